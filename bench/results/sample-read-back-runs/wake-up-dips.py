# For each tierd rep of a wake-up/fast run: from 5 s after the hot set is back to the end,
# majors per report second and the loss of sampled seconds (dipsum.py's measure).
# Usage: python3 wake-up-dips.py RESULTS_DIR LOGS_DIR (the logs: sleepy-tierd-N.jsonl, unpacked, as LOGS_DIR/wake-up-fast-tierd-N/sleepy.stdout)
import json,sys,glob,os
res=json.load(open(sys.argv[1]+'/results.json'))
m=[x for x in res['results'][0]['modes'] if x['mode']=='tierd'][0]
for i,rs in enumerate(m['resident_each']):
    f=f"{sys.argv[2]}/wake-up-fast-tierd-{i+1}/sleepy.stdout"
    rows=[]
    for l in open(f):
        try: d=json.loads(l)
        except: continue
        if 't' in d and d.get('phase')=='active' and d['t']>=86+rs+5: rows.append((d['t'],d['ops_per_sec'],d['major_faults']))
    q=[r for r in rows if r[2]<5]; f20=[r for r in rows if r[2]>=20]
    avg=lambda l: sum(r[1] for r in l)/max(1,len(l))
    print(f"rep {i+1}: resident {rs:.0f} s; {len(rows)} s after it; majors {sum(r[2] for r in rows)} ({sum(r[2] for r in rows)/max(1,len(rows)):.1f}/s); seconds with >=20 majors {len(f20)} at {avg(f20)/1e6:.2f} M vs <5 majors {len(q)} at {avg(q)/1e6:.2f} M; loss {1-avg(rows)/avg(q):.3f}")
