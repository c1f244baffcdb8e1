//! `tierd-bench policy`: the `tierd` policy against no limit (`dram`), plain swap
//! (`swap`, tierd's `none` policy) and fixed quotas (`static`), side by side in one run,
//! where memory moves: steady hot sets at 2x, a tenant waking up, a noisy neighbour,
//! and active memory above DRAM with a reserve and shares.

use std::path::Path;

use serde::Serialize;
use tierd_core::size::{GIB, MIB};

use crate::chart;
use crate::machine::RunInfo;
use crate::scenario::{Mode, Run, TenantDef, run};

/// One scenario's figures in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    pub mode: Mode,
    /// Throughput the scenario measures (ops/s), raw.
    pub throughput: f64,
    /// Against `dram` in the same run.
    pub relative_throughput: f64,
    pub p99_us: f64,
    pub p99_latency_ratio: f64,
    /// Per-tenant throughput relative to the same tenant under `dram`.
    pub tenants: Vec<(String, f64)>,
    /// Wake-up only: seconds until back to 95% of its pre-idle throughput.
    pub recovery_secs: Option<f64>,
    /// Wake-up only: throughput relative to before, second by second after waking.
    pub recovery_curve: Vec<(f64, f64)>,
    pub tierd_cpu_percent: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub description: String,
    pub modes: Vec<ModeResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyResults {
    pub run: RunInfo,
    pub scenarios: Vec<ScenarioResult>,
}

struct Scenario {
    name: &'static str,
    description: &'static str,
    budget: u64,
    secs: u64,
    tenants: Vec<TenantDef>,
    /// Tenants whose throughput the scenario is about.
    measured: Vec<&'static str>,
    /// Report window (workload seconds since its fill).
    from: f64,
    to: f64,
}

fn scenarios() -> Vec<Scenario> {
    let steady = (1..=4).map(|i| TenantDef::new(["s1", "s2", "s3", "s4"][i - 1], 512, 128, "active:80s")).collect();
    let mut noisy: Vec<TenantDef> =
        (1..=3).map(|i| TenantDef::new(["s1", "s2", "s3"][i - 1], 512, 128, "active:85s")).collect();
    noisy.push(TenantDef::new("noisy", 1200, 4, "idle:25s,sweep:55s"));
    let mut reserved = TenantDef::new("reserved", 512, 400, "active:80s");
    reserved.reserve = 450 * MIB;
    let mut heavy = TenantDef::new("shares200", 512, 440, "active:80s");
    heavy.shares = 200;
    let light = TenantDef::new("shares100", 512, 440, "active:80s");
    vec![
        Scenario {
            name: "steady",
            description: "4 tenants of 512 MiB at 2x overcommit (1 GiB DRAM), hot sets 4 x 128 MiB = 50% of DRAM",
            budget: GIB,
            secs: 90,
            tenants: steady,
            measured: vec!["s1", "s2", "s3", "s4"],
            from: 30.0,
            to: 80.0,
        },
        Scenario {
            name: "wake-up",
            description: "a 1.25 GiB tenant with a 1 GiB hot set idles 60 s; meanwhile two 1 GiB neighbours sweep \
                          all their memory for 30 s (pushing it out) and go back to 128 MiB hot sets; then it wakes; \
                          2 GiB DRAM",
            budget: 2 * GIB,
            secs: 160,
            tenants: vec![
                TenantDef::new("sleepy", 1280, 1024, "active:40s,idle:60s,active:45s"),
                TenantDef::new("pusher1", 1024, 128, "active:40s,sweep:30s,active:75s"),
                TenantDef::new("pusher2", 1024, 128, "active:40s,sweep:30s,active:75s"),
            ],
            measured: vec!["sleepy"],
            from: 0.0,
            to: 0.0,
        },
        Scenario {
            name: "noisy-neighbour",
            description: "3 steady tenants (512 MiB, 128 MiB hot) and one that sweeps all of its 1.2 GiB at random; 1 GiB DRAM",
            budget: GIB,
            secs: 95,
            tenants: noisy,
            measured: vec!["s1", "s2", "s3"],
            from: 35.0,
            to: 78.0,
        },
        Scenario {
            name: "contention",
            description: "active memory 125% of 1 GiB DRAM: `reserved` (400 MiB hot, --reserve 450M), `shares200` and \
                          `shares100` (440 MiB hot each)",
            budget: GIB,
            secs: 90,
            tenants: vec![reserved, heavy, light],
            measured: vec!["reserved", "shares200", "shares100"],
            from: 30.0,
            to: 80.0,
        },
    ]
}

