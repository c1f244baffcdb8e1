# Sourced by scripts/guest-check.sh inside the guests: a container started by a real
# OCI runtime (Debian's crun, cgroupfs manager, cgroup v2), as podman or containerd would
# start it under --cgroup-parent /machine.slice, adopted by tierd in place, tiered, and
# released with the runtime's own memory limit back. Lines start "guest-check: container".
container_check() {
  b=/tmp/ctr1
  mkdir -p $b/rootfs/bin $b/rootfs/proc $b/rootfs/dev $b/rootfs/tmp
  cat > $b/config.json <<JSON
{"ociVersion": "1.0.2",
 "process": {"terminal": false, "user": {"uid": 0, "gid": 0}, "cwd": "/", "env": ["PATH=/bin"],
  "args": ["/bin/tierd-bench", "workload", "--size", "48M", "--hot", "8M", "--phase", "active:40s", "--json",
   "--report", "10s"]},
 "root": {"path": "rootfs"},
 "hostname": "ctr1",
 "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
  {"destination": "/bin", "type": "bind", "source": "/bin", "options": ["rbind", "ro"]}],
 "linux": {"cgroupsPath": "/machine.slice/ctr1", "resources": {"memory": {"limit": 268435456}},
  "namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}]}}
JSON
  # The guest's root is ramfs, which pivot_root cannot leave: crun moves the root instead.
  crun --cgroup-manager=cgroupfs run --no-pivot -d --bundle $b ctr1 > /tmp/ctr1.out 2> /tmp/ctr1.err ||
    { say "container fail: crun: $(tr '\n' ' ' < /tmp/ctr1.err)"; return; }
  say "container state $(crun state ctr1 | tr -d '\n ')"
  adopt_cycle container /machine.slice/ctr1 ctr1
  # Released and read: ended through its runtime now (it verifies its pages on the way
  # out), not at its phase's end.
  crun kill ctr1 TERM
  for _ in $(seq 120); do
    grep -q '"summary":true' /tmp/ctr1.out && break
    sleep 1
  done
  say "container summary $(grep '"summary":true' /tmp/ctr1.out)"
  say "container stderr $(tail -c 300 /tmp/ctr1.err | tr '\n' ' ')"
  crun delete -f ctr1
}
