//! `tierd-bench run`: the seeds' experiments re-run on Linux, each scenario in every
//! mode side by side, repeated, with the median and spread of each figure.
//!
//! A scenario has one or more *points* (an overcommit level, an active-memory level, a
//! number of tenants). Every point runs in every chosen mode `reps` times, modes
//! interleaved within a repetition so slow drift of the machine hits all modes alike.
//! Figures relative to `dram` use the median `dram` figure of the same point and run.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::harness::{Throttle, interrupted};
use crate::machine::{RunInfo, median};

use crate::catalogue::catalogue;
use crate::scenario::{Mode, Report, Run, run};

mod aggregate;
pub use crate::catalogue::{MAX_TENANT_MEMORY, Measure, Point, Scenario, staggered_phases};
pub use aggregate::{aggregate, recovery_secs, resident_secs, settled_rate};

/// Loss at or under which a mode counts as sustaining a density (login-storm).
pub const SUSTAINED_LOSS: f64 = 0.05;

/// The figures of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub throughput: f64,
    pub p99_us: f64,
    /// Per measured tenant, raw ops/s.
    pub tenants: Vec<(String, f64)>,
    /// Wake-up: the tenant's ops/s before idling, and second by second after waking.
    pub before: f64,
    pub after: Vec<(f64, f64)>,
    /// Wake-up: its major faults a second, by report after waking (empty where the
    /// workload does not count them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults_after: Vec<(f64, f64)>,
    pub health: String,
    pub tierd_cpu_percent: f64,
    /// Of it, moving pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving_cpu_percent: Option<f64>,
    #[serde(default)]
    pub tracker_cpu_per_8gib: Option<f64>,
    /// The tier's read p99 through the run, as health judged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_tail: Option<crate::scenario::TierTail>,
    /// Tenants that failed before the run was over, with how ("sleepy: exit code 101").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

/// Reads a point's figures off one run.
pub fn sample(p: &Point, r: &Run) -> Sample {
    let mut s = Sample {
        throughput: 0.0,
        p99_us: 0.0,
        tenants: Vec::new(),
        before: 0.0,
        after: Vec::new(),
        faults_after: Vec::new(),
        health: r.health.clone(),
        tierd_cpu_percent: r.tierd_cpu_percent,
        moving_cpu_percent: r.moving_cpu_percent,
        tracker_cpu_per_8gib: r.tracker_cpu_per_8gib,
        tier_tail: r.tier_tail,
        failed: r.tenants.iter().filter_map(|t| Some(format!("{}: {}", t.name, t.failed.as_ref()?))).collect(),
    };
    match &p.measure {
        Measure::Steady { from, to } => {
            s.tenants = p.measured.iter().map(|n| (n.clone(), r.tenant(n).ops(*from, *to))).collect();
            s.throughput = s.tenants.iter().map(|t| t.1).sum();
            s.p99_us = p.measured.iter().map(|n| r.tenant(n).p99(*from, *to)).sum::<f64>() / p.measured.len() as f64;
        }
        Measure::WakeUp { tenant, secs, base_from, base_to } => {
            let t = r.tenant(tenant);
            let idle_end = t.reports.iter().filter(|x| x.phase == "idle").map(|x| x.t).fold(0.0, f64::max);
            s.before = t.ops(*base_from, *base_to);
            let woken = |x: &Report| x.phase == "active" && x.t > idle_end && x.t <= idle_end + secs;
            s.after = t.reports.iter().filter(|x| woken(x)).map(|x| (x.t - idle_end, x.ops_per_sec)).collect();
            s.faults_after = t
                .reports
                .windows(2)
                .filter(|w| woken(&w[1]))
                .filter_map(|w| Some((w[1].t - idle_end, w[1].major_faults? as f64 / (w[1].t - w[0].t).max(1e-3))))
                .collect();
            s.throughput = t.ops(idle_end, idle_end + secs);
            s.p99_us = t.p99(idle_end, idle_end + secs);
            s.tenants = vec![(tenant.clone(), s.throughput)];
        }
    }
    s
}

/// Median and range.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(v: &[f64]) -> Spread {
        Spread {
            median: median(v),
            min: v.iter().copied().fold(f64::INFINITY, f64::min).min(median(v)),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(median(v)),
        }
    }
}