/// Throughput of `sleepy` before it idles (its steady state in the first phase).
fn sleepy_baseline(r: &Run) -> f64 {
    r.tenant("sleepy").ops(25.0, 39.0)
}

/// The wake-up of `sleepy`: its throughput relative to `baseline` (its steady state
/// under `dram` in the same run), per second from the end of the idle phase, and the
/// time until it is back to 95% (3-report average).
fn recovery(r: &Run, baseline: f64) -> (Option<f64>, Vec<(f64, f64)>) {
    let s = r.tenant("sleepy");
    let Some(idle_end) = s.reports.iter().filter(|x| x.phase == "idle").map(|x| x.t).reduce(f64::max) else {
        return (None, Vec::new());
    };
    let after: Vec<(f64, f64)> = s
        .reports
        .iter()
        .filter(|x| x.phase == "active" && x.t > idle_end)
        .map(|x| (x.t - idle_end, if baseline > 0.0 { x.ops_per_sec / baseline } else { 0.0 }))
        .collect();
    let back = after.windows(3).find(|w| w.iter().map(|p| p.1).sum::<f64>() / 3.0 >= 0.95).map(|w| w[0].0);
    (back, after)
}

fn score(sc: &Scenario, r: &Run, dram: Option<&Run>) -> ModeResult {
    let (recovery_secs, curve) =
        if sc.name == "wake-up" { recovery(r, sleepy_baseline(dram.unwrap_or(r))) } else { (None, Vec::new()) };
    let (throughput, p99) = if sc.name == "wake-up" {
        // Throughput over the 45 s after waking, which is what recovery costs.
        let s = r.tenant("sleepy");
        let idle_end = s.reports.iter().filter(|x| x.phase == "idle").map(|x| x.t).fold(0.0, f64::max);
        (s.ops(idle_end, idle_end + 45.0), s.p99(idle_end, idle_end + 45.0))
    } else {
        let t: f64 = sc.measured.iter().map(|n| r.tenant(n).ops(sc.from, sc.to)).sum();
        let p: f64 =
            sc.measured.iter().map(|n| r.tenant(n).p99(sc.from, sc.to)).sum::<f64>() / sc.measured.len() as f64;
        (t, p)
    };
    let base = dram.map(|d| score(sc, d, None));
    let rel = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let relative_throughput = base.as_ref().map_or(1.0, |b| rel(throughput, b.throughput));
    let tenants = if sc.name == "wake-up" {
        // One measured tenant, over the 45 s after it woke (the window above).
        vec![("sleepy".to_string(), relative_throughput)]
    } else {
        sc.measured
            .iter()
            .map(|n| {
                let mine = r.tenant(n).ops(sc.from, sc.to);
                let theirs = dram.map_or(mine, |d| d.tenant(n).ops(sc.from, sc.to));
                (n.to_string(), rel(mine, theirs))
            })
            .collect()
    };
    ModeResult {
        mode: r.mode,
        throughput,
        relative_throughput,
        p99_us: p99,
        p99_latency_ratio: base.as_ref().map_or(1.0, |b| rel(p99, b.p99_us)),
        tenants,
        recovery_secs,
        recovery_curve: curve,
        tierd_cpu_percent: r.tierd_cpu_percent,
    }
}

