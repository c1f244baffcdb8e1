#!/usr/bin/env bash
# Installs what tierd needs on a fresh Debian machine and builds it (release).
# Idempotent: only missing packages are installed. `--with-browser` also installs
# headless Chromium and python3, which the tests drive (the demo needs neither).
set -euo pipefail
cd "$(dirname "$0")/.."

tools=(mkswap:util-linux losetup:mount blkid:util-linux kill:procps curl:curl)
[ "${1:-}" = "--with-browser" ] && tools+=(chromium:chromium python3:python3)
need_apt=()
for tool in "${tools[@]}"; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
if ((${#need_apt[@]})); then
  echo "setup: installing ${need_apt[*]}"
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