/// One mode at one point, over its repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModeResult {
    pub mode: Mode,
    pub reps: usize,
    /// Median of the measured tenants' summed ops/s.
    pub throughput: f64,
    /// Against the median `dram` throughput of the same point.
    pub relative_throughput: f64,
    pub relative_spread: Spread,
    pub p99_us: f64,
    pub p99_latency_ratio: f64,
    /// Per measured tenant: median throughput relative to the same tenant under `dram`.
    pub tenants: Vec<(String, f64)>,
    /// Wake-up: seconds until back to 95% of the `dram` throughput before idling (of
    /// the same round's `dram` repetition where each has one), median over
    /// repetitions (a repetition that never got there counts as never).
    pub recovery_secs: Option<f64>,
    pub recovery_each: Vec<Option<f64>>,
    /// Wake-up: seconds until back to 95% of the rate it settles at later in the same
    /// repetition ([`settled_rate`]), median over repetitions: how long the read-back
    /// takes, apart from any lasting gap to `dram`.
    #[serde(default)]
    pub settle_secs: Option<f64>,
    #[serde(default)]
    pub settle_each: Vec<Option<f64>>,
    /// Wake-up: that settled rate against `dram`'s before idling (median).
    #[serde(default)]
    pub settled_relative: Option<f64>,
    /// Wake-up: seconds until its hot set is back in DRAM ([`resident_secs`]), median
    /// over repetitions: the read-back itself, apart from whatever slows the tenant once
    /// its pages are back (its throughput lagged that by up to 28 s, in swap as in tierd).
    #[serde(default)]
    pub resident_secs: Option<f64>,
    #[serde(default)]
    pub resident_each: Vec<Option<f64>>,
    /// Wake-up: median relative throughput by second after waking.
    pub recovery_curve: Vec<(f64, f64)>,
    /// tierd's active-memory health colour near the end of each repetition.
    pub health: Vec<String>,
    pub tierd_cpu_percent: f64,
    /// Of it, moving pages (median of the repetitions that say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving_cpu_percent: Option<f64>,
    /// The tracker's CPU, % of one core per 8 GiB tracked (median; the budget is 1%).
    #[serde(default)]
    pub tracker_cpu_per_8gib: Option<f64>,
    /// The tier's read p99 (µs): the repetitions' medians through their runs, where
    /// tierd timed enough reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_read_p99_us: Option<Spread>,
    pub samples: Vec<Sample>,
}

/// One point of one scenario, every mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PointResult {
    /// `scenario` or `scenario/point`.
    pub name: String,
    pub scenario: String,
    pub point: String,
    pub description: String,
    pub tenant_memory_bytes: u64,
    /// The measured tenants' hot sets.
    pub measured_hot_bytes: u64,
    pub dram_budget_bytes: u64,
    pub slow_tier: Option<Throttle>,
    /// `dram` itself is CPU-bound here: more tenants busy while measured than CPUs, and
    /// some not measured, so a neighbour's CPU (not memory) sets the reference.
    #[serde(default)]
    pub reference_cpu_bound: bool,
    pub modes: Vec<ModeResult>,
    /// The run that measured this point (results of several runs can share a file).
    #[serde(default)]
    pub taken: Option<RunInfo>,
}

impl PointResult {
    pub fn mode(&self, m: Mode) -> Option<&ModeResult> {
        self.modes.iter().find(|r| r.mode == m)
    }
}

/// Results that came from the simulator, not from runs on this machine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Simulated {
    /// Seeds per point and mode (the `reps` of a simulated run).
    pub seeds: usize,
    /// Wall time the whole simulation took here.
    pub wall_secs: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// The latest run that wrote the file.
    pub run: RunInfo,
    /// Set when the simulator wrote these results (`tierd-bench sim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
    pub reps: usize,
    pub scale: f64,
    pub tier: String,
    pub results: Vec<PointResult>,
}

impl Results {
    /// Puts a point's result in, replacing an earlier one of the same name in place.
    pub fn put(&mut self, mut p: PointResult) {
        p.taken.get_or_insert_with(|| self.run.clone());
        match self.results.iter_mut().find(|x| x.name == p.name) {
            Some(old) => *old = p,
            None => self.results.push(p),
        }
        self.in_catalogue_order();
    }

    /// Orders the points as the catalogue lists them, scenarios and then the points of
    /// each, so that a point added by a later run reads in its place in the report
    /// (login-storm's 5 tenants, added last, came after its 10). Points the catalogue
    /// no longer has go after the others of their scenario, in the order they were.
    fn in_catalogue_order(&mut self) {
        let cat = catalogue(self.scale);
        self.results.sort_by_cached_key(|p| {
            let sc = cat.iter().position(|s| s.name == p.scenario);
            let point = sc.and_then(|i| cat[i].points.iter().position(|q| q.label == p.point));
            (sc.unwrap_or(usize::MAX), point.unwrap_or(usize::MAX))
        });
    }

