//! `tierd-bench`: workloads and benchmarks for tierd.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tierd_bench::workload::{self, Pattern, Phase, PhaseKind, Settings};
use tierd_bench::{pg_load, redis_load};
use tierd_core::ByteSize;
use tierd_sys::memory::PageKind;

/// Workloads and benchmarks for tierd.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// How a server tenant's client runs and reports.
#[derive(clap::Args, Debug)]
struct ClientRun {
    /// Phases, e.g. active:2m or active:30s,idle:1m,active:1m (sweep, Redis only: the
    /// whole keyspace at random).
    #[arg(long, default_value = "active:30s")]
    phase: String,
    /// Report interval.
    #[arg(long, default_value = "1s")]
    report: String,
    /// JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

impl ClientRun {
    fn phases(&self) -> anyhow::Result<Vec<Phase>> {
        workload::parse_phases(&self.phase)
    }

    fn report_every(&self) -> anyhow::Result<std::time::Duration> {
        workload::humantime_like(&self.report).context("--report")
    }
}

/// Which points of the suite, in which modes and at what scale: `run` and `sim` alike.
#[derive(clap::Args, Debug)]
struct SuitePoints {
    /// Scenarios (default: all shipped ones, or those of --scenario files), or
    /// SCENARIO/POINT for one point, e.g. wake-up/slow.
    scenarios: Vec<String>,
    /// A scenario file of your own (TOML, as bench/scenarios/*.toml); repeatable. One
    /// named like a shipped scenario takes its place.
    #[arg(long = "scenario", value_name = "FILE.toml")]
    files: Vec<std::path::PathBuf>,
    /// Modes, comma-separated: dram (no limit, the reference), swap (plain Linux
    /// swap), static (fixed quotas), tierd (the policy); the simulator also has
    /// memory-mode (DRAM as a direct-mapped cache of the tier). Default: all of them.
    #[arg(long)]
    modes: Option<String>,
    /// Multiplies every memory size (DRAM budget, tenants, hot sets).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
}

impl SuitePoints {
    fn plan(self, reps: usize, fresh: bool, simulated: bool) -> anyhow::Result<tierd_bench::suite::Plan> {
        let all = if simulated { "dram,swap,static,tierd,memory-mode" } else { "dram,swap,static,tierd" };
        let modes = self
            .modes
            .as_deref()
            .unwrap_or(all)
            .split(',')
            .map(tierd_bench::scenario::Mode::parse)
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(tierd_bench::suite::Plan {
            scenarios: self.scenarios,
            files: self.files,
            modes,
            reps,
            scale: self.scale,
            fresh,
            simulated,
        })
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// A test tenant: fills memory with verifiable content and accesses a hot set,
    /// printing throughput and latency; exits 2 on any corrupted byte.
    Workload {
        /// Memory to allocate, e.g. 1G.
        #[arg(long)]
        size: ByteSize,
        /// Hot set size, e.g. 128M.
        #[arg(long)]
        hot: ByteSize,
        /// Where the hot set starts within the memory.
        #[arg(long, default_value = "0")]
        hot_offset: ByteSize,
        #[arg(long, value_enum, default_value_t = Pattern::Uniform)]
        pattern: Pattern,
        /// Phases, e.g. active:30s,idle:60s,active:2m (overrides --duration).
        #[arg(long)]
        phase: Option<String>,
        /// Length of a single active phase, e.g. 30s.
        #[arg(long, default_value = "30s")]
        duration: String,
        /// Report interval.
        #[arg(long, default_value = "1s")]
        report: String,
        /// JSON lines instead of text.
        #[arg(long)]
        json: bool,
        /// Fraction of accesses that rewrite their page (0..=1).
        #[arg(long, default_value_t = 0.0)]
        write_ratio: f64,
        /// Ask for transparent huge pages (`MADV_HUGEPAGE`).
        #[arg(long, conflicts_with = "small_pages")]
        thp: bool,
        /// Small pages only (`MADV_NOHUGEPAGE`, an opt-out of huge pages). By default
        /// the memory is what the system's THP setting gives a program that does not ask.
        #[arg(long)]
        small_pages: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Skip verifying every page at the end.
        #[arg(long)]
        no_verify_all: bool,
        /// Accesses per second (0: as fast as it can); a slow rate touches each hot
        /// page now and then rather than all the time.
        #[arg(long, default_value_t = 0)]
        rate: u64,
    },
    /// The client of a Redis tenant: loads KEYS values into a redis-server, then runs
    /// Zipf-skewed GETs and SETs on a hot set of them, printing throughput and latency
    /// like `workload`; every GET is checked, and a lost or wrong value ends it with an
    /// error.
    RedisClient {
        /// The server's Unix socket.
        #[arg(long)]
        socket: std::path::PathBuf,
        /// Keys to load and use.
        #[arg(long)]
        keys: u64,
        /// Bytes per value.
        #[arg(long, default_value_t = 1000)]
        value_size: usize,
        /// Keys in the hot set (default: a tenth of the keys).
        #[arg(long)]
        hot_keys: Option<u64>,
        /// Fraction of operations that are SETs (0..=1).
        #[arg(long, default_value_t = 0.1)]
        set_ratio: f64,
        #[command(flatten)]
        client: ClientRun,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The keys are already loaded.
        #[arg(long)]
        no_load: bool,
    },
    /// The client of a PostgreSQL tenant: initialises the database with pgbench at
    /// --scale, then runs pgbench's account update and read (accounts drawn Zipf)
    /// through the phases, printing throughput and latency like `workload`.
    PgClient {
        /// The server's socket directory.
        #[arg(long)]
        host: std::path::PathBuf,
        /// pgbench scale factor (100,000 accounts, ~15 MiB, each).
        #[arg(long)]
        scale: u32,
        #[command(flatten)]
        client: ClientRun,
        /// The database is already initialised.
        #[arg(long)]
        no_load: bool,
        /// Directory for pgbench's transaction logs (default: a new one under /tmp).
        #[arg(long)]
        work: Option<std::path::PathBuf>,
    },
    /// The benchmark suite: each scenario in each mode side by side, repeated; writes
    /// results.json, report.md and SVG charts to --out. Scenarios: density-2x,
    /// active-sweep, wake-up, login-storm, overcommit-sweep, noisy-neighbour,
    /// contention, redis, postgres (all when none is named; a point as SCENARIO/POINT).
    /// A full run takes hours; the estimate is printed first.
    Run {
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
    },
    /// The suite in the simulator (tierd-sim): every point in every mode over --seeds
    /// seeds, with the real tierd policy code, in minutes. Writes results.json,
    /// report.md and charts to --out as `run` does, marked as simulated.
    Sim {
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
    },
    /// Live migration of a tiered VM against the same VM all in DRAM: QEMU's total
    /// time and downtime, and the guest's throughput during it (~4 minutes per mode).
    /// Needs the test guest (scripts/guest.sh). Writes vm.json and vm.md to --out.
    Vm {
        #[arg(long, default_value = "bench/results")]
        out: std::path::PathBuf,
        /// Modes, comma-separated: dram, tierd, tierd-prefetch.
        #[arg(long, default_value = "dram,tierd,tierd-prefetch")]
        modes: String,
        /// Use hardware virtualization (KVM) instead of software emulation.
        #[arg(long)]
        kvm: bool,
    },
    /// Print the QEMU command line that boots the test guest (scripts/guest.sh) with
    /// its workload, one argument per line: for the VM tests, and to boot it by hand.
    GuestCommand {
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
    },
    /// Time `/metrics` scrapes against a tierd with many tenants (goal: under 50 ms
    /// with 50). Writes metrics.json and metrics.md to --out.
    Metrics {
        #[arg(long, default_value = "bench/results")]
        out: std::path::PathBuf,
        #[arg(long, default_value_t = 50)]
        tenants: usize,
        #[arg(long, default_value_t = 200)]
        scrapes: usize,
    },
    /// An hour of tenants cycling through work, rest and sweeps under the `tierd`
    /// policy: tierd's RSS, open files and CPU over time (their slopes), every page
    /// verified, the warnings it logged. Writes soak.json and soak.md to --out.
    Soak {
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
    },
    /// Memory latency by page size: a dependent-load pointer chase over a random cycle
    /// of cache lines, from below L3 to several GiB, on 4 KiB pages, transparent huge
    /// pages and hugetlb pages. Writes latency.json, latency.md and latency.svg to --out.
    Latency {
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
    },
    /// Huge pages through a demote / wake-up cycle under tierd: whether a THP tenant's
    /// hot set is huge again after being pushed out and waking, against the same
    /// tenant on 4 KiB pages (latency, throughput, tierd's CPU). ~7 minutes. Writes
    /// huge.json, huge.md and SVG charts to --out.
    Huge {
        #[arg(long, default_value = "bench/results")]
        out: std::path::PathBuf,
    },
    /// Benchmark the engine: demotion and prefetch throughput, and tierd's CPU and
    /// memory with 8 tenants. Writes engine.json and engine.md to --out.
    Engine {
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
    },
}

fn main() {
    match run(Cli::parse()) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("tierd-bench: {e:#}");
            std::process::exit(if format!("{e:#}").contains("corrupt memory") { 2 } else { 1 });
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.cmd {
        Cmd::Run { points, out, reps, dry_run, fresh, report_only, logs } => {
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
        Cmd::Sim { points, out, seeds, trace, validate, real, property } => {
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
                return tierd_bench::sim::trace(&points.plan(0, true, true)?);
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
            println!(
                "simulated {} points, {seeds} seeds, in {secs:.0} s; results in {}",
                r.results.len(),
                out.display()
            );
            Ok(0)
        }
        Cmd::GuestCommand { ram, workload, kvm, extra } => {
            let img = tierd_bench::vm_bench::GuestImage::find()?;
            for arg in img.qemu_argv(ram.0 >> 20, &workload, kvm, &extra) {
                println!("{arg}");
            }
            Ok(0)
        }
        Cmd::Vm { out, modes, kvm } => {
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
        Cmd::Latency { out, size, page, reps, loads, reserve_hugetlb, tlb_entries } => {
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
        Cmd::Huge { out } => {
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
        Cmd::Soak { out, duration, tenants, size, hot, budget, every } => {
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
        Cmd::Metrics { out, tenants, scrapes } => {
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
        Cmd::Engine { out, size, reps, window } => {
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
        Cmd::RedisClient { socket, keys, value_size, hot_keys, set_ratio, client, seed, no_load } => {
            if !(0.0..=1.0).contains(&set_ratio) {
                anyhow::bail!("--set-ratio {set_ratio} must be between 0 and 1");
            }
            let settings = redis_load::Settings {
                socket,
                keys,
                value_size,
                hot_keys: hot_keys.unwrap_or(keys.div_ceil(10)),
                set_ratio,
                phases: client.phases()?,
                report: client.report_every()?,
                json: client.json,
                seed,
                no_load,
            };
            let summary = redis_load::run(&settings, stop_on_signal()?)?;
            println!("{}", serde_json::to_string(&summary)?);
            Ok(0)
        }
        Cmd::PgClient { host, scale, client, no_load, work } => {
            let own_work = work.is_none();
            let work =
                work.unwrap_or_else(|| std::env::temp_dir().join(format!("tierd-pg-client-{}", std::process::id())));
            let settings = pg_load::Settings {
                host,
                scale,
                phases: client.phases()?,
                report: client.report_every()?,
                json: client.json,
                no_load,
                work: work.clone(),
            };
            let summary = pg_load::run(&settings, stop_on_signal()?);
            if own_work {
                let _ = std::fs::remove_dir_all(&work);
            }
            println!("{}", serde_json::to_string(&summary?)?);
            Ok(0)
        }
        Cmd::Workload {
            size,
            hot,
            hot_offset,
            pattern,
            phase,
            duration,
            report,
            json,
            write_ratio,
            thp,
            small_pages,
            seed,
            no_verify_all,
            rate,
        } => {
            if !(0.0..=1.0).contains(&write_ratio) {
                anyhow::bail!("--write-ratio {write_ratio} must be between 0 and 1");
            }
            let phases = match phase {
                Some(p) => workload::parse_phases(&p)?,
                None => vec![Phase {
                    kind: PhaseKind::Active,
                    duration: workload::humantime_like(&duration).context("--duration")?,
                }],
            };
            let stop = stop_on_signal()?;
            let settings = Settings {
                size: size.0 as usize,
                hot: hot.0 as usize,
                hot_offset: hot_offset.0 as usize,
                pattern,
                phases,
                report: workload::humantime_like(&report).context("--report")?,
                json,
                write_ratio,
                pages: match (thp, small_pages) {
                    (true, _) => PageKind::Thp,
                    (false, true) => PageKind::Small,
                    (false, false) => PageKind::Default,
                },
                seed,
                verify_all: !no_verify_all,
                rate,
            };
            let summary = workload::run(&settings, stop)?;
            println!("{}", serde_json::to_string(&summary)?);
            Ok(if summary.corrupt_pages > 0 { 2 } else { 0 })
        }
    }
}

/// A flag SIGTERM and SIGINT raise, so a tenant ends its run gracefully (and reports).
fn stop_on_signal() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}
