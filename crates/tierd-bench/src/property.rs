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

use crate::random_hosts::{SECS, hosts};
use crate::scenario::Mode;
use crate::suite::Plan;
use tierd_core::size::MIB;

/// How far below plain swap counts as worse.
pub const MARGIN: f64 = 0.05;
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
