//! Scenarios run side by side in every mode, and the figures taken from them.
//!
//! A scenario is a set of workload-generator tenants with known hot sets and phases.
//! Each mode runs it under its own tierd: `dram` (no memory pressure: the ideal),
//! `swap` (plain Linux swap: one limit equal to the DRAM budget — tierd's `none`
//! policy), `static` (fixed quotas) and `tierd` (the policy). Throughput is read from
//! the tenants' own reports, so it is what the tenant saw.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tierd_core::colour::Colour;
use tierd_core::health::{self, TierReadLatency};
use tierd_core::size::MIB;
use tierd_core::tenant::TenantSpec;
pub use tierd_sys::memory::PageKind;

use crate::harness::{SlowTier, Throttle, Tierd, sleep};
use crate::machine::cpu_seconds;
use crate::workload::Pattern;

pub use tierd_sim::Mode;

/// tierd's flags for a run in `mode` with `budget` bytes of DRAM.
fn tierd_args(mode: Mode, budget: u64, ratio: f64) -> Vec<String> {
    // `dram`: the same harness, but a budget no tenant set here comes near.
    let (policy, budget) = match mode {
        Mode::Dram | Mode::MemoryMode => ("none", 16 << 30),
        Mode::Swap => ("none", budget),
        Mode::Static => ("static", budget),
        Mode::Tierd => ("tierd", budget),
    };
    let ratio = if mode == Mode::Dram { 0.25 } else { ratio };
    ["--policy", policy, "--dram-budget", &budget.to_string(), "--ratio", &ratio.to_string()]
        .into_iter()
        .chain(["--interval", "5s", "--window", "30s"])
        .map(str::to_string)
        .collect()
}

/// What a tenant runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    /// The workload generator, with the tenant's size, hot set and phases.
    Workload,
    /// `redis-server` holding `keys` values of `value_size` bytes, driven from outside
    /// the tenant (so the client's memory and CPU are not the tenant's) by
    /// `tierd-bench redis-client` with the tenant's phases; its hot set is `hot` bytes
    /// of values.
    Redis { keys: u64, value_size: usize },
    /// PostgreSQL with a pgbench database of `scale` and `shared_buffers_mib` of shared
    /// buffers, driven from outside the tenant by `tierd-bench pg-client`.
    Postgres { scale: u32, shared_buffers_mib: u64 },
}

/// One tenant of a scenario.
#[derive(Debug, Clone)]
pub struct TenantDef {
    pub name: String,
    pub size: u64,
    pub hot: u64,
    pub phases: String,
    pub reserve: u64,
    pub shares: u32,
    pub report: &'static str,
    /// What backs the tenant's memory (the workload's `--thp` / `--small-pages`).
    pub pages: PageKind,
    /// How the workload picks pages of its hot set (servers follow their own clients).
    pub pattern: Pattern,
    pub app: App,
}

impl TenantDef {
    /// Whether the tenant is running (active or sweeping, not idle) `secs` into its run.
    pub fn busy_at(&self, secs: f64) -> bool {
        let Ok(phases) = crate::workload::parse_phases(&self.phases) else { return false };
        let mut end = 0.0;
        for p in phases {
            end += p.duration.as_secs_f64();
            if secs < end {
                return p.kind != crate::workload::PhaseKind::Idle;
            }
        }
        false
    }

    pub fn new(name: impl Into<String>, size_mib: u64, hot_mib: u64, phases: impl Into<String>) -> TenantDef {
        TenantDef {
            name: name.into(),
            size: size_mib * MIB,
            hot: hot_mib * MIB,
            phases: phases.into(),
            reserve: 0,
            shares: 100,
            report: "1s",
            pages: PageKind::Default,
            pattern: Pattern::Uniform,
            app: App::Workload,
        }
    }

    /// A Redis tenant with `data_mib` of 1000-byte values, `hot_pct` percent of them
    /// hot. Its size is what redis-server takes for them (measured: 1.12 GiB for 1 GiB).
    pub fn redis(name: impl Into<String>, data_mib: u64, hot_pct: u64, phases: impl Into<String>) -> TenantDef {
        const VALUE: u64 = 1000;
        let keys = data_mib * MIB / VALUE;
        let mut d = TenantDef::new(name, data_mib * 9 / 8, 0, phases);
        d.hot = (keys * hot_pct).div_ceil(100) * VALUE;
        d.app = App::Redis { keys, value_size: VALUE as usize };
        d
    }

