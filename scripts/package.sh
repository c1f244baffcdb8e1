#!/usr/bin/env bash
# Builds the Debian package, target/debian/tierd_VERSION_ARCH.deb: tierd and tierctl in
# /usr/bin, the systemd unit, a default config (a conffile), man pages and bash, zsh and
# fish completions made from the binaries' own command-line definitions (tierd-dist).
# Then checks what came out: the file list, and that the packaged tierd --version,
# tierctl --help and man pages work. Install with `dpkg -i target/debian/tierd_*.deb`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# The whole workspace, as setup.sh builds it: one package set, one feature set, so a
# build setup.sh made is reused instead of compiled again for two of its packages.
cargo build --release --locked --workspace
version=$(cargo metadata --format-version 1 --no-deps | python3 -c \
  'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="tierd"))')
arch=$(dpkg --print-architecture)
out=target/debian
root=$out/root
rm -rf "$root" && mkdir -p "$root/DEBIAN"

install -D -m 0755 target/release/tierd "$root/usr/bin/tierd"
install -D -m 0755 target/release/tierctl "$root/usr/bin/tierctl"
strip --strip-debug "$root/usr/bin/tierd" "$root/usr/bin/tierctl"
# The unit as shipped in the repository names /usr/local/bin (a hand install).
install -d "$root/lib/systemd/system"
sed 's|/usr/local/bin/|/usr/bin/|g' packaging/tierd.service > "$root/lib/systemd/system/tierd.service"
install -d "$root/etc/tierd"
target/release/tierd --print-config > "$root/etc/tierd/tierd.toml"

gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
target/release/tierd-dist "$gen" > /dev/null
install -d "$root/usr/share/man/man1"
for page in "$gen"/man/*.1; do
  gzip -9n < "$page" > "$root/usr/share/man/man1/$(basename "$page").gz"
done
for bin in tierd tierctl; do
  install -D -m 0644 "$gen/completions/bash/$bin.bash" "$root/usr/share/bash-completion/completions/$bin"
  install -D -m 0644 "$gen/completions/zsh/_$bin" "$root/usr/share/zsh/vendor-completions/_$bin"
  install -D -m 0644 "$gen/completions/fish/$bin.fish" "$root/usr/share/fish/vendor_completions.d/$bin.fish"
done
install -D -m 0644 README.md "$root/usr/share/doc/tierd/README.md"
install -D -m 0644 docs/operating.md "$root/usr/share/doc/tierd/operating.md"
printf 'tierd\nLicense: Apache-2.0\n' > "$root/usr/share/doc/tierd/copyright"

echo /etc/tierd/tierd.toml > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/control" <<EOF
Package: tierd
Version: $version
Architecture: $arch
Maintainer: tierd developers <tierd@localhost>
Depends: libc6 (>= 2.34)
Recommends: util-linux
Section: admin
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Description: NVMe SSD as a second tier of memory for unmodified processes
 tierd keeps each tenant's hot memory in DRAM and lets cold memory live on an
 NVMe tier, shares DRAM between tenants by quota, and shows active memory,
 tier bandwidth and latency and health. tierctl controls a running tierd.
EOF
deb="$out/tierd_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group "$root" "$deb" > /dev/null

# What came out of it.
listing=$(dpkg-deb -c "$deb")
for f in ./usr/bin/tierd ./usr/bin/tierctl ./lib/systemd/system/tierd.service ./etc/tierd/tierd.toml \
  ./usr/share/man/man1/tierd.1.gz ./usr/share/man/man1/tierctl.1.gz ./usr/share/man/man1/tierctl-tier.1.gz \
  ./usr/share/bash-completion/completions/tierctl ./usr/share/zsh/vendor-completions/_tierd \
  ./usr/share/fish/vendor_completions.d/tierctl.fish; do
  grep -q " $f\$" <<< "$listing" || { echo "package.sh: $f missing from $deb" >&2; exit 1; }
done
x=$(mktemp -d)
trap 'rm -rf "$gen" "$x"' EXIT
dpkg-deb -x "$deb" "$x"
# Each output is taken whole before it is searched (grep -q closing a pipe early fails it).
check() { # WHAT TEXT PATTERN
  grep -q -- "$3" <<< "$2" || { echo "package.sh: $1 lacks \"$3\"" >&2; exit 1; }
}
check "tierd --version" "$("$x/usr/bin/tierd" --version)" "^tierd $version\$"
check "tierctl --help" "$("$x/usr/bin/tierctl" --help)" "tier drain\|Usage: tierctl"
check "the unit" "$(cat "$x/lib/systemd/system/tierd.service")" "^ExecStart=/usr/bin/tierd "
"$x/usr/bin/tierd" --config "$x/etc/tierd/tierd.toml" --check > /dev/null
check "man tierctl" "$(MANWIDTH=80 man -l "$x/usr/share/man/man1/tierctl.1.gz" 2>/dev/null)" "tierctl-status"
check "man tierd" "$(MANWIDTH=80 man -l "$x/usr/share/man/man1/tierd.1.gz" 2>/dev/null)" "--dram-budget"
echo "package.sh: $deb ($(du -h "$deb" | cut -f1), $(grep -c '\.1\.gz$' <<< "$listing") man pages), checked"
