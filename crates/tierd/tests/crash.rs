//! Crash at every step: tierd is killed (SIGKILL, at a `crash_point!`) during start-up,
//! a control-loop pass, a quota write, a demotion, a prefetch, a relayout, a state save,
//! a drain and shutdown. Each time its tenants keep running, a restarted tierd re-adopts
//! them with their settings, every page verifies, and once it stops nothing is
//! stranded: no swap area, loop device or cgroup. Needs the failpoints build of tierd
//! (scripts/test.sh makes it; required in CI through `TIERD_REQUIRE_FAILPOINTS`).
//! `TIERD_CRASH_POINTS=relayout,drain` runs only those cases.

mod support;

use std::time::Duration;

use support::*;

/// One crash: where, and what brings tierd there once its tenant runs.
struct Case {
    point: &'static str,
    /// `FAILPOINTS` for the crashing run.
    spec: &'static str,
    tierd: &'static [&'static str],
    workload: &'static [&'static str],
    trigger: fn(&mut Daemon),
}

const STATIC: &[&str] = &["--dram-budget", "128M", "--ratio", "2", "--policy", "static", "--interval", "1s"];
const ROOMY: &[&str] = &["--dram-budget", "384M", "--ratio", "1", "--policy", "static", "--interval", "1s"];
const ACTIVE: &[&str] = &["--size", "192M", "--hot", "16M", "--phase", "active:600s", "--json"];
/// The `tierd` policy, with a tier that has free 2 MiB clusters for whole huge pages.
const RELAYOUT: &[&str] = &[
    "--dram-budget",
    "128M",
    "--ratio",
    "2",
    "--tier-size",
    "1G",
    "--policy",
    "tierd",
    "--interval",
    "2s",
    "--window",
    "16s",
];
/// A hot set beyond the budget thrashes, so reclaim scatters it over the tier a page at a
/// time; at rest tierd lays it out in runs (as in policy.rs's relayout test).
const THRASH_THEN_REST: &[&str] =
    &["--size", "192M", "--hot", "160M", "--phase", "active:16s,idle:600s", "--json", "--report", "2s"];

fn nothing(_: &mut Daemon) {}

fn cases() -> Vec<Case> {
    vec![
        // tierd stopped cleanly, then crashed starting again: tier made, nothing saved.
        Case { point: "start", spec: "start=return", tierd: STATIC, workload: ACTIVE, trigger: nothing },
        Case { point: "pass", spec: "pass=3*off->return", tierd: STATIC, workload: ACTIVE, trigger: nothing },
        Case {
            point: "quota",
            spec: "quota=return",
            tierd: STATIC,
            workload: ACTIVE,
            trigger: |d| {
                // A second tenant changes the first one's static quota.
                let _ = d.try_ctl(&["run", "--name", "v", "--size", "64M", "--", "sleep", "600"]);
            },
        },
        Case {
            point: "demote",
            spec: "demote=return",
            tierd: STATIC,
            workload: ACTIVE,
            trigger: |d| {
                let _ = d.try_ctl(&["demote", "w"]);
            },
        },
        Case {
            point: "prefetch",
            spec: "prefetch=return",
            tierd: STATIC,
            workload: ACTIVE,
            trigger: |d| {
                d.ctl(&["demote", "w"]);
                let _ = d.try_ctl(&["prefetch", "w"]);
            },
        },
        Case {
            point: "relayout",
            spec: "relayout=return",
            tierd: RELAYOUT,
            workload: THRASH_THEN_REST,
            trigger: nothing,
        },
        Case {
            point: "save",
            spec: "save=1*off->return",
            tierd: STATIC,
            workload: ACTIVE,
            trigger: nothing, // the save after `run` (the first is at start)
        },
        Case {
            point: "drain",
            spec: "drain=return",
            tierd: ROOMY,
            workload: ACTIVE,
            trigger: |d| {
                d.ctl(&["demote", "w"]);
                let _ = d.try_ctl(&["tier", "drain"]);
            },
        },
        Case {
            point: "shutdown",
            spec: "shutdown=return",
            tierd: STATIC,
            workload: ACTIVE,
            trigger: |d| send_signal(d.pid(), 15),
        },
    ]
}

