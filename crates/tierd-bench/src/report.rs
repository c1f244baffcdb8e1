//! `results.json`, `report.md` and the SVG charts of a `tierd-bench run`.

use std::fmt::Write as _;
use std::path::Path;

use tierd_core::size::{GIB, human};

use crate::chart;
use crate::scenario::Mode;
use crate::suite::{PointResult, Results, SUSTAINED_LOSS};

/// Whether a goal was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// A mode or scenario the goal needs was not run.
    NotRun,
}

impl Verdict {
    fn of(ok: bool) -> Verdict {
        if ok { Verdict::Met } else { Verdict::Missed }
    }

    fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "**missed**",
            Verdict::NotRun => "not run",
        }
    }
}

/// One line of the summary: a goal of the issue, what we measured, and the verdict.
#[derive(Debug, Clone)]
pub struct Goal {
    pub scenario: &'static str,
    pub goal: &'static str,
    pub measured: String,
    pub verdict: Verdict,
}

fn point<'a>(r: &'a Results, name: &str) -> Option<&'a PointResult> {
    r.results.iter().find(|p| p.name == name)
}

fn loss(x: f64) -> String {
    format!("{:+.1}%", (x - 1.0) * 100.0)
}

/// The largest tenant count a mode sustains at ≤ 5% loss in login-storm, and whether
/// every smaller point was run.
pub fn sustained_tenants(r: &Results, mode: Mode) -> Option<usize> {
    let mut best = None;
    let mut points: Vec<(usize, f64)> = r
        .results
        .iter()
        .filter(|p| p.scenario == "login-storm")
        .filter_map(|p| {
            let n = p.point.split_whitespace().next()?.parse().ok()?;
            Some((n, p.mode(mode)?.relative_throughput))
        })
        .collect();
    points.sort_by_key(|p| p.0);
    for (n, rel) in points {
        if rel >= 1.0 - SUSTAINED_LOSS {
            best = Some(n);
        } else {
            break;
        }
    }
    best
}

impl Goal {
    fn not_run(scenario: &'static str, goal: &'static str) -> Goal {
        Goal { scenario, goal, measured: "—".into(), verdict: Verdict::NotRun }
    }
}

/// A goal on loss: tierd within `max_loss` of `dram`, and not worse than `swap` (tierd's
/// best repetition at least swap's median: single runs vary ±7% here).
fn loss_goal(r: &Results, scenario: &'static str, name: &str, goal: &'static str, max_loss: f64) -> Goal {
    match point(r, name).and_then(|p| Some((p.mode(Mode::Tierd)?, p.mode(Mode::Swap)?))) {
        Some((t, s)) => Goal {
            scenario,
            goal,
            measured: format!("tierd {}, swap {}", loss(t.relative_throughput), loss(s.relative_throughput)),
            verdict: Verdict::of(
                t.relative_throughput >= 1.0 - max_loss && t.relative_spread.max >= s.relative_throughput,
            ),
        },
        None => Goal::not_run(scenario, goal),
    }
}