    /// A PostgreSQL tenant with a pgbench database of `scale` (~15 MiB each) and a
    /// quarter of it, at least 16 MiB, as shared buffers. Its size is the database
    /// (in the page cache) and the buffers.
    pub fn postgres(name: impl Into<String>, scale: u32, phases: impl Into<String>) -> TenantDef {
        let db_mib = scale as u64 * 15;
        let shared_buffers_mib = (db_mib / 4).max(16);
        let mut d = TenantDef::new(name, db_mib + shared_buffers_mib, 0, phases);
        d.app = App::Postgres { scale, shared_buffers_mib };
        d
    }
}

/// A report line of the workload generator.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Report {
    pub t: f64,
    pub unix: f64,
    pub phase: String,
    pub ops_per_sec: f64,
    #[serde(default)]
    pub p50_us: f64,
    pub p99_us: f64,
    /// Share of the hot set on huge pages (THP tenants only).
    #[serde(default)]
    pub hot_huge: Option<f64>,
    /// Major faults in the report's window (workloads that count them).
    #[serde(default)]
    pub major_faults: Option<u64>,
}

/// What one tenant saw in one run.
#[derive(Debug, Clone, Serialize)]
pub struct TenantRun {
    pub name: String,
    pub reports: Vec<Report>,
    /// How the tenant ended, if it failed before the run was over (a crash, the OOM
    /// killer): its throughput from then on counts as zero, and the report says why.
    pub failed: Option<String>,
}

/// Words for a failed tenant's exit: 128 + N is signal N, as the shell and tierd say;
/// its cgroup's count tells the OOM killer's SIGKILL from another.
pub fn how_it_ended(exit_code: Option<i32>, oom_kills: u64) -> String {
    match exit_code {
        Some(137) if oom_kills > 0 => "killed by the kernel's OOM killer".into(),
        Some(137) => "killed by SIGKILL".into(),
        Some(c) if c > 128 => format!("killed by signal {}", c - 128),
        Some(c) => format!("exit code {c}"),
        None => "ended, exit code unknown".into(),
    }
}

impl TenantRun {
    /// Mean throughput of the active reports with `from <= t < to`; a failed tenant's
    /// time after its last report counts as zero.
    pub fn ops(&self, from: f64, to: f64) -> f64 {
        let v: Vec<f64> = self
            .reports
            .iter()
            .filter(|r| r.phase == "active" && r.t >= from && r.t < to)
            .map(|r| r.ops_per_sec)
            .collect();
        let mean = if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        mean * self.alive_share(from, to)
    }

    /// The share of `[from, to)` the tenant was running: 1 unless it failed, else up to
    /// the end of its last report's window.
    fn alive_share(&self, from: f64, to: f64) -> f64 {
        if self.failed.is_none() || to <= from {
            return 1.0;
        }
        let Some(last) = self.reports.last() else { return 0.0 };
        let period = match self.reports.len() {
            0 | 1 => 1.0,
            n => (last.t - self.reports[0].t) / (n - 1) as f64,
        };
        ((last.t + period - from) / (to - from)).clamp(0.0, 1.0)
    }

    /// Mean p99 latency (µs) of the same reports.
    pub fn p99(&self, from: f64, to: f64) -> f64 {
        let v: Vec<f64> =
            self.reports.iter().filter(|r| r.phase == "active" && r.t >= from && r.t < to).map(|r| r.p99_us).collect();
        if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
    }
}

/// One scenario in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub mode: Mode,
    pub tenants: Vec<TenantRun>,
    /// tierd's CPU over the run, % of one core.
    pub tierd_cpu_percent: f64,
    /// Of it, moving pages (the kernel's paging work in tierd's threads), when known.
    pub moving_cpu_percent: Option<f64>,
    /// Decisions tierd logged (for the report's explanations).
    pub events: usize,
    /// tierd's active-memory health colour near the end of the run.
    pub health: String,
    /// The tracker's CPU near the end of the run, % of one core per 8 GiB of tenant
    /// memory tracked (the tracking budget is 1%); `None` when nothing was tracked.
    pub tracker_cpu_per_8gib: Option<f64>,
    /// The tier's read p99 as health judged it through the run; `None` where tierd
    /// timed too few reads for a p99 (no paging) or cannot trace them.
    pub tier_tail: Option<TierTail>,
}

/// How often a run reads tierd's tier p99 (a 10 s window): every reading overlaps the last.
const TAIL_POLL_SECS: u64 = 5;

