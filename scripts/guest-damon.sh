# Runs inside the guest of scripts/guest-host.sh when the kernel's command line says
# tierd.check=damon (busybox sh): one tenant with a known hot set measured by the DAMON
# tracker and by sampling, one after the other; tierd's kdamond removed at a clean stop
# and taken back after a kill -9. Lines starting "guest-damon:" are read by
# crates/tierd/tests/guests.rs.
say() { echo "guest-damon: $*"; }
# shellcheck source=scripts/guest-common.sh
. /bin/guest-common
kdamonds=/sys/kernel/mm/damon/admin/kdamonds
start_tierd() { # TRACKER
  tierd --tier /dev/vda --dram-budget 96M --ratio 3 --policy tierd --interval 2s --window 16s \
    --state-dir /var/lib/tierd --socket /run/tierd.sock --tracker "$1" >> "/tmp/tierd-$1.log" 2>&1 &
  tierd_pid=$!
  await_tierd "/tmp/tierd-$1.log"
}
stop_tierd() {
  kill "$tierd_pid"
  for _ in $(seq 60); do
    kill -0 "$tierd_pid" 2> /dev/null || return 0
    sleep 1
  done
}
# A 128 MiB tenant touching a 32 MiB hot set, read eight times 5 s apart once it has
# filled its memory and a whole 16 s window has passed since. Waited for, not timed: a
# fixed 30 s read the window's fill under CI's load (sampling's median 23 MiB, rising).
measure() { # TRACKER (the tenant is named after it)
  start_tierd "$1" || return
  ctl run --name "$1" --size 128M -- /bin/tierd-bench workload --size 128M --hot 32M --phase active:90s --json --report 10s
  await_filled "$1"
  sleep 20
  for i in 1 2 3 4 5 6 7 8; do
    say "reading $1 $i $(ctl status --json | tr -d '\n')"
    sleep 5
  done
  say "kdamonds with $1 $(cat $kdamonds/nr_kdamonds)"
}
tracker() { ctl status --json | tr -d '\n' | grep -o '"tracker": *"[a-z]*"' | cut -d'"' -f4; }
say "kernel $(uname -r)"
[ -b /dev/vda ] || { say "fail: no /dev/vda"; exit 0; }
# A kdamond another tool made (configured, not running): left alone, tierd samples.
echo 1 > $kdamonds/nr_kdamonds && echo 1 > $kdamonds/0/contexts/nr_contexts
echo paddr > $kdamonds/0/contexts/0/operations
start_tierd damon && say "beside a foreign kdamond $(tracker)"
stop_tierd
say "foreign kdamond after $(cat $kdamonds/nr_kdamonds) $(cat $kdamonds/0/contexts/0/operations)"
echo 0 > $kdamonds/nr_kdamonds
start_tierd damon
if [ "$(tracker)" != damon ]; then
  # A kernel without what the DAMON tracker needs: the log says why.
  say "fallback $(grep -e 'DAMON cannot' /tmp/tierd-damon.log | tail -n 1)"
  stop_tierd
  say "done"
  exit 0
fi
stop_tierd
measure damon
# kill -9: the kdamond outlives tierd; the next start knows it for its own.
kill -9 "$tierd_pid"
sleep 1
say "kdamonds after kill $(cat $kdamonds/nr_kdamonds) $(cat $kdamonds/0/state 2>&1)"
if start_tierd damon; then
  say "restarted $(tracker)"
  ctl stop damon > /dev/null
  stop_tierd
fi
say "kdamonds after stop $(cat $kdamonds/nr_kdamonds)"
measure sampling
ctl stop sampling > /dev/null
stop_tierd
say "done"
