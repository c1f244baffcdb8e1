//! The policy's own cost at host scale: one `tierd` policy pass (signals, curves,
//! allocation, moves) on synthetic hosts far bigger than this machine's, timed in
//! process. A pass runs every interval, so its time against the interval is the CPU it
//! costs; the goal is under 1% of a core per 8 GiB of tenants, tracker and moves
//! included, so the pass itself should be a small part of that.

use std::path::Path;
use std::time::Instant;

use anyhow::bail;
use serde::Serialize;
use tierd_core::name::TenantName;
use tierd_core::policy::{Knobs, PolicyKind};
use tierd_core::snapshot::{Activeness, Range, Region, Snapshot, TenantView, TierView};
use tierd_core::tenant::TenantSpec;

use crate::machine::{RunInfo, median};

const GIB: u64 = 1 << 30;
const REGION: u64 = tierd_core::size::HUGE_PAGE;
/// The default control-loop interval, against which a pass's time is a CPU share.
const INTERVAL_SECS: f64 = 10.0;

/// One host size's timing.
#[derive(Debug, Serialize)]
pub struct PassRow {
    pub tenants: usize,
    pub tenant_gib: u64,
    pub regions: usize,
    pub median_ms: f64,
    pub max_ms: f64,
    /// Median pass time over the interval, per 8 GiB of tenants, in % of a core.
    pub core_percent_per_8gib: f64,
}

#[derive(Debug, Serialize)]
pub struct PassResults {
    pub run: RunInfo,
    pub interval_secs: f64,
    pub passes: usize,
    pub rows: Vec<PassRow>,
}

/// A tenant of `gib` GiB in 2 MiB regions: a working one reuses its first quarter every
/// second and left the rest idle for up to two minutes; a resting one stopped 30 s ago
/// with its hot quarter half on the tier. Half of every tenant is in DRAM.
fn tenant(index: usize, gib: u64, resting: bool, rng: &mut fastrand::Rng) -> TenantView {
    let size = gib * GIB;
    let mut spec = TenantSpec::new(TenantName::new(&format!("t{index}")).expect("a valid name"));
    spec.size = Some(size);
    let mut t = TenantView::unmeasured(spec, size);
    let hot = size / 4;
    t.activeness = Some(Activeness {
        active_bytes: hot,
        recent_bytes: Some(hot),
        returned_share: Some(0.9),
        ..Default::default()
    });
    (t.dram, t.tier, t.demand_cores, t.stall_share) = (size / 2, size / 2, 0.5, 0.1);
    if resting {
        (t.at_rest_secs, t.rest_began_secs, t.demand_cores) = (Some(30.0), Some(30.0), 0.0);
    }
    let regions = size / REGION;
    t.regions = (0..regions)
        .map(|i| {
            let in_hot = i < regions / 4;
            let reused = if in_hot { if resting { 30.0 } else { 1.0 } } else { rng.f64() * 120.0 };
            let in_dram = rng.bool();
            Region {
                range: Range { pid: 1000 + index as u32, start: 0x7f00_0000_0000 + i * REGION, len: REGION },
                idle_secs: Some(reused),
                reused_secs: Some(reused),
                laid_out: rng.bool(),
                cold_samples: (!in_hot) as u32,
                dram_bytes: if in_dram { REGION } else { 0 },
                tier_bytes: if in_dram { 0 } else { REGION },
                wants_huge: false,
                huge_bytes: 0,
            }
        })
        .collect();
    t
}

/// A host of `tenants` tenants of `gib` GiB each, half of them resting, on DRAM for
/// half of what they hold.
fn host(tenants: usize, gib: u64, seed: u64) -> Snapshot {
    let mut rng = fastrand::Rng::with_seed(seed);
    let views = (0..tenants).map(|i| tenant(i, gib, i % 2 == 1, &mut rng)).collect();
    let budget = tenants as u64 * gib * GIB / 2;
    Snapshot {
        dram_budget: budget,
        ratio: 1.0,
        interval_secs: INTERVAL_SECS,
        window_secs: 60.0,
        tier: TierView { size_bytes: budget, read_latency_us: Some(90.0), ..TierView::default() },
        tenants: views,
        quotas_in_force: Some(false),
    }
}

