//! tierd-sim: a deterministic, discrete-time model of one tiered host.
//!
//! It runs the benchmark suite's scenarios in every mode — `dram`, `swap` (one shared
//! limit, the kernel's LRU), `static`, `tierd` (the real `tierd_core` policy code,
//! unchanged) and `memory-mode` (DRAM as a direct-mapped cache of the tier, seed 002's
//! Optane Memory Mode) — in seconds instead of hours, so a policy is judged on every
//! point and many seeds before a real run confirms it. What is modelled, and the
//! measurement each figure comes from, is in [`calib`] and in each module's notes; how
//! well it agrees with the real suite is in `bench/results/sim/validation.md`.
//!
//! It is a model: tenants' memory is counted per 2 MiB region and page class in
//! expected values, the LRU is Che's approximation, the device a queue. It does not
//! model huge pages, page-table memory, the OOM killer or the control loop's syscalls
//! failing.
#![forbid(unsafe_code)]

pub mod access;
pub mod calib;
pub mod device;
pub mod engine;
pub mod host;
pub mod memory;
pub mod memory_mode;
pub mod tracker;

use tierd_core::config::PolicyKind;

pub use access::{App, Pattern, PhaseKind, TenantModel};
pub use device::Slow;
pub use host::Report;

/// How memory is managed in a run, simulated or real (`tierd-bench` names its modes
/// with this type too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Dram,
    Swap,
    Static,
    Tierd,
    /// DRAM as a direct-mapped cache of the tier (seed 002), no quotas: simulated only.
    MemoryMode,
}

impl Mode {
    pub const ALL: [Mode; 5] = [Mode::Dram, Mode::Swap, Mode::Static, Mode::Tierd, Mode::MemoryMode];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Dram => "dram",
            Mode::Swap => "swap",
            Mode::Static => "static",
            Mode::Tierd => "tierd",
            Mode::MemoryMode => "memory-mode",
        }
    }

    pub fn parse(s: &str) -> Result<Mode, UnknownMode> {
        Mode::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| UnknownMode(s.to_string()))
    }
}

/// A mode name that is none of [`Mode::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl std::fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown mode `{}`: dram, swap, static, tierd or memory-mode", self.0)
    }
}

impl std::error::Error for UnknownMode {}

/// A host and its tenants.
#[derive(Debug, Clone)]
pub struct Point {
    pub budget: u64,
    /// Tier size as a multiple of the budget.
    pub tier_ratio: f64,
    pub secs: f64,
    pub slow: Option<Slow>,
    pub tenants: Vec<TenantModel>,
}

/// What one simulated run produced, in the real suite's terms.
#[derive(Debug, Clone)]
pub struct Run {
    /// Each tenant's reports, as its workload would print them.
    pub tenants: Vec<(String, Vec<Report>)>,
    /// tierd's CPU over the run, % of one core.
    pub tierd_cpu_percent: f64,
    /// The tracker's CPU, % of one core per 8 GiB of tenant memory.
    pub tracker_cpu_per_8gib: Option<f64>,
    /// Active-memory health near the end.
    pub health: String,
}

/// Suite settings of the daemon: 5 s interval, 30 s window (`tierd-bench run`).
pub const INTERVAL_SECS: f64 = 5.0;
pub const WINDOW_SECS: f64 = 30.0;

/// Runs `point` in `mode` with `seed`: the same arguments give the same run.
pub fn simulate(point: &Point, mode: Mode, seed: u64) -> Run {
    simulate_traced(point, mode, seed, |_| {})
}

/// One line per tenant per second of a run: what it did and where its memory was.
#[derive(Debug, Clone)]
pub struct TraceLine {
    pub t: f64,
    pub tenant: String,
    pub doing: String,
    pub ops_per_sec: f64,
    pub dram_mib: f64,
    pub tier_mib: f64,
    pub quota_mib: Option<f64>,
    pub faults_per_sec: f64,
    /// Cores it used over the second.
    pub cores: f64,
    pub read_latency_us: f64,
    /// Why tierd set its quota, as the plan says (empty before the first plan).
    pub reason: String,
}