/// The tier's read p99 over a run: tierd's 10 s window read every [`TAIL_POLL_SECS`],
/// and how much of the run health judged it yellow or red (the bands to fit).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct TierTail {
    /// Readings with a p99 (enough sampled reads in the window).
    pub readings: usize,
    pub median_us: f64,
    pub worst_us: f64,
    /// Shares of those readings in health's yellow and red bands.
    pub yellow: f64,
    pub red: f64,
}

impl TierTail {
    pub fn of(p99s: &[f64]) -> Option<TierTail> {
        if p99s.is_empty() {
            return None;
        }
        let share = |c: Colour| {
            p99s.iter().filter(|&&us| health::tier_read_latency(TierReadLatency::P99(us)) == c).count() as f64
                / p99s.len() as f64
        };
        Some(TierTail {
            readings: p99s.len(),
            median_us: crate::machine::median(p99s),
            worst_us: p99s.iter().copied().fold(0.0, f64::max),
            yellow: share(Colour::Yellow),
            red: share(Colour::Red),
        })
    }
}

/// Sleeps `secs`, reading the tier's p99 off tierd's status every [`TAIL_POLL_SECS`].
fn watch_tail(t: &Tierd, secs: u64, p99s: &mut Vec<f64>) -> anyhow::Result<()> {
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        sleep(left.min(Duration::from_secs(TAIL_POLL_SECS)))?;
        p99s.extend(t.status().ok().and_then(|s| s.tier.read_latency_p99_us));
    }
}

impl Run {
    pub fn tenant(&self, name: &str) -> &TenantRun {
        self.tenants.iter().find(|t| t.name == name).expect("scenario tenant")
    }
}

