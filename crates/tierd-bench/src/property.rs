//! `tierd-bench sim --property N`: the policy on N random hosts, against plain swap.
//!
//! Each host draws 2–12 tenants (sizes, hot sets, access patterns, phases — always
//! busy, taking turns, waking after a rest, sweeping —, shares and reserves) on a DRAM
//! budget they overcommit 1.2–3x, on the fast or the hard-disk-like tier. Every host runs
//! in `dram`, `swap` and `tierd`; the figure is the share of hosts where `tierd`'s
//! relative throughput is below `swap`'s by more than [`MARGIN`]. The hosts are drawn
//! from a fixed seed, so the same build judges the same hosts.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tierd_core::size::MIB;

use crate::harness::Throttle;
use crate::scenario::{Mode, TenantDef};
use crate::suite::{Plan, Point, Scenario};
use crate::workload::Pattern;

/// How far below plain swap counts as worse.
pub const MARGIN: f64 = 0.05;
/// Hosts drawn by default, and nameable as `random-hosts/host-NN`.
pub const HOSTS: usize = 50;
const SECS: u64 = 120;
const HOSTS_SEED: u64 = 0x7ea5_0b1e;

/// One random host.
fn host(i: usize, rng: &mut fastrand::Rng) -> Point {
    let budget_mib = 128 * rng.u64(4..=16);
    let n = rng.usize(2..=12);
    let overcommit = 1.2 + rng.f64() * 1.8;
    let total = ((budget_mib as f64 * overcommit) as u64).min(8 * 1024);
    let mut weights: Vec<f64> = (0..n).map(|_| 0.3 + rng.f64()).collect();
    let sum: f64 = weights.iter().sum();
    weights.iter_mut().for_each(|w| *w /= sum);
    let tenants: Vec<TenantDef> = weights
        .iter()
        .enumerate()
        .map(|(k, w)| {
            let size = ((total as f64 * w) as u64).max(64);
            let hot = ((size as f64 * (0.05 + rng.f64() * 0.85)) as u64).max(4);
            let mut d = TenantDef::new(format!("h{}", k + 1), size, hot, phases(rng));
            if rng.f64() < 0.3 {
                d.pattern = Pattern::Zipf;
            }
            if rng.f64() < 0.2 {
                d.shares = if rng.bool() { 200 } else { 50 };
            }
            d
        })
        .collect();
    let mut p = Point::steady(format!("host-{:02}", i + 1), budget_mib * MIB, SECS, tenants, 30.0, (SECS - 5) as f64);
    // Now and then a reserve: one tenant's hot set guaranteed, where it fits.
    if rng.f64() < 0.15 {
        let t = &mut p.tenants[0];
        if t.hot < p.budget / 2 {
            t.reserve = t.hot;
        }
    }
    if rng.f64() < 0.2 {
        p.slow = Some(Throttle::hard_disk(25));
    }
    p
}

/// A random phase string over the run.
fn phases(rng: &mut fastrand::Rng) -> String {
    match rng.u8(0..100) {
        0..40 => format!("active:{SECS}s"),
        40..70 => {
            let (on, off) = (rng.u64(10..=40), rng.u64(10..=40));
            let mut out = Vec::new();
            let mut t = 0;
            let mut active = rng.bool();
            while t < SECS {
                let len = (if active { on } else { off }).min(SECS - t);
                out.push(format!("{}:{len}s", if active { "active" } else { "idle" }));
                t += len;
                active = !active;
            }
            out.join(",")
        }
        70..85 => {
            let rest = rng.u64(20..=60);
            format!("active:20s,idle:{rest}s,active:{}s", SECS - 20 - rest)
        }
        _ => {
            let sweep = rng.u64(10..=30);
            format!("active:30s,sweep:{sweep}s,active:{}s", SECS - 30 - sweep)
        }
    }
}

