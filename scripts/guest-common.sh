# Sourced by the checks that run inside the guests of scripts/guest-host.sh (busybox
# sh), each of which defines `say` first.
ctl() { tierctl --socket /run/tierd.sock "$@"; }
# Waits up to a minute for the tierd started in the background to answer; says why
# not, with LOG's last lines, and returns 1 if it does not.
await_tierd() { # LOG
  for _ in $(seq 60); do
    ctl status > /dev/null 2>&1 && return 0
    sleep 1
  done
  say "fail: tierd did not come up: $(tail -n 5 "$1" | tr '\n' ' ')"
  return 1
}
# Waits up to two minutes for tenant NAME's workload to name a phase in its reports,
# which it does once it has filled its memory.
await_filled() { # NAME
  for _ in $(seq 120); do
    grep -q '"phase"' "/var/lib/tierd/tenants/$1/stdout" 2> /dev/null && return 0
    sleep 1
  done
}
# Adopts the cgroup CGROUP (a path below /sys/fs/cgroup) as tenant NAME 5 s after its
# workload started, demotes and releases it; says KEY before, during, status and after,
# with its four memory files before, during and after.
adopt_cycle() { # KEY CGROUP NAME
  dir=/sys/fs/cgroup$2
  settings() { for f in memory.max memory.high memory.low memory.swap.max; do printf '%s=%s ' $f "$(cat "$dir/$f")"; done; }
  say "$1 before $(settings)"
  sleep 5
  ctl adopt "$2" --name "$3" --size 48M
  sleep 8
  say "$1 during $(settings)"
  ctl demote "$3"
  say "$1 status $(ctl status --json | tr -d '\n')"
  ctl release "$3"
  say "$1 after $(settings)"
}
