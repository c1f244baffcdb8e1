//! `tierd-bench`: workloads and benchmarks for tierd.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tierd_bench::workload::{self, Pattern, Phase, PhaseKind, Settings};
use tierd_core::ByteSize;

/// Workloads and benchmarks for tierd.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
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
        /// Ask for transparent huge pages.
        #[arg(long)]
        thp: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Skip verifying every page at the end.
        #[arg(long)]
        no_verify_all: bool,
    },
    /// Benchmark the tierd policy against no limit, plain swap and static quotas in the
    /// steady, wake-up, noisy-neighbour and contention scenarios. Writes policy.json,
    /// policy.md and SVG charts to --out.
    Policy {
        #[arg(long, default_value = "bench/results")]
        out: std::path::PathBuf,
        /// Modes to run, comma-separated (dram is the reference; keep it).
        #[arg(long, default_value = "dram,swap,static,tierd")]
        modes: String,
        /// Scenarios to run (default: all): steady, wake-up, noisy-neighbour, contention.
        scenarios: Vec<String>,
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
        Cmd::Policy { out, modes, scenarios } => {
            tierd_bench::harness::catch_interrupts()?;
            let modes = modes.split(',').map(tierd_bench::scenario::Mode::parse).collect::<anyhow::Result<Vec<_>>>()?;
            let r = tierd_bench::policy_bench::run_all(&out, &scenarios, &modes)?;
            for s in &r.scenarios {
                let line: Vec<String> =
                    s.modes.iter().map(|m| format!("{} {:.3}", m.mode.name(), m.relative_throughput)).collect();
                println!("{:<16} {}", s.name, line.join("  "));
            }
            println!("results in {}", out.display());
            Ok(0)
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
            seed,
            no_verify_all,
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
            let stop = Arc::new(AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
                signal_hook::flag::register(sig, Arc::clone(&stop))?;
            }
            let settings = Settings {
                size: size.0 as usize,
                hot: hot.0 as usize,
                hot_offset: hot_offset.0 as usize,
                pattern,
                phases,
                report: workload::humantime_like(&report).context("--report")?,
                json,
                write_ratio,
                huge: thp,
                seed,
                verify_all: !no_verify_all,
            };
            let summary = workload::run(&settings, stop)?;
            println!("{}", serde_json::to_string(&summary)?);
            Ok(if summary.corrupt_pages > 0 { 2 } else { 0 })
        }
    }
}