    /// The results already in `out`, to add to, or none (or an error if they cannot be
    /// added to: unreadable, or taken at another scale).
    pub fn existing(out: &Path, scale: f64) -> anyhow::Result<Option<Results>> {
        let file = out.join("results.json");
        let Ok(text) = std::fs::read_to_string(&file) else { return Ok(None) };
        let mut r: Results = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} cannot be read ({e}); move it away or give --fresh", file.display()))?;
        if r.scale != scale {
            anyhow::bail!(
                "{} holds results at --scale {}, not {scale}; use another --out or --fresh",
                file.display(),
                r.scale
            );
        }
        // Points written before points recorded their own run belong to the file's run.
        let run = r.run.clone();
        for p in &mut r.results {
            p.taken.get_or_insert_with(|| run.clone());
        }
        r.in_catalogue_order();
        Ok(Some(r))
    }
}

/// What `tierd-bench run` was asked to do.
pub struct Plan {
    /// Scenario or `SCENARIO/POINT` names; none for every scenario (or, with `files`,
    /// every scenario of the files).
    pub scenarios: Vec<String>,
    /// Scenario files of the user's (`--scenario FILE.toml`); one named like a shipped
    /// scenario takes its place.
    pub files: Vec<std::path::PathBuf>,
    pub modes: Vec<Mode>,
    pub reps: usize,
    pub scale: f64,
    /// Start a new results file instead of adding to the one in the output directory.
    pub fresh: bool,
    /// For the simulator (which has modes the real suite has not).
    pub simulated: bool,
}

/// The chosen scenarios, checked: names known, memory within bounds.
pub fn choose(plan: &Plan) -> anyhow::Result<Vec<Scenario>> {
    if plan.reps == 0 {
        anyhow::bail!("--reps must be at least 1");
    }
    if !(plan.scale > 0.0 && plan.scale <= 4.0) {
        anyhow::bail!("--scale {} must be above 0 and at most 4", plan.scale);
    }
    if plan.modes.is_empty() {
        anyhow::bail!("--modes names no mode");
    }
    if plan.modes.contains(&Mode::MemoryMode) && !plan.simulated {
        anyhow::bail!("memory-mode exists only in the simulator: run it with `tierd-bench sim`");
    }
    if !plan.modes.contains(&Mode::Dram) {
        // Without it every mode would be scored against itself (a relative of 1.0).
        anyhow::bail!("--modes must include dram: every figure is relative to dram in the same run");
    }
    select(plan)
}

/// The scenarios and points a plan names (shipped and its files'), checked against
/// the memory bound; modes and repetitions are not looked at.
pub fn select(plan: &Plan) -> anyhow::Result<Vec<Scenario>> {
    if !(plan.scale > 0.0 && plan.scale <= 4.0) {
        anyhow::bail!("--scale {} must be above 0 and at most 4", plan.scale);
    }
    let mut all = catalogue(plan.scale);
    // The property check's random hosts, by name (`random-hosts/host-07`), to look into one.
    if plan.scenarios.iter().any(|s| s.starts_with("random-hosts")) {
        all.push(crate::random_hosts::hosts(crate::random_hosts::HOSTS));
    }
    let mut own = Vec::new();
    for f in &plan.files {
        let sc = crate::catalogue::load(f, plan.scale)?;
        own.push(sc.name.clone());
        match all.iter_mut().find(|c| c.name == sc.name) {
            Some(c) => *c = sc,
            None => all.push(sc),
        }
    }
    // `NAME` picks a scenario, `NAME/POINT` one of its points; with files and no names,
    // the files' scenarios.
    let wanted = |c: &Scenario, p: &Point| {
        (plan.scenarios.is_empty() && (own.is_empty() || own.contains(&c.name)))
            || plan.scenarios.iter().any(|s| match s.split_once('/') {
                Some((n, pt)) => n == c.name && pt == p.label,
                None => *s == c.name,
            })
    };
    for s in &plan.scenarios {
        if !all
            .iter()
            .any(|c| c.points.iter().any(|p| wanted(c, p) && (*s == c.name || s.starts_with(&format!("{}/", c.name)))))
        {
            let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
            anyhow::bail!("unknown scenario or point `{s}`: {} (or NAME/POINT, e.g. wake-up/slow)", names.join(", "));
        }
    }
    let chosen: Vec<Scenario> = all
        .into_iter()
        .map(|mut c| {
            let points = std::mem::take(&mut c.points);
            c.points = points.into_iter().filter(|p| wanted(&c, p)).collect();
            c
        })
        .filter(|c| !c.points.is_empty())
        .collect();
    for c in &chosen {
        for p in &c.points {
            if p.tenant_memory() > MAX_TENANT_MEMORY {
                anyhow::bail!(
                    "{}/{} would use {} of tenant memory at --scale {}; the most allowed is {}",
                    c.name,
                    p.label,
                    tierd_core::size::human(p.tenant_memory()),
                    plan.scale,
                    tierd_core::size::human(MAX_TENANT_MEMORY)
                );
            }
        }
    }
    Ok(chosen)
}

