# Per run: tierd relative to dram, dram and tierd ops/s, tierd CPU. Usage: summ.py PREFIX (ls12 or h19)
import json, sys, glob
for f in sorted(glob.glob(f'/var/tmp/s54/{sys.argv[1]}-*-*/results.json')):
    x = json.load(open(f))['results'][0]
    m = {mm['mode']: mm for mm in x['modes']}
    run = f.split('/')[4]
    print(f"{run:20s} tierd {m['tierd']['relative_throughput']:.3f}  dram {m['dram']['throughput']/1e6:.2f} M  tierd {m['tierd']['throughput']/1e6:.2f} M  CPU {m['tierd']['tierd_cpu_percent']:.1f}%")
