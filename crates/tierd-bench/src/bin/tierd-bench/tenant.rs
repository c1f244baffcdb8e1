//! The test tenants the suite runs: the synthetic workload, and the Redis and
//! PostgreSQL clients.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use tierd_bench::workload::{self, Pattern, Phase, PhaseKind, Settings};
use tierd_bench::{pg_load, redis_load};
use tierd_core::ByteSize;
use tierd_sys::memory::PageKind;

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

/// The flags of `tierd-bench workload`.
#[derive(clap::Args, Debug)]
pub struct WorkloadArgs {
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
}

impl WorkloadArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let WorkloadArgs {
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
        } = self;
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

/// The flags of `tierd-bench redis-client`.
#[derive(clap::Args, Debug)]
pub struct RedisClientArgs {
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
}

impl RedisClientArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let RedisClientArgs { socket, keys, value_size, hot_keys, set_ratio, client, seed, no_load } = self;
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
}

/// The flags of `tierd-bench pg-client`.
#[derive(clap::Args, Debug)]
pub struct PgClientArgs {
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
}

impl PgClientArgs {
    pub fn run(self) -> anyhow::Result<i32> {
        let PgClientArgs { host, scale, client, no_load, work } = self;
        let own_work = work.is_none();
        let work = work.unwrap_or_else(|| std::env::temp_dir().join(format!("tierd-pg-client-{}", std::process::id())));
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
}

/// A flag SIGTERM and SIGINT raise, so a tenant ends its run gracefully (and reports).
fn stop_on_signal() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}
