//! `tierd-bench sim --validate`: the simulator against the committed real suite.
//!
//! Every point of the real results is simulated with the same modes; per point and
//! mode the real and simulated relative throughputs sit side by side. Two shares say
//! how far the simulator can be trusted (calibration points left out of both):
//! - `order_agreement`: of the points where `tierd` and `swap` differ by more than
//!   their ranges in the real run, the share the simulator orders the same way;
//! - `within_tolerance`: of the (point, mode) pairs other than `dram`, the share whose
//!   simulated median is within max(0.08, the real range) of the real median.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::scenario::Mode;
use crate::suite::{Plan, PointResult, Results};

/// The points the model's figures were fitted on; never scored.
pub const CALIBRATION: [&str; 3] = ["density-2x/2x", "contention/125%", "wake-up/fast"];
/// The least tolerance, relative throughput.
pub const TOLERANCE: f64 = 0.08;

/// One mode at one point, real and simulated.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModeCompare {
    pub mode: Mode,
    pub real: f64,
    pub real_min: f64,
    pub real_max: f64,
    pub sim: f64,
    pub sim_min: f64,
    pub sim_max: f64,
    pub within: bool,
    /// A `tierd` pair whose real run had another policy generation: shown, not scored.
    #[serde(default)]
    pub other_policy: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PointCompare {
    pub point: String,
    pub calibration: bool,
    /// The policy generation the real point was measured with ("" for the rule-based one).
    #[serde(default)]
    pub real_policy: String,
    /// The commit the real point was measured at.
    pub real_commit: String,
    pub modes: Vec<ModeCompare>,
    /// Real tierd against swap, when their ranges do not overlap: "tierd" or "swap".
    pub real_order: Option<String>,
    pub sim_order: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Validation {
    pub seeds: usize,
    pub sim_wall_secs: f64,
    pub sim_commit: String,
    pub order_agreement: Option<f64>,
    pub ordered_points: usize,
    pub within_tolerance: Option<f64>,
    pub compared_pairs: usize,
    pub points: Vec<PointCompare>,
}

fn order(tierd: f64, swap: f64) -> String {
    if tierd >= swap { "tierd".into() } else { "swap".into() }
}

/// Compares `sim` against `real`, point by point.
pub fn compare(real: &Results, sim: &Results) -> Validation {
    let mut points = Vec::new();
    for rp in &real.results {
        let Some(sp) = sim.results.iter().find(|p| p.name == rp.name) else { continue };
        points.push(compare_point(rp, sp, &real.run.policy, &sim.run.policy));
    }
    let scored: Vec<&PointCompare> = points.iter().filter(|p| !p.calibration).collect();
    // The order of tierd and swap says something only where real tierd ran this policy.
    let ordered: Vec<&&PointCompare> =
        scored.iter().filter(|p| p.real_order.is_some() && p.real_policy == sim.run.policy).collect();
    let agree = ordered.iter().filter(|p| p.sim_order == p.real_order).count();
    let pairs: Vec<&ModeCompare> =
        scored.iter().flat_map(|p| p.modes.iter()).filter(|m| m.mode != Mode::Dram && !m.other_policy).collect();
    let within = pairs.iter().filter(|m| m.within).count();
    let share = |n: usize, of: usize| (of > 0).then(|| n as f64 / of as f64);
    Validation {
        seeds: sim.reps,
        sim_wall_secs: sim.simulated.as_ref().map_or(0.0, |s| s.wall_secs),
        sim_commit: sim.run.commit.clone(),
        order_agreement: share(agree, ordered.len()),
        ordered_points: ordered.len(),
        within_tolerance: share(within, pairs.len()),
        compared_pairs: pairs.len(),
        points,
    }
}

fn compare_point(rp: &PointResult, sp: &PointResult, run_policy: &str, sim_policy: &str) -> PointCompare {
    let real_policy = rp.taken.as_ref().map_or(run_policy, |t| &t.policy).to_string();
    let modes: Vec<ModeCompare> = rp
        .modes
        .iter()
        .filter_map(|rm| {
            let sm = sp.mode(rm.mode)?;
            let range = rm.relative_spread.max - rm.relative_spread.min;
            Some(ModeCompare {
                mode: rm.mode,
                real: rm.relative_throughput,
                real_min: rm.relative_spread.min,
                real_max: rm.relative_spread.max,
                sim: sm.relative_throughput,
                sim_min: sm.relative_spread.min,
                sim_max: sm.relative_spread.max,
                within: (sm.relative_throughput - rm.relative_throughput).abs() <= TOLERANCE.max(range),
                other_policy: rm.mode == Mode::Tierd && real_policy != sim_policy,
            })
        })
        .collect();
    let pair = |m: Mode| rp.mode(m).zip(sp.mode(m));
    let (real_order, sim_order) = match (pair(Mode::Tierd), pair(Mode::Swap)) {
        (Some((rt, st)), Some((rs, ss))) => {
            let apart =
                rt.relative_spread.min > rs.relative_spread.max || rs.relative_spread.min > rt.relative_spread.max;
            let real = apart.then(|| order(rt.relative_throughput, rs.relative_throughput));
            (real, Some(order(st.relative_throughput, ss.relative_throughput)))
        }
        _ => (None, None),
    };
    PointCompare {
        point: rp.name.clone(),
        calibration: CALIBRATION.contains(&rp.name.as_str()),
        real_policy,
        real_commit: rp.taken.as_ref().map_or(String::new(), |t| t.commit.clone()),
        modes,
        real_order,
        sim_order,
    }
}

/// The plan that simulates every point of `real` in the modes it has.
pub fn plan_for(real: &Results, seeds: usize) -> Plan {
    let mut modes: Vec<Mode> = Vec::new();
    for p in &real.results {
        for m in &p.modes {
            if !modes.contains(&m.mode) {
                modes.push(m.mode);
            }
        }
    }
    modes.sort_by_key(|m| Mode::ALL.iter().position(|x| x == m));
    Plan {
        scenarios: real.results.iter().map(|p| p.name.clone()).collect(),
        files: Vec::new(),
        modes,
        reps: seeds,
        scale: real.scale,
        fresh: true,
        simulated: true,
    }
}

/// Writes `validation.json` and `validation.md` to `out`; the analysis in
/// `out/validation-notes.md` (written by hand: where it misses and why), if there is
/// one, goes at the end of `validation.md`.
pub fn write(out: &Path, v: &Validation) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("validation.json"), serde_json::to_string_pretty(v)?)?;
    let mut md = markdown(v);
    if let Ok(notes) = std::fs::read_to_string(out.join("validation-notes.md")) {
        md += "\n";
        md += &notes;
    }
    std::fs::write(out.join("validation.md"), md)?;
    Ok(())
}

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| format!("{:.0}%", x * 100.0))
}

