//! Policy v2's goals (issue 24), judged on the suite's medians.
//!
//! Single runs here spread ±10–15%, so a comparison whose medians disagree but whose
//! ranges overlap is *inconclusive*, not missed; so is one against a `dram` reference
//! that is itself CPU-bound (a neighbour's CPU, not memory, sets the measured rate).

use crate::scenario::Mode;
use crate::suite::{ModeResult, PointResult, Results, SUSTAINED_LOSS};

/// Whether a goal was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// The medians miss but the repetitions' ranges overlap, or the reference is unsound.
    Inconclusive,
    /// A mode or scenario the goal needs was not run.
    NotRun,
}

impl Verdict {
    fn of(ok: bool) -> Verdict {
        if ok { Verdict::Met } else { Verdict::Missed }
    }

    pub fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "**missed**",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotRun => "not run",
        }
    }

    /// The verdict of several checks together: any miss misses, then any doubt.
    fn all(v: impl IntoIterator<Item = Verdict>) -> Verdict {
        let v: Vec<Verdict> = v.into_iter().collect();
        if v.is_empty() || v.contains(&Verdict::NotRun) && v.iter().all(|x| *x == Verdict::NotRun) {
            Verdict::NotRun
        } else if v.contains(&Verdict::Missed) {
            Verdict::Missed
        } else if v.contains(&Verdict::Inconclusive) {
            Verdict::Inconclusive
        } else {
            Verdict::Met
        }
    }
}

/// One line of the summary: a goal, what we measured, and the verdict.
#[derive(Debug, Clone)]
pub struct Goal {
    pub scenario: &'static str,
    pub goal: &'static str,
    pub measured: String,
    pub verdict: Verdict,
}

impl Goal {
    fn not_run(scenario: &'static str, goal: &'static str) -> Goal {
        Goal { scenario, goal, measured: "—".into(), verdict: Verdict::NotRun }
    }
}

fn point<'a>(r: &'a Results, name: &str) -> Option<&'a PointResult> {
    r.results.iter().find(|p| p.name == name)
}

fn modes(p: &PointResult) -> Option<(&ModeResult, &ModeResult)> {
    Some((p.mode(Mode::Tierd)?, p.mode(Mode::Swap)?))
}

/// tierd's median at least swap's less `slack`; where not, inconclusive if the ranges
/// overlap or the `dram` reference is CPU-bound.
fn at_least_swap(p: &PointResult, slack: f64) -> Option<(Verdict, String)> {
    let (t, s) = modes(p)?;
    let (a, b) = (t.relative_spread, s.relative_spread);
    let verdict = if t.relative_throughput >= s.relative_throughput - slack {
        Verdict::Met
    } else if a.max >= b.min || p.reference_cpu_bound {
        Verdict::Inconclusive
    } else {
        Verdict::Missed
    };
    let why = if p.reference_cpu_bound { ", dram CPU-bound" } else { "" };
    Some((verdict, format!("{} {:.3} vs {:.3}{why}", p.name, t.relative_throughput, s.relative_throughput)))
}

/// tierd's median against a fixed bar.
fn at_least(r: &Results, name: &str, bar: f64, scenario: &'static str, goal: &'static str) -> Goal {
    match point(r, name).and_then(|p| Some((p, p.mode(Mode::Tierd)?))) {
        Some((p, t)) => Goal {
            scenario,
            goal,
            measured: format!(
                "tierd {:.3}{}",
                t.relative_throughput,
                p.mode(Mode::Swap).map_or(String::new(), |s| format!(", swap {:.3}", s.relative_throughput))
            ),
            verdict: Verdict::of(t.relative_throughput >= bar),
        },
        None => Goal::not_run(scenario, goal),
    }
}

/// Every point both modes ran, contention apart: tierd ≥ swap − 0.03.
fn never_below_swap(r: &Results) -> Goal {
    let g = "tierd's median ≥ swap's − 0.03 on every point (contention: below)";
    let checks: Vec<(Verdict, String)> =
        r.results.iter().filter(|p| p.scenario != "contention").filter_map(|p| at_least_swap(p, 0.03)).collect();
    if checks.is_empty() {
        return Goal::not_run("every point", g);
    }
    let bad: Vec<&str> = checks.iter().filter(|c| c.0 != Verdict::Met).map(|c| c.1.as_str()).collect();
    let measured = if bad.is_empty() {
        format!("{} points, none below", checks.len())
    } else {
        format!("{} points; below: {}", checks.len(), bad.join("; "))
    };
    Goal { scenario: "every point", goal: g, measured, verdict: Verdict::all(checks.into_iter().map(|c| c.0)) }
}

