# Tenants running above 100 k ops/s, every 5 s of a run, from the tenants' report lines
# (u*.stdout in the run's logs): prints "t:fast/active" per 5 s and their mean over the
# measured window (30-130 s).
import json, sys, glob, os, collections

rows = collections.defaultdict(dict)
for f in glob.glob(sys.argv[1] + '/u*.stdout'):
    for line in open(f):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if 'unix' in r:
            rows[os.path.basename(f)][int(r['unix'])] = (r['phase'], r['ops_per_sec'])
times = sorted({t for v in rows.values() for t in v})
every5 = []
for t in times:
    if (t - times[0]) % 5:
        continue
    active = sum(1 for v in rows.values() if t in v and v[t][0] == 'active')
    fast = sum(1 for v in rows.values() if t in v and v[t][1] > 100000)
    every5.append((t - times[0], fast, active))
print(' '.join(f"{t}:{f}/{a}" for t, f, a in every5))
window = [f for t, f, _ in every5 if 30 <= t <= 130]
print('mean fast %.2f' % (sum(window) / max(1, len(window))))
