#!/usr/bin/env bash
# Builds the tiny guest that VM-tenant tests and `tierd-bench vm` boot under QEMU:
# Debian's kernel and an initramfs holding busybox and tierd-bench, linked statically,
# as the guest's own memory workload (it verifies every page it reads).
#
#   scripts/guest.sh            # -> target/guest/vmlinuz, target/guest/initrd.img
#
# The guest's /init runs `tierd-bench workload` with the arguments given on the
# kernel command line as workload="…", prints its reports on the serial console,
# and powers off. Idempotent: packages and downloads are fetched once.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/guest
mkdir -p "$out/dl"

# shellcheck source=scripts/guest-lib.sh
source scripts/guest-lib.sh
host_tools
if [ ! -f "$out/vmlinuz" ]; then
  kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
  kernel=$(kernel_pkg)
  [ -n "$kernel" ] || { apt-get update -qq && kernel=$(kernel_pkg); }
  [ -n "$kernel" ] || { echo "guest: no linux-image-amd64 in the package lists" >&2; exit 1; }
  echo "guest: kernel $kernel"
  fetch "$out/dl" "$kernel"
  cp "$out"/dl/"$kernel"/boot/vmlinuz-* "$out/vmlinuz"
fi
fetch "$out/dl" busybox-static

echo "guest: building a static tierd-bench for the guest"
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked -q -p tierd-bench --bin tierd-bench \
  --target x86_64-unknown-linux-gnu --target-dir target/static

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,proc,sys,dev,tmp}
cp "$out/dl/busybox-static/bin/busybox" "$root/bin/busybox"
cp target/static/x86_64-unknown-linux-gnu/release/tierd-bench "$root/bin/tierd-bench"
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo "guest: up, $(grep MemTotal /proc/meminfo | tr -s ' ')"
args=$(sed -n 's/.*workload="\([^"]*\)".*/\1/p' /proc/cmdline)
# shellcheck disable=SC2086 # the arguments are split on purpose
/bin/tierd-bench workload $args
echo "guest: workload exit $?"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initrd.img.new"
mv "$out/initrd.img.new" "$out/initrd.img"
echo "guest: $out/vmlinuz $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1))"
