//! What a tenant does in one step: as many operations as its CPU share and its
//! faults allow, and the report it prints once a second of its own clock.

use crate::access::PhaseKind;
use crate::calib::{DT, FAULT_CPU_SECS, MINOR_FAULT_SECS};
use crate::memory::Touched;

use super::{Demand, Doing, Report, Tenant};

/// A tenant's operations this step at CPU share `s`: the X for which its CPU work at
/// share `s` and its waits on the tier fill the step. With `miss` (memory-mode), each
/// access to class k misses DRAM with probability `miss[k]` instead.
pub(super) fn solve(
    t: &Tenant,
    kind: PhaseKind,
    s: f64,
    latency: f64,
    reclaim: (f64, f64),
    miss: Option<&[f64]>,
) -> Demand {
    let per_page = t.layout.per_page(kind);
    let c = t.layout.op_secs / t.speed;
    let major_cpu = FAULT_CPU_SECS + reclaim.0;
    let latency = latency + reclaim.1;
    let at = |x: f64| {
        let lambda: Vec<f64> = per_page.iter().map(|a| a * x).collect();
        let f = match miss {
            Some(m) => {
                let ios: f64 = lambda.iter().zip(&t.layout.class_pages).zip(m).map(|((l, p), m)| l * p * m * DT).sum();
                Touched { ios, pages_in: ios, ..Touched::default() }
            }
            None => t.mem.faults_at(&t.totals, &lambda, DT),
        };
        let cpu = x * DT * c + f.ios * major_cpu + f.minor * MINOR_FAULT_SECS;
        (cpu, f, cpu / s + f.ios * latency)
    };
    let (mut lo, mut hi) = (0.0, s / c);
    if at(hi).2 <= DT {
        lo = hi;
    } else {
        for _ in 0..30 {
            let mid = 0.5 * (lo + hi);
            if at(mid).2 <= DT { lo = mid } else { hi = mid }
        }
    }
    let (cpu, touched, _) = at(lo);
    Demand { ops: lo, touched, fill_pages: 0.0, cpu, runnable: cpu / s / DT }
}

/// Tenant `t` does its step's share `d` of work (its reads `served` by the device
/// at that share); returns what its touches brought in.
pub(super) fn run_tenant(
    t: &mut Tenant,
    d: &Demand,
    now: f64,
    served: f64,
    latency: f64,
    direct_mapped: bool,
) -> Touched {
    let doing = t.doing(now);
    if doing == Doing::Fill {
        for (x, n) in t.inserted.iter_mut().zip(t.mem.fill(d.fill_pages)) {
            *x += n;
        }
    }
    let mut got = Touched::default();
    t.last_ops = 0.0;
    if let Doing::Phase(kind) = doing
        && d.ops > 0.0
    {
        let per_page = t.layout.per_page(kind);
        let x = d.ops;
        t.last_ops = x;
        let lambda: Vec<f64> = per_page.iter().map(|a| a * x).collect();
        got = if direct_mapped {
            // DRAM caches the tier: every miss is a read, nothing moves between tiers.
            let ios = d.touched.ios * if served < 1.0 { served } else { 1.0 };
            Touched { ios, pages_in: ios, ..Touched::default() }
        } else {
            t.mem.touch(&lambda, DT)
        };
        for (e, l) in t.exposure.iter_mut().zip(&lambda) {
            *e += l * DT;
        }
    }
    t.major_faults += got.ios;
    t.minor_faults += got.minor;
    t.cpu_secs += d.cpu * if served < 1.0 && got.ios > 0.0 { served } else { 1.0 };
    t.window_ops += d.ops * DT;
    t.ops_done += d.ops * DT;
    t.window_ios += got.ios;
    t.window_fault_secs += got.ios * latency;
    got
}

/// Emits the tenant's report once a second of its own clock has passed.
pub(super) fn report(t: &mut Tenant, now: f64, share: f64, latency: f64) {
    let Some(start) = t.started else { return };
    let own = now - start;
    if own + 1e-9 < t.next_report {
        return;
    }
    let phase = match t.doing(now - DT) {
        Doing::Phase(k) => k,
        _ => return,
    };
    let ops = t.window_ops;
    let hit_us = t.layout.op_secs / t.speed / share * 1e6;
    let fault_us = (latency + FAULT_CPU_SECS) * 1e6 + hit_us;
    let miss = if ops > 0.0 { t.window_ios / ops } else { 0.0 };
    let quantile = |q: f64| if miss > 1.0 - q { fault_us } else { hit_us };
    t.reports.push(Report { t: t.next_report, phase, ops_per_sec: ops, p50_us: quantile(0.5), p99_us: quantile(0.99) });
    t.window_ops = 0.0;
    t.window_ios = 0.0;
    t.window_fault_secs = 0.0;
    t.next_report += 1.0;
}
