# Runs inside the 6.12 guest of scripts/guest-host.sh (busybox sh) when the kernel's
# command line says tierd.check=outgrow: on cgroup v2, a tenant that declared 32 MiB
# grows to 256 MiB with 64 MiB of DRAM and a 64 MiB tier disk. While reclaim moves its
# memory to the tier, the kernel's throttle at memory.high is the quota at work; once the
# tier is full reclaim moves nothing (the livelock the guard is for): tierd gives it room
# and says so, and the kernel's OOM killer ends it in its own cgroup while its neighbour
# runs on (on a slow guest it can meet its memory.max before the tier is full). Lines
# starting "guest-outgrow:" are read by crates/tierd/tests/guests.rs.
# With the argument `slow` (tierd.check=outgrow-slow) QEMU writes the 256 MiB tier disk at
# 2 MiB/s, and big grows to 160 MiB, which DRAM and the tier hold together: reclaim lags
# far behind its growth, and it must not be killed for that.
say() { echo "guest-outgrow: $*"; }
# shellcheck source=scripts/guest-common.sh
. /bin/guest-common
say "kernel $(uname -r)"
[ -b /dev/vda ] || { say "fail: no /dev/vda"; exit 0; }
big=256M work=240s limit=180
# Behind the slow tier big took 170-230 s alone to write out and read back; CI's load adds.
[ "$1" = slow ] && big=160M work=10s limit=600
# In a service cgroup, as systemd starts it (see guest-check.sh).
svc=/sys/fs/cgroup/tierd.service
mkdir $svc
sh -c "echo \$\$ > $svc/cgroup.procs; exec tierd --tier /dev/vda --dram-budget 64M --ratio 1 --policy tierd \
  --interval 1s --oom-grace 10s --state-dir /var/lib/tierd --socket /run/tierd.sock" > /tmp/tierd.log 2>&1 &
await_tierd /tmp/tierd.log || exit 0
# small runs until the guest powers off: any end seen before then is harm.
ctl run --name small --size 16M -- /bin/tierd-bench workload --size 16M --hot 4M --phase active:3600s --json --report 10s
ctl run --name big --size 32M -- /bin/tierd-bench workload --size $big --hot 32M --phase active:$work --json --report 10s
# Until big has ended (at most $limit s), the first red health that names it. A look
# takes 1-3 s under load, so the lines carry the seconds since big started.
start=$(date +%s)
while i=$(($(date +%s) - start)); [ $i -lt $limit ]; do
  health=$(ctl health 2>&1)
  case "$health" in
    *"big ("*) [ -n "$red" ] || { red=$i; say "red after ${i}s: $(echo "$health" | grep "big (" | tr '\n' ' ')"; } ;;
  esac
  b=$svc/tierd/tenants/big
  # What is charged (memory.stat) tells a kill at memory.max apart: anon grown past the
  # throttle, or swap cache and pages under writeback behind a slow tier.
  [ -d $b ] && say "big at ${i}s: current $(cat $b/memory.current) high $(cat $b/memory.high) swap $(cat $b/memory.swap.current) events $(tr '\n' ' ' < $b/memory.events) peak $(cat $b/memory.peak) $(grep -E '^(anon|file|kernel|swapcached|file_writeback) ' $b/memory.stat | tr '\n' ' ')"
  ctl status | grep -q "^big  *exit" && break
  sleep 1
done
say "ended after ${i}s"
say "status $(ctl status --json | tr -d '\n')"
say "events $(ctl events | grep -e '\[big\]' -e '\[small\]' | tr '\n' '|')"
say "swaps $(tail -n +2 /proc/swaps | tr -s ' ' | tr '\n' '|')"
say "done"
