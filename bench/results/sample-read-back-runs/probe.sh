#!/bin/bash
# One 1 GiB uniformly hot tenant under a standalone tierd (policy tierd, 5 s interval),
# beside SPIN busy loops outside tierd. With READBACK=1 its hot set is paged out 10 s in
# (`tierctl demote`) and the tenant reads it back itself: clean pages that keep their
# swap slots, as after a wake-up. Its reports go to $OUT/NAME/hot.stdout.
# Usage: SPIN=2 READBACK=1 probe.sh SAMPLE_PAGES BUDGET   (B: the binaries' directory)
set -u
n=$1; budget=$2; spin=${SPIN:-2}; readback=${READBACK:-0}
kind=$([ "$readback" = 1 ] && echo readback || echo run)
d=${OUT:-/var/tmp/probe}/$kind-$n-$budget-spin$spin; rm -rf $d; mkdir -p $d
B=${B:-/var/tmp/s82/bin}
pids=()
for i in $(seq $spin); do bash -c 'while :; do :; done' & pids+=($!); done
$B/tierd --state-dir $d/state --socket $d/sock --dram-budget $budget --interval 5s --window 30s \
  --policy tierd --sample-pages $n --cgroup-name tierd-probe-$n > $d/tierd.log 2>&1 &
tp=$!
trap 'kill -TERM $tp 2>/dev/null; wait $tp; for p in "${pids[@]}"; do kill $p; done' EXIT
for i in $(seq 50); do [ -S $d/sock ] && break; sleep 0.2; done
$B/tierctl run --socket $d/sock --name hot --size 1200M -- $B/tierd-bench workload --size 1073741824 \
  --hot 1073741824 --phase active:75s --json --report 1s --no-verify-all
if [ "$readback" = 1 ]; then
  sleep 10; $B/tierctl demote --socket $d/sock hot
  sleep 5; $B/tierctl prefetch --socket $d/sock hot
  sleep 65
else
  sleep 80
fi
cp $d/state/tenants/hot/stdout $d/hot.stdout 2>/dev/null || ls -R $d/state/tenants | head
