# Runs inside the 6.12 guest of scripts/guest-host.sh (busybox sh) when the kernel's
# command line says tierd.check=cache (or cache-none: plain swap, `--policy none`): on
# cgroup v2, a tenant whose memory is page cache (it reads a 256 MiB disk, /dev/vdb,
# over and over through the cache) beside a tenant with a 32 MiB anonymous hot set,
# on a 96 MiB budget. Its looks print the reader's cgroup (with its inactive page cache,
# which tierd caps) and the neighbour's hot set (bench/results/page-cache-neighbour.md).
# Lines starting "guest-cache:" are read by crates/tierd/tests/guests.rs.
say() { echo "guest-cache: $*"; }
# shellcheck source=scripts/guest-common.sh
. /bin/guest-common
say "kernel $(uname -r)"
[ -b /dev/vda ] && [ -b /dev/vdb ] || { say "fail: no /dev/vda and /dev/vdb"; exit 0; }
tierd --tier /dev/vda --dram-budget 96M --ratio 2 --policy "${1:-tierd}" --interval 2s --window 16s \
  --state-dir /var/lib/tierd --socket /run/tierd.sock > /tmp/tierd.log 2>&1 &
await_tierd /tmp/tierd.log || exit 0
ctl run --name hot --size 64M -- /bin/tierd-bench workload --size 64M --hot 32M --phase active:600s --json --report 10s
# Each pass prints a line when it has read the whole disk.
ctl run --name reader --size 16M -- sh -c 'while :; do dd if=/dev/vdb of=/dev/null bs=1M 2> /dev/null; echo pass; done'
await_filled hot
# Once a window has passed, eight looks 5 s apart at what the reader holds and where.
sleep 20
g=/sys/fs/cgroup/tierd/tenants
r=$g/reader h=$g/hot
say "passes before $(grep -c pass /var/lib/tierd/tenants/reader/stdout)"
say "hot faults before $(grep '^pgmajfault ' $h/memory.stat | cut -d' ' -f2)"
for i in 1 2 3 4 5 6 7 8; do
  say "look $i current $(cat $r/memory.current) high $(cat $r/memory.high) swap $(cat $r/memory.swap.current) $(grep -E '^(anon|file|active_file|inactive_file|file_mapped|workingset_refault_file|workingset_activate_file) ' $r/memory.stat | tr '\n' ' ')"
  say "hot look $i current $(cat $h/memory.current) $(grep -E '^(anon|swapcached|pgsteal|pgmajfault|workingset_refault_anon) ' $h/memory.stat | tr '\n' ' ') low-events $(grep '^low ' $h/memory.events)"
  sleep 5
done
say "passes after $(grep -c pass /var/lib/tierd/tenants/reader/stdout)"
say "hot faults after $(grep '^pgmajfault ' $h/memory.stat | cut -d' ' -f2)"
say "reader events $(tr '\n' ' ' < $r/memory.events)"
say "protection hot $(cat $h/memory.low) reader $(cat $r/memory.low) group $(cat $g/memory.low) limit $(cat $g/memory.high) $(cat $g/memory.max)"
say "hot events $(tr '\n' ' ' < $h/memory.events)"
say "host $(grep -E '^(MemTotal|MemFree|MemAvailable|Cached|Shmem|AnonPages):' /proc/meminfo | tr -s ' ' | tr '\n' ' ') $(grep -E '^(allocstall_dma32|allocstall_normal|pgsteal_kswapd|pgsteal_direct) ' /proc/vmstat | tr '\n' ' ') tierd-low $(cat /sys/fs/cgroup/tierd/memory.low) $(cat /sys/fs/cgroup/tierd/memory.current)"
for t in hot reader; do
  say "$t stat $(grep -E '^(anon|file|pgsteal|pgscan|pgsteal_direct|pgsteal_kswapd|pgscan_direct|workingset_refault_anon|workingset_refault_file|pswpin|pswpout|swapcached) ' $g/$t/memory.stat | tr '\n' ' ')"
done
say "status $(ctl status --json | tr -d '\n')"
say "events $(ctl events | grep -e '\[reader\]' -e '\[hot\]' | tr '\n' '|')"
say "done"
