import sys,re,datetime
for f in sys.argv[1:]:
    ev=[]; end=None
    for l in open(f):
        m=re.match(r"tierd: (\S+)Z",l)
        if not m: continue
        t=datetime.datetime.fromisoformat(m.group(1)).timestamp(); end=t
        if "decision: DRAM short" in l: ev.append((t,'S' if 'but' in l.split("decision:")[1][:60] else 'Q'))
    tot={'Q':0,'S':0}
    for (t,m),(t2,_) in zip(ev,ev[1:]+[(end,None)]): tot[m]+=t2-t
    print(f.split('/')[0], "quotas %.0f s, shared-while-short %.0f s"%(tot['Q'],tot['S']))
