#!/bin/bash
# Premise check (host, cgroup v1): pages a tenant reads back from the tier stay in the swap
# cache while mapped, so memory.stat's swapcached counts a working set as droppable.
# Usage: swapcache.sh OUT [BIN_DIR]
set -u
OUT=$1; B=${2:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
D=$(mktemp -d /var/tmp/swapcache.XXXXXX)
ctl() { $B/tierctl --socket $D/s.sock "$@"; }
say() { echo "$*" | tee -a $OUT; }
$B/tierd --dram-budget 512M --ratio 2 --policy none --interval 2s \
  --state-dir $D/state --socket $D/s.sock --cgroup-name tierd-swapcache > $D/tierd.log 2>&1 &
TP=$!
for _ in $(seq 60); do ctl status >/dev/null 2>&1 && break; sleep 1; done
ctl run --name t --size 160M -- $B/tierd-bench workload --size 128M --hot 128M --phase active:600s --json --report 5s >/dev/null
for _ in $(seq 120); do grep -q '"phase"' $D/state/tenants/t/stdout 2>/dev/null && break; sleep 1; done
g=$(find /sys/fs/cgroup/memory -type d -name t -path '*tierd-swapcache*' | head -1)
st() { grep -E "^(rss|shmem|swapcached|inactive_anon|active_anon|swap|pgmajfault) " $g/memory.stat | tr '\n' ' '; }
say "after fill: usage $(cat $g/memory.usage_in_bytes) $(st)"
ctl demote t | tee -a $OUT
say "just demoted: usage $(cat $g/memory.usage_in_bytes) $(st)"
sleep 6
say "read back by its own faults, 6 s: usage $(cat $g/memory.usage_in_bytes) $(st)"
ctl demote t | tee -a $OUT
ctl prefetch t | tee -a $OUT
say "demoted and prefetched by tierd: usage $(cat $g/memory.usage_in_bytes) $(st)"
sleep 4
say "4 s later: usage $(cat $g/memory.usage_in_bytes) $(st)"
say "status t: $(ctl status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); t=[x for x in d["tenants"] if x["name"]=="t"][0]; print({k:v for k,v in t.items() if "dram" in k or "tier" in k or "cache" in k})')"
ctl stop t >/dev/null 2>&1; sleep 2
kill $TP; wait $TP
say "tierd exit $?"
cp $D/tierd.log $OUT.tierd.log
