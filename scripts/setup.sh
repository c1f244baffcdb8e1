#!/usr/bin/env bash
# Installs what tierd needs on a fresh Debian machine and builds it (release).
# Idempotent: only missing packages are installed. `--with-browser` also installs
# headless Chromium and python3, which the tests drive, and what the package check
# uses (the demo needs none of them).
set -euo pipefail
cd "$(dirname "$0")/.."

# redis-server: the benchmark suite's Redis tenants (tierd itself does not need it).
tools=(mkswap:util-linux losetup:mount blkid:util-linux kill:procps curl:curl setpriv:util-linux
  redis-server:redis-server)
# The tests also build and check the Debian package (scripts/package.sh).
[ "${1:-}" = "--with-browser" ] && tools+=(chromium:chromium python3:python3 dpkg-deb:dpkg strip:binutils man:man-db)
need_apt=()
for tool in "${tools[@]}"; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
# PostgreSQL (server and pgbench): the suite's PostgreSQL tenants.
compgen -G '/usr/lib/postgresql/*/bin/pgbench' >/dev/null || need_apt+=(postgresql postgresql-contrib)
if ((${#need_apt[@]})); then
  echo "setup: installing ${need_apt[*]}"
  # Debian starts a package's service (a redis on port 6379) when it installs it; the
  # suite starts its own servers, so keep services down unless a policy already decides.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: installing Rust with rustup"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi

cargo build --release --workspace --locked
