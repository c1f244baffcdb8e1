#!/usr/bin/env bash
# Builds the guests that run tierd itself on kernels other than the host's: Debian's
# 6.12 (cgroup v2 as the only hierarchy, PSI, DAMON, MGLRU) and 6.1 (no PAGEMAP_SCAN),
# each with busybox, util-linux's mkswap and blkid, dmsetup, Debian's crun (an OCI
# runtime), and static tierd, tierctl and tierd-bench in an initramfs. Its /init mounts
# cgroup2, loads virtio_blk and the NVMe driver (the tier is a virtual disk, /dev/vda or
# /dev/nvme0n1, a real block device), device-mapper and dm-crypt, runs
# scripts/guest-check.sh (or scripts/guest-fault.sh when the kernel's command line says
# tierd.check=fault or write-fault, scripts/guest-damon.sh or guest-outgrow.sh for
# tierd.check=damon, outgrow or outgrow-slow, scripts/guest-kernel-tests.sh for
# tierd.check=kernel-tests) and powers off; crates/tierd/tests/guests.rs boots them.
#
#   scripts/guest-host.sh             # -> target/guest/host-{6.12,6.1}/{vmlinuz,initrd.img,
#                                     #    initrd-kernel-tests.img}
#   scripts/guest-host.sh 6.12        # one of them
#
# Idempotent: each kernel package is fetched once.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || set -- 6.12 6.1
# shellcheck source=scripts/guest-lib.sh
source scripts/guest-lib.sh
# Run alone on a fresh host (not after guest.sh), it needs cpio and dmsetup too.
host_tools
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "guest-host: building static tierd, tierctl, tierd-bench and tierd's kernel tests for the guests"
static=(--release --locked --target x86_64-unknown-linux-gnu --target-dir target/static)
export RUSTFLAGS="-C target-feature=+crt-static"
cargo build "${static[@]}" -q -p tierd -p tierd-bench --bin tierd --bin tierctl --bin tierd-bench
# Not quiet: cargo names the test binary it built on its "Executable" line.
cargo test "${static[@]}" -p tierd --test kernel --no-run > "$tmp/kernel-tests.log" 2>&1 || {
  cat "$tmp/kernel-tests.log" >&2
  exit 1
}
kernel_tests=$(sed -n 's/.*Executable tests\/kernel.rs (\(.*\))/\1/p' "$tmp/kernel-tests.log")
[ -x "$kernel_tests" ] || { echo "guest-host: cargo named no kernel test binary: $(cat "$tmp/kernel-tests.log")" >&2; exit 1; }
unset RUSTFLAGS
# Where the test binary looks for tierd, tierctl and tierd-bench (cargo's CARGO_BIN_EXE_*).
bin_dir=$PWD/target/static/x86_64-unknown-linux-gnu/release

build() { # SERIES
series=$1
out=target/guest/host-$series
mkdir -p "$out/dl"

newest() {
  apt-cache search "^linux-image-${series//./\\.}[.-].*-amd64-unsigned\$" 2>/dev/null | awk '{print $1}' |
    grep -v -e -cloud- -e -rt- | sort -V | tail -1
}
kernel=$(newest)
[ -n "$kernel" ] || { apt-get update -qq && kernel=$(newest); }
[ -n "$kernel" ] || { echo "guest-host: no linux-image-$series in the package lists" >&2; exit 1; }
fetch "$out/dl" "$kernel"
fetch target/guest/dl busybox-static
echo "guest-host: kernel $kernel"

root=$tmp/$series
mkdir -p "$root"/{bin,proc,sys,dev,tmp,run,var/lib,lib/modules}
cp target/guest/dl/busybox-static/bin/busybox "$root/bin/busybox"
# Stripped: the root file system is ramfs in the guest (never swapped), so every byte of
# it holds the guest's DRAM.
for b in tierd tierctl tierd-bench; do
  strip -o "$root/bin/$b" "target/static/x86_64-unknown-linux-gnu/release/$b"
done
# Debian's crun (an OCI runtime: the main check's container), unpacked with libyajl2,
# which a host without crun lacks; its other libraries are the host's.
fetch target/guest/dl crun
fetch target/guest/dl libyajl2
yajl=$PWD/target/guest/dl/libyajl2/usr/lib/x86_64-linux-gnu
copy_with_libs() { # BINARY NAME: into the guest as /bin/NAME.host, with the libraries it loads
  local lib dest missing
  cp "$1" "$root/bin/$2.host"
  missing=$(LD_LIBRARY_PATH=$yajl ldd "$1" | grep "not found" || true)
  [ -z "$missing" ] || { echo "guest-host: $1 needs libraries the host lacks: $missing" >&2; exit 1; }
  for lib in $(LD_LIBRARY_PATH=$yajl ldd "$1" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}'); do
    # The unpacked libyajl goes where the guest's loader looks; the host's keep their paths.
    dest=$lib
    [[ $lib == "$yajl"/* ]] && dest=/lib/x86_64-linux-gnu/${lib##*/}
    mkdir -p "$root$(dirname "$dest")"
    cp -L "$lib" "$root$dest"
  done
}
# util-linux's mkswap, blkid and losetup, as a host has them (busybox's mkswap lacks -f,
# its losetup --find, and it has no blkid), and dmsetup (the fault check's failing tier), with
# the libraries they load.
for b in mkswap blkid losetup dmsetup; do
  copy_with_libs "$(command -v "$b")" "$b"
done
copy_with_libs target/guest/dl/crun/usr/bin/crun crun
# virtio_blk and, where they are modules (6.1), what it needs, in load order; the NVMe
# driver (the main check's tier on 6.12 is an NVMe drive, for its health log); then
# device-mapper with its delay and flakey targets (the fault checks), and dm-crypt with the
# ECB and XTS modes its cipher needs (the guest has no modprobe to load them on demand).
n=0
for name in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk nvme-auth nvme-core nvme \
  dm-mod dm-delay dm-flakey ecb xts dm-crypt; do
  module=$(find "$out/dl/$kernel/lib/modules" -name "$name.ko*" | head -1)
  [ -n "$module" ] || continue
  n=$((n + 1))
  # Numbered to two digits: /init loads them in the order of the names.
  file=$root/lib/modules/$(printf %02d "$n")-$name.ko
  case $module in
    *.xz) xz -dc "$module" > "$file" ;;
    *) cp "$module" "$file" ;;
  esac
