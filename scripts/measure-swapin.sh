#!/usr/bin/env bash
# The capacity of this machine's swap-in path (a swap file on a loop device, as the
# suite's tier), for the simulator's calibration: N tenants at once fault their pages
# back, with no limit while they do, so no reclaim rides on the reads. With AT_LIMIT=S
# they fault back under a limit of S times what they filled, measured once they reach
# it, so each read also evicts a page as at a thrashing limit (with S near 1 the pages
# reclaim passes over are hot). For each N it prints faults a second, pages read a
# second, the device's reads a second and its mean time per read, the wait each fault
# saw, the device's writes a second, and the CPU the host spent per fault (the machine
# is shared: other load counts too). With WRITE_RATIO=R each access rewrites its page
# with probability R, so at a limit the pages evicted are dirty and each is a write.
#
# Usage: scripts/measure-swapin.sh [COUNTS...]   (default: 1 2 4 8 12)
# Env: BIN (tierd-bench), SIZE_MIB per tenant (512), WINDOW seconds measured (3),
# AT_LIMIT (none: no limit while they fault back), WRITE_RATIO (0).
# Leaves nothing behind: its swap area, loop device, file, cgroup and processes go on
# any exit.
set -euo pipefail

BIN=${BIN:-target/release/tierd-bench}
SIZE_MIB=${SIZE_MIB:-512}
WINDOW=${WINDOW:-3}
AT_LIMIT=${AT_LIMIT:-}
WRITE_RATIO=${WRITE_RATIO:-0}
COUNTS=${*:-1 2 4 8 12}
V1=/sys/fs/cgroup/memory
[ -w "$V1" ] || { echo "needs root and the cgroup v1 memory controller at $V1" >&2; exit 1; }
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p tierd-bench" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/tierd-calib.XXXXXX)
CG=$V1/tierd-calib-$$
loopdev=""
pids=()

stop_tenants() {
	for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
cleanup() {
	stop_tenants
	if [ -n "$loopdev" ]; then
		swapoff "$loopdev" 2>/dev/null || true
		losetup -d "$loopdev" 2>/dev/null || true
	fi
	[ -d "$CG" ] && rmdir "$CG" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
majfaults() { awk '$1 == "total_pgmajfault" { print $2 }' "$CG/memory.stat"; }
# Jiffies busy and in all, over every CPU (idle and iowait are not busy).
cpu() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
# Reads completed, milliseconds spent reading and writes completed, of the loop device.
disk() { awk -v d="${loopdev#/dev/}" '$3 == d { print $4, $7, $8 }' /proc/diskstats; }

total_mib=0
for n in $COUNTS; do total_mib=$((total_mib > n * SIZE_MIB ? total_mib : n * SIZE_MIB)); done
fallocate -l $((total_mib + 1024))M "$WORK/swap.img"
# Direct I/O as tierd sets up its tier: reads come from the disk, not the page cache.
loopdev=$(losetup --find --show --direct-io=on "$WORK/swap.img")
mkswap -q "$loopdev" >/dev/null
swapon -p 5 "$loopdev"
mkdir "$CG"

cpus=$(nproc)
echo "| tenants | faults/s | pages read/s | device reads/s | ms per device read | ms per fault | device writes/s | CPUs busy | µs CPU per fault |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $COUNTS; do
	for i in $(seq "$n"); do
		(
			echo "$BASHPID" >"$CG/cgroup.procs"
			exec "$BIN" workload --size "${SIZE_MIB}M" --hot "${SIZE_MIB}M" --phase active:10m \
				--small-pages --no-verify-all --json --report 10s --seed "$i" --write-ratio "$WRITE_RATIO"
		) >"$WORK/w$n-$i.log" 2>&1 &
		pids+=($!)
	done
	want=$((n * SIZE_MIB * 1024 * 1024 * 98 / 100))
	for _ in $(seq 600); do
		[ "$(cat "$CG/memory.usage_in_bytes")" -ge "$want" ] && break
		sleep 0.2
	done
	for p in "${pids[@]}"; do kill -STOP "$p"; done
	# A limit below what it holds pushes the pages out; v1 gives up (EBUSY) after some
	# rounds of reclaim, so it is asked again until they are out.
	for _ in $(seq 20); do
		echo $((16 << 20)) 2>/dev/null >"$CG/memory.limit_in_bytes" && break
	done
	limit=-1
	[ -n "$AT_LIMIT" ] && limit=$(awk -v s="$AT_LIMIT" -v b=$((n * SIZE_MIB << 20)) 'BEGIN { printf "%d", s * b }')
	echo "$limit" >"$CG/memory.limit_in_bytes"
	if [ "$limit" -gt 0 ]; then
		# Measured once the limit is reached: every fault then evicts a page.
		for p in "${pids[@]}"; do kill -CONT "$p"; done
		for _ in $(seq 600); do
			[ "$(cat "$CG/memory.usage_in_bytes")" -ge $((limit * 97 / 100)) ] && break
			sleep 0.1
		done
	fi
	read -r r0 ms0 wr0 < <(disk)
	read -r b0 t0 < <(cpu)
	f0=$(majfaults) s0=$(vmstat pswpin)
	for p in "${pids[@]}"; do kill -CONT "$p"; done
	sleep "$WINDOW"
	read -r r1 ms1 wr1 < <(disk)
	read -r b1 t1 < <(cpu)
	f1=$(majfaults) s1=$(vmstat pswpin)
	stop_tenants
	echo -1 >"$CG/memory.limit_in_bytes"
	awk -v n="$n" -v w="$WINDOW" -v f=$((f1 - f0)) -v s=$((s1 - s0)) -v r=$((r1 - r0)) -v ms=$((ms1 - ms0)) \
		-v busy="$(((b1 - b0) * 1000 / (t1 - t0)))" -v cpus="$cpus" -v wr=$((wr1 - wr0)) 'BEGIN {
			c = busy / 1000 * cpus
			printf "| %d | %.0f | %.0f | %.0f | %.3f | %.3f | %.0f | %.2f | %.1f |\n", n, f / w, s / w, r / w,
				r ? ms / r : 0, f ? n * w * 1000 / f : 0, wr / w, c, f ? c * w * 1e6 / f : 0
		}'
done