/// The goals against the results.
pub fn goals(r: &Results) -> Vec<Goal> {
    let mut out = Vec::new();

    out.push(loss_goal(r, "density-2x", "density-2x/2x", "tierd loss ≤ 2% vs dram, never worse than swap", 0.02));
    out.push(loss_goal(r, "redis", "redis/2x", "tierd loss ≤ 2% vs dram, never worse than swap", 0.02));
    for (name, gb, g) in [
        ("wake-up/fast", true, "tierd back to 95% within 2 s per GiB of hot set, ≥ 10× faster than swap"),
        ("wake-up/slow", false, "tierd ≥ 10× faster than swap on a hard-disk-like tier"),
    ] {
        let Some(p) = point(r, name) else {
            out.push(Goal::not_run("wake-up", g));
            continue;
        };
        let (Some(t), Some(s)) = (p.mode(Mode::Tierd), p.mode(Mode::Swap)) else {
            out.push(Goal::not_run("wake-up", g));
            continue;
        };
        let hot = p.measured_hot_bytes;
        let per_gib = t.recovery_secs.map(|x| x / (hot as f64 / GIB as f64));
        // Never back within the window: swap's time is at least the window.
        let window = s.recovery_curve.last().map_or(0.0, |c| c.0);
        let swap_secs = s.recovery_secs.unwrap_or(window);
        let ratio = t.recovery_secs.map(|x| swap_secs / x.max(1.0));
        let fmt = |v: Option<f64>| v.map_or("never".to_string(), |x| format!("{x:.0} s"));
        let measured = format!(
            "tierd {}{}, swap {}{}",
            fmt(t.recovery_secs),
            per_gib.map_or(String::new(), |x| format!(" ({x:.1} s/GiB)")),
            fmt(s.recovery_secs),
            match (ratio, s.recovery_secs) {
                (None, _) => String::new(),
                (Some(x), None) => format!(" (not within {window:.0} s): ≥ {x:.1}× faster"),
                (Some(x), Some(_)) => format!(": {x:.1}× faster"),
            }
        );
        let ok = ratio.is_some_and(|x| x >= 10.0) && (!gb || per_gib.is_some_and(|x| x <= 2.0));
        out.push(Goal { scenario: "wake-up", goal: g, measured, verdict: Verdict::of(ok) });
    }

    out.push(loss_goal(
        r,
        "noisy-neighbour",
        "noisy-neighbour",
        "steady tenants lose ≤ 3% under tierd, no more than under swap",
        0.03,
    ));

    let g = "the reserved tenant keeps ≥ 95% of its dram throughput at 125% active; shares order the others";
    match point(r, "contention/125%").and_then(|p| p.mode(Mode::Tierd)) {
        Some(t) => {
            let get = |n: &str| t.tenants.iter().find(|x| x.0 == n).map_or(0.0, |x| x.1);
            let (res, s200, s100) = (get("reserved"), get("shares200"), get("shares100"));
            out.push(Goal {
                scenario: "contention",
                goal: g,
                measured: format!("reserved {res:.2}, shares200 {s200:.2}, shares100 {s100:.2}"),
                verdict: Verdict::of(res >= 0.95 && s200 >= s100),
            });
        }
        None => out.push(Goal::not_run("contention", g)),
    }

    let g = "tierd sustains ≥ 25% more tenants than swap at ≤ 5% loss";
    let storm_ran = |m: Mode| r.results.iter().any(|p| p.scenario == "login-storm" && p.mode(m).is_some());
    // "none" must mean no point at ≤ 5% loss, never "not run".
    if storm_ran(Mode::Tierd) && storm_ran(Mode::Swap) {
        let (t, s) = (sustained_tenants(r, Mode::Tierd), sustained_tenants(r, Mode::Swap));
        let show = |v: Option<usize>| v.map_or("none".to_string(), |n| n.to_string());
        out.push(Goal {
            scenario: "login-storm",
            goal: g,
            measured: format!("tierd {}, swap {}", show(t), show(s)),
            verdict: Verdict::of(t.unwrap_or(0) as f64 >= 1.25 * s.unwrap_or(0) as f64 && t.is_some()),
        });
    } else {
        out.push(Goal::not_run("login-storm", g));
    }
    out
}

/// Tenants that failed during a repetition: their throughput counted as zero from then
/// on, which a reader must know before believing a mode's figure.
fn failures(p: &PointResult) -> String {
    let mut lines = String::new();
    for m in &p.modes {
        for (i, s) in m.samples.iter().enumerate().filter(|(_, s)| !s.failed.is_empty()) {
            let _ = writeln!(lines, "- {} repetition {}: {}", m.mode.name(), i + 1, s.failed.join("; "));
        }
    }
    if lines.is_empty() {
        lines
    } else {
        format!(
            "\nTenants that failed before the run was over (their throughput counts as zero from then on):\n\n{lines}"
        )
    }
}

fn spread(m: &crate::suite::ModeResult) -> String {
    if m.reps > 1 {
        format!("{:.3} ({:.3}–{:.3})", m.relative_throughput, m.relative_spread.min, m.relative_spread.max)
    } else {
        format!("{:.3}", m.relative_throughput)
    }
}

fn chart_file(name: &str) -> String {
    format!("run-{}.svg", name.replace(['/', '%', ' ', '.'], "-").replace("--", "-").trim_end_matches('-'))
}