fn time_passes(snap: &Snapshot, passes: usize) -> Vec<f64> {
    let knobs = Knobs::DEFAULT;
    (0..passes)
        .map(|_| {
            let t0 = Instant::now();
            let plan = tierd_core::policy::plan(PolicyKind::Tierd, snap, &knobs);
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            assert_eq!(plan.tenants.len(), snap.tenants.len(), "a plan for every tenant");
            ms
        })
        .collect()
}

/// Times `passes` passes on each host size and writes `pass.json` and `pass.md` to `out`.
pub fn run(out: &Path, sizes: &[(usize, u64)], passes: usize) -> anyhow::Result<PassResults> {
    if passes == 0 || sizes.is_empty() {
        bail!("at least one pass and one host size");
    }
    let mut rows = Vec::new();
    for &(tenants, gib) in sizes {
        let snap = host(tenants, gib, 7);
        let ms = time_passes(&snap, passes);
        let eighths = (tenants as u64 * gib) as f64 / 8.0;
        let row = PassRow {
            tenants,
            tenant_gib: gib,
            regions: snap.tenants.iter().map(|t| t.regions.len()).sum(),
            median_ms: median(&ms),
            max_ms: ms.iter().copied().fold(0.0, f64::max),
            core_percent_per_8gib: median(&ms) / 1000.0 / INTERVAL_SECS * 100.0 / eighths,
        };
        eprintln!("  {tenants} x {gib} GiB: median {:.1} ms a pass", row.median_ms);
        rows.push(row);
    }
    let r = PassResults { run: RunInfo::collect(), interval_secs: INTERVAL_SECS, passes, rows };
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("pass.json"), serde_json::to_string_pretty(&r)? + "\n")?;
    std::fs::write(out.join("pass.md"), markdown(&r))?;
    Ok(r)
}

fn markdown(r: &PassResults) -> String {
    let rows: String = r
        .rows
        .iter()
        .map(|x| {
            format!(
                "| {} × {} GiB | {} | {:.2} ms | {:.2} ms | {:.4}% |\n",
                x.tenants, x.tenant_gib, x.regions, x.median_ms, x.max_ms, x.core_percent_per_8gib
            )
        })
        .collect();
    format!(
        "# Policy pass benchmark: the `tierd` policy's own cost by host size\n\n{}\n\
         Synthetic hosts: half the tenants working on a quarter of their memory, half at rest for 30 s, \
         DRAM for half of what they hold, every tenant tracked in 2 MiB regions. Each host is planned \
         {} times by the real policy code (`tierd_core::policy::plan`), in one thread; the tracker's \
         and the moves' own CPU are not in it (see engine.md).\n\n\
         | host | regions | median pass | slowest pass | % of a core per 8 GiB at a {:.0} s interval |\n\
         |---|---|---|---|---|\n{rows}",
        r.run.markdown(),
        r.passes,
        r.interval_secs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_host_is_what_the_report_says() {
        let s = host(4, 1, 1);
        assert_eq!(s.tenants.len(), 4);
        assert_eq!(s.dram_budget, 2 * GIB, "DRAM for half of what they hold");
        assert_eq!(s.tenants.iter().filter(|t| t.at_rest_secs.is_some()).count(), 2, "half at rest");
        assert!(s.tenants.iter().all(|t| t.regions.len() == 512), "1 GiB in 2 MiB regions");
        // The pass it times reaches the move stage (cold regions, demotion, read-back).
        let plan = tierd_core::policy::plan(PolicyKind::Tierd, &s, &Knobs::DEFAULT);
        let moved = |t: &tierd_core::plan::TenantPlan| !t.demote.is_empty() || !t.prefetch.is_empty();
        assert!(plan.tenants.iter().any(moved), "{plan:?}");
    }
}
