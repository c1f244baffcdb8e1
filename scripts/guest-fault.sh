# Runs inside the 6.12 guest of scripts/guest-host.sh (busybox sh) when the kernel's
# command line says tierd.check=fault (argument `reads`) or tierd.check=write-fault
# (`writes`): the tier is a device-mapper device over the virtual disk, whose table is
# swapped under tierd's feet.
# - reads: first for one that delays every I/O by 400 ms (a device gone slow), then for
#   one that fails every I/O (a device gone bad). The tier is not encrypted here
#   (--tier-encrypt off), so it is also the control for guest-check.sh's look for
#   plaintext on the disk.
# - writes: for one that fails writes and serves reads (dm-flakey's error_writes), the
#   way a worn-out flash device often fails first, while a tenant is demoted.
# Lines starting "guest-fault:" are read by crates/tierd/tests/guests.rs.
say() { echo "guest-fault: $*"; }
# shellcheck source=scripts/guest-common.sh
. /bin/guest-common
table() { # TABLE: swaps the tier's table in place, as a failing device would change
  dmsetup load tier --table "$1" && dmsetup resume tier && say "table $(dmsetup table tier)"
}
say "kernel $(uname -r)"
# shellcheck source=scripts/guest-marker.sh
. /bin/guest-marker
# No udev in the guest: libdevmapper makes the /dev/mapper node itself.
export DM_DISABLE_UDEV=1
sectors=$(blockdev --getsz /dev/vda)
dmsetup create tier --table "0 $sectors linear /dev/vda 0" || { say "fail: dmsetup create"; exit 0; }
[ -b /dev/mapper/tier ] || { say "fail: no /dev/mapper/tier"; exit 0; }
start_tierd() { # in a service cgroup, as systemd starts it (see guest-check.sh); says whether it came up
  svc=/sys/fs/cgroup/tierd.service
  mkdir $svc
  sh -c "echo \$\$ > $svc/cgroup.procs; exec tierd --tier /dev/mapper/tier --tier-encrypt off --dram-budget 64M --ratio 3 --policy tierd \
    --interval 2s --window 16s --state-dir /var/lib/tierd --socket /run/tierd.sock" > /tmp/tierd.log 2>&1 &
  cg=$svc/tierd/tenants
  await_tierd /tmp/tierd.log
}

device_fails() { # slow, then every I/O failing
  # w sweeps its whole 128 MiB after 40 s, so it reads back what is on the tier; rest
  # fills 32 MiB and then touches nothing.
  ctl run --name w --size 128M -- /bin/tierd-bench workload --size 128M --hot 16M --phase active:40s,sweep:600s \
    --json --report 10s
  ctl run --name rest --size 32M -- /bin/tierd-bench workload --size 32M --hot 4M --phase active:10s,idle:600s \
    --json --report 10s
  plaintext_marker
  sleep 30
  say "before $(ctl status --json | tr -d '\n')"
  say "plaintext on the disk: $(plaintext_on /dev/vda) lines of the marker"
  ctl stop marker
  table "0 $sectors delay /dev/vda 0 400"
  sleep 25
  say "slow health $(ctl health --json | tr -d '\n')"
  say "slow status $(ctl status --json | tr -d '\n')"
  table "0 $sectors error"
  sleep 25
  say "failing status $(ctl status --json | tr -d '\n')"
  say "failing health $(ctl health --json | tr -d '\n')"
  # A tenant started now is kept off the tier from its start, and runs in DRAM.
  ctl run --name late --size 16M -- /bin/tierd-bench workload --size 16M --hot 4M --phase active:600s --json \
    --report 5s
  sleep 8
  say "late status $(ctl status --json | tr -d '\n')"
  say "demote $(ctl demote rest 2>&1 | tr '\n' ' ')"
  for t in rest late; do
    say "file tenants/$t/memory.swap.max $(cat $cg/$t/memory.swap.max)"
  done
  # The device is replaced: drain it. rest's pages on it cannot be read, and rest
  # (which touches none of them) keeps running.
  ctl stop late
  say "drain $(ctl tier drain 2>&1 | tr '\n' ' ')"
  say "drained status $(ctl status --json | tr -d '\n')"
  say "swaps after the drain: $(tail -n +2 /proc/swaps | wc -l)"
  ctl events | sed 's/^/guest-fault: event /'
  say "kernel log $(dmesg | grep -c 'error on swap-device') swap I/O errors"
}

writes_fail() { # reads served, every write failing, while a tenant fitting in DRAM is demoted
  # w fills 40 MiB (4 MiB hot), then sweeps it all: each page read back is checked, and
  # at its end every byte is (exit 2 on any wrong byte).
  ctl run --name w --size 40M -- /bin/tierd-bench workload --size 40M --hot 4M --phase active:45s,sweep:15s \
    --json --report 5s
  sleep 8
  table "0 $sectors flakey /dev/vda 0 0 3600 1 error_writes"
  say "demote $(ctl demote w 2>&1 | tr '\n' ' ')"
  sleep 8
  say "writes failing status $(ctl status --json | tr -d '\n')"
  say "writes failing health $(ctl health --json | tr -d '\n')"
  say "file tenants/w/memory.swap.max $(cat $cg/w/memory.swap.max)"
  for _ in $(seq 90); do
    ctl status --json | grep -q '"state": *"running"' || break
    sleep 1
  done
  say "after status $(ctl status --json | tr -d '\n')"
  say "w output $(tail -n 2 /var/lib/tierd/tenants/w/stdout 2>&1 | tr '\n' ' ')"
  ctl events | sed 's/^/guest-fault: event /'
  say "kernel log $(dmesg | grep -c 'Write-error on swap-device') swap write errors"
}

if start_tierd; then
  case "${1:-reads}" in
    writes) writes_fail ;;
    *) device_fails ;;
  esac
fi
{ head -n 8 /tmp/tierd.log; echo ...; tail -n 30 /tmp/tierd.log; } | sed 's/^/guest-log: /'
say "done"
