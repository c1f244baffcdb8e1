# Per random host (`tierd-bench sim --property`), tierd A -> B where it moved by > 0.01,
# with the mean change and the count below swap. Usage: compare-hosts.py A.json B.json
import json,sys
a={r['host']:r for r in json.load(open(sys.argv[1]))['results']}
b={r['host']:r for r in json.load(open(sys.argv[2]))['results']}
ds=[];up=down=0
for h in a:
    d=b[h]['tierd']-a[h]['tierd']; ds.append(d)
    if abs(d)>0.01:
        print(f"{h} swap {a[h]['swap']:.3f} tierd {a[h]['tierd']:.3f} -> {b[h]['tierd']:.3f} {d:+.3f} {'WORSE' if b[h]['worse'] else ''}{' (was worse)' if a[h]['worse'] else ''} n={a[h]['tenants']} slow={a[h]['slow']}")
        if d>0: up+=1
        else: down+=1
print('mean %+.4f up %d down %d; worse %d -> %d' % (sum(ds)/len(ds), up, down, sum(r['worse'] for r in a.values()), sum(r['worse'] for r in b.values())))
