#!/usr/bin/env bash
# The test command: formatting, lints, then every test (unit, fixture and the
# real-kernel suites, which need root and clean up their swap, cgroups and processes).
set -euo pipefail
# Each command with its start time, so the log says where CI's time goes.
PS4='+ [$(date +%T)] '
set -x
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-browser
export PATH="$HOME/.cargo/bin:$PATH"
# The test guest for the VM-tenant tests (QEMU, a Debian kernel, busybox); its tests
# fail rather than skip when it is missing.
bash scripts/guest.sh
# The guest that runs tierd itself on Debian's 6.12 kernel with cgroup v2 (tests/guests.rs).
bash scripts/guest-host.sh
export TIERD_REQUIRE_GUEST=1
# The huge-page tests fail, rather than skip, on a host without transparent huge pages.
export TIERD_REQUIRE_THP=1
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets --locked -- -D warnings
cargo clippy --release -p tierd --all-targets --locked --features failpoints -- -D warnings
# tierd with its crash points (tests/crash.rs), set apart in target/failpoints. Built in the
# workspace's own tree, where only tierd compiles again (a tree of its own compiled every
# dependency too); the plain build after it puts the release tierd back.
cargo build --release --locked --workspace --features tierd/failpoints --bin tierd
mkdir -p target/failpoints/release
cp target/release/tierd target/failpoints/release/tierd
cargo build --release --locked --workspace --bin tierd
export TIERD_REQUIRE_FAILPOINTS=1
cargo test --release --workspace --locked
# The Debian package: built, then its contents, binaries and man pages checked.
bash scripts/package.sh
