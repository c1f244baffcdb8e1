//! The property check's random hosts: 2–12 tenants each (sizes, hot sets, access
//! patterns, phases, shares and reserves) on a budget they overcommit 1.2–3x, on the
//! fast or the hard-disk-like tier, drawn from a fixed seed so that the same build
//! judges the same hosts. Nameable in `run` and `sim` as `random-hosts/host-NN`.

use tierd_core::size::MIB;

use crate::catalogue::{Point, Scenario};
use crate::harness::Throttle;
use crate::scenario::TenantDef;
use crate::workload::Pattern;

/// Hosts drawn by default, and nameable as `random-hosts/host-NN`.
pub const HOSTS: usize = 50;
pub const SECS: u64 = 120;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Measure;

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
            assert!(total <= crate::catalogue::MAX_TENANT_MEMORY, "{}", p.label);
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
