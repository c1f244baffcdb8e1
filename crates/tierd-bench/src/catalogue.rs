//! The scenario catalogue as data: one TOML file per scenario, read by the real suite
//! (`tierd-bench run`) and the simulator (`tierd-bench sim`) alike.
//!
//! The shipped files (`bench/scenarios/*.toml`) are embedded in the binary; an operator
//! passes a file of their own with `--scenario FILE.toml` to ask "what if" about their
//! own mix. Every size scales with `--scale` (rounded to whole MiB, at least 1 MiB),
//! and so do sizes written in braces in a description (`{512M}`).

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use tierd_core::ByteSize;
use tierd_core::size::MIB;

use crate::harness::Throttle;
use crate::scenario::{Mode, TenantDef};
use crate::workload::{Pattern, parse_phases};

/// Most tenant memory a single point may use (DESIGN.md: the machines are shared).
pub const MAX_TENANT_MEMORY: u64 = 8 * tierd_core::size::GIB;

/// What a point measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Measure {
    /// The measured tenants' throughput over `[from, to)` seconds of their own clock.
    Steady { from: f64, to: f64 },
    /// One tenant's recovery after its idle phase, over `secs` after it wakes, against
    /// its throughput over `[base_from, base_to)` before idling (under `dram`).
    WakeUp { tenant: String, secs: f64, base_from: f64, base_to: f64 },
}

/// One setting of a scenario.
#[derive(Debug, Clone)]
pub struct Point {
    pub label: String,
    pub budget: u64,
    pub secs: u64,
    pub tenants: Vec<TenantDef>,
    pub measured: Vec<String>,
    pub measure: Measure,
    /// The tier throttled to a hard-disk-like device.
    pub slow: Option<Throttle>,
    /// Only these modes (e.g. the half-density point, where everything fits in DRAM).
    pub only: Option<Vec<Mode>>,
}

impl Point {
    /// Whether `dram` is CPU-bound at this point on `cpus` CPUs: see
    /// `PointResult::reference_cpu_bound` in the suite.
    pub fn reference_cpu_bound(&self, cpus: usize) -> bool {
        let Measure::Steady { from, to } = self.measure else { return false };
        let busy: Vec<&TenantDef> = self.tenants.iter().filter(|t| t.busy_at((from + to) / 2.0)).collect();
        busy.len() > cpus && busy.iter().any(|t| !self.measured.contains(&t.name))
    }

    pub fn steady(
        label: impl Into<String>,
        budget: u64,
        secs: u64,
        tenants: Vec<TenantDef>,
        from: f64,
        to: f64,
    ) -> Point {
        Point {
            label: label.into(),
            budget,
            secs,
            measured: tenants.iter().map(|t| t.name.clone()).collect(),
            tenants,
            measure: Measure::Steady { from, to },
            slow: None,
            only: None,
        }
    }

    pub(crate) fn runs_in(&self, mode: Mode) -> bool {
        self.only.as_ref().is_none_or(|m| m.contains(&mode))
    }

    pub(crate) fn tenant_memory(&self) -> u64 {
        self.tenants.iter().map(|t| t.size).sum()
    }

    /// The hot sets of the tenants the point measures, together.
    pub(crate) fn measured_hot(&self) -> u64 {
        self.tenants.iter().filter(|t| self.measured.contains(&t.name)).map(|t| t.hot).sum()
    }

    /// The tier's size as a multiple of the DRAM budget: 2 (tierd's default), or
    /// enough for every tenant where they are more than 3x DRAM (login-storm's 12
    /// tenants, overcommit-sweep's 3.4x), since tierd refuses tenants it cannot hold.
    pub fn tier_ratio(&self) -> f64 {
        (self.tenant_memory() as f64 / self.budget as f64).ceil().max(2.0)
    }
}

#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub points: Vec<Point>,
}

/// Login-storm phases for tenant `i` of `n`: turns of `on` seconds active and `on`
/// idle over `total` seconds, each tenant at its own place in the cycle so that half
/// of them are active at any time, from the start.
pub fn staggered_phases(i: usize, n: usize, on: u64, total: u64) -> String {
    let cycle = 2 * on;
    let mut pos = (cycle - cycle * i as u64 / n as u64) % cycle;
    let mut phases = Vec::new();
    let mut t = 0;
    while t < total {
        let (kind, left) = if pos < on { ("active", on - pos) } else { ("idle", cycle - pos) };
        let len = left.min(total - t);
        phases.push(format!("{kind}:{len}s"));
        t += len;
        pos = (pos + len) % cycle;
    }
    phases.join(",")
}