/// Estimated wall time of a plan in seconds (run length plus start-up and fill).
pub fn estimate_secs(chosen: &[Scenario], plan: &Plan) -> u64 {
    chosen
        .iter()
        .flat_map(|c| &c.points)
        .map(|p| plan.modes.iter().filter(|m| p.runs_in(**m)).count() as u64 * (p.secs + 15))
        .sum::<u64>()
        * plan.reps as u64
}

/// Runs the plan, adding to the results in `out`; `written` gets them after each point
/// (the caller writes them there: an interrupted run keeps what it measured).
pub fn run_plan(
    out: &Path,
    plan: &Plan,
    mut written: impl FnMut(&Results) -> anyhow::Result<()>,
) -> anyhow::Result<Results> {
    let chosen = choose(plan)?;
    let total = estimate_secs(&chosen, plan);
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {percent}% eta {eta} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let earlier = if plan.fresh { None } else { Results::existing(out, plan.scale)? };
    let mut res = Results {
        run: RunInfo::collect(),
        simulated: None,
        reps: plan.reps,
        scale: plan.scale,
        tier: "the tierd default: a swap file behind a loop device on the host's disk".into(),
        results: earlier.map(|r| r.results).unwrap_or_default(),
    };
    for sc in &chosen {
        for p in &sc.points {
            let modes: Vec<Mode> = plan.modes.iter().copied().filter(|m| p.runs_in(*m)).collect();
            let mut samples: Vec<(Mode, Vec<Sample>)> = modes.iter().map(|m| (*m, Vec::new())).collect();
            for rep in 1..=plan.reps {
                for (mode, got) in samples.iter_mut() {
                    if interrupted() {
                        anyhow::bail!("interrupted; what finished is in {}", out.display());
                    }
                    let what = format!("{}/{} {} rep {rep}/{}", sc.name, p.label, mode.name(), plan.reps);
                    if bar.is_hidden() {
                        // No terminal (a log file): a line per run instead of the bar.
                        eprintln!("[{:>3.0}%] {what}", bar.position() as f64 * 100.0 / total.max(1) as f64);
                    }
                    crate::harness::label_next_run(&format!("{}-{}-{}-{rep}", sc.name, p.label, mode.name()));
                    bar.set_message(what);
                    let r = run(*mode, p.budget, p.tier_ratio(), &p.tenants, p.secs, p.slow)?;
                    got.push(sample(p, &r));
                    bar.inc(p.secs + 15);
                }
            }
            res.put(aggregate(p, sc, &samples));
            written(&res)?;
        }
    }
    bar.finish_and_clear();
    Ok(res)
}

