//! The benchmarks: the suite, the simulator, and the focused measurements.

use anyhow::Context;
use tierd_bench::workload;
use tierd_core::ByteSize;

use super::SuitePoints;

/// The flags of `tierd-bench run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    points: SuitePoints,
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    /// Repetitions of every point in every mode (figures are medians).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print the plan and its estimated time, run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Start a new results.json in --out instead of adding to (and replacing
    /// re-run points of) the one there.
    #[arg(long)]
    fresh: bool,
    /// Write report.md and the charts again from the results.json in --out, running
    /// nothing (after a report fix, or to redraw a run copied from elsewhere).
    #[arg(long, conflicts_with_all = ["dry_run", "fresh"])]
    report_only: bool,
    /// Keep each run's tierd log and tenant output in DIR/SCENARIO-POINT-MODE-REP/
    /// (to see what tierd decided and why).
    #[arg(long, value_name = "DIR")]
    logs: Option<std::path::PathBuf>,
}

impl RunArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let RunArgs { points, out, reps, dry_run, fresh, report_only, logs } = self;
        if report_only {
            let r = tierd_bench::suite::Results::existing(&out, points.scale)?
                .ok_or_else(|| anyhow::anyhow!("no results.json in {} to report on", out.display()))?;
            tierd_bench::report::write(&out, &r)?;
            println!("report of {} points written to {}", r.results.len(), out.display());
            return Ok(0);
        }
        tierd_bench::harness::catch_interrupts()?;
        if let Some(dir) = logs {
            tierd_bench::harness::keep_logs_in(dir)?;
        }
        let plan = points.plan(reps, fresh, false)?;
        let chosen = tierd_bench::suite::choose(&plan)?;
        let secs = tierd_bench::suite::estimate_secs(&chosen, &plan);
        for c in &chosen {
            let points: Vec<&str> = c.points.iter().map(|p| p.label.as_str()).collect();
            eprintln!("{:<17} {}", c.name, points.join(", "));
        }
        eprintln!("about {} h {} min; results in {}", secs / 3600, secs % 3600 / 60, out.display());
        if dry_run {
            return Ok(0);
        }
        let r = tierd_bench::suite::run_plan(&out, &plan, |res| tierd_bench::report::write(&out, res))?;
        for p in &r.results {
            let line: Vec<String> =
                p.modes.iter().map(|m| format!("{} {:.3}", m.mode.name(), m.relative_throughput)).collect();
            println!("{:<26} {}", p.name, line.join("  "));
        }
        for g in tierd_bench::goals::goals(&r) {
            println!("{:<16} {:<10} {}", g.scenario, format!("{:?}", g.verdict), g.measured);
        }
        println!("results in {}", out.display());
        Ok(0)
    }
}

/// The flags of `tierd-bench sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    points: SuitePoints,
    #[arg(long, default_value = "bench/results/sim")]
    out: std::path::PathBuf,
    /// Seeds per point and mode (figures are medians, ranges over seeds).
    #[arg(long, default_value_t = 10)]
    seeds: usize,
    /// Print what each tenant does second by second in one run instead (one point,
    /// the first mode given, seed 0): ops/s, DRAM, tier, quota, faults/s.
    #[arg(long)]
    trace: bool,
    /// With --trace: the repetition to follow, as numbered in the report (seed 0 is
    /// the first), to see why one of them stood out.
    #[arg(long, value_name = "N", requires = "trace", default_value_t = 0)]
    trace_seed: usize,
    /// Simulate every point of the real results in --real, in its modes, and write
    /// validation.md and validation.json (the simulator against the real suite),
    /// the simulated points themselves in --out/validation/.
    #[arg(long, conflicts_with = "trace")]
    validate: bool,
    /// The real suite's results that --validate compares against.
    #[arg(long, default_value = "bench/results/suite/results.json")]
    real: std::path::PathBuf,
    /// Run the policy on N random hosts against plain swap instead, and write
    /// property.md and property.json (the share of hosts where tierd is worse).
    #[arg(long, value_name = "N", conflicts_with_all = ["trace", "validate"])]
    property: Option<usize>,
}