done
cp scripts/guest-common.sh "$root/bin/guest-common"
cp scripts/guest-check.sh "$root/bin/guest-check"
cp scripts/guest-fault.sh "$root/bin/guest-fault"
cp scripts/guest-marker.sh "$root/bin/guest-marker"
cp scripts/guest-damon.sh "$root/bin/guest-damon"
cp scripts/guest-outgrow.sh "$root/bin/guest-outgrow"
cp scripts/guest-cache.sh "$root/bin/guest-cache"
cp scripts/guest-container.sh "$root/bin/guest-container"
cp "$out"/dl/"$kernel"/boot/vmlinuz-* "$out/vmlinuz.new"
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
for b in mkswap blkid losetup dmsetup crun; do ln -sf "$b.host" "/bin/$b"; done
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# As systemd does on a host: the root hands the memory controller to its children.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
for m in /lib/modules/*.ko; do insmod "$m"; done
# No udev here: libdevmapper (tierd's dmsetup, the fault check's) makes /dev/mapper nodes itself.
export DM_DISABLE_UDEV=1
case " $(cat /proc/cmdline) " in
  *" tierd.check=fault "*) sh /bin/guest-fault reads ;;
  *" tierd.check=write-fault "*) sh /bin/guest-fault writes ;;
  *" tierd.check=damon "*) sh /bin/guest-damon ;;
  *" tierd.check=outgrow "*) sh /bin/guest-outgrow ;;
  *" tierd.check=outgrow-slow "*) sh /bin/guest-outgrow slow ;;
  *" tierd.check=cache "*) sh /bin/guest-cache ;;
  *" tierd.check=cache-none "*) sh /bin/guest-cache none ;;
  *" tierd.check=kernel-tests "*) sh /bin/guest-kernel-tests ;;
  *) sh /bin/guest-check ;;
esac
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initrd.img.new"
kernel_tests_overlay > "$out/initrd-kernel-tests.img.new"
mv "$out/vmlinuz.new" "$out/vmlinuz"
mv "$out/initrd.img.new" "$out/initrd.img"
mv "$out/initrd-kernel-tests.img.new" "$out/initrd-kernel-tests.img"
echo "guest-host: $out/vmlinuz $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1))"
}

# The initramfs with tierd's kernel tests on top (a second cpio archive the kernel unpacks
# over the first), so the other checks' guests do not hold the test binary in their RAM:
# the tests, where cargo built their binaries, and ext4 and loop for the tests' /var/tmp
# (a file system on a disk, where tierd's default tier file lives).
kernel_tests_overlay() {
  local over=$tmp/$series-tests n=50 name module
  mkdir -p "$over/bin" "$over/etc" "$over/lib/modules"
  strip -o "$over/bin/kernel-tests" "$kernel_tests"
  cp scripts/guest-kernel-tests.sh "$over/bin/guest-kernel-tests"
  # The guest links tierd, tierctl and tierd-bench there once its /var/tmp is mounted
  # (a clone under /var/tmp, as CI's, would be hidden by it).
  echo "$bin_dir" > "$over/etc/kernel-tests-bin-dir"
  for name in crc16 mbcache jbd2 crc32c_generic ext4 loop; do
    module=$(find "$out/dl/$kernel/lib/modules" -name "$name.ko*" | head -1)
    [ -n "$module" ] || continue
    n=$((n + 1))
    case $module in
      *.xz) xz -dc "$module" > "$over/lib/modules/$n-$name.ko" ;;
      *) cp "$module" "$over/lib/modules/$n-$name.ko" ;;
    esac
  done
  cat "$out/initrd.img.new"
  (cd "$over" && find . | cpio -o -H newc --quiet | gzip -1)
}

for series in "$@"; do
  build "$series"
done