/// Contention: the reserve holds and the total stays near swap's.
fn contention(r: &Results) -> Goal {
    let g = "reserved tenant ≥ 0.95 of dram, total ≥ swap's − 0.05";
    let mut verdicts = Vec::new();
    let mut words = Vec::new();
    for p in r.results.iter().filter(|p| p.scenario == "contention") {
        let (Some(t), Some((v, vs))) = (p.mode(Mode::Tierd), at_least_swap(p, 0.05)) else { continue };
        let reserved = t.tenants.iter().find(|x| x.0 == "reserved").map_or(0.0, |x| x.1);
        verdicts.push(Verdict::all([Verdict::of(reserved >= 0.95), v]));
        words.push(format!("{vs}, reserved {reserved:.2}"));
    }
    if verdicts.is_empty() {
        return Goal::not_run("contention", g);
    }
    Goal { scenario: "contention", goal: g, measured: words.join("; "), verdict: Verdict::all(verdicts) }
}

/// The largest tenant count a mode sustains at ≤ 5% loss in login-storm (every smaller
/// point too).
pub fn sustained_tenants(r: &Results, mode: Mode) -> Option<usize> {
    let mut points: Vec<(usize, f64)> = r
        .results
        .iter()
        .filter(|p| p.scenario == "login-storm")
        .filter_map(|p| Some((p.point.split_whitespace().next()?.parse().ok()?, p.mode(mode)?.relative_throughput)))
        .collect();
    points.sort_by_key(|p| p.0);
    points.iter().take_while(|p| p.1 >= 1.0 - SUSTAINED_LOSS).last().map(|p| p.0)
}

fn login_storm(r: &Results) -> Goal {
    let g = "tierd sustains ≥ 1.25× the tenants swap does at ≤ 5% loss";
    let ran = |m: Mode| r.results.iter().any(|p| p.scenario == "login-storm" && p.mode(m).is_some());
    // "none" must mean no point at ≤ 5% loss, never "not run".
    if !(ran(Mode::Tierd) && ran(Mode::Swap)) {
        return Goal::not_run("login-storm", g);
    }
    let (t, s) = (sustained_tenants(r, Mode::Tierd), sustained_tenants(r, Mode::Swap));
    let show = |v: Option<usize>| v.map_or("none".to_string(), |n| n.to_string());
    Goal {
        scenario: "login-storm",
        goal: g,
        measured: format!("tierd {}, swap {}", show(t), show(s)),
        verdict: Verdict::of(t.is_some() && t.unwrap_or(0) as f64 >= 1.25 * s.unwrap_or(0) as f64),
    }
}

fn secs(v: Option<f64>) -> String {
    v.map_or("never".into(), |x| format!("{x:.0} s"))
}

/// wake-up/fast: the read-back takes ≤ 2 s per GiB and is ≥ 10× faster than swap's.
fn wake_up_fast(r: &Results) -> Goal {
    let g = "back to 95% of where it settles in ≤ 2 s/GiB, ≥ 10× faster than swap (medians)";
    let Some((p, (t, s))) = point(r, "wake-up/fast").and_then(|p| Some((p, modes(p)?))) else {
        return Goal::not_run("wake-up", g);
    };
    let gib = p.measured_hot_bytes as f64 / tierd_core::size::GIB as f64;
    // Never back within the window: swap's time is at least the window.
    let window = s.recovery_curve.last().map_or(0.0, |c| c.0);
    let swap_secs = s.recovery_secs.unwrap_or(window);
    let per_gib = t.settle_secs.map(|x| x / gib);
    let ratio = t.recovery_secs.map(|x| swap_secs / x.max(1.0));
    // Where the workload counts its faults: when the hot set was back in DRAM, apart
    // from whatever slows the tenant once its pages are back.
    let resident = match t.resident_each.is_empty() {
        true => String::new(),
        false => format!(", hot set back in {}", secs(t.resident_secs)),
    };
    let measured = format!(
        "tierd settles in {} ({}){resident}, back to 95% of dram in {}; swap {}{}",
        secs(t.settle_secs),
        per_gib.map_or("—".into(), |x| format!("{x:.1} s/GiB")),
        secs(t.recovery_secs),
        secs(s.recovery_secs),
        ratio.map_or(String::new(), |x| format!(
            ": {}{x:.1}× faster",
            if s.recovery_secs.is_none() { "≥ " } else { "" }
        ))
    );
    let ok = per_gib.is_some_and(|x| x <= 2.0) && ratio.is_some_and(|x| x >= 10.0);
    Goal { scenario: "wake-up", goal: g, measured, verdict: Verdict::of(ok) }
}

