//! `tierd-bench huge`: huge pages through a demote / wake-up cycle under `tierd`.
//!
//! A tenant with a 512 MiB hot set in 1 GiB is active, idles while a neighbour of the
//! same size sweeps all of its memory (2x overcommit on a 1 GiB budget, so the idle
//! tenant is pushed out to the tier), then wakes. Run once on transparent huge pages
//! and once on 4 KiB pages: the THP run shows whether hot memory is huge again after
//! the cycle (goal: ≥ 90% of the hot set), both show what huge pages are worth to the
//! tenant (access latency, throughput) and what they cost tierd (CPU).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tierd_core::size::{GIB, human};

use crate::harness::sleep;
use crate::machine::{RunInfo, cpu_seconds};
use crate::scenario::{Mode, PageKind, Report, TenantDef, parse_reports, start};

/// Seconds: active, idle (pushed out), active again.
const ACTIVE1: f64 = 40.0;
const IDLE: f64 = 80.0;
const ACTIVE2: f64 = 60.0;
const HOT_MIB: u64 = 512;

fn tenants(thp: bool) -> Vec<TenantDef> {
    let mut w = TenantDef::new("w", 1024, HOT_MIB, "active:40s,idle:80s,active:60s");
    let pages = if thp { PageKind::Thp } else { PageKind::Small };
    w.pages = pages;
    let mut p = TenantDef::new("pusher", 1024, 1024, "idle:40s,active:80s,idle:60s");
    p.pages = pages;
    vec![w, p]
}

/// `thp_swpout` and `thp_swpout_fallback` from /proc/vmstat: huge pages written to
/// swap whole, and ones split first.
fn thp_swap_counters() -> (u64, u64) {
    let v = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
    let get = |k: &str| v.lines().find_map(|l| l.strip_prefix(k).and_then(|r| r.trim().parse().ok())).unwrap_or(0);
    (get("thp_swpout "), get("thp_swpout_fallback "))
}