/// Writes `results.json`, `report.md` and the charts to `out`.
pub fn write(out: &Path, r: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(r)?)?;
    let mut md = match &r.simulated {
        None => String::from("# Benchmark suite: tierd against all-DRAM, plain swap and static quotas\n\n"),
        Some(s) => format!(
            "# Simulated benchmark suite (tierd-sim)\n\n**Simulated, not measured**: `tierd-bench sim` ran every point \
             in a model of this machine with the real `tierd` policy code, {} seed(s) per point and mode, in {:.0} s \
             here. How far the model can be trusted is in `validation.md` beside this file; a repetition below is a \
             seed.\n\n",
            s.seeds, s.wall_secs
        ),
    };
    md += &r.run.markdown();
    let mut earlier: Vec<&crate::machine::RunInfo> = Vec::new();
    for t in r.results.iter().filter_map(|p| p.taken.as_ref()) {
        if *t != r.run && !earlier.contains(&t) {
            earlier.push(t);
        }
    }
    if !earlier.is_empty() {
        md += "\nSome points were measured by earlier runs into the same directory (each point says which):\n\n";
        for t in &earlier {
            let _ = writeln!(md, "- {} ({}): `{}`", t.date, t.commit, t.command);
        }
    }
    let _ = write!(
        md,
        "\nEach figure is the median of the point's repetitions (latest run: {} each), with the range in brackets; \
         modes are interleaved within each repetition. `relative` is throughput against `dram` (no memory limit) at the same point in \
         the same run. Memory scale {}. Tier: {}. tierd interval 5 s, window 30 s. Modes: `dram` (no limit), \
         `swap` (plain Linux: one limit equal to the DRAM budget, tierd's `none` policy), `static` (fixed \
         quotas), `tierd` (the policy). `tierd CPU` is the whole daemon over the run (tracking, paging out and \
         in, the API), % of one core; `tracking CPU per 8 GiB` is the trackers' own thread CPU until near the end, \
         scaled to 8 GiB of tenant memory (the budget is 1%).\n",
        r.reps, r.scale, r.tier
    );
    md += "\n## Goals\n\n| scenario | goal | measured | verdict |\n|---|---|---|---|\n";
    for g in goals(r) {
        let _ = writeln!(md, "| {} | {} | {} | {} |", g.scenario, g.goal, g.measured, g.verdict.word());
    }
    // Each scenario once, where it first appears: a point added by a later run comes
    // after the others, but belongs in its scenario's section.
    let mut scenarios: Vec<&str> = Vec::new();
    for p in &r.results {
        if !scenarios.contains(&p.scenario.as_str()) {
            scenarios.push(&p.scenario);
        }
    }
    for sc in scenarios {
        let points: Vec<&PointResult> = r.results.iter().filter(|p| p.scenario == sc).collect();
        let _ = write!(md, "\n## {sc}\n\n{}\n", points[0].description);
        for p in &points {
            let reps = p.modes.iter().map(|m| m.reps).max().unwrap_or(0);
            let when = match &p.taken {
                Some(t) if *t != r.run => format!("; taken {} ({})", t.date, t.commit),
                _ => String::new(),
            };
            let _ = write!(
                md,
                "\n### {} — {} of tenant memory on {} of DRAM{}\n\n{reps} repetition(s){when}.\n\n| mode | relative | throughput (ops/s) | p99 (µs) | p99 ratio | per tenant (relative) | health | tierd CPU | tracking CPU per 8 GiB |\n|---|---|---|---|---|---|---|---|---|\n",
                p.point,
                human(p.tenant_memory_bytes),
                human(p.dram_budget_bytes),
                p.slow_tier.map_or(String::new(), |t| format!(
                    ", tier reads throttled to {} IOPS and {} MB/s from {} s into each run",
                    t.read_iops,
                    t.read_bytes_per_sec / 1_000_000,
                    t.after_secs
                ))
            );
            for m in &p.modes {
                let per: Vec<String> = m.tenants.iter().map(|(n, v)| format!("{n} {v:.2}")).collect();
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {:.0} | {:.2} | {} | {} | {:.1}% | {} |",
                    m.mode.name(),
                    spread(m),
                    m.throughput,
                    m.p99_us,
                    m.p99_latency_ratio,
                    per.join(", "),
                    m.health.join(" "),
                    m.tierd_cpu_percent,
                    m.tracker_cpu_per_8gib.map_or("—".into(), |c| format!("{c:.2}%"))
                );
            }
            md += &failures(p);
            if sc == "wake-up" {
                md += "\n| mode | back to 95% of dram after (median) | each repetition | settles at (of dram) | \
                       back to 95% of where it settles (median) | each repetition |\n|---|---|---|---|---|---|\n";
                let secs = |v: Option<f64>| v.map_or("not within the run".to_string(), |v| format!("{v:.0} s"));
                let each = |e: &[Option<f64>]| {
                    e.iter()
                        .map(|e| e.map_or("never".into(), |v| format!("{v:.0} s")))
                        .collect::<Vec<String>>()
                        .join(", ")
                };
                for m in &p.modes {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {} | {} | {} |",
                        m.mode.name(),
                        secs(m.recovery_secs),
                        each(&m.recovery_each),
                        m.settled_relative.map_or("—".into(), |v| format!("{v:.2}")),
                        if m.settle_each.is_empty() { "—".into() } else { secs(m.settle_secs) },
                        if m.settle_each.is_empty() { "—".into() } else { each(&m.settle_each) },
                    );
                }
                md += "\nThe goal is timed against `dram` before idling. Where a mode settles below 95% of that, \
                       the first figure is noise around that line; the second times the read-back alone.\n";
                let series: Vec<(&str, Vec<(f64, f64)>)> =
                    p.modes.iter().map(|m| (m.mode.name(), m.recovery_curve.clone())).collect();
                let file = chart_file(&p.name);
                std::fs::write(
                    out.join(&file),
                    chart::lines(
                        &format!("Wake-up ({} tier): throughput vs before idling", p.point),
                        "seconds after waking",
                        "relative throughput (median)",
                        &series,
                        Some(0.95),
                    ),
                )?;
                let _ = writeln!(md, "\n![wake-up, {} tier]({file})", p.point);
            }
        }
        if sc != "wake-up" {
            let file = chart_file(sc);
            std::fs::write(out.join(&file), scenario_chart(sc, &points))?;
            let _ = writeln!(md, "\n![{sc}]({file})");
        }
        if sc == "login-storm" {
            md += "\n| mode | most tenants at ≤ 5% loss |\n|---|---|\n";
            for m in Mode::ALL {
                if points.iter().any(|p| p.mode(m).is_some()) {
                    let n = sustained_tenants(r, m);
                    let _ =
                        writeln!(md, "| {} | {} |", m.name(), n.map_or("none of those run".into(), |n| n.to_string()));
                }
            }
        }
    }
    std::fs::write(out.join("report.md"), md)?;
    Ok(())
}