/// wake-up/slow: back to 95% within 60 s in every repetition.
fn wake_up_slow(r: &Results) -> Goal {
    let g = "slow tier (150 IOPS): back to 95% within 60 s in every repetition";
    let Some(t) = point(r, "wake-up/slow").and_then(|p| p.mode(Mode::Tierd)) else {
        return Goal::not_run("wake-up", g);
    };
    let each: Vec<String> = t.recovery_each.iter().map(|x| secs(*x)).collect();
    let ok = !t.recovery_each.is_empty() && t.recovery_each.iter().all(|x| x.is_some_and(|x| x <= 60.0));
    Goal { scenario: "wake-up", goal: g, measured: format!("tierd {}", each.join(", ")), verdict: Verdict::of(ok) }
}

/// The first second after waking, against `dram` before idling, per repetition.
fn first_second(m: &ModeResult, before: f64) -> Vec<f64> {
    m.samples.iter().filter_map(|s| s.after.first()).map(|a| if before > 0.0 { a.1 / before } else { 0.0 }).collect()
}

/// wake-up/burst: a tenant back from a short rest is not slower than under swap at once.
fn wake_up_burst(r: &Results) -> Goal {
    let g = "after a short rest, the first second is no slower than under swap";
    let Some((p, (t, s))) = point(r, "wake-up/burst").and_then(|p| Some((p, modes(p)?))) else {
        return Goal::not_run("wake-up", g);
    };
    let before = p
        .mode(Mode::Dram)
        .map_or(0.0, |d| crate::machine::median(&d.samples.iter().map(|x| x.before).collect::<Vec<_>>()));
    let (a, b) = (first_second(t, before), first_second(s, before));
    let (ta, sa) = (crate::suite::Spread::of(&a), crate::suite::Spread::of(&b));
    let verdict = if a.is_empty() || b.is_empty() {
        Verdict::NotRun
    } else if ta.median >= sa.median {
        Verdict::Met
    } else if ta.max >= sa.min {
        Verdict::Inconclusive
    } else {
        Verdict::Missed
    };
    Goal {
        scenario: "wake-up",
        goal: g,
        measured: format!("first second: tierd {:.2}, swap {:.2} of dram", ta.median, sa.median),
        verdict,
    }
}

/// A server at 2x: loss ≤ 3% and at least swap's median.
fn server(r: &Results, name: &'static str, scenario: &'static str) -> Goal {
    let g = "loss ≤ 3% and at least swap's median";
    let Some((p, (t, _))) = point(r, name).and_then(|p| Some((p, modes(p)?))) else {
        return Goal::not_run(scenario, g);
    };
    let (v, words) = at_least_swap(p, 0.0).expect("both modes ran");
    Goal { scenario, goal: g, measured: words, verdict: Verdict::all([Verdict::of(t.relative_throughput >= 0.97), v]) }
}

/// Scenarios whose tenants all run throughout: where the per-GiB CPU goal applies.
const STEADY: [&str; 3] = ["density-2x", "active-sweep", "overcommit-sweep"];

