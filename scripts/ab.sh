#!/usr/bin/env bash
# A/B on the machine: two builds of tierd run one suite point in turn, round after round,
# so the machine's drift (dram's own runs spread ±10–15%) falls on both alike.
#
#   scripts/ab.sh build REV DIR        release binaries of commit REV into DIR
#   scripts/ab.sh run [--rounds N] [--modes M] [--scale S] --out OUT POINT DIR...
#   scripts/ab.sh summary OUT          per run and per build: tierd / dram, ops/s, CPU
#
# `run` writes OUT/<build>-<round>/ (results.json, logs/, run.log) and OUT/summary.txt;
# <build> is each DIR's last path component. Run nothing else meanwhile (no builds, no
# simulator): they load the same two cores.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

build() {
    local rev=$1 dir=$2 target
    # Global: the EXIT trap runs after this function has returned.
    tree=$(mktemp -d /var/tmp/tierd-ab-tree.XXXXXX)
    target=${CARGO_TARGET_DIR_AB:-/var/tmp/tierd-ab-target}
    # The worktree goes whatever happens; its target stays to speed up the next build.
    trap 'git -C "$here" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"; git -C "$here" worktree prune' EXIT
    git -C "$here" worktree add --detach "$tree" "$rev" >/dev/null
    (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --release --locked --bins)
    mkdir -p "$dir"
    for b in tierd tierctl tierd-bench; do cp "$target/release/$b" "$dir/"; done
    git -C "$here" rev-parse --short "$rev" > "$dir/REVISION"
    echo "$(git -C "$here" rev-parse --short "$rev") built into $dir"
}

summary() {
    python3 - "$1" <<'EOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(out, "*-*", "results.json"))):
    name = os.path.basename(os.path.dirname(f))
    build = name.rsplit("-", 1)[0]
    for point in json.load(open(f))["results"]:
        m = {x["mode"]: x for x in point["modes"]}
        t = m.get("tierd")
        if t is None:
            continue
        rel = t["relative_throughput"]
        runs.setdefault(build, []).append(rel)
        dram = m["dram"]["throughput"] / 1e6 if "dram" in m else float("nan")
        print(f"{name:24s} {point['name'][:32]:32s} tierd/dram {rel:.3f}  dram {dram:.2f} M  "
              f"tierd {t['throughput']/1e6:.2f} M  tierd CPU {t.get('tierd_cpu_percent', 0):.1f}%")
# In the order `run` was given them (base first), else by name.
order = os.path.join(out, "builds.txt")
named = open(order).read().split() if os.path.exists(order) else []
builds = [b for b in named if b in runs] + sorted(b for b in runs if b not in named)
for b in builds:
    print(f"{b}: median {statistics.median(runs[b]):.3f} of {len(runs[b])} runs ({min(runs[b]):.3f}–{max(runs[b]):.3f})")
if len(builds) == 2:
    a, b = runs[builds[0]], runs[builds[1]]
    # Mann–Whitney U: pairs where the second build did better (ties half).
    u = sum((y > x) + 0.5 * (y == x) for x in a for y in b)
    print(f"{builds[1]} above {builds[0]} in {u:g} of {len(a) * len(b)} pairs")
EOF
}

run() {
    local rounds=3 modes=dram,tierd scale=1 out="" point
    while [[ $# -gt 0 ]]; do
        case $1 in
            --rounds) rounds=$2; shift 2 ;;
            --modes) modes=$2; shift 2 ;;
            --scale) scale=$2; shift 2 ;;
            --out) out=$2; shift 2 ;;
            -h|--help) usage 0 ;;
            -*) echo "unknown option $1" >&2; usage ;;
            *) break ;;
        esac
    done
    [[ -n $out && $# -ge 2 ]] || usage
    point=$1; shift
    for d in "$@"; do
        [[ -x $d/tierd-bench && -x $d/tierd ]] || { echo "$d: no tierd and tierd-bench (scripts/ab.sh build)" >&2; exit 2; }
    done
    mkdir -p "$out"
    for d in "$@"; do basename "$d"; done > "$out/builds.txt"
    for i in $(seq 1 "$rounds"); do
        for d in "$@"; do
            local run; run="$out/$(basename "$d")-$i"
            echo "$(date +%T) $point: $(basename "$d") round $i of $rounds"
            mkdir -p "$run"
            "$d/tierd-bench" run "$point" --modes "$modes" --scale "$scale" --reps 1 --fresh \
                --out "$run" --logs "$run/logs" > "$run/run.log" 2>&1 \
                || { echo "$(date +%T) failed: see $run/run.log" >&2; exit 1; }
        done
    done
    summary "$out" | tee "$out/summary.txt"
}

case ${1:-} in
    build) [[ $# -eq 3 ]] || usage; build "$2" "$3" ;;
    run) shift; run "$@" ;;
    summary) [[ $# -eq 2 ]] || usage; summary "$2" ;;
    -h|--help) usage 0 ;;
    *) usage ;;
esac