pub fn markdown(v: &Validation) -> String {
    let mut md = String::from("# The simulator against the real suite\n\n");
    let _ = write!(
        md,
        "`tierd-bench sim --validate` at {}: every point of `bench/results/suite/results.json` simulated over {} \
         seeds ({:.0} s here), relative throughput against `dram` at the same point. Calibration points ({}) are \
         shown but not scored. A pair is within tolerance when the simulated median is within max({TOLERANCE}, the \
         real range) of the real median. A `tierd` pair whose real run had another policy than the simulated one \
         (the rule-based policy, before policy v2) is shown but not scored.\n\n",
        v.sim_commit,
        v.seeds,
        v.sim_wall_secs,
        CALIBRATION.join(", ")
    );
    let _ = writeln!(
        md,
        "- **order agreement**: {} of {} points where real `tierd` and `swap` differ by more than their ranges (goal ≥ 80%)",
        pct(v.order_agreement),
        v.ordered_points
    );
    let _ = writeln!(
        md,
        "- **within tolerance**: {} of {} (point, mode) pairs other than `dram` (goal ≥ 80%)\n",
        pct(v.within_tolerance),
        v.compared_pairs
    );
    md += "| point | mode | real (range) | simulated (range) | within | real commit |\n|---|---|---|---|---|---|\n";
    for p in &v.points {
        for m in p.modes.iter().filter(|m| m.mode != Mode::Dram) {
            let name = if p.calibration { format!("{} (calibration)", p.point) } else { p.point.clone() };
            let _ = writeln!(
                md,
                "| {name} | {} | {:.3} ({:.2}–{:.2}) | {:.3} ({:.2}–{:.2}) | {} | {} |",
                m.mode.name(),
                m.real,
                m.real_min,
                m.real_max,
                m.sim,
                m.sim_min,
                m.sim_max,
                match (m.other_policy, m.within) {
                    (true, _) => "other policy",
                    (false, true) => "yes",
                    (false, false) => "**no**",
                },
                p.real_commit
            );
        }
    }
    md += "\n## Order of tierd and swap\n\n| point | real | simulated |\n|---|---|---|\n";
    for p in v.points.iter().filter(|p| p.real_order.is_some()) {
        let mark = if p.real_order == p.sim_order { "" } else { " **(differs)**" };
        let _ = writeln!(
            md,
            "| {}{} | {} | {}{mark} |",
            p.point,
            if p.calibration { " (calibration)" } else { "" },
            p.real_order.as_deref().unwrap_or("—"),
            p.sim_order.as_deref().unwrap_or("—")
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{ModeResult, Spread};

    use crate::suite::fixtures::{mode_result, pt, results};

    fn mode(m: Mode, rel: f64, lo: f64, hi: f64) -> ModeResult {
        ModeResult { relative_spread: Spread { median: rel, min: lo, max: hi }, ..mode_result(m, rel, &[]) }
    }

    fn point(name: &str, modes: Vec<ModeResult>) -> PointResult {
        let (scenario, label) = name.split_once('/').unwrap();
        pt(scenario, label, modes)
    }

    #[test]
    fn order_and_tolerance_are_scored_off_the_calibration_points() {
        let real = results(vec![
            point("a/x", vec![mode(Mode::Swap, 0.30, 0.29, 0.32), mode(Mode::Tierd, 0.06, 0.04, 0.09)]),
            point("a/y", vec![mode(Mode::Swap, 0.95, 0.90, 1.00), mode(Mode::Tierd, 0.97, 0.93, 0.99)]),
            point("contention/125%", vec![mode(Mode::Swap, 0.69, 0.67, 0.70), mode(Mode::Tierd, 0.41, 0.38, 0.41)]),
        ]);
        let sim = results(vec![
            // Ordered the other way, and tierd 0.24 off.
            point("a/x", vec![mode(Mode::Swap, 0.25, 0.2, 0.3), mode(Mode::Tierd, 0.30, 0.2, 0.4)]),
            // Not ordered in the real run; both within 0.08.
            point("a/y", vec![mode(Mode::Swap, 0.90, 0.9, 0.9), mode(Mode::Tierd, 1.0, 1.0, 1.0)]),
            point("contention/125%", vec![mode(Mode::Swap, 0.0, 0.0, 0.0), mode(Mode::Tierd, 0.0, 0.0, 0.0)]),
        ]);
        let v = compare(&real, &sim);
        assert_eq!((v.ordered_points, v.order_agreement), (1, Some(0.0)));
        assert_eq!(v.compared_pairs, 4, "two scored points, two modes each");
        assert_eq!(v.within_tolerance, Some(0.75), "a/x swap 0.05 off is within; a/x tierd is not");
        assert!(v.points[2].calibration);
        assert!(markdown(&v).contains("| a/x | tierd | 0.060 (0.04–0.09) | 0.300 (0.20–0.40) | **no** |"));
    }

    #[test]
    fn real_tierd_runs_of_another_policy_are_shown_but_not_scored() {
        let mut old = point("a/x", vec![mode(Mode::Swap, 0.30, 0.29, 0.32), mode(Mode::Tierd, 0.06, 0.04, 0.09)]);
        let mut taken = crate::machine::RunInfo::collect();
        taken.policy = String::new();
        old.taken = Some(taken);
        let real = results(vec![old]);
        let sim =
            results(vec![point("a/x", vec![mode(Mode::Swap, 0.31, 0.3, 0.3), mode(Mode::Tierd, 0.70, 0.6, 0.8)])]);
        let v = compare(&real, &sim);
        assert_eq!((v.compared_pairs, v.within_tolerance), (1, Some(1.0)), "swap alone is scored");
        assert_eq!(v.ordered_points, 0, "the real order was the rule-based policy's");
        assert!(markdown(&v).contains("| other policy |"));
    }
}