/// tierd's own CPU: ≤ 5% of a core everywhere, ≤ 1% per 8 GiB of tenants where steady.
fn cpu(r: &Results) -> Goal {
    let g = "tierd ≤ 5% of a core on every point, ≤ 1% per 8 GiB of tenants on steady points";
    let t: Vec<(&PointResult, &ModeResult)> =
        r.results.iter().filter_map(|p| Some((p, p.mode(Mode::Tierd)?))).collect();
    let worst = t.iter().max_by(|a, b| a.1.tierd_cpu_percent.total_cmp(&b.1.tierd_cpu_percent));
    let Some((wp, wm)) = worst else { return Goal::not_run("every point", g) };
    let per_8gib = |p: &PointResult, m: &ModeResult| {
        m.tierd_cpu_percent * (8 * tierd_core::size::GIB) as f64 / p.tenant_memory_bytes.max(1) as f64
    };
    let steady = t
        .iter()
        .filter(|(p, _)| STEADY.contains(&p.scenario.as_str()))
        .map(|(p, m)| (p.name.as_str(), per_8gib(p, m)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    Goal {
        scenario: "every point",
        goal: g,
        measured: format!(
            "most {:.1}% ({}{}); steady points at most {}",
            wm.tierd_cpu_percent,
            wp.name,
            wm.moving_cpu_percent.map_or(String::new(), |m| format!(", {m:.1}% of it moving pages")),
            steady.map_or("— (none run)".into(), |(n, c)| format!("{c:.2}% per 8 GiB ({n})"))
        ),
        verdict: Verdict::of(wm.tierd_cpu_percent <= 5.0 && steady.is_none_or(|s| s.1 <= 1.0)),
    }
}

/// The goals against the results.
pub fn goals(r: &Results) -> Vec<Goal> {
    vec![
        never_below_swap(r),
        contention(r),
        at_least(r, "login-storm/12 tenants", 0.6, "login-storm", "12 tenants ≥ 0.6 of dram"),
        at_least(r, "contention/150%", 0.7, "contention", "150% ≥ 0.7 of dram"),
        login_storm(r),
        wake_up_fast(r),
        wake_up_slow(r),
        wake_up_burst(r),
        server(r, "redis/2x", "redis"),
        server(r, "postgres/2x", "postgres"),
        cpu(r),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Spread;
    use crate::suite::fixtures::{mode_result, pt, results};

    fn with_range(mut m: ModeResult, min: f64, max: f64) -> ModeResult {
        m.relative_spread = Spread { median: m.relative_throughput, min, max };
        m
    }

    fn find<'a>(g: &'a [Goal], goal_starts: &str) -> &'a Goal {
        g.iter().find(|x| x.goal.starts_with(goal_starts)).unwrap()
    }

    #[test]
    fn the_cpu_goal_says_how_much_of_tierds_cpu_moved_pages() {
        let mut t = mode_result(Mode::Tierd, 0.5, &[]);
        (t.tierd_cpu_percent, t.moving_cpu_percent) = (16.4, Some(14.0));
        let g = find(&goals(&results(vec![pt("login-storm", "12 tenants", vec![t])])), "tierd ≤ 5%").clone();
        assert!(
            g.measured.starts_with("most 16.4% (login-storm/12 tenants, 14.0% of it moving pages)"),
            "{}",
            g.measured
        );
        assert_eq!(g.verdict, Verdict::Missed, "the goal is on the whole daemon");
    }

    #[test]
    fn tierd_against_swap_is_judged_on_medians_and_overlap_is_inconclusive() {
        let p = |t: ModeResult, s: ModeResult| pt("density-2x", "2x", vec![mode_result(Mode::Dram, 1.0, &[]), s, t]);
        let judge = |t, s| find(&goals(&results(vec![p(t, s)])), "tierd's median").verdict;
        let swap = with_range(mode_result(Mode::Swap, 0.95, &[]), 0.93, 0.97);
        // tierd's best repetition beats swap's median, but its median is 0.05 below.
        let t = with_range(mode_result(Mode::Tierd, 0.90, &[]), 0.85, 0.96);
        assert_eq!(judge(t, swap.clone()), Verdict::Inconclusive, "ranges overlap");
        let t = with_range(mode_result(Mode::Tierd, 0.85, &[]), 0.80, 0.90);
        assert_eq!(judge(t, swap.clone()), Verdict::Missed, "ranges apart");
        let t = with_range(mode_result(Mode::Tierd, 0.93, &[]), 0.92, 0.94);
        assert_eq!(judge(t, swap), Verdict::Met, "within 0.03");
    }

    #[test]
    fn a_cpu_bound_reference_makes_a_miss_inconclusive() {
        let mut p = pt(
            "noisy-neighbour",
            "",
            vec![
                with_range(mode_result(Mode::Swap, 1.10, &[]), 1.08, 1.12),
                with_range(mode_result(Mode::Tierd, 1.00, &[]), 0.99, 1.01),
            ],
        );
        assert_eq!(find(&goals(&results(vec![p.clone()])), "tierd's median").verdict, Verdict::Missed);
        p.reference_cpu_bound = true;
        let g = goals(&results(vec![p]));
        assert_eq!(find(&g, "tierd's median").verdict, Verdict::Inconclusive);
        assert!(find(&g, "tierd's median").measured.contains("dram CPU-bound"));
    }

    #[test]
    fn goals_not_run_say_so() {
        let g = goals(&results(vec![pt("active-sweep", "25%", vec![mode_result(Mode::Dram, 1.0, &[])])]));
        assert!(g.iter().all(|x| x.verdict == Verdict::NotRun), "{g:?}");
    }

    #[test]
    fn contention_needs_the_reserve_and_a_total_near_swap() {
        let p = |reserved: f64, total: f64| {
            pt(
                "contention",
                "125%",
                vec![
                    mode_result(Mode::Swap, 0.60, &[("reserved", 0.6)]),
                    mode_result(Mode::Tierd, total, &[("reserved", reserved)]),
                ],
            )
        };
        let judge = |r, t| find(&goals(&results(vec![p(r, t)])), "reserved tenant").verdict;
        assert_eq!(judge(0.97, 0.58), Verdict::Met);
        assert_eq!(judge(0.90, 0.70), Verdict::Missed, "the reserve did not hold");
        assert_eq!(judge(0.97, 0.45), Verdict::Missed, "the total fell 0.15 below swap");
    }

    #[test]
    fn wake_up_is_timed_per_gib_and_against_swap_even_when_swap_never_recovers() {
        let wake = |mode: Mode, secs: Option<f64>| ModeResult {
            recovery_secs: secs,
            settle_secs: secs,
            recovery_curve: (1..=120).map(|s| (s as f64, 0.5)).collect(),
            ..mode_result(mode, 0.5, &[])
        };
        let p = |tierd: Option<f64>| pt("wake-up", "fast", vec![wake(Mode::Swap, None), wake(Mode::Tierd, tierd)]);
        let fast = |t| find(&goals(&results(vec![p(t)])), "back to 95% of where").clone();
        // 1 GiB hot set back in 2 s: 60× faster than swap's "not within 120 s".
        let g = fast(Some(2.0));
        assert_eq!(g.verdict, Verdict::Met, "{}", g.measured);
        assert!(g.measured.contains("≥ 60.0× faster") && g.measured.contains("2.0 s/GiB"), "{}", g.measured);
        assert!(!g.measured.contains("hot set back"), "no fault counts, no residency: {}", g.measured);
        assert_eq!(fast(Some(5.0)).verdict, Verdict::Missed, "24× swap but over 2 s/GiB");
        assert_eq!(fast(None).verdict, Verdict::Missed);
    }

    #[test]
    fn the_first_second_after_a_short_rest_is_compared_per_repetition() {
        let sample = |first: f64| crate::suite::Sample {
            throughput: 1.0,
            p99_us: 1.0,
            tenants: Vec::new(),
            before: 1000.0,
            after: vec![(1.0, first), (2.0, 1000.0)],
            faults_after: Vec::new(),
            health: "green".into(),
            tierd_cpu_percent: 0.1,
            moving_cpu_percent: None,
            tracker_cpu_per_8gib: None,
            tier_tail: None,
            failed: Vec::new(),
        };
        let m = |mode, firsts: &[f64]| ModeResult {
            samples: firsts.iter().map(|f| sample(*f)).collect(),
            ..mode_result(mode, 1.0, &[])
        };
        let judge = |t: &[f64], s: &[f64]| {
            let p = pt("wake-up", "burst", vec![m(Mode::Dram, &[1000.0; 3]), m(Mode::Swap, s), m(Mode::Tierd, t)]);
            find(&goals(&results(vec![p])), "after a short rest").clone()
        };
        let g = judge(&[900.0, 950.0, 1000.0], &[500.0, 600.0, 700.0]);
        assert_eq!(g.verdict, Verdict::Met);
        assert!(g.measured.contains("tierd 0.95, swap 0.60"), "{}", g.measured);
        assert_eq!(judge(&[100.0, 200.0, 300.0], &[500.0, 600.0, 700.0]).verdict, Verdict::Missed);
        assert_eq!(judge(&[400.0, 500.0, 550.0], &[500.0, 600.0, 700.0]).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn login_storm_counts_the_most_tenants_before_the_first_loss_over_5_percent() {
        let storm = |n: usize, swap: f64, tierd: f64| {
            pt(
                "login-storm",
                &format!("{n} tenants"),
                vec![mode_result(Mode::Swap, swap, &[]), mode_result(Mode::Tierd, tierd, &[])],
            )
        };
        let r = results(vec![storm(4, 0.99, 1.0), storm(6, 0.93, 0.97), storm(8, 0.96, 0.96), storm(10, 0.8, 0.9)]);
        assert_eq!(sustained_tenants(&r, Mode::Swap), Some(4), "8 passing after 6 failed does not count");
        assert_eq!(sustained_tenants(&r, Mode::Tierd), Some(8));
        assert_eq!(sustained_tenants(&r, Mode::Static), None);
        assert_eq!(find(&goals(&r), "tierd sustains").verdict, Verdict::Met, "8 ≥ 1.25 × 4");
        // Only tierd run: swap's count is unknown, not "none".
        let only = results(vec![pt("login-storm", "4 tenants", vec![mode_result(Mode::Tierd, 1.0, &[])])]);
        assert_eq!(find(&goals(&only), "tierd sustains").verdict, Verdict::NotRun);
    }
}