#[test]
fn killed_at_every_step_tierd_comes_back_to_its_tenants_and_strands_nothing() {
    let _g = serial();
    if failpoints_bin().is_none() {
        return;
    }
    let only = std::env::var("TIERD_CRASH_POINTS").ok();
    let chosen = |c: &Case| only.as_deref().is_none_or(|o| o.split(',').any(|p| p == c.point));
    for case in cases().into_iter().filter(chosen) {
        eprintln!("crash at {}: {}", case.point, crash_and_come_back(&case));
    }
}

/// Runs one case; returns what the restarted tierd found.
fn crash_and_come_back(case: &Case) -> String {
    let mut d;
    if case.point == "start" {
        d = Daemon::start(case.tierd);
        d.run_workload("w", &["--size", "192M"], case.workload);
        d.wait_filled("w", Duration::from_secs(60));
        assert!(d.stop().success(), "{}", d.log());
        d.crash_at = Some(case.spec.into());
        d.spawn();
    } else {
        d = Daemon::start_with(case.tierd, Some(case.spec));
        let bench = bench_bin().to_string_lossy().to_string();
        let run = ["run", "--name", "w", "--size", "192M", "--", &bench, "workload"];
        let _ = d.try_ctl(&run.into_iter().chain(case.workload.iter().copied()).collect::<Vec<_>>());
        // Known by PID from the start, so the harness stops it whatever happens.
        let procs = std::fs::read_to_string(d.cgroup_dir().join("tenants/w/cgroup.procs")).unwrap_or_default();
        d.tenant_pids.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        if case.point != "save" && case.point != "pass" {
            d.wait_filled("w", Duration::from_secs(60));
        }
        (case.trigger)(&mut d);
    }
    d.wait_crashed(Duration::from_secs(90));
    let w = std::fs::read_dir(d.cgroup_dir().join("tenants/w")).is_ok();
    assert!(w, "{}: the tenant's cgroup outlives tierd", case.point);

    d.spawn();
    let t = d.tenant("w");
    assert_eq!(t["state"], "running", "{}: re-adopted: {t:#}\n{}", case.point, d.log());
    assert_eq!(t["declared_size_bytes"].as_u64(), Some(192 * MIB), "{}: its settings kept: {t:#}", case.point);
    let pid = t["pids"][0].as_u64().unwrap() as u32;
    d.tenant_pids.push(pid);
    d.wait_filled("w", Duration::from_secs(60));
    let found = format!(
        "re-adopted w (DRAM {} MiB, tier {} MiB, quota {})",
        t["dram_bytes"].as_u64().unwrap_or(0) / MIB,
        t["tier_bytes"].as_u64().unwrap_or(0) / MIB,
        t["quota_bytes"].as_u64().map_or("none".into(), |q| format!("{} MiB", q / MIB))
    );
    let tenants = d.status()["tenants"].as_array().unwrap().clone();
    for t in tenants.iter().filter(|t| t["state"] == "running") {
        d.ctl(&["stop", t["name"].as_str().unwrap()]);
    }
    wait_for("the tenants to exit", Duration::from_secs(120), || {
        d.status()["tenants"].as_array().unwrap().iter().all(|t| t["state"] == "exited")
    });
    let s = d.summary("w");
    assert_eq!((s["corrupt_pages"].as_u64(), s["verified_pages"].as_u64()), (Some(0), Some(192 * MIB / 4096)));
    assert!(d.stop().success(), "{}", d.log());
    assert!(d.owned_swaps().is_empty(), "{}: a swap area stranded: {:?}", case.point, d.owned_swaps());
    assert!(d.owned_loops().is_empty(), "{}: a loop device stranded: {:?}", case.point, d.owned_loops());
    assert!(!d.cgroup_dir().exists(), "{}: cgroups stranded under {}", case.point, d.cgroup_dir().display());
    found
}
