# Runs inside the guest of scripts/guest-host.sh (busybox sh): tierd on cgroup v2 with
# the virtual disk as its tier (an NVMe drive, /dev/nvme0n1, where QEMU gave one, else
# /dev/vda), a workload tenant at 3x the DRAM left to it and one kept off the tier
# (--no-tier), then a cgroup it did not create and a container crun started, each adopted
# and released. Lines starting "guest-check:" are read by crates/tierd/tests/guests.rs.
say() { echo "guest-check: $*"; }
# shellcheck source=scripts/guest-marker.sh
. /bin/guest-marker
# shellcheck source=scripts/guest-common.sh
. /bin/guest-common
# shellcheck source=scripts/guest-container.sh
. /bin/guest-container
say "kernel $(uname -r), $(grep " /sys/fs/cgroup " /proc/mounts | cut -d" " -f1,3), $(grep MemTotal /proc/meminfo | tr -s ' ')"
say "doctor $(tierctl doctor --json | tr -d '\n')"
say "kernel said $(dmesg | grep -i -e 'device-mapper' -e 'crypt' -e insmod | tail -n 5 | tr '\n' ' ')"
tier=/dev/vda
[ -b /dev/nvme0n1 ] && tier=/dev/nvme0n1
[ -b $tier ] || { say "fail: no /dev/vda or /dev/nvme0n1"; exit 0; }
# Started as systemd starts a service with Delegate=yes: in a cgroup of its own, which
# its parent offers the memory controller.
svc=/sys/fs/cgroup/tierd.service
mkdir $svc
# The tracker the kernel's command line names (tierd.tracker=damon), else sampling.
tracker=$(sed -n 's/.*tierd\.tracker=\([a-z]*\).*/\1/p' /proc/cmdline)
start_tierd() { # CGROUP_DIR LOG
  sh -c "echo \$\$ > $1/cgroup.procs; exec tierd --tier $tier --dram-budget 96M --ratio 3 --policy tierd \
    --interval 2s --window 16s --state-dir /var/lib/tierd --socket /run/tierd.sock --adopt-root /machine.slice \
    --tracker ${tracker:-sampling}" \
    > "$2" 2>&1 &
  tierd_pid=$!
  up=no
  for _ in $(seq 60); do
    ctl status > /dev/null 2>&1 && { up=yes; break; }
    sleep 1
  done
}
# A cgroup another manager made (as libvirt makes a VM's scope), with a workload in it:
# adopted in place, tiered, and released with its own memory settings back.
adopt_check() {
  m=/sys/fs/cgroup/machine.slice
  mkdir -p $m && echo +memory > $m/cgroup.subtree_control
  mkdir -p $m/vm1 && echo 1073741824 > $m/vm1/memory.max
  say "adopt refused $(ctl adopt /elsewhere/vm2 --name vm2 2>&1 | tr '\n' ' ')"
  sh -c "echo \$\$ > $m/vm1/cgroup.procs; exec /bin/tierd-bench workload --size 48M --hot 8M --phase active:40s \
    --json --report 10s" > /tmp/vm1.out 2>&1 &
  vm1_pid=$!
  adopt_cycle adopt /machine.slice/vm1 vm1
  say "adopt cgroup $(cat /proc/$vm1_pid/cgroup)"
  # Released and read: ended now (it verifies its pages on the way out), not at 40 s.
  kill -TERM $vm1_pid
  wait $vm1_pid
  say "summary adopt $(grep '"summary":true' /tmp/vm1.out)"
}
start_tierd $svc /tmp/tierd.log
if [ "$up" = yes ]; then
  say "tierd cgroup $(cat /proc/$tierd_pid/cgroup)"
  cg=$svc/tierd/tenants
  ctl run --name keep --size 32M --no-tier -- /bin/tierd-bench workload --size 32M --hot 4M --phase active:150s,idle:1s --json --report 10s
  # Its sweep after the first minute runs at memory.high: throttled, never failed.
  ctl run --name w --size 192M -- /bin/tierd-bench workload --size 192M --hot 32M --phase active:50s,sweep:20s,idle:1s \
    --json --report 10s
  plaintext_marker
  # Its hot set is read once the fill is over and out of the 16 s window: 8 s after its
  # first report of the active phase (10 s in; at 3x on a slow host disk the fill alone
  # can take a minute). Two readings, as an emulated guest on a busy host can miss a pass.
  for _ in $(seq 180); do
    grep -q '"phase":"active"' /var/lib/tierd/tenants/w/stdout 2> /dev/null && break
    sleep 1
  done
  sleep 8
  say "early status $(ctl status --json | tr -d '\n')"
  sleep 8
  say "status $(ctl status --json | tr -d '\n')"
  for f in memory.high memory.max memory.low w/memory.high w/memory.max w/memory.swap.current keep/memory.swap.max \
    keep/memory.swap.current keep/memory.low; do
    [ -f "$cg/$f" ] && say "file tenants/$f $(cat "$cg/$f")"
  done
  # kill -9, and a restart as systemd 254's DelegateSubgroup=supervisor makes it.
  kill -9 "$tierd_pid"
  sleep 1
  start_tierd $svc/supervisor /tmp/tierd-restarted.log
  say "restarted $up $(cat /proc/$tierd_pid/cgroup)"
  say "readopted $(ctl status --json | tr -d '\n')"
  sleep 26
  say "during sweep $(ctl status --json | tr -d '\n')"
  say "sweep events $(tr '\n' ' ' < $cg/w/memory.events)"
  # All is read: the tenants are stopped rather than left to their phases' end (keep's
  # would take another minute and a half), and verify every page on their way out.
  for t in marker w keep; do ctl stop $t > /dev/null; done
  for _ in $(seq 120); do
    ctl status --json | grep -q '"state": *"running"' || break
    sleep 1
  done
  for t in w keep; do
    say "summary $t $(grep '"summary":true' /var/lib/tierd/tenants/$t/stdout)"
    say "tenant stderr $t $(tail -c 600 /var/lib/tierd/tenants/$t/stderr | tr '\n' ' ')"
  done
  # The tier is encrypted by default where the kernel has dm-crypt: the text the marker
  # tenant paged out is not on the disk under it.
  say "plaintext on the disk: $(plaintext_on $tier) lines of the marker"
  adopt_check
  container_check
else
  say "fail: tierd did not come up"
fi
{ head -n 8 /tmp/tierd.log; echo ...; grep -e "\[w\]" -e warn /tmp/tierd.log | tail -n 60; echo ...; tail -n 20 /tmp/tierd.log; echo "restarted:"; tail -n 20 /tmp/tierd-restarted.log; } |
  sed 's/^/guest-log: /'
say "done"