/// [`simulate`], calling `trace` with every tenant's state once a second.
pub fn simulate_traced(point: &Point, mode: Mode, seed: u64, mut trace: impl FnMut(&[TraceLine])) -> Run {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut host = host::Host::new(point.tenants.clone(), point.slow, &mut rng);
    if mode == Mode::MemoryMode {
        let pages: f64 = host.tenants.iter().map(|t| t.mem.total_pages()).sum();
        let classes: Vec<usize> = host.tenants.iter().map(|t| t.layout.classes).collect();
        host.direct_mapped = Some(memory_mode::DirectMapped::new(point.budget, pages, &classes, &mut rng));
    }
    let (policy, budget) = match mode {
        Mode::Dram | Mode::MemoryMode => (PolicyKind::None, 16u64 << 30),
        Mode::Swap => (PolicyKind::None, point.budget),
        Mode::Static => (PolicyKind::Static, point.budget),
        _ => (PolicyKind::Tierd, point.budget),
    };
    let settings = engine::Settings {
        policy,
        budget,
        ratio: point.tier_ratio,
        interval: INTERVAL_SECS,
        window: WINDOW_SECS,
        tier_size: (point.budget as f64 * point.tier_ratio) as u64,
        knobs: tierd_core::policy::Knobs::default(),
    };
    let mut engine = engine::Engine::new(settings, &host, seed);
    let steps = (point.secs / calib::DT).round() as usize;
    let mut health = String::new();
    let health_at = point.secs - 5.0;
    let mut last: Vec<(f64, f64, f64)> = host.tenants.iter().map(|_| (0.0, 0.0, 0.0)).collect();
    let per_sec = (1.0 / calib::DT).round() as usize;
    for step in 0..steps {
        engine.act(&mut host);
        host.step();
        if (step + 1) % per_sec == 0 {
            let lines: Vec<TraceLine> = host
                .tenants
                .iter()
                .zip(last.iter_mut())
                .enumerate()
                .map(|(i, (t, (ops, faults, cpu)))| {
                    let line = TraceLine {
                        t: host.now,
                        tenant: t.model.name.clone(),
                        doing: format!("{:?}", t.doing(host.now)),
                        ops_per_sec: t.ops_done - *ops,
                        dram_mib: t.dram_pages() * calib::PAGE / (1u64 << 20) as f64,
                        tier_mib: t.mem.swapped_pages() * calib::PAGE / (1u64 << 20) as f64,
                        quota_mib: t.quota.map(|q| q * calib::PAGE / (1u64 << 20) as f64),
                        faults_per_sec: t.major_faults - *faults,
                        cores: t.cpu_secs - *cpu,
                        read_latency_us: host.device.read_latency() * 1e6,
                        reason: engine.reason(i),
                    };
                    *ops = t.ops_done;
                    *faults = t.major_faults;
                    *cpu = t.cpu_secs;
                    line
                })
                .collect();
            trace(&lines);
        }
        if health.is_empty() && host.now >= health_at {
            health = active_health(&engine, &host, point.budget);
        }
    }
    let tracked: f64 = point.tenants.iter().map(|t| t.size as f64).sum();
    Run {
        tenants: host.tenants.iter().map(|t| (t.model.name.clone(), t.reports.clone())).collect(),
        tierd_cpu_percent: (engine.cpu_secs + host.prefetch_reclaim_secs) / point.secs * 100.0,
        tracker_cpu_per_8gib: (engine.tracker_secs > 0.0)
            .then(|| engine.tracker_secs / point.secs * 100.0 * (8u64 << 30) as f64 / tracked),
        health,
    }
}

/// The active-memory colour: the tracker's figures under `tierd`, the hot sets of the
/// tenants running now otherwise (no tracker runs there).
fn active_health(engine: &engine::Engine, host: &host::Host, budget: u64) -> String {
    let active: u64 = match &engine.last {
        Some(s) if engine.settings.policy == PolicyKind::Tierd => {
            s.tenants.iter().filter_map(|t| t.activeness.map(|a| a.touched_bytes())).sum()
        }
        _ => host.tenants.iter().filter(|t| t.busy(host.now)).map(|t| t.model.hot).sum(),
    };
    tierd_core::health::active_memory(active, budget).to_string()
}
