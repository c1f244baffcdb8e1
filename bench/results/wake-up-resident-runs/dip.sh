#!/bin/bash
# One hot uniform tenant (1 GiB) alone under tierd: does each interval's sampling show
# as a dip in its throughput, as it does after a wake-up beside two neighbours?
# Usage: dip.sh SAMPLE_PAGES [DRAM_BUDGET]    (B: the binaries' directory; OUT: where runs go)
set -u
n=$1; budget=${2:-4G}; d=${OUT:-/var/tmp/dip}/run-$n-$budget; rm -rf $d; mkdir -p $d
B=${B:-/var/tmp/s81/bin}
$B/tierd --state-dir $d/state --socket $d/sock --dram-budget $budget --interval 5s --window 30s \
  --policy tierd --sample-pages $n --cgroup-name tierd-dip-$n > $d/tierd.log 2>&1 &
tp=$!
trap 'kill -TERM $tp 2>/dev/null; wait $tp' EXIT
for i in $(seq 50); do [ -S $d/sock ] && break; sleep 0.2; done
$B/tierctl run --socket $d/sock --name hot --size 1200M -- $B/tierd-bench workload --size 1073741824 \
  --hot 1073741824 --phase active:75s --json --report 1s --no-verify-all
sleep 80
cp $d/state/tenants/hot/stdout $d/hot.stdout 2>/dev/null || ls -R $d/state/tenants | head
