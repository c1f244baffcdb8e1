#!/usr/bin/env bash
# The demo: tierd tiering four tenants at 2x density on its embedded default tier (a
# file in its state directory, behind a loop device). About two minutes. Needs root.
# Everything it sets up (swap, loop device, cgroups, processes) is removed at the end,
# also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BIN="$PWD/target/release"
DEMO=$(mktemp -d /var/tmp/tierd-demo.XXXXXX)
export TIERD_SOCKET="$DEMO/tierd.sock"
TIERD_PID=""

cleanup() {
  set +e
  if [ -n "$TIERD_PID" ] && kill -0 "$TIERD_PID" 2>/dev/null; then
    for pid in $("$BIN/tierctl" status --json 2>/dev/null | grep -o '"pids": *\[[0-9, ]*' | grep -o '[0-9][0-9]*'); do
      kill "$pid" 2>/dev/null
    done
    kill -TERM "$TIERD_PID"; wait "$TIERD_PID" 2>/dev/null
  fi
  # Whatever a crash may have left: our swap areas, loop devices.
  for dev in $(losetup -j "$DEMO/state/tier.swap" -O NAME -n 2>/dev/null); do swapoff "$dev" 2>/dev/null; losetup -d "$dev"; done
  rm -rf "$DEMO"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Starting tierd: DRAM budget 1 GiB, tier = 2 GiB file in its state directory (ratio 1:2), policy tierd"
"$BIN/tierd" --dram-budget 1G --ratio 2 --policy tierd --interval 2s --window 20s \
  --state-dir "$DEMO/state" --cgroup-name "tierd-demo-$$" --http 127.0.0.1:0 2>"$DEMO/tierd.log" &
TIERD_PID=$!
for _ in $(seq 100); do "$BIN/tierctl" status >/dev/null 2>&1 && break; sleep 0.1; done
cat "$DEMO/tierd.log"

step "Four 512 MiB tenants with 64 MiB hot sets: 2 GiB of tenants on 1 GiB of DRAM (2x)"
for i in 1 2 3 4; do
  "$BIN/tierctl" run --name "web-$i" --size 512M -- \
    "$BIN/tierd-bench" workload --size 512M --hot 64M --duration 80s --report 10s
done

for t in 15 30 45; do
  sleep 15
  step "Status after ${t}s: tierd measures each hot set (ACTIVE) and sizes quotas from it; cold memory moves to the tier"
  "$BIN/tierctl" status
done

step "web-1 on demand: demote all its memory to the tier; its hot set faults back on its own"
"$BIN/tierctl" demote web-1
sleep 4
"$BIN/tierctl" status | sed -n '1,/^TENANT/d;/web-1/p'

step "...and prefetch fills the rest of its quota from the tier"
"$BIN/tierctl" prefetch web-1
sleep 2
"$BIN/tierctl" status

step "Health checks (tierctl health; exit code 0 green, 1 yellow, 2 red) and one screen of tierctl top"
"$BIN/tierctl" health || true
"$BIN/tierctl" top --batch --iterations 1 --sort faults
addr=$("$BIN/tierctl" status --json | grep -o '"http_address": *"[^"]*"' | cut -d'"' -f4)
echo "(live: tierctl top; dashboard at http://$addr/ while the demo runs)"
echo "A few lines of its Prometheus metrics:"
curl -s "http://$addr/metrics" 2>/dev/null | grep -E '^tierd_(active_dram_ratio|tier_read_bytes_per_second|tenant_active_bytes)' | head -6 || true

step "Why web-1 has the quota it has"
"$BIN/tierctl" explain web-1

step "Throughput the tenant saw (its own report, last lines)"
tail -n 3 "$DEMO/state/tenants/web-1/stdout"

step "Stopping the tenants: each verifies every page it wrote before exiting"
for i in 1 2 3 4; do "$BIN/tierctl" stop "web-$i" >/dev/null; done
for _ in $(seq 120); do
  state=$("$BIN/tierctl" status --json)
  grep -q '"state": "running"' <<<"$state" || break
  sleep 1
done
"$BIN/tierctl" status
for i in 1 2 3 4; do tail -n 1 "$DEMO/state/tenants/web-$i/stdout"; done

step "Stopping tierd: limits lifted, tier swapped off and removed"
kill -TERM "$TIERD_PID"; wait "$TIERD_PID" || true
TIERD_PID=""
tail -n 3 "$DEMO/tierd.log"
grep -q "$DEMO" /proc/swaps && echo "tier still active!" || echo "no tierd swap area remains."