/// The shipped scenarios, in catalogue order.
pub const SHIPPED: [(&str, &str); 9] = [
    ("density-2x", include_str!("../../../bench/scenarios/density-2x.toml")),
    ("active-sweep", include_str!("../../../bench/scenarios/active-sweep.toml")),
    ("wake-up", include_str!("../../../bench/scenarios/wake-up.toml")),
    ("login-storm", include_str!("../../../bench/scenarios/login-storm.toml")),
    ("overcommit-sweep", include_str!("../../../bench/scenarios/overcommit-sweep.toml")),
    ("noisy-neighbour", include_str!("../../../bench/scenarios/noisy-neighbour.toml")),
    ("redis", include_str!("../../../bench/scenarios/redis.toml")),
    ("postgres", include_str!("../../../bench/scenarios/postgres.toml")),
    ("contention", include_str!("../../../bench/scenarios/contention.toml")),
];

/// Every shipped scenario, memory sizes multiplied by `scale`.
pub fn catalogue(scale: f64) -> Vec<Scenario> {
    SHIPPED
        .iter()
        .map(|(name, text)| parse(text, scale).unwrap_or_else(|e| panic!("shipped scenario {name}: {e:#}")))
        .collect()
}

/// A scenario file of the user's.
pub fn load(path: &Path, scale: f64) -> anyhow::Result<Scenario> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read scenario {}", path.display()))?;
    parse(&text, scale).with_context(|| format!("scenario {}", path.display()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    description: String,
    points: Vec<PointFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PointFile {
    label: String,
    /// DRAM for the tenants.
    budget: ByteSize,
    /// Run length, seconds from when the tenants start.
    secs: u64,
    measure: MeasureFile,
    /// Only these modes (e.g. a point where everything fits in DRAM).
    only: Option<Vec<Mode>>,
    /// The tier throttled to a hard-disk-like device from `after` seconds.
    slow: Option<SlowFile>,
    /// The tenants whose throughput counts (default: all).
    measured: Option<Vec<String>>,
    tenants: Vec<TenantFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum MeasureFile {
    Steady { from: f64, to: f64 },
    WakeUp { tenant: String, secs: f64, base_from: f64, base_to: f64 },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlowFile {
    after: u64,
    #[serde(default = "hard_disk_iops")]
    read_iops: u64,
    #[serde(default = "hard_disk_bps")]
    read_bytes_per_sec: u64,
}

fn hard_disk_iops() -> u64 {
    Throttle::hard_disk(0).read_iops
}

fn hard_disk_bps() -> u64 {
    Throttle::hard_disk(0).read_bytes_per_sec
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantFile {
    /// The name, or with `count` the prefix of `name1..nameN`.
    name: String,
    count: Option<usize>,
    /// Memory of a workload tenant (a server's follows from its data).
    size: Option<ByteSize>,
    /// The workload's hot set.
    hot: Option<ByteSize>,
    #[serde(default)]
    pattern: Option<Pattern>,
    phases: PhasesFile,
    shares: Option<u32>,
    reserve: Option<ByteSize>,
    #[serde(default)]
    app: AppFile,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PhasesFile {
    /// `active:30s,idle:1m,active:1m`.
    Fixed(String),
    /// Turns of `on` seconds active and `on` idle over `total`, each of `count` tenants
    /// at its own place in the cycle (login-storm).
    Staggered { staggered: Stagger },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stagger {
    on: u64,
    total: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum AppFile {
    #[default]
    Workload,
    Redis {
        data: ByteSize,
        hot_pct: u64,
    },
    Postgres {
        scale: u32,
    },
}

/// Scales a size to whole MiB, at least 1 MiB.
fn scaled(size: ByteSize, scale: f64) -> u64 {
    ((size.0 as f64 / MIB as f64 * scale).round() as u64).max(1)
}

/// Parses a scenario file's text at `scale`, checked as a whole.
pub fn parse(text: &str, scale: f64) -> anyhow::Result<Scenario> {
    let f: ScenarioFile = toml::from_str(text).context("not a valid scenario file")?;
    if f.name.is_empty() || f.name.contains('/') {
        bail!("scenario name `{}` must be non-empty and without `/`", f.name);
    }
    if f.points.is_empty() {
        bail!("scenario {} has no [[points]]", f.name);
    }
    let points = f
        .points
        .into_iter()
        .map(|p| {
            let label = p.label.clone();
            point(p, scale).with_context(|| format!("point `{label}`"))
        })
        .collect::<anyhow::Result<Vec<Point>>>()?;
    let mut labels: Vec<&str> = points.iter().map(|p| p.label.as_str()).collect();
    labels.sort_unstable();
    if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
        bail!("two points are labelled `{}`", w[0]);
    }
    Ok(Scenario { description: scale_description(&f.description, scale), name: f.name, points })
}

fn point(p: PointFile, scale: f64) -> anyhow::Result<Point> {
    if p.secs == 0 {
        bail!("secs must be above 0");
    }
    let mut tenants = Vec::new();
    for t in p.tenants {
        tenants.extend(tenant_defs(t, scale)?);
    }
    if tenants.is_empty() {
        bail!("no tenants");
    }
    let mut names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!("two tenants are named `{}`", w[0]);
    }
    let known = |n: &str| tenants.iter().any(|t| t.name == n);
    let measured = p.measured.unwrap_or_else(|| tenants.iter().map(|t| t.name.clone()).collect());
    if let Some(n) = measured.iter().find(|n| !known(n)) {
        bail!("measured tenant `{n}` is not one of the point's tenants");
    }
    let measure = match p.measure {
        MeasureFile::Steady { from, to } if from < to && to <= p.secs as f64 => Measure::Steady { from, to },
        MeasureFile::Steady { from, to } => bail!("steady measure [{from}, {to}) must lie within the {} s run", p.secs),
        MeasureFile::WakeUp { tenant, .. } if !known(&tenant) => bail!("wake-up tenant `{tenant}` is not in the point"),
        MeasureFile::WakeUp { tenant, secs, base_from, base_to } => {
            if base_from >= base_to || secs <= 0.0 {
                bail!("wake-up measure: base_from < base_to and secs > 0");
            }
            Measure::WakeUp { tenant, secs, base_from, base_to }
        }
    };
    if p.only.as_ref().is_some_and(|m| m.is_empty()) {
        bail!("`only` names no mode");
    }
    let budget = scaled(p.budget, scale) * MIB;
    let slow = p.slow.map(|s| Throttle {
        read_iops: s.read_iops,
        read_bytes_per_sec: s.read_bytes_per_sec,
        after_secs: s.after,
    });
    Ok(Point { label: p.label, budget, secs: p.secs, tenants, measured, measure, slow, only: p.only })
}

/// One tenant line, expanded to `count` tenants.
fn tenant_defs(t: TenantFile, scale: f64) -> anyhow::Result<Vec<TenantDef>> {
    let count = t.count.unwrap_or(1);
    if count == 0 {
        bail!("tenant `{}`: count must be at least 1", t.name);
    }
    let name = |i: usize| if t.count.is_some() { format!("{}{}", t.name, i + 1) } else { t.name.clone() };
    (0..count)
        .map(|i| {
            let phases = match &t.phases {
                PhasesFile::Fixed(s) => s.clone(),
                PhasesFile::Staggered { staggered } => {
                    if staggered.on == 0 || staggered.total == 0 {
                        bail!("tenant `{}`: staggered on and total must be above 0", t.name);
                    }
                    staggered_phases(i, count, staggered.on, staggered.total)
                }
            };
            parse_phases(&phases).with_context(|| format!("tenant `{}`", name(i)))?;
            let mut d = match t.app {
                AppFile::Workload => {
                    let (Some(size), Some(hot)) = (t.size, t.hot) else {
                        bail!("workload tenant `{}` needs size and hot", t.name)
                    };
                    if hot > size {
                        bail!("tenant `{}`: hot {hot} is larger than its size {size}", t.name);
                    }
                    TenantDef::new(name(i), scaled(size, scale), scaled(hot, scale), phases)
                }
                AppFile::Redis { data, hot_pct } => {
                    if !(1..=100).contains(&hot_pct) {
                        bail!("tenant `{}`: hot_pct must be 1 to 100", t.name);
                    }
                    TenantDef::redis(name(i), scaled(data, scale), hot_pct, phases)
                }
                AppFile::Postgres { scale: pg } => {
                    TenantDef::postgres(name(i), ((pg as f64 * scale).round() as u32).max(1), phases)
                }
            };
            if !matches!(t.app, AppFile::Workload) && (t.size.is_some() || t.hot.is_some()) {
                bail!("tenant `{}`: a server's size and hot set follow from its data; drop size and hot", t.name);
            }
            if let Some(p) = t.pattern {
                d.pattern = p;
            }
            if let Some(s) = t.shares {
                if s == 0 {
                    bail!("tenant `{}`: shares must be at least 1", t.name);
                }
                d.shares = s;
            }
            if let Some(r) = t.reserve {
                d.reserve = scaled(r, scale) * MIB;
            }
            Ok(d)
        })
        .collect()
}

/// `{512M}` in a description becomes the scaled size in MiB ("256 MiB"); a bare
/// number in braces (`{48}`, a pgbench scale) is scaled and printed as a number.
fn scale_description(text: &str, scale: f64) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else { break };
        out.push_str(&rest[..open]);
        let token = &rest[open + 1..close];
        match (token.parse::<u64>(), token.parse::<ByteSize>()) {
            (Ok(n), _) => out.push_str(&((n as f64 * scale).round() as u64).max(1).to_string()),
            (_, Ok(size)) => out.push_str(&format!("{} MiB", scaled(size, scale))),
            _ => out.push_str(&rest[open..=close]),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_reads_and_scales() {
        let all = catalogue(1.0);
        assert_eq!(all.len(), SHIPPED.len());
        let storm = all.iter().find(|s| s.name == "login-storm").unwrap();
        assert_eq!(storm.points.len(), 6);
        assert_eq!(storm.points[5].tenants.len(), 12);
        assert_eq!(storm.points[5].tenants[11].name, "u12");
        assert_eq!(storm.points[0].tenants[1].phases, staggered_phases(1, 4, 20, 135));
        let redis = all.iter().find(|s| s.name == "redis").unwrap();
        assert_eq!(redis.points[0].tenants[0].size, 1152 * MIB, "9/8 of its data");
        assert_eq!(redis.points[0].budget, 2304 * MIB, "half of what the four take");
        let c = all.iter().find(|s| s.name == "contention").unwrap();
        assert_eq!(c.points[0].tenants[0].reserve, 450 * MIB);
        assert_eq!(c.points[0].tenants[1].shares, 200);
        let half = catalogue(0.5);
        let w = half.iter().find(|s| s.name == "wake-up").unwrap();
        assert_eq!(w.points[0].tenants[0].hot, 512 * MIB);
        assert!(w.description.contains("(512 MiB hot)"), "{}", w.description);
        assert_eq!(w.points[1].slow.unwrap().after_secs, 80);
    }

    #[test]
    fn a_user_file_with_a_mistake_is_refused_with_the_reason() {
        let good = r#"
            name = "mine"
            description = "two tenants"
            [[points]]
            label = "a"
            budget = "1G"
            secs = 60
            measure = { steady = { from = 10, to = 50 } }
            tenants = [{ name = "web", count = 2, size = "512M", hot = "64M", pattern = "zipf", phases = "active:60s" }]
        "#;
        let s = parse(good, 1.0).unwrap();
        assert_eq!(s.points[0].tenants[1].name, "web2");
        assert_eq!(s.points[0].tenants[1].pattern, Pattern::Zipf);
        let cases = [
            (good.replace("hot = \"64M\"", "hot = \"1G\""), "larger than its size"),
            (good.replace("to = 50", "to = 70"), "within the 60 s run"),
            (good.replace("count = 2", "count = 0"), "count must be at least 1"),
            (good.replace("active:60s", "busy:60s"), "tenant `web1`"),
            (good.replace("secs = 60", "secs = 60\nbogus = 1"), "not a valid scenario file"),
            (good.replace("name = \"web\", count = 2,", "name = \"web\","), ""),
        ];
        for (text, want) in &cases[..5] {
            let e = format!("{:#}", parse(text, 1.0).unwrap_err());
            assert!(e.contains(want), "{want}: {e}");
        }
        assert_eq!(parse(&cases[5].0, 1.0).unwrap().points[0].tenants[0].name, "web", "no count: the name as is");
        let twice = good.replace(
            "tenants = [",
            "tenants = [{ name = \"web1\", size = \"1M\", hot = \"1M\", phases = \"active:1s\" }, ",
        );
        assert!(format!("{:#}", parse(&twice, 1.0).unwrap_err()).contains("two tenants are named `web1`"));
    }
}
