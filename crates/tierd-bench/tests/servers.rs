//! Redis and PostgreSQL tenants through the suite's own harness: tierd starts the
//! servers as tenants, their clients run beside them and report, and nothing of
//! theirs is left when the run ends; with `--logs`, what they printed is kept. Needs root (tierd, cgroups, swap) and the
//! workspace built (`cargo build --release --workspace`: the harness runs the binaries).

use tierd_bench::scenario::{Mode, TenantDef, run};
use tierd_core::size::MIB;

#[test]
fn server_tenants_run_under_tierd_and_report_through_their_clients() {
    let logs = std::env::temp_dir().join(format!("tierd-bench-logs-{}", std::process::id()));
    tierd_bench::harness::keep_logs_in(logs.clone()).unwrap();
    tierd_bench::harness::label_next_run("servers/tierd 1");
    let tenants = [TenantDef::redis("r", 8, 10, "active:8s"), TenantDef::postgres("pg", 1, "active:8s")];
    let r = run(Mode::Tierd, 512 * MIB, 2.0, &tenants, 25, None).unwrap();
    for name in ["r", "pg"] {
        let t = r.tenant(name);
        assert!(t.reports.len() >= 6, "{name}: a report a second: {:?}", t.reports);
        assert!(t.ops(0.0, 100.0) > 100.0, "{name} served requests: {:?}", t.reports);
    }
    // The harness's directory is /var/tmp/tierd-bench-PID-…; the servers work in it
    // (redis-server changes to its --dir, PostgreSQL to its data directory).
    let dir = format!("/var/tmp/tierd-bench-{}-", std::process::id());
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.to_string_lossy().starts_with(&dir)))
        .map(|e| std::fs::read_to_string(e.path().join("comm")).unwrap_or_default())
        .collect();
    assert!(left.is_empty(), "processes of the run left behind: {left:?}");

    // The run's logs outlive its directory, under the label it was given.
    let kept = logs.join("servers-tierd-1");
    let read = |f: &str| std::fs::read_to_string(kept.join(f)).unwrap_or_else(|e| panic!("{f} kept: {e}"));
    assert!(read("tierd.log").contains("running, policy tierd"), "tierd's log: {}", read("tierd.log"));
    assert!(
        read("r.client.out").lines().filter(|l| l.starts_with("{\"t\"")).count() >= 6,
        "the redis client's reports"
    );
    assert!(kept.join("pg.stdout").exists() && kept.join("pg.stderr").exists(), "the server's own output");
    std::fs::remove_dir_all(&logs).unwrap();
}
