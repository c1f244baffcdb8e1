#!/usr/bin/env python3
"""Times `tierctl run` sent while a control-loop pass has held tierd's engine >= 0.5 s.

usage: yield-probe.py TIERD_BIN OUT_JSON. On a 256 MiB budget, tenant a fills 200 MiB
and rests; b (a 16 MiB reserve, so quotas are in force) then wants 180 MiB hot, and a is
demoted pass by pass; FAILPOINTS demote=sleep(1000) makes each 4 MiB batch take a
second, so passes move pages for seconds."""
import json, os, subprocess, sys, time, shutil
tierd, out = sys.argv[1], sys.argv[2]
B = os.environ.get("BIN", "target/release")
D = "/var/tmp/tierd-yield-probe"
shutil.rmtree(D, ignore_errors=True); os.makedirs(D)
log = open(f"{D}/log", "w")
env = dict(os.environ, FAILPOINTS="demote=sleep(1000)")
p = subprocess.Popen([tierd, "--dram-budget", "256M", "--ratio", "2", "--policy", "tierd", "--interval", "6s",
                      "--window", "12s", "--state-dir", f"{D}/state", "--socket", f"{D}/sock",
                      "--cgroup-name", "tierd-yield-probe"], stdout=log, stderr=log, env=env)
C = [f"{B}/tierctl", "--socket", f"{D}/sock"]
def ctl(*a):
    return subprocess.run(C + list(a), capture_output=True, text=True)
for _ in range(100):
    if ctl("status").returncode == 0: break
    time.sleep(0.1)
ctl("run", "--name", "a", "--size", "256M", "--", f"{B}/tierd-bench", "workload",
    "--size", "200M", "--hot", "16M", "--phase", "active:5s,idle:600s", "--json")
time.sleep(8)
ctl("run", "--name", "b", "--size", "256M", "--reserve", "16M", "--", f"{B}/tierd-bench", "workload",
    "--size", "200M", "--hot", "180M", "--phase", "active:600s", "--json")
asks, idle = [], []
end = time.time() + 60
i = 0
last = 0
while time.time() < end and len(asks) < 1:
    s = json.loads(ctl("status", "--json").stdout)
    busy = s.get("busy") or {}
    held = busy.get("for_secs", 0.0) if busy.get("doing", "").endswith("control-loop pass") else 0.0
    if time.time() - last >= 1 and (held >= 0.5 or (not busy and len(idle) < 2)):
        t0 = time.time()
        ctl("run", "--name", f"v{i}", "--size", "4M", "--", "sleep", "600")
        took = time.time() - t0
        (asks if held >= 0.5 else idle).append({"held_secs": round(held, 2), "took_secs": round(took, 3)})
        i += 1; last = time.time()
    time.sleep(0.1)
for n in ["a", "b"] + [f"v{k}" for k in range(i)]:
    ctl("stop", n)
time.sleep(2)
p.terminate(); p.wait()
json.dump({"tierd": tierd, "during_moves": asks, "engine_free": idle}, open(out, "w"), indent=1)
print(json.dumps({"during_moves": asks, "engine_free": idle}))
