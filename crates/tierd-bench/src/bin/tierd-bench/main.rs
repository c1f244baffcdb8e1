//! `tierd-bench`: workloads and benchmarks for tierd.

mod bench;
mod tenant;

use clap::{Parser, Subcommand};

/// Workloads and benchmarks for tierd.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Which points of the suite, in which modes and at what scale: `run` and `sim` alike.
#[derive(clap::Args, Debug)]
pub struct SuitePoints {
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
            .collect::<Result<Vec<_>, _>>()?;
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
    Workload(tenant::WorkloadArgs),
    /// The client of a Redis tenant: loads KEYS values into a redis-server, then runs
    /// Zipf-skewed GETs and SETs on a hot set of them, printing throughput and latency
    /// like `workload`; every GET is checked, and a lost or wrong value ends it with an
    /// error.
    RedisClient(tenant::RedisClientArgs),
    /// The client of a PostgreSQL tenant: initialises the database with pgbench at
    /// --scale, then runs pgbench's account update and read (accounts drawn Zipf)
    /// through the phases, printing throughput and latency like `workload`.
    PgClient(tenant::PgClientArgs),
    /// The benchmark suite: each scenario in each mode side by side, repeated; writes
    /// results.json, report.md and SVG charts to --out. Scenarios: density-2x,
    /// active-sweep, wake-up, login-storm, overcommit-sweep, noisy-neighbour,
    /// contention, redis, postgres (all when none is named; a point as SCENARIO/POINT).
    /// A full run takes hours; the estimate is printed first.
    Run(bench::RunArgs),
    /// The suite in the simulator (tierd-sim): every point in every mode over --seeds
    /// seeds, with the real tierd policy code, in minutes. Writes results.json,
    /// report.md and charts to --out as `run` does, marked as simulated.
    Sim(bench::SimArgs),
    /// Live migration of a tiered VM against the same VM all in DRAM: QEMU's total
    /// time and downtime, and the guest's throughput during it (~4 minutes per mode).
    /// Needs the test guest (scripts/guest.sh). Writes vm.json and vm.md to --out.
    Vm(bench::VmArgs),
    /// Print the QEMU command line that boots the test guest (scripts/guest.sh) with
    /// its workload, one argument per line: for the VM tests, and to boot it by hand.
    GuestCommand(bench::GuestCommandArgs),
    /// Time `/metrics` scrapes against a tierd with many tenants (goal: under 50 ms
    /// with 50). Writes metrics.json and metrics.md to --out.
    Metrics(bench::MetricsArgs),
    /// An hour of tenants cycling through work, rest and sweeps under the `tierd`
    /// policy: tierd's RSS, open files and CPU over time (their slopes), every page
    /// verified, the warnings it logged. Writes soak.json and soak.md to --out.
    Soak(bench::SoakArgs),
    /// Memory latency by page size: a dependent-load pointer chase over a random cycle
    /// of cache lines, from below L3 to several GiB, on 4 KiB pages, transparent huge
    /// pages and hugetlb pages. Writes latency.json, latency.md and latency.svg to --out.
    Latency(bench::LatencyArgs),
    /// Huge pages through a demote / wake-up cycle under tierd: whether a THP tenant's
    /// hot set is huge again after being pushed out and waking, against the same
    /// tenant on 4 KiB pages (latency, throughput, tierd's CPU). ~7 minutes. Writes
    /// huge.json, huge.md and SVG charts to --out.
    Huge(bench::HugeArgs),
    /// Benchmark the engine: demotion and prefetch throughput, and tierd's CPU and
    /// memory with 8 tenants. Writes engine.json and engine.md to --out.
    Engine(bench::EngineArgs),
    /// The `tierd` policy's own cost by host size: one pass timed on synthetic hosts of
    /// 8 tenants up to 64 GiB each, in seconds. Writes pass.json and pass.md to --out.
    Pass(bench::PassArgs),
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
        Cmd::Workload(a) => a.run(),
        Cmd::RedisClient(a) => a.run(),
        Cmd::PgClient(a) => a.run(),
        Cmd::Run(a) => a.run(),
        Cmd::Sim(a) => a.run(),
        Cmd::Vm(a) => a.run(),
        Cmd::GuestCommand(a) => a.run(),
        Cmd::Metrics(a) => a.run(),
        Cmd::Soak(a) => a.run(),
        Cmd::Latency(a) => a.run(),
        Cmd::Huge(a) => a.run(),
        Cmd::Engine(a) => a.run(),
        Cmd::Pass(a) => a.run(),
    }
}
