//! `results.json`, `report.md` and the SVG charts of a `tierd-bench run`.

use std::fmt::Write as _;
use std::path::Path;

use tierd_core::size::human;

use crate::chart;
use crate::goals::{goals, sustained_tenants};
use crate::scenario::Mode;
use crate::suite::{PointResult, Results};

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
    let mut md = header(r);
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
        md += &scenario_section(out, r, sc)?;
    }
    std::fs::write(out.join("report.md"), md)?;
    Ok(())
}

/// The report's title, the run, and how to read its figures.
fn header(r: &Results) -> String {
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
         scaled to 8 GiB of tenant memory (the budget is 1%). `tier read p99` is the median of tierd's 10 s \
         p99 of the tenants' tier reads, read every 5 s through each run, with the range of the repetitions; \
         health's bands are 2 and 8 ms; — where too few reads were timed (points run before 2026-12-07 \
         did not record it).\n",
        r.reps, r.scale, r.tier
    );
    // A tierd figure is the policy's it ran: say when the points mix generations.
    let older = r.results.iter().filter(|p| policy_of(r, p) != r.run.policy).count();
    if older > 0 {
        let _ = write!(
            md,
            "\n**{older} of {} points ran an earlier `tierd` policy** (the rule-based one, before policy v2: \
             docs/decisions/001); their `tierd` figures, and the goals judged on them, are that policy's. Each \
             point names its policy.\n",
            r.results.len()
        );
    }
    md
}

/// The policy generation a point's `tierd` figures come from.
fn policy_of(r: &Results, p: &PointResult) -> String {
    p.taken.as_ref().unwrap_or(&r.run).policy.clone()
}

/// One scenario's section: its points, then its chart (wake-up's are per point) and,
/// for login-storm, the most tenants each mode sustains.
fn scenario_section(out: &Path, r: &Results, sc: &str) -> anyhow::Result<String> {
    let points: Vec<&PointResult> = r.results.iter().filter(|p| p.scenario == sc).collect();
    let mut md = format!("\n## {sc}\n\n{}\n", points[0].description);
    for p in &points {
        md += &point_section(r, p);
        if sc == "wake-up" {
            md += &wake_up_section(out, p)?;
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
                let _ = writeln!(md, "| {} | {} |", m.name(), n.map_or("none of those run".into(), |n| n.to_string()));
            }
        }
    }
    Ok(md)
}

/// One point: where it ran, each mode's figures, and the tenants that failed.
fn point_section(r: &Results, p: &PointResult) -> String {
    let reps = p.modes.iter().map(|m| m.reps).max().unwrap_or(0);
    // Every point names the code that measured it.
    let named = match policy_of(r, p).as_str() {
        "" => "the rule-based policy".to_string(),
        g => format!("policy {g}"),
    };
    let when = match &p.taken {
        Some(t) if *t != r.run => format!("; taken {} ({}, {named})", t.date, t.commit),
        _ => format!("; taken by the latest run ({}, {named})", r.run.commit),
    };
    let mut md = format!(
        "\n### {} — {} of tenant memory on {} of DRAM{}\n\n{reps} repetition(s){when}.\n\n| mode | relative | throughput (ops/s) | p99 (µs) | p99 ratio | per tenant (relative) | health | tierd CPU | tracking CPU per 8 GiB | tier read p99 (ms) |\n|---|---|---|---|---|---|---|---|---|---|\n",
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
            "| {} | {} | {:.0} | {:.0} | {:.2} | {} | {} | {} | {} | {} |",
            m.mode.name(),
            spread(m),
            m.throughput,
            m.p99_us,
            m.p99_latency_ratio,
            per.join(", "),
            m.health.join(" "),
            cpu_cell(m),
            m.tracker_cpu_per_8gib.map_or("—".into(), |c| format!("{c:.2}%")),
            m.tier_read_p99_us.map_or("—".into(), |t| format!(
                "{:.1} ({:.1}–{:.1})",
                t.median / 1e3,
                t.min / 1e3,
                t.max / 1e3
            ))
        );
    }
    md + &failures(p)
}

/// tierd's CPU, and the part of it moving pages where that was measured.
fn cpu_cell(m: &crate::suite::ModeResult) -> String {
    match m.moving_cpu_percent {
        Some(moving) if moving >= 0.05 => format!("{:.1}% (moving {moving:.1}%)", m.tierd_cpu_percent),
        _ => format!("{:.1}%", m.tierd_cpu_percent),
    }
}

/// A wake-up point's recovery times per mode, and its chart.
fn wake_up_section(out: &Path, p: &PointResult) -> anyhow::Result<String> {
    let mut md = String::from(
        "\n| mode | back to 95% of dram after (median) | each repetition | settles at (of dram) | \
         back to 95% of where it settles (median) | each repetition | hot set back in DRAM (median) | each \
         repetition |\n|---|---|---|---|---|---|---|---|\n",
    );
    let secs = |v: Option<f64>| v.map_or("not within the run".to_string(), |v| format!("{v:.0} s"));
    let each = |e: &[Option<f64>]| {
        e.iter().map(|e| e.map_or("never".into(), |v| format!("{v:.0} s"))).collect::<Vec<String>>().join(", ")
    };
    for m in &p.modes {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            m.mode.name(),
            secs(m.recovery_secs),
            each(&m.recovery_each),
            m.settled_relative.map_or("—".into(), |v| format!("{v:.2}")),
            if m.settle_each.is_empty() { "—".into() } else { secs(m.settle_secs) },
            if m.settle_each.is_empty() { "—".into() } else { each(&m.settle_each) },
            if m.resident_each.is_empty() { "—".into() } else { secs(m.resident_secs) },
            if m.resident_each.is_empty() { "—".into() } else { each(&m.resident_each) },
        );
    }
    md += "\nThe goal is timed against `dram` before idling. Where a mode settles below 95% of that, \
           the first figure is noise around that line; the second times the read-back alone. The hot set \
           is back in DRAM when its major faults fall below a thousandth of its pages a second; \
           throughput can lag that, in `swap` as in `tierd`.\n";
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
    Ok(md)
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
    use crate::suite::fixtures::{mode_result, pt, results};

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
        older.policy = String::new();
        for (label, taken) in [("25%", &old), ("50%", &older), ("75%", &old), ("90%", &r.run.clone())] {
            let mut p = pt("active-sweep", label, vec![mode_result(Mode::Dram, 1.0, &[])]);
            p.taken = Some(taken.clone());
            r.results.push(p);
        }
        write(&dir, &r).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert_eq!(md.matches("- 2026-01-01T00:00:00Z (abc1234)").count(), 1, "{md}");
        assert_eq!(md.matches("- 2026-01-01T00:00:00Z (0ld0000)").count(), 1, "{md}");
        assert_eq!(md.matches("; taken 2026-01-01T00:00:00Z (abc1234, ").count(), 2, "{md}");
        assert_eq!(md.matches("; taken 2026").count(), 3, "{md}");
        assert_eq!(md.matches("; taken by the latest run").count(), 1, "every point names its commit: {md}");
        assert!(
            md.contains("(0ld0000, the rule-based policy)") && md.contains("**1 of 4 points ran an earlier"),
            "{md}"
        );
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
            faults_after: Vec::new(),
            health: "green".into(),
            tierd_cpu_percent: 0.1,
            moving_cpu_percent: None,
            tracker_cpu_per_8gib: None,
            tier_tail: None,
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
