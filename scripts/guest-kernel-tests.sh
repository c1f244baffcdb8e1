# Runs inside the guest of scripts/guest-host.sh (busybox sh), booted with
# tierd.check=kernel-tests and tierd.tests=NAME,NAME,...: those of tierd's own kernel tests
# (crates/tierd/tests/kernel.rs, built static), on cgroup v2 with the tests' /var/tmp on
# the first virtual disk. crates/tierd/tests/guests.rs reads libtest's "test NAME ... ok"
# lines and the "guest-kernel-tests:" ones.
say() { echo "guest-kernel-tests: $*"; }
say "kernel $(uname -r), $(grep MemTotal /proc/meminfo | tr -s ' ')"
# The kernel's own messages (an OOM kill the tests cause) would split libtest's result lines.
dmesg -n 1
# tierd's default tier is a file in its state directory: on a disk's file system, as on
# a host, never on the ramfs root (a swap file needs a block device under it).
mkdir -p /var/tmp
if ! { mke2fs -q /dev/vda > /dev/null && mount -t ext2 /dev/vda /var/tmp; }; then
  say "fail: no file system on /dev/vda for /var/tmp"
  exit 0
fi
# Where the tests look for tierd, tierctl and tierd-bench: where cargo built them.
bin_dir=$(cat /etc/kernel-tests-bin-dir)
mkdir -p "$bin_dir"
for b in tierd tierctl tierd-bench; do ln -sf "/bin/$b" "$bin_dir/$b"; done
# As a test runner started by systemd with Delegate=yes would sit: in its service's leaf,
# so the tierds it starts can delegate memory below the service cgroup.
svc=/sys/fs/cgroup/kernel-tests.service
mkdir -p $svc/supervisor
echo $$ > $svc/supervisor/cgroup.procs
# An emulated CPU: the tests' waits, set for a host's, are this many times longer.
export TIERD_TEST_TIME_SCALE=5
# And the tests that fill gigabytes (two 1 GiB tenants) fill a quarter of that.
export TIERD_TEST_SIZE_SCALE=0.25
tests=$(sed -n 's/.*tierd\.tests=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
# One run per test, so the console says what each costs (CI's time is mostly guests).
status=0
for t in $tests; do
  start=$(date +%s)
  /bin/kernel-tests --exact --test-threads 1 "$t" 2>&1 || status=1
  say "$t took $(($(date +%s) - start)) s"
done
say "exit $status"
