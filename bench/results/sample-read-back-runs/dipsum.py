# Per report second of a `--json --report 1s` workload (from second ARG2 on): major faults, and
# throughput in seconds with >= 20 majors against those with < 5; "loss" = 1 - mean(all) / mean(< 5).
# Usage: python3 dipsum.py TENANT.jsonl [FIRST_SECOND]
import json,sys
rows=[]
for l in open(sys.argv[1]):
    try: d=json.loads(l)
    except: continue
    if 't' in d and d.get('phase')=='active': rows.append((round(d['t']),d['ops_per_sec'],d.get('major_faults')))
lo=int(sys.argv[2]) if len(sys.argv)>2 else 20
st=[r for r in rows if r[0]>=lo]
f=[r for r in st if r[2]>=20]; q=[r for r in st if r[2]<5]
avg=lambda l: sum(r[1] for r in l)/max(1,len(l))
print('seconds', len(st), 'majors', sum(r[2] for r in st), '| with >=20 majors', len(f), 'ops', round(avg(f)), '| <5 majors', len(q), 'ops', round(avg(q)), '| loss', f"{1-avg(st)/avg(q):.3f}" if q else '')
print(' '.join(f"{r[0]}:{r[1]/1e6:.2f}/{r[2]}" for r in st[:60]))
