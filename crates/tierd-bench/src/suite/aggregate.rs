//! Each mode's samples at a point, combined into medians and spreads against `dram`.

use crate::machine::median;
use crate::scenario::Mode;

use super::{Measure, ModeResult, Point, PointResult, Sample, Scenario, Spread};

/// Seconds after waking until throughput, averaged over 3 reports, is back to 95% of
/// `baseline`.
pub fn recovery_secs(after: &[(f64, f64)], baseline: f64) -> Option<f64> {
    if baseline <= 0.0 {
        return None;
    }
    after.windows(3).find(|w| w.iter().map(|p| p.1).sum::<f64>() / 3.0 >= 0.95 * baseline).map(|w| w[0].0)
}

/// When a woken tenant's hot set of `hot_bytes` is back in DRAM, from its major faults a
/// second by report (`faults`): the end of the last report with more than a thousandth
/// of the hot set's pages a second (tierd's sampling refaults stay well below), 0 if
/// none had; `None` if the last report still had (or no report counted faults).
pub fn resident_secs(faults: &[(f64, f64)], hot_bytes: u64) -> Option<f64> {
    let line = (hot_bytes as f64 / tierd_core::size::PAGE as f64 / 1000.0).max(64.0);
    let (last, _) = faults.last()?;
    match faults.iter().rev().find(|f| f.1 > line) {
        Some(f) if f.0 >= *last => None,
        Some(f) => Some(f.0),
        None => Some(0.0),
    }
}

/// Where a woken tenant settles: its throughput late in the window, the median report
/// of the window's second half (`None`: no reports there).
pub fn settled_rate(after: &[(f64, f64)]) -> Option<f64> {
    let end = after.iter().map(|a| a.0).fold(0.0, f64::max);
    let late: Vec<f64> = after.iter().filter(|a| a.0 >= end / 2.0).map(|a| a.1).collect();
    (!late.is_empty()).then(|| median(&late))
}

/// The median of per-repetition times, where never counts as later than any time: the
/// median is `None` when most never got there.
fn median_time(each: &[Option<f64>]) -> Option<f64> {
    let mut keyed: Vec<f64> = each.iter().map(|e| e.unwrap_or(f64::INFINITY)).collect();
    keyed.sort_by(f64::total_cmp);
    keyed.get((keyed.len().max(1) - 1) / 2).copied().filter(|m| m.is_finite())
}

/// `a` against `b`, 0 where there is no `b`.
fn rel(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The median of one figure over samples.
fn med(v: &[Sample], f: &dyn Fn(&Sample) -> f64) -> f64 {
    median(&v.iter().map(f).collect::<Vec<_>>())
}

/// Combines each mode's samples at a point into medians and spreads.
pub fn aggregate(p: &Point, scenario: &Scenario, samples: &[(Mode, Vec<Sample>)]) -> PointResult {
    let dram = samples.iter().find(|(m, _)| *m == Mode::Dram).map(|(_, s)| s.as_slice());
    let modes = samples
        .iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(mode, s)| mode_result(p, *mode, s, dram.unwrap_or(s)))
        .collect();
    PointResult {
        name: if p.label.is_empty() { scenario.name.clone() } else { format!("{}/{}", scenario.name, p.label) },
        scenario: scenario.name.clone(),
        point: p.label.clone(),
        description: scenario.description.clone(),
        tenant_memory_bytes: p.tenant_memory(),
        measured_hot_bytes: p.measured_hot(),
        dram_budget_bytes: p.budget,
        slow_tier: p.slow,
        reference_cpu_bound: p.reference_cpu_bound(std::thread::available_parallelism().map_or(1, |n| n.get())),
        modes,
        taken: None,
    }
}

