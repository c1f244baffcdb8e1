#!/usr/bin/env bash
# The test command: formatting, lints, then every test (unit, fixture and the
# real-kernel suites, which need root and clean up their swap, cgroups and processes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-browser
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets --locked -- -D warnings
cargo test --release --workspace --locked
