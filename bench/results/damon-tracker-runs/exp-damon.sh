say() { echo "guest-exp: $*"; }
. /bin/guest-common
tierd --tier /dev/vda --dram-budget 96M --ratio 3 --policy tierd --interval 2s --window 16s \
    --state-dir /var/lib/tierd --socket /run/tierd.sock --tracker damon > /tmp/tierd.log 2>&1 &
await_tierd /tmp/tierd.log || exit 0
say "tracker $(ctl status --json | tr -d '\n' | grep -o '"tracker": *"[a-z]*"')"
s=${1:-yes}
if [ "$s" = churn ]; then
ctl run --name w --size 96M -- /bin/tierd-bench workload --size 96M --hot 32M --phase active:120s --json --report 10s
ctl run --name churn --size 4M -- sh -c 'while :; do sleep 1; done'
elif [ "$s" = cat ]; then
ctl run --name w --size 96M -- sh -c "(cat /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb /dev/vdb > /dev/null) & exec /bin/tierd-bench workload --size 96M --hot 32M --phase active:120s --json --report 10s"
elif [ "$s" = yes ]; then
ctl run --name w --size 96M -- sh -c "(while :; do dd if=/dev/vdb of=/dev/null bs=1M 2>/dev/null; done) & exec /bin/tierd-bench workload --size 96M --hot 32M --phase active:120s --json --report 10s"
else
ctl run --name w --size 96M -- /bin/tierd-bench workload --size 96M --hot 32M --phase active:120s --json --report 10s
fi
await_filled w
sleep 20
for i in 1 2 3 4 5 6 7 8; do
  say "reading $i $(ctl status --json | tr -d '\n')"
  c=$(find /sys/fs/cgroup -name w -path '*tenants*' | head -1)
  say "cg $i $(grep -E '^(anon|file|pgsteal|pgscan|workingset_refault_anon) ' $c/memory.stat | tr '\n' ' ') swap $(cat $c/memory.swap.current 2>/dev/null)"
  k=/sys/kernel/mm/damon/admin/kdamonds/0
  say "damon $i state $(cat $k/state) targets $(cat $k/contexts/0/targets/nr_targets) pids $(cat $k/contexts/0/targets/*/pid_target | tr '\n' ' ') regions $(ls $k/contexts/0/schemes/0/tried_regions 2>/dev/null | wc -l) kpid $(cat $k/pid)"
  sleep 5
done
grep -v decision /tmp/tierd.log | tail -n 30 | sed 's/^/guest-log: /' 
say done
