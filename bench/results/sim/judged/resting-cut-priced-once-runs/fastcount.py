import json,sys,glob,os,collections
d=sys.argv[1]
rows=collections.defaultdict(dict)
for f in glob.glob(d+'/u*.stdout'):
    for line in open(f):
        try: r=json.loads(line)
        except: continue
        if 'unix' in r: rows[os.path.basename(f)][int(r['unix'])]=(r['phase'],r['ops_per_sec'])
allt=sorted({t for v in rows.values() for t in v}); t0=allt[0]
out=[]
for t in allt:
    act=sum(1 for v in rows.values() if t in v and v[t][0]=='active')
    fast=sum(1 for v in rows.values() if t in v and v[t][1]>100000)
    out.append((t-t0,fast,act))
print(' '.join(f"{t}:{f}/{a}" for t,f,a in out if t%5==0))
print('mean fast %.2f' % (sum(f for _,f,_ in out if 30<=_<=130)/max(1,sum(1 for _,f,_ in out if 30<=_<=130))))
