//! The systemd unit in `packaging/`: it passes `systemd-analyze verify` and keeps the
//! settings tierd relies on.

use std::path::Path;
use std::process::Command;

const UNIT: &str = include_str!("../../../packaging/tierd.service");

/// `Key=value` lines of the unit.
fn settings() -> Vec<(&'static str, &'static str)> {
    UNIT.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('=')).collect()
}

#[test]
fn the_unit_delegates_a_subtree_and_leaves_tenants_running_on_stop() {
    let s = settings();
    assert!(s.contains(&("Delegate", "yes")), "tenants' cgroups live below tierd's: {s:?}");
    assert!(s.contains(&("KillMode", "process")), "stopping tierd must not kill its tenants: {s:?}");
    assert!(s.iter().any(|(k, v)| *k == "ExecStart" && v.starts_with("/usr/local/bin/tierd ")), "{s:?}");
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let Ok(v) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipped: no systemd-analyze on this machine");
        return;
    };
    let version: u32 = String::from_utf8_lossy(&v.stdout)
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("systemd-analyze --version names its version");
    // verify checks ExecStart's binary exists: point it at the one just built.
    let dir = tempfile::tempdir().unwrap();
    let tierd = Path::new(env!("CARGO_BIN_EXE_tierd"));
    let unit = dir.path().join("tierd.service");
    std::fs::write(&unit, UNIT.replace("/usr/local/bin/tierd", tierd.to_str().unwrap())).unwrap();
    let out = Command::new("systemd-analyze").arg("verify").arg(&unit).output().unwrap();
    let complaints: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        // DelegateSubgroup= came in systemd 254; older ones ignore it, as the unit says.
        .filter(|l| !(version < 254 && l.contains("Unknown key 'DelegateSubgroup'")))
        .map(str::to_string)
        .collect();
    assert!(out.status.success() && complaints.is_empty(), "systemd {version}: {complaints:#?}");
}