/// The N hosts, as a scenario.
pub fn hosts(n: usize) -> Scenario {
    let mut rng = fastrand::Rng::with_seed(HOSTS_SEED);
    Scenario {
        name: "random-hosts".into(),
        description: format!("{n} random hosts (see `tierd-bench sim --property`)"),
        points: (0..n).map(|i| host(i, &mut rng)).collect(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostResult {
    pub host: String,
    pub tenants: usize,
    pub budget_mib: u64,
    pub tenant_mib: u64,
    pub hot_mib: u64,
    pub slow: bool,
    pub swap: f64,
    pub tierd: f64,
    pub worse: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Property {
    pub hosts: usize,
    pub seeds: usize,
    pub margin: f64,
    /// Share of hosts where tierd is below swap by more than the margin.
    pub worse_share: f64,
    pub commit: String,
    pub results: Vec<HostResult>,
}

/// Simulates the N hosts over `seeds` seeds and scores them.
pub fn run(n: usize, seeds: usize) -> anyhow::Result<Property> {
    let sc = hosts(n);
    let plan = Plan {
        scenarios: Vec::new(),
        files: Vec::new(),
        modes: vec![Mode::Dram, Mode::Swap, Mode::Tierd],
        reps: seeds,
        scale: 1.0,
        fresh: true,
        simulated: true,
    };
    let res = crate::sim::run_scenarios(&plan, std::slice::from_ref(&sc), seeds)?;
    let results: Vec<HostResult> = res
        .results
        .iter()
        .zip(&sc.points)
        .map(|(r, p)| {
            let rel = |m: Mode| r.mode(m).map_or(0.0, |x| x.relative_throughput);
            let (swap, tierd) = (rel(Mode::Swap), rel(Mode::Tierd));
            HostResult {
                host: p.label.clone(),
                tenants: p.tenants.len(),
                budget_mib: p.budget / MIB,
                tenant_mib: p.tenants.iter().map(|t| t.size).sum::<u64>() / MIB,
                hot_mib: p.tenants.iter().map(|t| t.hot).sum::<u64>() / MIB,
                slow: p.slow.is_some(),
                swap,
                tierd,
                worse: tierd < swap - MARGIN,
            }
        })
        .collect();
    let worse = results.iter().filter(|h| h.worse).count();
    Ok(Property {
        hosts: n,
        seeds,
        margin: MARGIN,
        worse_share: worse as f64 / n.max(1) as f64,
        commit: res.run.commit.clone(),
        results,
    })
}

pub fn write(out: &Path, p: &Property) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("property.json"), serde_json::to_string_pretty(p)?)?;
    let mut md = String::from("# The policy on random hosts, against plain swap\n\n");
    let _ = write!(
        md,
        "`tierd-bench sim --property {}` at {}: {} random hosts (2–12 tenants, 1.2–3x overcommit, uniform and Zipf \
         hot sets, busy / taking turns / waking / sweeping, some shares and reserves, a fifth on the hard-disk-like \
         tier), {} seed(s) each; relative throughput of all tenants against `dram` over [30, {}) s.\n\n\
         **tierd below swap by more than {MARGIN}: {} of {} hosts ({:.0}%)** (the goal is none).\n\n\
         | host | tenants | DRAM MiB | tenants MiB | hot MiB | tier | swap | tierd | worse |\n|---|---|---|---|---|---|---|---|---|\n",
        p.hosts,
        p.commit,
        p.hosts,
        p.seeds,
        SECS - 5,
        p.results.iter().filter(|h| h.worse).count(),
        p.hosts,
        p.worse_share * 100.0
    );
    for h in &p.results {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} |",
            h.host,
            h.tenants,
            h.budget_mib,
            h.tenant_mib,
            h.hot_mib,
            if h.slow { "slow" } else { "fast" },
            h.swap,
            h.tierd,
            if h.worse { "**yes**" } else { "" }
        );
    }
    std::fs::write(out.join("property.md"), md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Measure;

    #[test]
    fn the_random_hosts_are_the_same_every_time_and_within_the_suite_bounds() {
        let (a, b) = (hosts(20), hosts(20));
        for (p, q) in a.points.iter().zip(&b.points) {
            assert_eq!(p.budget, q.budget);
            assert_eq!(
                p.tenants.iter().map(|t| &t.phases).collect::<Vec<_>>(),
                q.tenants.iter().map(|t| &t.phases).collect::<Vec<_>>()
            );
            let total: u64 = p.tenants.iter().map(|t| t.size).sum();
            assert!(total <= crate::suite::MAX_TENANT_MEMORY, "{}", p.label);
            assert!((2..=12).contains(&p.tenants.len()));
            for t in &p.tenants {
                assert!(t.hot <= t.size, "{} {}", p.label, t.name);
                let phases = crate::workload::parse_phases(&t.phases).unwrap();
                let secs: f64 = phases.iter().map(|ph| ph.duration.as_secs_f64()).sum();
                assert_eq!(secs, SECS as f64, "{}", t.phases);
            }
            assert!(matches!(p.measure, Measure::Steady { .. }));
        }
    }
}