/// Runs the scenarios named in `only` (all when empty) in `modes`.
pub fn run_all(out: &Path, only: &[String], modes: &[Mode]) -> anyhow::Result<PolicyResults> {
    let info = RunInfo::collect();
    let mut results = Vec::new();
    let chosen: Vec<Scenario> =
        scenarios().into_iter().filter(|s| only.is_empty() || only.iter().any(|o| o == s.name)).collect();
    let total = chosen.len() * modes.len();
    let mut done = 0;
    for sc in &chosen {
        let mut runs = Vec::new();
        for &mode in modes {
            done += 1;
            eprintln!("[{done}/{total}] {} under {} ({} s)", sc.name, mode.name(), sc.secs);
            runs.push(run(mode, sc.budget, 2.0, &sc.tenants, sc.secs)?);
        }
        let dram = runs.iter().find(|r| r.mode == Mode::Dram);
        let modes = runs.iter().map(|r| score(sc, r, dram)).collect();
        results.push(ScenarioResult { name: sc.name.into(), description: sc.description.into(), modes });
        // Write as we go: a long run that is interrupted keeps what it measured.
        write(out, &PolicyResults { run: info.clone(), scenarios: results.clone() })?;
    }
    let res = PolicyResults { run: info, scenarios: results };
    write(out, &res)?;
    Ok(res)
}

fn write(out: &Path, r: &PolicyResults) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("policy.json"), serde_json::to_string_pretty(r)?)?;
    let mut md = String::from("# Policy benchmark: tierd against no limit, plain swap and static quotas\n\n");
    md += &r.run.markdown();
    md += "\nOne run per mode (these machines vary by about ±7% between runs of the same mode). \
           Throughput is what the tenants' own reports say; `relative` is against `dram` (no memory limit) \
           in the same run. Every mode uses the same tier (a file behind a loop device), interval 5 s, window 30 s.\n";
    for s in &r.scenarios {
        md += &format!(
            "\n## {}\n\n{}\n\n| mode | throughput (ops/s) | relative | p99 (µs) | p99 ratio | per tenant (relative) | tierd CPU |\n|---|---|---|---|---|---|---|\n",
            s.name, s.description
        );
        for m in &s.modes {
            let per: Vec<String> = m.tenants.iter().map(|(n, v)| format!("{n} {v:.2}")).collect();
            md += &format!(
                "| {} | {:.0} | {:.3} | {:.1} | {:.2} | {} | {:.2}% |\n",
                m.mode.name(),
                m.throughput,
                m.relative_throughput,
                m.p99_us,
                m.p99_latency_ratio,
                per.join(", "),
                m.tierd_cpu_percent
            );
        }
        if s.name == "wake-up" {
            md += "\n| mode | back to 95% after (s) |\n|---|---|\n";
            for m in &s.modes {
                md += &format!(
                    "| {} | {} |\n",
                    m.mode.name(),
                    m.recovery_secs.map_or("not within the run".into(), |v| format!("{v:.1}"))
                );
            }
            let series: Vec<(&str, Vec<(f64, f64)>)> =
                s.modes.iter().map(|m| (m.mode.name(), m.recovery_curve.clone())).collect();
            std::fs::write(
                out.join("policy-wake-up.svg"),
                chart::lines(
                    "Wake-up: throughput vs before idling",
                    "seconds after waking",
                    "relative throughput",
                    &series,
                    Some(0.95),
                ),
            )?;
            md += "\n![wake-up recovery](policy-wake-up.svg)\n";
        } else {
            let cats: Vec<String> = s.modes.iter().map(|m| m.mode.name().to_string()).collect();
            let series =
                vec![("relative throughput", s.modes.iter().map(|m| m.relative_throughput).collect::<Vec<_>>())];
            let file = format!("policy-{}.svg", s.name);
            std::fs::write(
                out.join(&file),
                chart::bars(
                    &format!("{}: throughput vs no limit", s.name),
                    "relative to dram",
                    &cats,
                    &series,
                    Some(1.0),
                ),
            )?;
            md += &format!("\n![{}]({file})\n", s.name);
        }
    }
    std::fs::write(out.join("policy.md"), md)?;
    Ok(())
}
