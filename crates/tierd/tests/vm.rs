//! Real-kernel tests of VM tenants: a small Linux guest booted by QEMU (software
//! emulation here; the same command line with `-enable-kvm` where the host has it)
//! runs tierd-bench's workload in its own memory at 2x overcommit. Its cold memory
//! must move to the tier, its hot memory stay in DRAM, and the guest must keep every
//! byte (its workload verifies what it reads, and all of its memory at the end).
//!
//! The guest is built by `scripts/guest.sh` (which `scripts/test.sh` runs). Without
//! it the tests say so and pass, unless `TIERD_REQUIRE_GUEST=1` (as in CI).

mod support;

use std::time::Duration;

use serde_json::Value;
use support::*;

/// The QEMU command line of the test guest with `ram` MiB running `workload` (its
/// arguments), from `tierd-bench guest-command`; `None` (the reason said) when the
/// guest or QEMU is missing.
fn qemu(ram: u64, workload: &str, extra: &[&str]) -> Option<Vec<String>> {
    let out = std::process::Command::new(bench_bin())
        .args(["guest-command", "--ram", &format!("{ram}M"), &format!("--workload={workload}"), "--"])
        .args(extra)
        .output()
        .unwrap();
    if out.status.success() {
        return Some(String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(std::env::var("TIERD_REQUIRE_GUEST").is_err(), "{why}");
    eprintln!("skipped: {why}");
    None
}

fn guest(t: &Value) -> &Value {
    &t["guest"]
}

#[test]
fn a_guest_at_2x_keeps_its_hot_memory_in_dram_and_its_cold_memory_on_the_tier() {
    let Some(argv) = qemu(768, "--size 560M --hot 48M --phase active:100s --json --report 2s", &[]) else { return };
    let _g = serial();
    // 768 MiB of guest RAM (plus QEMU's own) on 384 MiB of DRAM: 2x.
    let mut d = Daemon::start(&[
        "--policy",
        "tierd",
        "--dram-budget",
        "384M",
        "--ratio",
        "2",
        "--interval",
        "2s",
        "--window",
        "16s",
    ]);
    let mut args = vec!["run", "--vm", "--name", "vm", "--size", "840M", "--"];
    args.extend(argv.iter().map(String::as_str));
    d.ctl(&args);

    wait_for("the guest RAM mapping", Duration::from_secs(30), || guest(&d.tenant("vm"))["ram_found"] == true);
    let t = d.tenant("vm");
    let g = guest(&t);
    assert_eq!(g["ram_bytes"], 768 * MIB, "{t:#}");
    assert_eq!(g["accel"], "tcg");
    assert_eq!(g["tierable"], true, "{t:#}");
    assert_eq!(t["vm"], true);
    assert!(d.ctl(&["status"]).contains("vm vm: guest RAM 768 MiB (tcg"), "{}", d.ctl(&["status"]));

    // Booted and filled its memory: the workload reports.
    wait_for("the guest workload's first reports", Duration::from_secs(120), || d.reports("vm").len() >= 3);
    let early: Vec<f64> = d.reports("vm").iter().take(3).map(|r| r["ops_per_sec"].as_f64().unwrap()).collect();

    // Cold guest memory goes to the tier.
    wait_for("cold guest RAM on the tier", Duration::from_secs(60), || {
        guest(&d.tenant("vm"))["ram_tier_bytes"].as_u64().unwrap() >= 300 * MIB
    });
    // Hot memory stays: after a few windows the guest hardly faults and runs as fast
    // as when it was all in DRAM (software emulation on a shared machine: a wide margin).
    wait_for("the guest's hot set to settle in DRAM, under 200 tier faults/s", Duration::from_secs(90), || {
        let t = d.tenant("vm");
        guest(&t)["ram_dram_bytes"].as_u64().unwrap() <= 420 * MIB
            && t["major_faults_per_sec"].as_f64().unwrap() < 200.0
    });
    // Three more reports at the settled rate: the throughput compared is the settled one.
    let settled = d.reports("vm").len();
    wait_for("three reports since", Duration::from_secs(30), || d.reports("vm").len() >= settled + 3);
    let t = d.tenant("vm");
    let faults = t["major_faults_per_sec"].as_f64().unwrap();
    let late: Vec<f64> = d.reports("vm").iter().rev().take(3).map(|r| r["ops_per_sec"].as_f64().unwrap()).collect();
    let (e, l) = (early.iter().sum::<f64>() / 3.0, late.iter().sum::<f64>() / 3.0);
    eprintln!(
        "guest RAM: {} MiB in DRAM, {} MiB on the tier; {faults:.0} faults/s; {l:.0} ops/s late vs {e:.0} before tiering",
        guest(&t)["ram_dram_bytes"].as_u64().unwrap() / MIB,
        guest(&t)["ram_tier_bytes"].as_u64().unwrap() / MIB
    );
    assert!(l >= 0.5 * e, "guest throughput {l:.0} ops/s late vs {e:.0} before tiering");

    // The guest ends its run, having verified all of its memory.
    wait_for("the guest to finish", Duration::from_secs(180), || {
        d.tenant_stdout("vm").contains("guest: workload exit")
    });
    let out = d.tenant_stdout("vm");
    assert!(out.contains("guest: workload exit 0"), "{out}");
    let summary = out.lines().map(|l| l.trim_matches(['\r', ' '])).find(|l| l.contains("\"summary\":true")).unwrap();
    let s: Value = serde_json::from_str(summary).unwrap();
    assert_eq!(s["verified_pages"], 560 * MIB / 4096, "{s:#}");
}

#[test]
fn a_guest_with_locked_memory_is_reported_not_tierable_and_kept_in_dram() {
    // Paused before booting (-S): QEMU has allocated and locked guest RAM already.
    let Some(argv) = qemu(128, "", &["-S", "-overcommit", "mem-lock=on"]) else { return };
    let _g = serial();
    let mut d = Daemon::start(&["--policy", "tierd", "--dram-budget", "1G", "--ratio", "1"]);
    let mut args = vec!["run", "--name", "locked", "--"];
    args.extend(argv.iter().map(String::as_str));
    d.ctl(&args);
    wait_for("the guest to be seen", Duration::from_secs(30), || !guest(&d.tenant("locked")).is_null());
    let t = d.tenant("locked");
    assert_eq!(t["vm"], true, "recognised as a VM without --vm: {t:#}");
    let g = guest(&t);
    assert_eq!(g["tierable"], false, "{t:#}");
    assert!(g["untierable"][0].as_str().unwrap().contains("-overcommit mem-lock=on"), "{t:#}");
    wait_for("locked guest RAM counted as pinned", Duration::from_secs(30), || {
        d.tenant("locked")["pinned_bytes"].as_u64().unwrap() >= 128 * MIB
    });
    assert!(d.ctl(&["status"]).contains("not tierable: guest RAM is locked in DRAM"));
    assert!(d.ctl(&["events"]).contains("cannot be tiered"), "{}", d.ctl(&["events"]));
}

#[test]
fn a_running_qemu_started_elsewhere_is_attached_as_a_vm() {
    // As libvirt would: QEMU started by someone else, in a cgroup below tierd's, its
    // guest RAM touched at start (-mem-prealloc) and so charged to that cgroup.
    let Some(argv) = qemu(192, "", &["-S", "-mem-prealloc"]) else { return };
    let _g = serial();
    let mut d = Daemon::start(&["--policy", "tierd", "--dram-budget", "1G", "--ratio", "1"]);
    let mut qemu = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = qemu.id();
    d.tenant_pids.push(pid);
    // QEMU maps guest RAM at start-up and touches it all; wait until it has.
    let rss_anon_kib = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).map(str::to_string).unwrap_or_default();
        line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    wait_for("QEMU to touch its guest RAM", Duration::from_secs(30), || rss_anon_kib() * 1024 >= 192 * MIB);
    d.ctl(&["attach", &pid.to_string(), "--name", "guest1", "--vm"]);
    wait_for("the attached guest's RAM", Duration::from_secs(30), || guest(&d.tenant("guest1"))["ram_found"] == true);
    let t = d.tenant("guest1");
    assert_eq!(guest(&t)["ram_bytes"], 192 * MIB, "{t:#}");
    assert_eq!(guest(&t)["pid"], pid);
    assert_eq!(guest(&t)["tierable"], true);
    assert!(d.ctl(&["events"]).contains("guest RAM 192 MiB found"), "{}", d.ctl(&["events"]));
    // Where it is charged, too: the kernel moved no charges, and tierd says so.
    let bytes = |k: &str| t[k].as_u64().unwrap_or(0);
    assert!(bytes("charged_elsewhere_bytes") >= 160 * MIB, "guest RAM charged to QEMU's old cgroup: {t:#}");
    assert!(bytes("dram_bytes") >= 192 * MIB, "and counted as the VM's DRAM: {t:#}");
    assert!(d.ctl(&["explain", "guest1"]).contains("stays charged to its old cgroup"));
    d.ctl(&["detach", "guest1"]);
    qemu.kill().unwrap();
    qemu.wait().unwrap();
}