pub fn parse_reports(stdout: &str) -> Vec<Report> {
    stdout.lines().filter(|l| l.starts_with("{\"t\"")).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Starts a fresh tierd in `mode` and the scenario's tenants under it (and the clients
/// of those that are servers).
pub fn start(mode: Mode, budget: u64, ratio: f64, tenants: &[TenantDef]) -> anyhow::Result<Tierd> {
    if tenants.iter().any(|d| matches!(d.app, App::Redis { .. })) && which("redis-server").is_none() {
        anyhow::bail!("redis-server is not installed (Debian: apt-get install redis-server)");
    }
    let mut t = Tierd::start(&tierd_args(mode, budget, ratio))?;
    for d in tenants {
        let mut spec = tierd_core::tenant::TenantSpec::new(tierd_core::TenantName::new(&d.name)?);
        spec.size = Some(d.size);
        spec.reserve = d.reserve;
        spec.shares = d.shares;
        match d.app {
            App::Workload => start_workload(&mut t, d, spec)?,
            App::Redis { keys, value_size } => start_redis(&mut t, d, spec, keys, value_size)?,
            App::Postgres { scale, shared_buffers_mib } => start_postgres(&mut t, d, spec, scale, shared_buffers_mib)?,
        }
    }
    Ok(t)
}

fn start_workload(t: &mut Tierd, d: &TenantDef, spec: TenantSpec) -> anyhow::Result<()> {
    let mut argv = vec![
        crate::harness::sibling("tierd-bench")?.to_string_lossy().to_string(),
        "workload".into(),
        "--size".into(),
        d.size.to_string(),
        "--hot".into(),
        d.hot.to_string(),
        "--phase".into(),
        d.phases.clone(),
        "--json".into(),
        "--report".into(),
        d.report.into(),
        "--no-verify-all".into(),
    ];
    if d.pattern == Pattern::Zipf {
        argv.extend(["--pattern".into(), "zipf".into()]);
    }
    match d.pages {
        PageKind::Thp => argv.push("--thp".into()),
        PageKind::Small => argv.push("--small-pages".into()),
        _ => {}
    }
    t.run(spec, argv)?;
    Ok(())
}

/// The flags every server client takes: the tenant's phases and report interval.
fn client_run_args(d: &TenantDef) -> [String; 5] {
    ["--phase".into(), d.phases.clone(), "--json".into(), "--report".into(), d.report.into()]
}

fn start_redis(t: &mut Tierd, d: &TenantDef, spec: TenantSpec, keys: u64, value_size: usize) -> anyhow::Result<()> {
    let socket = t.dir.join(format!("{}.redis.sock", d.name));
    let (socket_arg, dir_arg) = (socket.to_string_lossy().to_string(), t.dir.to_string_lossy().to_string());
    let server = [
        "redis-server",
        "--port",
        "0",
        "--unixsocket",
        &socket_arg,
        "--unixsocketperm",
        "700",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir_arg,
    ];
    t.run(spec, server.iter().map(|s| s.to_string()).collect())?;
    let mut client = vec![
        "redis-client".to_string(),
        "--socket".into(),
        socket_arg,
        "--keys".into(),
        keys.to_string(),
        "--value-size".into(),
        value_size.to_string(),
        "--hot-keys".into(),
        (d.hot / value_size as u64).max(1).to_string(),
    ];
    client.extend(client_run_args(d));
    t.spawn_client(&d.name, &client)
}

fn start_postgres(
    t: &mut Tierd,
    d: &TenantDef,
    spec: TenantSpec,
    scale: u32,
    shared_buffers_mib: u64,
) -> anyhow::Result<()> {
    let data = t.dir.join(format!("{}.pg", d.name));
    let sock = t.dir.join(format!("{}.pgsock", d.name));
    crate::pg_load::initdb(&data, &sock)?;
    t.run(spec, crate::pg_load::server_argv(&data, &sock, shared_buffers_mib)?)?;
    let mut client = vec![
        "pg-client".to_string(),
        "--host".into(),
        sock.to_string_lossy().to_string(),
        "--scale".into(),
        scale.to_string(),
        "--work".into(),
        t.dir.join(format!("{}.pgbench", d.name)).to_string_lossy().to_string(),
    ];
    client.extend(client_run_args(d));
    t.spawn_client(&d.name, &client)
}

/// Runs `tenants` under a fresh tierd in `mode` for `secs` seconds after they start;
/// with `slow`, tierd and the tenants read the tier through a throttled blkio cgroup
/// (a hard-disk-like device).
pub fn run(
    mode: Mode,
    budget: u64,
    ratio: f64,
    tenants: &[TenantDef],
    secs: u64,
    slow: Option<Throttle>,
) -> anyhow::Result<Run> {
    let t = start(mode, budget, ratio, tenants)?;
    let started = std::time::Instant::now();
    let pid = t.pid();
    let c0 = cpu_seconds(pid);
    let moving0 = t.status().ok().map(|s| s.moving_cpu_seconds);
    let mut slept = 0;
    let mut p99s = Vec::new();
    let _slow = match slow {
        Some(th) => {
            slept = th.after_secs.min(secs);
            watch_tail(&t, slept, &mut p99s)?;
            let st = t.status()?;
            let g = SlowTier::new(&st.tier.swap_path, th)?;
            g.add(pid)?;
            for ts in &st.tenants {
                for &p in &ts.pids {
                    g.add(p)?;
                }
            }
            Some(g)
        }
        None => None,
    };
    // Health is read a little before the end, while every tenant still runs.
    let left = secs - slept;
    watch_tail(&t, left.saturating_sub(5), &mut p99s)?;
    let status = t.status().ok();
    let health = status.as_ref().map(|s| s.active_health.clone()).unwrap_or_default();
    let tracker_cpu_per_8gib = status.as_ref().and_then(|s| {
        let secs = s.tracker_seconds();
        let tracked: u64 = s.tenants.iter().map(|t| t.size_bytes).sum();
        (secs > 0.0 && tracked > 0)
            .then(|| secs / started.elapsed().as_secs_f64() * 100.0 * (8u64 << 30) as f64 / tracked as f64)
    });
    watch_tail(&t, left.min(5), &mut p99s)?;
    // Failures are read at the very end: a tenant that died in the last seconds failed too.
    let status = t.status().ok().or(status);
    let cpu = (cpu_seconds(pid) - c0) / secs as f64 * 100.0;
    let moving_cpu_percent =
        status.as_ref().zip(moving0).map(|(s, m0)| (s.moving_cpu_seconds - m0).max(0.0) / secs as f64 * 100.0);
    // Every tenant outlives the run; one that ended already, other than cleanly, failed.
    let failed = |name: &str| {
        let ts = status.as_ref()?.tenants.iter().find(|ts| ts.name == name)?;
        (ts.state == "exited" && ts.exit_code != Some(0)).then(|| how_it_ended(ts.exit_code, ts.oom_kills))
    };
    let events = t.request(&tierd::api::Request::Events)?.as_array().map_or(0, Vec::len);
    let runs = tenants
        .iter()
        .map(|d| {
            let out = match d.app {
                App::Workload => t.tenant_stdout(&d.name),
                App::Redis { .. } | App::Postgres { .. } => t.client_stdout(&d.name),
            };
            TenantRun { name: d.name.clone(), reports: parse_reports(&out), failed: failed(&d.name) }
        })
        .collect();
    Ok(Run {
        mode,
        tenants: runs,
        tierd_cpu_percent: cpu,
        moving_cpu_percent,
        events,
        health,
        tracker_cpu_per_8gib,
        tier_tail: TierTail::of(&p99s),
    })
}

/// Where `prog` is on `PATH`.
fn which(prog: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(prog)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_tier_tail_is_judged_in_healths_bands() {
        assert_eq!(TierTail::of(&[]), None, "no reading had a p99: nothing paged");
        let t = TierTail::of(&[900.0, 1_500.0, 3_000.0, 12_000.0]).unwrap();
        assert_eq!((t.readings, t.median_us, t.worst_us), (4, 2_250.0, 12_000.0));
        assert_eq!((t.yellow, t.red), (0.25, 0.25), "2–8 ms yellow, above 8 ms red, as `tierctl health`");
    }

    #[test]
    fn reports_parse_and_average_by_phase_and_time() {
        let out = "filled 1 MiB\n\
{\"t\":1.0,\"unix\":10.0,\"phase\":\"active\",\"ops\":1,\"ops_per_sec\":100.0,\"p50_us\":1,\"p99_us\":2.0,\"p999_us\":3}\n\
{\"t\":2.0,\"unix\":11.0,\"phase\":\"idle\",\"ops\":0,\"ops_per_sec\":0.0,\"p50_us\":0,\"p99_us\":0.0,\"p999_us\":0}\n\
{\"t\":3.0,\"unix\":12.0,\"phase\":\"active\",\"ops\":1,\"ops_per_sec\":300.0,\"p50_us\":1,\"p99_us\":4.0,\"p999_us\":3}\n\
{\"summary\":true}\n";
        let r = TenantRun { name: "a".into(), reports: parse_reports(out), failed: None };
        assert_eq!(r.reports.len(), 3);
        assert_eq!(r.ops(0.0, 10.0), 200.0, "idle reports do not count");
        assert_eq!(r.p99(0.0, 10.0), 3.0);
        assert_eq!(r.ops(2.5, 10.0), 300.0);
        assert_eq!(r.ops(50.0, 60.0), 0.0);
    }

    #[test]
    fn a_failed_tenant_counts_as_zero_from_its_last_report() {
        let line = |t: f64, ops: f64| {
            format!("{{\"t\":{t},\"unix\":0.0,\"phase\":\"active\",\"ops_per_sec\":{ops},\"p99_us\":1.0}}\n")
        };
        let out: String = (1..=10).map(|t| line(t as f64, 1000.0)).collect();
        let alive = TenantRun { name: "a".into(), reports: parse_reports(&out), failed: None };
        let dead = TenantRun { failed: Some("exit code 101".into()), ..alive.clone() };
        assert_eq!(alive.ops(0.0, 20.0), 1000.0, "a tenant that ran on is averaged over its reports");
        // Its last report (t = 10) covers 9–10 s: alive for 11 s of the 20.
        assert!((dead.ops(0.0, 20.0) - 550.0).abs() < 1e-9, "{}", dead.ops(0.0, 20.0));
        assert_eq!(dead.ops(15.0, 20.0), 0.0, "after its failure");
        assert_eq!(dead.ops(2.0, 8.0), 1000.0, "before its failure");
    }

    #[test]
    fn a_failed_tenant_is_said_to_have_crashed_or_been_killed() {
        assert_eq!(how_it_ended(Some(101), 0), "exit code 101");
        assert_eq!(how_it_ended(Some(137), 1), "killed by the kernel's OOM killer");
        assert_eq!(how_it_ended(Some(137), 0), "killed by SIGKILL");
        assert_eq!(how_it_ended(Some(143), 0), "killed by signal 15");
        assert_eq!(how_it_ended(None, 0), "ended, exit code unknown");
    }

    #[test]
    fn modes_parse_and_map_to_policies() {
        assert_eq!(Mode::parse("swap").unwrap(), Mode::Swap);
        assert!(Mode::parse("zram").is_err());
        let a = tierd_args(Mode::Swap, 1 << 30, 2.0);
        assert!(a.windows(2).any(|w| w[0] == "--policy" && w[1] == "none"));
        assert!(a.windows(2).any(|w| w[0] == "--dram-budget" && w[1] == (1u64 << 30).to_string()));
        let d = tierd_args(Mode::Dram, 1 << 30, 2.0);
        assert!(d.windows(2).any(|w| w[0] == "--dram-budget" && w[1] == (16u64 << 30).to_string()));
    }
}