impl SimArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let SimArgs { points, out, seeds, trace, trace_seed, validate, real, property } = self;
        if let Some(n) = property {
            let p = tierd_bench::property::run(n, seeds)?;
            tierd_bench::property::write(&out, &p)?;
            println!(
                "tierd below swap by more than {} on {} of {} hosts; {}",
                tierd_bench::property::MARGIN,
                p.results.iter().filter(|h| h.worse).count(),
                p.hosts,
                out.join("property.md").display()
            );
            return Ok(0);
        }
        if trace {
            return tierd_bench::sim::trace(&points.plan(0, true, true)?, trace_seed);
        }
        if validate {
            let text = std::fs::read_to_string(&real).with_context(|| format!("cannot read {}", real.display()))?;
            let real: tierd_bench::suite::Results = serde_json::from_str(&text)?;
            let plan = tierd_bench::validate::plan_for(&real, seeds);
            // The simulated points beside the comparison, apart from a catalogue run.
            let sim = tierd_bench::sim::run(&plan, seeds, Some(&out.join("validation")))?;
            let v = tierd_bench::validate::compare(&real, &sim);
            tierd_bench::validate::write(&out, &v)?;
            let pct = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{:.0}%", x * 100.0));
            println!(
                "order agreement {} of {} points, within tolerance {} of {} pairs; {}",
                pct(v.order_agreement),
                v.ordered_points,
                pct(v.within_tolerance),
                v.compared_pairs,
                out.join("validation.md").display()
            );
            return Ok(0);
        }
        let plan = points.plan(seeds, true, true)?;
        let r = tierd_bench::sim::run(&plan, seeds, Some(&out))?;
        for p in &r.results {
            let line: Vec<String> =
                p.modes.iter().map(|m| format!("{} {:.3}", m.mode.name(), m.relative_throughput)).collect();
            println!("{:<26} {}", p.name, line.join("  "));
        }
        let secs = r.simulated.as_ref().map_or(0.0, |s| s.wall_secs);
        println!("simulated {} points, {seeds} seeds, in {secs:.0} s; results in {}", r.results.len(), out.display());
        Ok(0)
    }
}

/// The flags of `tierd-bench vm`.
#[derive(clap::Args, Debug)]
pub struct VmArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    /// Modes, comma-separated: dram, tierd, tierd-prefetch.
    #[arg(long, default_value = "dram,tierd,tierd-prefetch")]
    modes: String,
    /// Use hardware virtualization (KVM) instead of software emulation.
    #[arg(long)]
    kvm: bool,
}

impl VmArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let VmArgs { out, modes, kvm } = self;
        tierd_bench::harness::catch_interrupts()?;
        let modes: Vec<String> = modes.split(',').map(str::to_string).collect();
        let r = tierd_bench::vm_bench::run(&out, &modes, kvm)?;
        for m in &r.migrations {
            println!(
                "{:<15} total {:>6.1} s  downtime {:>5} ms  guest throughput during {:.2}  verified {}",
                m.mode,
                m.total_ms as f64 / 1000.0,
                m.downtime_ms,
                m.relative_throughput_during,
                m.guest_verified
            );
        }
        println!("results in {}", out.display());
        Ok(0)
    }
}

/// The flags of `tierd-bench guest-command`.
#[derive(clap::Args, Debug)]
pub struct GuestCommandArgs {
    /// Guest RAM.
    #[arg(long, default_value = "256M")]
    ram: ByteSize,
    /// `tierd-bench workload` arguments for the guest, e.g. "--size 128M --hot 16M".
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    workload: String,
    #[arg(long)]
    kvm: bool,
    /// More QEMU arguments (after `--`).
    #[arg(last = true)]
    extra: Vec<String>,
}