/// Bars per point (or per tenant for single-point scenarios), one per mode, with the
/// spread of the repetitions as whiskers.
fn scenario_chart(sc: &str, points: &[&PointResult]) -> String {
    let modes: Vec<Mode> = Mode::ALL.into_iter().filter(|m| points.iter().any(|p| p.mode(*m).is_some())).collect();
    if points.len() == 1 || sc == "contention" {
        // Per tenant (contention: of its 125% point, or its only point).
        let p = points.iter().find(|p| p.point == "125%").unwrap_or(&points[0]);
        let cats: Vec<String> = p.modes.first().map_or(Vec::new(), |m| m.tenants.iter().map(|t| t.0.clone()).collect());
        let series: Vec<(&str, Vec<f64>)> =
            p.modes.iter().map(|m| (m.mode.name(), m.tenants.iter().map(|t| t.1).collect())).collect();
        return chart::bars(
            &format!("{}: each tenant's throughput vs dram", p.name),
            "relative to dram (median)",
            &cats,
            &series,
            &[],
            Some(1.0),
        );
    }
    let cats: Vec<String> = points.iter().map(|p| p.point.clone()).collect();
    // A point run under `dram` alone (everything fits) stands for every mode.
    fn pick(p: &PointResult, m: Mode) -> Option<&crate::suite::ModeResult> {
        p.mode(m).or_else(|| p.mode(Mode::Dram).filter(|_| p.modes.len() == 1))
    }
    let series: Vec<(&str, Vec<f64>)> = modes
        .iter()
        .map(|&m| (m.name(), points.iter().map(|p| pick(p, m).map_or(0.0, |x| x.relative_throughput)).collect()))
        .collect();
    let whiskers: Vec<Vec<(f64, f64)>> = modes
        .iter()
        .map(|&m| {
            points
                .iter()
                .map(|p| pick(p, m).map_or((0.0, 0.0), |x| (x.relative_spread.min, x.relative_spread.max)))
                .collect()
        })
        .collect();
    chart::bars(
        &format!("{sc}: throughput vs dram"),
        "relative to dram (median, range)",
        &cats,
        &series,
        &whiskers,
        Some(1.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{ModeResult, Spread};

    fn mode_result(mode: Mode, rel: f64, tenants: &[(&str, f64)]) -> ModeResult {
        ModeResult {
            mode,
            reps: 3,
            throughput: rel * 1000.0,
            relative_throughput: rel,
            relative_spread: Spread { median: rel, min: rel - 0.02, max: rel + 0.02 },
            p99_us: 10.0,
            p99_latency_ratio: 1.0,
            tenants: tenants.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            recovery_secs: None,
            recovery_each: Vec::new(),
            recovery_curve: Vec::new(),
            settle_secs: None,
            settle_each: Vec::new(),
            settled_relative: None,
            health: vec!["green".into()],
            tierd_cpu_percent: 1.0,
            tracker_cpu_per_8gib: Some(0.5),
            samples: Vec::new(),
        }
    }

    fn pt(scenario: &str, point: &str, modes: Vec<ModeResult>) -> PointResult {
        PointResult {
            name: if point.is_empty() { scenario.into() } else { format!("{scenario}/{point}") },
            scenario: scenario.into(),
            point: point.into(),
            description: "d".into(),
            tenant_memory_bytes: 2 * GIB,
            measured_hot_bytes: GIB,
            dram_budget_bytes: GIB,
            slow_tier: None,
            modes,
            taken: None,
        }
    }

    fn results(results: Vec<PointResult>) -> Results {
        Results {
            run: crate::machine::RunInfo::collect(),
            simulated: None,
            reps: 3,
            scale: 1.0,
            tier: "t".into(),
            results,
        }
    }

    #[test]
    fn goals_say_met_missed_or_not_run() {
        let r = results(vec![
            pt(
                "density-2x",
                "2x",
                vec![
                    mode_result(Mode::Dram, 1.0, &[]),
                    mode_result(Mode::Swap, 0.97, &[]),
                    mode_result(Mode::Tierd, 0.985, &[]),
                ],
            ),
            pt(
                "contention",
                "125%",
                vec![mode_result(Mode::Tierd, 0.8, &[("reserved", 0.97), ("shares200", 0.7), ("shares100", 0.75)])],
            ),
        ]);
        let g = goals(&r);
        let get = |s: &str| g.iter().find(|x| x.scenario == s).unwrap();
        assert_eq!(get("density-2x").verdict, Verdict::Met, "{}", get("density-2x").measured);
        assert_eq!(get("contention").verdict, Verdict::Missed, "shares200 lost more than shares100");
        assert_eq!(get("noisy-neighbour").verdict, Verdict::NotRun);
        assert_eq!(get("login-storm").verdict, Verdict::NotRun);
        assert_eq!(get("redis").verdict, Verdict::NotRun);
    }

    #[test]
    fn wake_up_is_timed_per_gib_and_against_swap_even_when_swap_never_recovers() {
        let wake = |mode: Mode, secs: Option<f64>| ModeResult {
            recovery_secs: secs,
            recovery_curve: (1..=120).map(|s| (s as f64, 0.5)).collect(),
            ..mode_result(mode, 0.5, &[])
        };
        let p = |tierd: Option<f64>| pt("wake-up", "fast", vec![wake(Mode::Swap, None), wake(Mode::Tierd, tierd)]);
        // 1 GiB hot set back in 2 s: 60× faster than swap's "not within 120 s".
        let g = goals(&results(vec![p(Some(2.0))]));
        let fast = g.iter().find(|x| x.scenario == "wake-up").unwrap();
        assert_eq!(fast.verdict, Verdict::Met, "{}", fast.measured);
        assert!(fast.measured.contains("≥ 60.0× faster") && fast.measured.contains("2.0 s/GiB"), "{}", fast.measured);
        // 5 s per GiB is 24× swap but over the 2 s/GiB goal.
        let wake = |g: Vec<Goal>| g.into_iter().find(|x| x.scenario == "wake-up").unwrap().verdict;
        assert_eq!(wake(goals(&results(vec![p(Some(5.0))]))), Verdict::Missed);
        assert_eq!(wake(goals(&results(vec![p(None)]))), Verdict::Missed);
        let slow = g.iter().filter(|x| x.scenario == "wake-up").nth(1).unwrap();
        assert_eq!(slow.verdict, Verdict::NotRun, "the slow tier was not run");
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
        let g = goals(&r);
        assert_eq!(g.iter().find(|x| x.scenario == "login-storm").unwrap().verdict, Verdict::Met, "8 ≥ 1.25 × 4");
        // Only tierd run: swap's count is unknown, not "none".
        let only = results(vec![pt("login-storm", "4 tenants", vec![mode_result(Mode::Tierd, 1.0, &[])])]);
        let g = goals(&only);
        assert_eq!(g.iter().find(|x| x.scenario == "login-storm").unwrap().verdict, Verdict::NotRun);
    }

    #[test]
    fn a_report_is_written_with_a_chart_per_scenario() {
        let dir = std::env::temp_dir().join(format!("tierd-report-{}", std::process::id()));
        let r = results(vec![
            pt("active-sweep", "25%", vec![mode_result(Mode::Dram, 1.0, &[]), mode_result(Mode::Tierd, 0.99, &[])]),
            pt("contention", "125%", vec![mode_result(Mode::Dram, 1.0, &[])]),
            pt("active-sweep", "50%", vec![mode_result(Mode::Dram, 1.0, &[]), mode_result(Mode::Tierd, 0.97, &[])]),
        ]);
        write(&dir, &r).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.contains("## active-sweep") && md.contains("0.970 (0.950–0.990)"), "{md}");
        assert!(md.contains("![active-sweep](run-active-sweep.svg)"));
        assert_eq!(md.matches("## active-sweep").count(), 1, "one section, though a contention point is between: {md}");
        let svg = std::fs::read_to_string(dir.join("run-active-sweep.svg")).unwrap();
        assert!(svg.contains("25%") && svg.contains("50%"));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(json["results"][2]["name"], "active-sweep/50%");
        assert_eq!(json["results"][2]["modes"][1]["relative_throughput"], 0.97);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn points_from_earlier_runs_say_when_and_each_earlier_run_is_listed_once() {
        let dir = std::env::temp_dir().join(format!("tierd-report-earlier-{}", std::process::id()));
        let mut r = results(Vec::new());
        let mut old = r.run.clone();
        old.date = "2026-01-01T00:00:00Z".into();
        old.commit = "abc1234".into();
        let mut older = old.clone();
        older.commit = "0ld0000".into();
        for (label, taken) in [("25%", &old), ("50%", &older), ("75%", &old), ("90%", &r.run.clone())] {
            let mut p = pt("active-sweep", label, vec![mode_result(Mode::Dram, 1.0, &[])]);
            p.taken = Some(taken.clone());
            r.results.push(p);
        }
        write(&dir, &r).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert_eq!(md.matches("- 2026-01-01T00:00:00Z (abc1234)").count(), 1, "{md}");
        assert_eq!(md.matches("- 2026-01-01T00:00:00Z (0ld0000)").count(), 1, "{md}");
        assert_eq!(md.matches("; taken 2026-01-01T00:00:00Z (abc1234)").count(), 2, "{md}");
        assert_eq!(md.matches("; taken").count(), 3, "the latest run's point says nothing: {md}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tenant_that_failed_during_a_repetition_is_named_under_its_point() {
        let dir = std::env::temp_dir().join(format!("tierd-report-failed-{}", std::process::id()));
        let sample = |failed: &[&str]| crate::suite::Sample {
            throughput: 1.0,
            p99_us: 1.0,
            tenants: Vec::new(),
            before: 0.0,
            after: Vec::new(),
            health: "green".into(),
            tierd_cpu_percent: 0.1,
            tracker_cpu_per_8gib: None,
            failed: failed.iter().map(|f| f.to_string()).collect(),
        };
        let mut swap = mode_result(Mode::Swap, 0.5, &[]);
        swap.samples = vec![sample(&[]), sample(&["sleepy: exit code 101"]), sample(&[])];
        let mut dram = mode_result(Mode::Dram, 1.0, &[]);
        dram.samples = vec![sample(&[]); 3];
        let r = results(vec![pt("wake-up", "slow", vec![dram.clone(), swap]), pt("wake-up", "fast", vec![dram])]);
        write(&dir, &r).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert_eq!(md.matches("Tenants that failed").count(), 1, "only the point with a failure: {md}");
        assert!(md.contains("- swap repetition 2: sleepy: exit code 101\n"), "{md}");
        // The failure survives a round trip through results.json (--report-only).
        let json: Results = serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(json.results[0].modes[1].samples[1].failed, vec!["sleepy: exit code 101"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