/// One mode's samples `s` against the reference's `base` (`dram`'s, or its own when
/// the point ran without `dram`).
fn mode_result(p: &Point, mode: Mode, s: &[Sample], base: &[Sample]) -> ModeResult {
    let base_tp = med(base, &|x| x.throughput);
    let base_p99 = med(base, &|x| x.p99_us);
    let rels: Vec<f64> = s.iter().map(|x| rel(x.throughput, base_tp)).collect();
    let tenants = p
        .measured
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mine = med(s, &|x| x.tenants.get(i).map_or(0.0, |t| t.1));
            let theirs = med(base, &|x| x.tenants.get(i).map_or(0.0, |t| t.1));
            (n.clone(), rel(mine, theirs))
        })
        .collect();
    let w = if matches!(p.measure, Measure::WakeUp { .. }) {
        wake_up(s, base, p.measured_hot())
    } else {
        WakeUp::default()
    };
    let p99 = med(s, &|x| x.p99_us);
    ModeResult {
        mode,
        reps: s.len(),
        throughput: med(s, &|x| x.throughput),
        relative_throughput: median(&rels),
        relative_spread: Spread::of(&rels),
        p99_us: p99,
        p99_latency_ratio: rel(p99, base_p99),
        tenants,
        recovery_secs: w.recovery_secs,
        recovery_each: w.recovery_each,
        recovery_curve: w.recovery_curve,
        settle_secs: w.settle_secs,
        settle_each: w.settle_each,
        settled_relative: w.settled_relative,
        resident_secs: w.resident_secs,
        resident_each: w.resident_each,
        health: s.iter().map(|x| x.health.clone()).collect(),
        tierd_cpu_percent: med(s, &|x| x.tierd_cpu_percent),
        moving_cpu_percent: {
            let v: Vec<f64> = s.iter().filter_map(|x| x.moving_cpu_percent).collect();
            (!v.is_empty()).then(|| median(&v))
        },
        tracker_cpu_per_8gib: {
            let v: Vec<f64> = s.iter().filter_map(|x| x.tracker_cpu_per_8gib).collect();
            (!v.is_empty()).then(|| median(&v))
        },
        tier_read_p99_us: {
            let v: Vec<f64> = s.iter().filter_map(|x| Some(x.tier_tail?.median_us)).collect();
            (!v.is_empty()).then(|| Spread::of(&v))
        },
        samples: s.to_vec(),
    }
}

/// A wake-up's recovery figures (see [`ModeResult`]).
#[derive(Default)]
struct WakeUp {
    recovery_secs: Option<f64>,
    recovery_each: Vec<Option<f64>>,
    recovery_curve: Vec<(f64, f64)>,
    settle_secs: Option<f64>,
    settle_each: Vec<Option<f64>>,
    settled_relative: Option<f64>,
    resident_secs: Option<f64>,
    resident_each: Vec<Option<f64>>,
}

/// How fast each repetition of `s` got back after waking, against the reference's
/// throughput before idling, and against where it settles. Each repetition is timed
/// against the reference's repetition of the same round when there is one for each
/// (modes interleave within a round; in the simulator a round is a seed, and a seed's
/// machine can be 5% slower than the median's, so no tenant of it reached 95% of that).
/// And when its hot set of `hot` bytes was back in DRAM, where the workload counts faults.
fn wake_up(s: &[Sample], base: &[Sample], hot: u64) -> WakeUp {
    let before = med(base, &|x| x.before);
    let paired = |i: usize| if base.len() == s.len() { base[i].before } else { before };
    let each: Vec<Option<f64>> = s.iter().enumerate().map(|(i, x)| recovery_secs(&x.after, paired(i))).collect();
    let settled: Vec<Option<f64>> = s.iter().map(|x| settled_rate(&x.after)).collect();
    let settle_each: Vec<Option<f64>> =
        s.iter().zip(&settled).map(|(x, r)| r.and_then(|r| recovery_secs(&x.after, r))).collect();
    let rates: Vec<f64> = settled.iter().flatten().copied().collect();
    let counted = s.iter().any(|x| !x.faults_after.is_empty());
    let resident_each: Vec<Option<f64>> =
        if counted { s.iter().map(|x| resident_secs(&x.faults_after, hot)).collect() } else { Vec::new() };
    let secs = s.iter().flat_map(|x| x.after.iter().map(|a| a.0.round() as i64)).max().unwrap_or(0);
    let recovery_curve = (1..=secs)
        .filter_map(|sec| {
            let v: Vec<f64> =
                s.iter().filter_map(|x| x.after.iter().find(|a| a.0.round() as i64 == sec).map(|a| a.1)).collect();
            (!v.is_empty()).then(|| (sec as f64, rel(median(&v), before)))
        })
        .collect();
    WakeUp {
        recovery_secs: median_time(&each),
        recovery_each: each,
        recovery_curve,
        settle_secs: median_time(&settle_each),
        settle_each,
        settled_relative: (!rates.is_empty()).then(|| rel(median(&rates), before)),
        resident_secs: median_time(&resident_each),
        resident_each,
    }
}
