# Per simulated point, tierd relative to dram: median (range over seeds), A -> B.
# Usage: compare-sim.py DIR_A DIR_B (each a `tierd-bench sim --out` directory).
import json,sys
def load(d):
    out={}
    for x in json.load(open(f'{d}/results.json'))['results']:
        for mm in x['modes']:
            out[(x['scenario']+'/'+x['point'],mm['mode'])]=mm['relative_spread']
    return out
a=load(sys.argv[1]); b=load(sys.argv[2])
for k in a:
    if k in b and k[1]=='tierd':
        x,y=a[k],b[k]
        d=y['median']-x['median']
        flag='  <<' if abs(d)>0.01 else ''
        print(f"{k[0]:40s} {x['median']:.3f} ({x['min']:.3f}-{x['max']:.3f}) -> {y['median']:.3f} ({y['min']:.3f}-{y['max']:.3f}) {d:+.3f}{flag}")