impl GuestCommandArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let GuestCommandArgs { ram, workload, kvm, extra } = self;
        let img = tierd_bench::vm_bench::GuestImage::find()?;
        for arg in img.qemu_argv(ram.0 >> 20, &workload, kvm, &extra) {
            println!("{arg}");
        }
        Ok(0)
    }
}

/// The flags of `tierd-bench metrics`.
#[derive(clap::Args, Debug)]
pub struct MetricsArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    #[arg(long, default_value_t = 50)]
    tenants: usize,
    #[arg(long, default_value_t = 200)]
    scrapes: usize,
}

impl MetricsArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let MetricsArgs { out, tenants, scrapes } = self;
        tierd_bench::harness::catch_interrupts()?;
        if tenants == 0 || scrapes == 0 {
            anyhow::bail!("--tenants and --scrapes must be at least 1");
        }
        let r = tierd_bench::metrics_bench::run(&out, tenants, scrapes)?;
        println!(
            "/metrics with {} tenants: median {:.2} ms, p99 {:.2} ms ({} bytes); results in {}",
            r.tenants,
            r.median_ms,
            r.p99_ms,
            r.page_bytes,
            out.display()
        );
        Ok(0)
    }
}

/// The flags of `tierd-bench soak`.
#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    /// How long the tenants cycle, e.g. 1h or 10m.
    #[arg(long, default_value = "1h")]
    duration: String,
    #[arg(long, default_value_t = 8)]
    tenants: usize,
    /// Each tenant's memory.
    #[arg(long, default_value = "384M")]
    size: ByteSize,
    /// Each tenant's hot set.
    #[arg(long, default_value = "96M")]
    hot: ByteSize,
    /// DRAM for the tenants (default: two thirds of what they hold).
    #[arg(long)]
    budget: Option<ByteSize>,
    /// Seconds between readings of tierd.
    #[arg(long, default_value_t = 30)]
    every: u64,
}

impl SoakArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let SoakArgs { out, duration, tenants, size, hot, budget, every } = self;
        tierd_bench::harness::catch_interrupts()?;
        let secs = workload::humantime_like(&duration).context("--duration")?.as_secs();
        if tenants == 0 || secs < 60 || every == 0 || hot.0 > size.0 {
            anyhow::bail!("a soak needs --tenants ≥ 1, --duration ≥ 1m, --every ≥ 1 and --hot ≤ --size");
        }
        let held = size.0 * tenants as u64;
        let budget = budget.map_or(held / 3 * 2, |b| b.0);
        let spec = tierd_bench::soak::SoakSpec { secs, tenants, tenant_size: size.0, hot: hot.0, budget, every };
        let r = tierd_bench::soak::run(&spec, &out)?;
        println!(
            "soak of {} s: tierd RSS {:+.2} MiB/h, open files {:+.2}/h, CPU {:+.2} points/h; nothing lost: {}; results in {}",
            r.secs,
            r.rss_slope_mib_per_hour,
            r.open_files_slope_per_hour,
            r.cpu_slope_percent_per_hour,
            r.nothing_lost(),
            out.display()
        );
        Ok(if r.nothing_lost() { 0 } else { 1 })
    }
}

/// The flags of `tierd-bench latency`.
#[derive(clap::Args, Debug)]
pub struct LatencyArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    /// Working-set sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1M,4M,16M,64M,256M,1G,4G")]
    size: Vec<ByteSize>,
    /// Page sizes, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "4k,2m-thp,2m-hugetlb,1g-hugetlb")]
    page: Vec<tierd_bench::latency::Page>,
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Dependent loads timed per repetition.
    #[arg(long, default_value_t = 10_000_000)]
    loads: u64,
    /// Grow the hugetlb pools as needed for the run and give the pages back after
    /// (without it, hugetlb sizes the pools cannot back are skipped).
    #[arg(long)]
    reserve_hugetlb: bool,
    /// TLB entries assumed by the coverage model printed beside the results.
    #[arg(long, default_value_t = 2048)]
    tlb_entries: u64,
}