/// One run: THP or 4 KiB pages.
#[derive(Debug, Clone, Serialize)]
pub struct HugeRun {
    pub pages: &'static str,
    /// Steady state before idling (25–39 s).
    pub baseline_ops_per_sec: f64,
    pub baseline_p50_us: f64,
    pub baseline_hot_huge: Option<f64>,
    /// The tenant's tier footprint at the end of its idle phase.
    pub pushed_out_bytes: u64,
    /// Seconds after waking until throughput is back to 95% of the baseline.
    pub recovery_secs: Option<f64>,
    /// Share of the hot set on huge pages 20 s after waking and at the end.
    pub hot_huge_at_20s: Option<f64>,
    pub hot_huge_at_end: Option<f64>,
    /// The last 20 s against the baseline.
    pub end_relative_throughput: f64,
    pub end_p50_us: f64,
    pub tierd_cpu_percent: f64,
    /// Host-wide over the run (`/proc/vmstat`; cgroup v1 has no per-group count): any
    /// other process's huge pages swapped meanwhile count too.
    pub thp_swapped_out_whole: u64,
    pub thp_split_for_swap: u64,
    /// (seconds after waking, throughput / baseline, hot set on huge pages).
    pub curve: Vec<(f64, f64, Option<f64>)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HugeResults {
    pub run: RunInfo,
    pub budget_bytes: u64,
    pub runs: Vec<HugeRun>,
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn active_between(reports: &[Report], from: f64, to: f64) -> Vec<&Report> {
    reports.iter().filter(|r| r.phase == "active" && r.t >= from && r.t < to).collect()
}

/// Figures from the tenant's own reports (t counts from the end of its fill).
fn score(pages: &'static str, reports: &[Report]) -> HugeRun {
    let base = active_between(reports, 25.0, ACTIVE1 - 1.0);
    let baseline = mean(base.iter().map(|r| r.ops_per_sec));
    let wake = reports.iter().filter(|r| r.phase == "idle").map(|r| r.t).reduce(f64::max).unwrap_or(ACTIVE1 + IDLE);
    let after: Vec<&Report> = reports.iter().filter(|r| r.phase == "active" && r.t > wake).collect();
    let curve: Vec<(f64, f64, Option<f64>)> = after
        .iter()
        .map(|r| (r.t - wake, if baseline > 0.0 { r.ops_per_sec / baseline } else { 0.0 }, r.hot_huge))
        .collect();
    let recovery = curve.windows(3).find(|w| w.iter().map(|p| p.1).sum::<f64>() / 3.0 >= 0.95).map(|w| w[0].0);
    let at = |secs: f64| curve.iter().find(|p| p.0 >= secs).and_then(|p| p.2);
    let last = active_between(reports, wake + ACTIVE2 - 20.0, f64::MAX);
    HugeRun {
        pages,
        baseline_ops_per_sec: baseline,
        baseline_p50_us: mean(base.iter().map(|r| r.p50_us)),
        baseline_hot_huge: base.iter().filter_map(|r| r.hot_huge).reduce(f64::min),
        pushed_out_bytes: 0,
        recovery_secs: recovery,
        hot_huge_at_20s: at(20.0),
        hot_huge_at_end: curve.last().and_then(|p| p.2),
        end_relative_throughput: if baseline > 0.0 { mean(last.iter().map(|r| r.ops_per_sec)) / baseline } else { 0.0 },
        end_p50_us: mean(last.iter().map(|r| r.p50_us)),
        tierd_cpu_percent: 0.0,
        thp_swapped_out_whole: 0,
        thp_split_for_swap: 0,
        curve,
    }
}

fn one(thp: bool, budget: u64) -> anyhow::Result<HugeRun> {
    let pages = if thp { "2m-thp" } else { "4k" };
    eprintln!("huge: {pages} run, about {:.0} s", ACTIVE1 + IDLE + ACTIVE2 + 20.0);
    let (out0, split0) = thp_swap_counters();
    let t = start(Mode::Tierd, budget, 2.0, &tenants(thp))?;
    let c0 = cpu_seconds(t.pid());
    let t0 = Instant::now();
    // The fill takes a few seconds to half a minute (both tenants fill at once over a
    // budget half their size); the tenant's own clock starts after it, so the run ends
    // when its reports reach the end of the last phase, not at a wall-clock deadline.
    // Sample the idle tenant's tier footprint near the end of its idle phase.
    let mut pushed = 0;
    let end = ACTIVE1 + IDLE + ACTIVE2 - 1.0;
    loop {
        sleep(Duration::from_secs(1))?;
        let reports = parse_reports(&t.tenant_stdout("w"));
        if reports.last().is_some_and(|r| r.phase == "idle" && r.t > ACTIVE1 + IDLE - 5.0) {
            pushed = pushed.max(t.tenant("w")?.tier_bytes);
        }
        if reports.last().is_some_and(|r| r.t >= end) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("tenant w did not finish its phases within 600 s");
        }
    }
    let cpu = (cpu_seconds(t.pid()) - c0) / t0.elapsed().as_secs_f64() * 100.0;
    let mut r = score(pages, &parse_reports(&t.tenant_stdout("w")));
    drop(t);
    let (out1, split1) = thp_swap_counters();
    r.pushed_out_bytes = pushed;
    r.tierd_cpu_percent = cpu;
    r.thp_swapped_out_whole = out1.saturating_sub(out0);
    r.thp_split_for_swap = split1.saturating_sub(split0);
    Ok(r)
}

/// Runs the THP and the 4 KiB variant; writes huge.json, huge.md and huge-*.svg.
pub fn run(out: &Path) -> anyhow::Result<HugeResults> {
    std::fs::create_dir_all(out)?;
    let budget = GIB;
    let runs = vec![one(true, budget)?, one(false, budget)?];
    let r = HugeResults { run: RunInfo::collect(), budget_bytes: budget, runs };
    std::fs::write(out.join("huge.json"), serde_json::to_string_pretty(&r)?)?;
    std::fs::write(out.join("huge.md"), markdown(&r))?;
    let chart = |file: &str, title: &str, y: &str, series: &[(&str, Vec<(f64, f64)>)], guide: f64| {
        std::fs::write(out.join(file), crate::chart::lines(title, "seconds after waking", y, series, Some(guide)))
    };
    let throughput: Vec<(&str, Vec<(f64, f64)>)> =
        r.runs.iter().map(|x| (x.pages, x.curve.iter().map(|p| (p.0, p.1)).collect())).collect();
    chart(
        "huge-wake-up.svg",
        "Waking tenant under tierd: throughput vs its own baseline",
        "relative throughput",
        &throughput,
        0.95,
    )?;
    let huge: Vec<(&str, Vec<(f64, f64)>)> = r
        .runs
        .iter()
        .filter(|x| x.curve.iter().any(|p| p.2.is_some()))
        .map(|x| ("hot set on huge pages", x.curve.iter().filter_map(|p| p.2.map(|h| (p.0, h))).collect()))
        .collect();
    chart("huge-pages.svg", "THP tenant: hot set on huge pages after waking", "share", &huge, 0.9)?;
    Ok(r)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{:.0}%", x * 100.0))
}

fn markdown(r: &HugeResults) -> String {
    let mut m = String::from("# Huge pages through a demote / wake-up cycle\n\n");
    m.push_str(&r.run.markdown());
    m.push_str(&format!(
        "\nUnder `tierd` with a {} DRAM budget: tenant `w` (1 GiB, {HOT_MIB} MiB hot set, uniform) is \
         active {ACTIVE1:.0} s, idle {IDLE:.0} s while `pusher` (1 GiB) touches all of its memory \
         (2x overcommit), then active {ACTIVE2:.0} s. Both tenants on transparent huge pages in \
         the first run, on 4 KiB pages in the second. Goal: ≥ 90% of the hot set back on huge \
         pages after the cycle. The THP swap counts are host-wide (`/proc/vmstat`; cgroup v1 \
         keeps none per group), so another process's huge pages swapped meanwhile count too.\n\n",
        human(r.budget_bytes)
    ));
    m.push_str(
        "| pages | baseline ops/s | baseline p50 | hot set huge before | pushed out | back to 95% | \
         hot set huge +20 s | hot set huge at end | end vs baseline | end p50 | tierd CPU | THP swapped out whole / split |\n",
    );
    m.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for x in &r.runs {
        m.push_str(&format!(
            "| {} | {:.0} | {:.2} µs | {} | {} | {} | {} | {} | {:.3} | {:.2} µs | {:.2}% | {} / {} |\n",
            x.pages,
            x.baseline_ops_per_sec,
            x.baseline_p50_us,
            pct(x.baseline_hot_huge),
            human(x.pushed_out_bytes),
            x.recovery_secs.map_or("not within the run".into(), |s| format!("{s:.0} s")),
            pct(x.hot_huge_at_20s),
            pct(x.hot_huge_at_end),
            x.end_relative_throughput,
            x.end_p50_us,
            x.tierd_cpu_percent,
            x.thp_swapped_out_whole,
            x.thp_split_for_swap
        ));
    }
    if let (Some(h), Some(s)) = (r.runs.iter().find(|x| x.pages == "2m-thp"), r.runs.iter().find(|x| x.pages == "4k"))
        && s.baseline_p50_us > 0.0
        && s.baseline_ops_per_sec > 0.0
    {
        m.push_str(&format!(
            "\nHuge pages against 4 KiB pages for the same tenant: p50 access latency {:+.1}%, \
             throughput {:+.1}% before the cycle; {:+.1}% / {:+.1}% in its last 20 s.\n",
            (h.baseline_p50_us / s.baseline_p50_us - 1.0) * 100.0,
            (h.baseline_ops_per_sec / s.baseline_ops_per_sec - 1.0) * 100.0,
            (h.end_p50_us / s.end_p50_us.max(1e-9) - 1.0) * 100.0,
            (h.end_relative_throughput * h.baseline_ops_per_sec
                / (s.end_relative_throughput * s.baseline_ops_per_sec).max(1e-9)
                - 1.0)
                * 100.0
        ));
    }
    m.push_str("\n![throughput after waking](huge-wake-up.svg)\n\n![hot set on huge pages](huge-pages.svg)\n");
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(t: f64, phase: &str, ops: f64, huge: Option<f64>) -> Report {
        Report {
            t,
            unix: t,
            phase: phase.into(),
            ops_per_sec: ops,
            p50_us: 1.0,
            p99_us: 2.0,
            hot_huge: huge,
            major_faults: None,
        }
    }

    #[test]
    fn score_measures_against_the_tenants_own_baseline() {
        let mut reports: Vec<Report> = (1..40).map(|t| rep(t as f64, "active", 100.0, Some(1.0))).collect();
        reports.extend((40..120).map(|t| rep(t as f64, "idle", 0.0, Some(0.0))));
        reports.extend((120..180).map(|t| {
            let s = (t - 120) as f64;
            rep(t as f64, "active", if s < 10.0 { 10.0 * s } else { 100.0 }, Some((s / 20.0).min(0.95)))
        }));
        let r = score("2m-thp", &reports);
        assert_eq!(r.baseline_ops_per_sec, 100.0);
        assert_eq!(r.baseline_hot_huge, Some(1.0));
        assert_eq!(r.recovery_secs, Some(10.0), "first 3-report run averaging ≥ 95%");
        assert_eq!(r.hot_huge_at_20s, Some(0.95));
        assert!((r.end_relative_throughput - 1.0).abs() < 1e-9);
    }
}