/// Results built by hand, for the tests of what reads them (report, goals).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use tierd_core::size::GIB;

    pub(crate) fn mode_result(mode: Mode, rel: f64, tenants: &[(&str, f64)]) -> ModeResult {
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
            resident_secs: None,
            resident_each: Vec::new(),
            health: vec!["green".into()],
            tierd_cpu_percent: 1.0,
            moving_cpu_percent: None,
            tracker_cpu_per_8gib: Some(0.5),
            tier_read_p99_us: None,
            samples: Vec::new(),
        }
    }

    pub(crate) fn pt(scenario: &str, point: &str, modes: Vec<ModeResult>) -> PointResult {
        PointResult {
            name: if point.is_empty() { scenario.into() } else { format!("{scenario}/{point}") },
            scenario: scenario.into(),
            point: point.into(),
            description: "d".into(),
            tenant_memory_bytes: 2 * GIB,
            measured_hot_bytes: GIB,
            dram_budget_bytes: GIB,
            slow_tier: None,
            reference_cpu_bound: false,
            modes,
            taken: None,
        }
    }

    pub(crate) fn results(results: Vec<PointResult>) -> Results {
        Results {
            run: crate::machine::RunInfo::collect(),
            simulated: None,
            reps: 3,
            scale: 1.0,
            tier: "t".into(),
            results,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::TenantDef;
    use tierd_core::size::{GIB, MIB};

    #[test]
    fn a_reference_is_cpu_bound_when_unmeasured_neighbours_take_the_cpus() {
        let point = |name: &str| catalogue(1.0).into_iter().find(|s| s.name == name).unwrap().points.remove(0);
        let noisy = point("noisy-neighbour");
        assert!(noisy.reference_cpu_bound(2), "3 steady tenants and a sweeping one on 2 CPUs");
        assert!(!noisy.reference_cpu_bound(4));
        assert!(!point("login-storm").reference_cpu_bound(2), "every busy tenant is measured");
        let t = &noisy.tenants[3];
        assert!(!t.busy_at(10.0) && t.busy_at(30.0) && !t.busy_at(90.0), "idle 25 s, sweeps 55 s, then gone");
    }

    /// `n` tenants `prefix1..` of `size` MiB with `hot` MiB hot sets, active for `secs`.
    fn steady_tenants(prefix: &str, n: usize, size: u64, hot: u64, secs: u64) -> Vec<TenantDef> {
        (1..=n).map(|i| TenantDef::new(format!("{prefix}{i}"), size, hot, format!("active:{secs}s"))).collect()
    }

    #[test]
    fn every_scenario_fits_the_memory_bound_and_the_issue_names() {
        let plan = Plan {
            scenarios: vec![],
            files: vec![],
            modes: Mode::ALL[..4].to_vec(),
            reps: 3,
            scale: 1.0,
            fresh: false,
            simulated: false,
        };
        let all = choose(&plan).unwrap();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        for n in [
            "density-2x",
            "active-sweep",
            "wake-up",
            "login-storm",
            "overcommit-sweep",
            "noisy-neighbour",
            "contention",
            "redis",
            "postgres",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        let bad = Plan { scale: 4.0, ..plan };
        assert!(choose(&bad).unwrap_err().to_string().contains("tenant memory"));
        let unknown = Plan {
            scenarios: vec!["redis-cluster".into()],
            files: vec![],
            modes: Mode::ALL[..4].to_vec(),
            reps: 1,
            scale: 1.0,
            fresh: false,
            simulated: false,
        };
        assert!(choose(&unknown).unwrap_err().to_string().contains("unknown scenario"));
        let one = Plan { scenarios: vec!["wake-up/slow".into(), "contention".into()], ..unknown };
        let c = choose(&one).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].points.iter().map(|p| p.label.as_str()).collect::<Vec<_>>(), ["slow"]);
        assert_eq!(c[1].points.len(), 3);
        let bad_point = Plan { scenarios: vec!["wake-up/medium".into()], ..one };
        assert!(choose(&bad_point).is_err());
        let no_dram = Plan { scenarios: vec!["contention".into()], modes: vec![Mode::Swap, Mode::Tierd], ..bad_point };
        assert!(choose(&no_dram).unwrap_err().to_string().contains("must include dram"));
    }

    #[test]
    fn every_point_fits_dram_plus_its_tier() {
        // tierd refuses a tenant beyond DRAM + tier: login-storm's 8 tenants failed
        // to start on the default 2x tier.
        for sc in catalogue(1.0) {
            for p in &sc.points {
                let room = p.budget as f64 * (1.0 + p.tier_ratio());
                assert!(p.tenant_memory() as f64 <= room, "{}/{} does not fit", sc.name, p.label);
                assert!(p.tier_ratio() >= 2.0);
            }
        }
        let storm = catalogue(1.0).into_iter().find(|s| s.name == "login-storm").unwrap();
        assert_eq!(storm.points.last().unwrap().tier_ratio(), 6.0, "12 tenants of 512 MiB on 1 GiB");
    }

    #[test]
    fn the_scale_shrinks_memory_and_the_slow_points_are_throttled() {
        let half = catalogue(0.5);
        let d = &half.iter().find(|s| s.name == "density-2x").unwrap().points[1];
        assert_eq!(d.budget, 512 * MIB);
        assert_eq!(d.tenant_memory(), 4 * 256 * MIB, "2x the budget");
        let o = catalogue(1.0).into_iter().find(|s| s.name == "overcommit-sweep").unwrap();
        let ratios: Vec<f64> = o.points.iter().map(|p| p.tenant_memory() as f64 / p.budget as f64).collect();
        assert_eq!(ratios.iter().map(|r| (r * 10.0).round() as u64).collect::<Vec<_>>(), [14, 20, 34, 14, 20, 34]);
        assert_eq!(o.points.iter().filter(|p| p.slow.is_some()).count(), 3);
    }

    #[test]
    fn login_storm_tenants_take_turns() {
        // Of 4 tenants in a 40 s cycle, each is 10 s further along than the one before.
        assert_eq!(staggered_phases(0, 4, 20, 60), "active:20s,idle:20s,active:20s");
        assert_eq!(staggered_phases(1, 4, 20, 60), "idle:10s,active:20s,idle:20s,active:10s");
        assert_eq!(staggered_phases(2, 4, 20, 60), "idle:20s,active:20s,idle:20s");
        assert_eq!(staggered_phases(3, 4, 20, 60), "active:10s,idle:20s,active:20s,idle:10s");
        // Half of them are active at any second.
        for t in 0..60 {
            let active = (0..4)
                .filter(|&i| {
                    let ph = crate::workload::parse_phases(&staggered_phases(i, 4, 20, 60)).unwrap();
                    let mut at = 0.0;
                    ph.iter().any(|p| {
                        let hit = (at..at + p.duration.as_secs_f64()).contains(&(t as f64 + 0.5));
                        at += p.duration.as_secs_f64();
                        hit && p.kind == crate::workload::PhaseKind::Active
                    })
                })
                .count();
            assert_eq!(active, 2, "at {t} s");
        }
    }

    #[test]
    fn a_run_adds_to_the_results_in_its_directory_and_replaces_what_it_reran() {
        let dir = std::env::temp_dir().join(format!("tierd-suite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(Results::existing(&dir, 1.0).unwrap().is_none());
        let sc = Scenario {
            name: "x".into(),
            description: String::new(),
            points: vec![
                Point::steady("a", GIB, 10, steady_tenants("t", 1, 512, 128, 10), 0.0, 10.0),
                Point::steady("b", GIB, 10, steady_tenants("t", 1, 512, 128, 10), 0.0, 10.0),
            ],
        };
        let mut first = fixtures::results(Vec::new());
        for p in &sc.points {
            first.put(aggregate(p, &sc, &[(Mode::Dram, vec![steady_sample(&[100.0], 1.0)])]));
        }
        std::fs::write(dir.join("results.json"), serde_json::to_string(&first).unwrap()).unwrap();
        let mut again = Results::existing(&dir, 1.0).unwrap().expect("read back");
        again.run.command = "second".into();
        again.put(aggregate(&sc.points[1], &sc, &[(Mode::Dram, vec![steady_sample(&[50.0], 1.0)])]));
        let names: Vec<&str> = again.results.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x/a", "x/b"], "replaced in place");
        assert_eq!(again.results[1].modes[0].throughput, 50.0);
        assert_ne!(again.results[0].taken.as_ref().unwrap().command, "second", "x/a keeps its own run");
        assert_eq!(again.results[1].taken.as_ref().unwrap().command, "second");
        assert!(Results::existing(&dir, 0.5).unwrap_err().to_string().contains("--scale"));
        std::fs::write(dir.join("results.json"), "{").unwrap();
        assert!(Results::existing(&dir, 1.0).unwrap_err().to_string().contains("--fresh"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn points_read_in_catalogue_order_whatever_order_they_were_run_in() {
        let cat = catalogue(1.0);
        let mut r = fixtures::results(Vec::new());
        for (scenario, label) in [("login-storm", "10 tenants"), ("density-2x", "2x"), ("login-storm", "5 tenants")] {
            let sc = cat.iter().find(|s| s.name == scenario).unwrap();
            let p = sc.points.iter().find(|p| p.label == label).unwrap();
            r.put(aggregate(p, sc, &[(Mode::Dram, vec![steady_sample(&[100.0], 1.0)])]));
        }
        let mut gone = r.results[0].clone();
        gone.scenario = "login-storm".into();
        gone.name = "login-storm/3 tenants".into();
        gone.point = "3 tenants".into();
        r.put(gone);
        let names: Vec<&str> = r.results.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["density-2x/2x", "login-storm/5 tenants", "login-storm/10 tenants", "login-storm/3 tenants"],
            "catalogue order; a point no longer in it last in its scenario"
        );
    }

    fn steady_sample(tp: &[f64], p99: f64) -> Sample {
        Sample {
            throughput: tp.iter().sum(),
            p99_us: p99,
            tenants: tp.iter().enumerate().map(|(i, v)| (format!("t{}", i + 1), *v)).collect(),
            before: 0.0,
            after: Vec::new(),
            faults_after: Vec::new(),
            health: "green".into(),
            tierd_cpu_percent: 1.0,
            moving_cpu_percent: None,
            tracker_cpu_per_8gib: Some(0.5),
            tier_tail: None,
            failed: Vec::new(),
        }
    }

    #[test]
    fn modes_are_scored_by_median_against_the_median_dram_run() {
        let sc = Scenario {
            name: "x".into(),
            description: String::new(),
            points: vec![Point::steady("p", GIB, 10, steady_tenants("t", 2, 512, 128, 10), 0.0, 10.0)],
        };
        let p = &sc.points[0];
        let dram = vec![
            steady_sample(&[100.0, 100.0], 10.0),
            steady_sample(&[90.0, 110.0], 10.0),
            steady_sample(&[120.0, 80.0], 30.0),
        ];
        let mut swap = vec![
            steady_sample(&[50.0, 100.0], 20.0),
            steady_sample(&[100.0, 90.0], 20.0),
            steady_sample(&[95.0, 95.0], 40.0),
        ];
        swap[0].tracker_cpu_per_8gib = Some(3.0);
        swap[1].tracker_cpu_per_8gib = None;
        swap[0].tier_tail = crate::scenario::TierTail::of(&[400.0, 3_000.0, 9_000.0]);
        swap[2].tier_tail = crate::scenario::TierTail::of(&[1_000.0]);
        let r = aggregate(p, &sc, &[(Mode::Dram, dram), (Mode::Swap, swap)]);
        assert_eq!(r.name, "x/p", "a point is named after its scenario and label");
        let s = r.mode(Mode::Swap).unwrap();
        assert_eq!(s.throughput, 190.0);
        assert!((s.relative_throughput - 0.95).abs() < 1e-9);
        assert_eq!((s.relative_spread.min, s.relative_spread.max), (0.75, 0.95));
        assert_eq!(s.p99_latency_ratio, 2.0);
        assert_eq!(s.tenants[0], ("t1".into(), 95.0 / 100.0));
        assert_eq!(r.mode(Mode::Dram).unwrap().relative_throughput, 1.0);
        assert_eq!(s.tracker_cpu_per_8gib, Some(1.75), "the median of the repetitions that tracked");
        let tail = s.tier_read_p99_us.expect("two repetitions timed the tier");
        assert_eq!((tail.median, tail.min, tail.max), (2_000.0, 1_000.0, 3_000.0), "their runs' medians");
        assert_eq!(r.mode(Mode::Dram).unwrap().tier_read_p99_us, None, "dram never read the tier");
    }

    #[test]
    fn wake_up_recovery_is_timed_against_dram_before_idling() {
        let sc = catalogue(1.0).into_iter().find(|s| s.name == "wake-up").unwrap();
        let p = &sc.points[0];
        let wake = |before: f64, curve: &[f64]| Sample {
            before,
            after: curve.iter().enumerate().map(|(i, v)| ((i + 1) as f64, *v)).collect(),
            ..steady_sample(&[curve.iter().sum::<f64>() / curve.len() as f64], 1.0)
        };
        let dram = vec![wake(100.0, &[100.0; 6]); 3];
        // Back at 5 s, at 3 s, and never.
        let tierd = vec![
            wake(100.0, &[10.0, 20.0, 50.0, 90.0, 96.0, 96.0, 96.0]),
            wake(100.0, &[10.0, 50.0, 96.0, 96.0, 96.0, 96.0]),
            wake(100.0, &[10.0, 10.0, 10.0, 10.0, 10.0, 10.0]),
        ];
        let r = aggregate(p, &sc, &[(Mode::Dram, dram), (Mode::Tierd, tierd.clone())]);
        let t = r.mode(Mode::Tierd).unwrap();
        assert_eq!(t.recovery_each, vec![Some(5.0), Some(3.0), None]);
        assert_eq!(t.recovery_secs, Some(5.0), "the median; never counts as the longest");
        assert_eq!(t.recovery_curve[0], (1.0, 0.1));
        // Where each settles (the median of its window's second half: 96, 96, 10), and
        // when it got within 95% of that: 4 s, 3 s, and 1 s for the one that stayed low.
        assert_eq!(t.settle_each, vec![Some(4.0), Some(3.0), Some(1.0)]);
        assert_eq!(t.settle_secs, Some(3.0));
        assert_eq!(t.settled_relative, Some(0.96));
        let never = aggregate(p, &sc, &[(Mode::Tierd, vec![tierd[2].clone(), tierd[2].clone(), tierd[0].clone()])]);
        assert_eq!(never.mode(Mode::Tierd).unwrap().recovery_secs, None);
    }

    #[test]
    fn a_hot_set_is_back_when_its_major_faults_stay_below_a_thousandth_of_it_a_second() {
        // 1 GiB hot: the line is 262 faults a second.
        let faults = |v: &[f64]| v.iter().enumerate().map(|(i, f)| ((i + 1) as f64, *f)).collect::<Vec<_>>();
        assert_eq!(resident_secs(&faults(&[9000.0, 4000.0, 300.0, 30.0, 20.0]), GIB), Some(3.0));
        assert_eq!(resident_secs(&faults(&[30.0, 500.0, 30.0, 20.0]), GIB), Some(2.0), "a late burst counts");
        assert_eq!(resident_secs(&faults(&[10.0, 0.0]), GIB), Some(0.0), "nothing to read back");
        assert_eq!(resident_secs(&faults(&[9000.0, 300.0]), GIB), None, "still faulting at the end");
        assert_eq!(resident_secs(&[], GIB), None, "no counts, no figure");
    }

    #[test]
    fn a_woken_tenants_major_faults_are_read_off_its_reports_a_second_from_waking() {
        let sc = catalogue(1.0).into_iter().find(|s| s.name == "wake-up").unwrap();
        let p = &sc.points[0];
        let Measure::WakeUp { tenant, .. } = &p.measure else { panic!("a wake-up point") };
        let report = |t: f64, phase: &str, faults: u64| Report {
            t,
            unix: t,
            phase: phase.into(),
            ops_per_sec: 1.0,
            p50_us: 1.0,
            p99_us: 1.0,
            hot_huge: None,
            major_faults: Some(faults),
        };
        let reports =
            vec![report(1.0, "idle", 0), report(2.0, "idle", 0), report(3.0, "active", 900), report(3.5, "active", 50)];
        let run = Run {
            mode: Mode::Tierd,
            tenants: vec![crate::scenario::TenantRun { name: tenant.clone(), reports, failed: None }],
            tierd_cpu_percent: 0.0,
            moving_cpu_percent: None,
            events: 0,
            health: "green".into(),
            tracker_cpu_per_8gib: None,
            tier_tail: None,
        };
        let s = sample(p, &run);
        assert_eq!(s.faults_after, vec![(1.0, 900.0), (1.5, 100.0)], "per second of each report's window");
    }

    #[test]
    fn wake_up_residency_is_the_median_over_repetitions_and_absent_without_fault_counts() {
        let sc = catalogue(1.0).into_iter().find(|s| s.name == "wake-up").unwrap();
        let p = &sc.points[0];
        let wake = |faults: &[f64]| Sample {
            before: 100.0,
            after: (1..=faults.len()).map(|i| (i as f64, 100.0)).collect(),
            faults_after: faults.iter().enumerate().map(|(i, f)| ((i + 1) as f64, *f)).collect(),
            ..steady_sample(&[100.0], 1.0)
        };
        let tierd = vec![wake(&[1e5, 1e5, 1e5, 0.0]), wake(&[1e5, 0.0, 0.0, 0.0]), wake(&[1e5; 4])];
        let r = aggregate(p, &sc, &[(Mode::Tierd, tierd)]);
        let t = r.mode(Mode::Tierd).unwrap();
        assert_eq!(t.resident_each, vec![Some(3.0), Some(1.0), None]);
        assert_eq!(t.resident_secs, Some(3.0), "never counts as the longest");
        let uncounted = aggregate(p, &sc, &[(Mode::Tierd, vec![wake(&[]); 3])]);
        assert!(uncounted.mode(Mode::Tierd).unwrap().resident_each.is_empty());
    }

    #[test]
    fn each_wake_up_is_timed_against_the_reference_of_its_own_round() {
        let sc = catalogue(1.0).into_iter().find(|s| s.name == "wake-up").unwrap();
        let p = &sc.points[0];
        let wake = |before: f64, level: f64| Sample {
            before,
            after: (1..=6).map(|i| (i as f64, if i < 3 { level / 10.0 } else { level })).collect(),
            ..steady_sample(&[level], 1.0)
        };
        // The third round ran on a slower machine: its dram did 90, and tierd got back to 90.
        let dram = vec![wake(100.0, 100.0), wake(104.0, 104.0), wake(90.0, 90.0)];
        let tierd = vec![wake(100.0, 100.0), wake(104.0, 104.0), wake(90.0, 90.0)];
        let r = aggregate(p, &sc, &[(Mode::Dram, dram.clone()), (Mode::Tierd, tierd.clone())]);
        assert_eq!(r.mode(Mode::Tierd).unwrap().recovery_each, vec![Some(3.0); 3], "90 is 100% of its round");
        // Against the median (100), 90 never gets to 95%: so it is read without rounds to pair.
        let unpaired = aggregate(p, &sc, &[(Mode::Dram, dram[..2].to_vec()), (Mode::Tierd, tierd)]);
        assert_eq!(unpaired.mode(Mode::Tierd).unwrap().recovery_each[2], None);
        // Pairing does not let a tenant that stays low pass: 50 of its round's 100 is never.
        let low = aggregate(p, &sc, &[(Mode::Dram, dram[..1].to_vec()), (Mode::Tierd, vec![wake(100.0, 50.0)])]);
        assert_eq!(low.mode(Mode::Tierd).unwrap().recovery_each, vec![None]);
    }
}