impl LatencyArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let LatencyArgs { out, size, page, reps, loads, reserve_hugetlb, tlb_entries } = self;
        tierd_bench::harness::catch_interrupts()?;
        if reps == 0 || loads == 0 || tlb_entries == 0 || size.iter().any(|s| s.0 < 4096) {
            anyhow::bail!("--reps, --loads and --tlb-entries must be at least 1 and every --size at least 4K");
        }
        let settings = tierd_bench::latency::Settings {
            sizes: size.iter().map(|s| s.0).collect(),
            pages: page,
            reps,
            loads,
            reserve_hugetlb,
            tlb_entries,
        };
        let r = tierd_bench::latency::run(&out, &settings)?;
        for p in &r.points {
            println!(
                "{:<11} {:>9} {:>7.1} ns/load",
                p.page.name(),
                tierd_core::size::human(p.size_bytes),
                p.ns_per_load
            );
        }
        for k in &r.skipped {
            println!("{:<11} skipped: {}", k.page.name(), k.reason);
        }
        println!("results in {}", out.display());
        Ok(0)
    }
}

/// The flags of `tierd-bench huge`.
#[derive(clap::Args, Debug)]
pub struct HugeArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
}

impl HugeArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let HugeArgs { out } = self;
        tierd_bench::harness::catch_interrupts()?;
        let r = tierd_bench::huge_bench::run(&out)?;
        for x in &r.runs {
            println!(
                "{:<7} back to 95% {}, hot set on huge pages at end {}, tierd cpu {:.2}%",
                x.pages,
                x.recovery_secs.map_or("never".into(), |s| format!("in {s:.0} s")),
                x.hot_huge_at_end.map_or("-".into(), |h| format!("{:.0}%", h * 100.0)),
                x.tierd_cpu_percent
            );
        }
        println!("results in {}", out.display());
        Ok(0)
    }
}

/// The flags of `tierd-bench engine`.
#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    /// Size of the tenant the movers work on.
    #[arg(long, default_value = "2G")]
    size: ByteSize,
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// How long to measure tierd's overhead in each configuration.
    #[arg(long, default_value = "60s")]
    window: String,
}

impl EngineArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let EngineArgs { out, size, reps, window } = self;
        tierd_bench::harness::catch_interrupts()?;
        let window = workload::humantime_like(&window).context("--window")?;
        let r = tierd_bench::engine::run(&out, size.0, reps, window)?;
        println!(
            "demote {:.2} GiB/s (end to end {:.2}), prefetch {:.2} GiB/s; results in {}",
            r.median_demote_gib_per_sec,
            r.median_demote_total_gib_per_sec,
            r.median_prefetch_gib_per_sec,
            out.display()
        );
        Ok(0)
    }
}

/// The flags of `tierd-bench pass`.
#[derive(clap::Args, Debug)]
pub struct PassArgs {
    #[arg(long, default_value = "bench/results")]
    out: std::path::PathBuf,
    /// Tenants per host.
    #[arg(long, default_value_t = 8)]
    tenants: usize,
    /// Each tenant's size on the hosts timed, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1G,8G,32G,64G")]
    size: Vec<ByteSize>,
    /// Passes timed on each host (the figures are medians).
    #[arg(long, default_value_t = 9)]
    passes: usize,
}

impl PassArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let PassArgs { out, tenants, size, passes } = self;
        let gib = |b: u64| (b >= 1 << 30 && b.is_multiple_of(1 << 30)).then_some(b >> 30);
        let sizes = size
            .iter()
            .map(|s| gib(s.0).map(|g| (tenants, g)).with_context(|| format!("--size {s}: whole GiB only (1G, 64G)")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let r = tierd_bench::pass_bench::run(&out, &sizes, passes)?;
        let largest = r.rows.last().context("no host timed")?;
        println!(
            "{} x {} GiB: a pass takes {:.1} ms ({:.4}% of a core per 8 GiB); results in {}",
            largest.tenants,
            largest.tenant_gib,
            largest.median_ms,
            largest.core_percent_per_8gib,
            out.display()
        );
        Ok(0)
    }
}
