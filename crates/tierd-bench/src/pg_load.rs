//! The client of a PostgreSQL tenant: `pgbench` (PostgreSQL's own load generator)
//! initialises the database, then runs transactions on it; its per-transaction log
//! becomes report lines like the workload generator's, so the suite measures
//! PostgreSQL tenants as it measures its own.
//!
//! The transaction is pgbench's TPC-B-like account update and read, with the account
//! drawn Zipf(1.01) (pgbench's `random_zipfian`) rather than uniformly: a database with
//! a hot set, as the other scenarios have, not one whose every page is equally hot.
//! Accounts are numbered in insertion order, so hot rows share pages, as recent rows
//! of a real table do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::workload::{Phase, PhaseKind, Report, emit};

/// The transaction every client runs (`:scale` is passed with `-D`).
const SCRIPT: &str = "\\set aid random_zipfian(1, 100000 * :scale, 1.01)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
END;
";

/// Seconds of one pgbench run within an active phase.
const CHUNK_SECS: u64 = 10;

#[derive(Debug, Clone)]
pub struct Settings {
    /// The server's socket directory.
    pub host: PathBuf,
    /// pgbench's scale factor: 100,000 accounts (~15 MiB with their index) each.
    pub scale: u32,
    pub phases: Vec<Phase>,
    pub report: Duration,
    pub json: bool,
    /// Skip `pgbench -i` (the database is already there).
    pub no_load: bool,
    /// Where pgbench's transaction logs go (removed after).
    pub work: PathBuf,
}

/// The final summary line.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub summary: bool,
    pub load_secs: f64,
    pub transactions: u64,
    pub tps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

/// The newest PostgreSQL's `pgbench` (Debian keeps each version's tools apart).
pub fn pgbench() -> anyhow::Result<PathBuf> {
    postgres_tool("pgbench")
}

/// A tool of the newest PostgreSQL installed: `postgres`, `initdb`, `pgbench`.
pub fn postgres_tool(name: &str) -> anyhow::Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin").join(name))))
        .filter(|(_, p): &(u32, PathBuf)| p.is_file())
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, p)| p)
        .with_context(|| format!("no PostgreSQL {name} under /usr/lib/postgresql (Debian: apt-get install postgresql)"))
}

/// PostgreSQL refuses to run as root; its servers here run as this user (the Debian
/// package's).
pub const USER: &str = "postgres";

/// Creates a database cluster in `data`, and the socket directory `sock`, owned by
/// [`USER`]: the start of a PostgreSQL tenant.
pub fn initdb(data: &Path, sock: &Path) -> anyhow::Result<()> {
    let ok = Command::new("install").args(["-d", "-m", "700", "-o", USER, "-g", USER]).arg(data).arg(sock).status()?;
    if !ok.success() {
        bail!("cannot make {} and {} for user {USER} (does it exist?)", data.display(), sock.display());
    }
    let out = Command::new("setpriv")
        .args(as_user())
        .arg(postgres_tool("initdb")?)
        .arg("-D")
        .arg(data)
        .args(["-A", "trust", "-U", USER, "--no-sync"])
        .output()
        .context("running initdb")?;
    if !out.status.success() {
        bail!("initdb {} failed: {}", data.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// `setpriv` arguments that run the rest of its command line as [`USER`].
pub fn as_user() -> [String; 4] {
    [format!("--reuid={USER}"), format!("--regid={USER}"), "--init-groups".into(), "--".into()]
}

/// The server's command line: memory-bound, not disk-bound (no fsync, commits not
/// waited for), listening only on its socket directory.
pub fn server_argv(data: &Path, sock: &Path, shared_buffers_mib: u64) -> anyhow::Result<Vec<String>> {
    let mut argv = vec!["setpriv".to_string()];
    argv.extend(as_user());
    argv.push(postgres_tool("postgres")?.to_string_lossy().to_string());
    for a in ["-D", &data.to_string_lossy(), "-k", &sock.to_string_lossy()] {
        argv.push(a.to_string());
    }
    for c in [
        "listen_addresses=".to_string(),
        format!("shared_buffers={shared_buffers_mib}MB"),
        "fsync=off".into(),
        "synchronous_commit=off".into(),
        "full_page_writes=off".into(),
    ] {
        argv.push("-c".into());
        argv.push(c);
    }
    Ok(argv)
}

/// One transaction from pgbench's log: when it ended (µs since the epoch) and how
/// long it took (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Txn {
    end_us: u64,
    latency_us: u64,
}

/// Parses a per-transaction log line: `client txn latency_us script epoch_s epoch_us`.
fn parse_txn(line: &str) -> Option<Txn> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 6 {
        return None;
    }
    let latency_us = f[2].parse().ok()?;
    let end_us = f[4].parse::<u64>().ok()? * 1_000_000 + f[5].parse::<u64>().ok()?;
    Some(Txn { end_us, latency_us })
}

/// Report lines for `txns` of one active phase that started at `start_us` (epoch) and
/// `offset` into the run, one per `every`.
fn reports(txns: &[Txn], start_us: u64, offset: Duration, every: Duration, secs: f64) -> anyhow::Result<Vec<Report>> {
    let step = every.as_micros().max(1) as u64;
    let windows = ((secs * 1e6) as u64 / step).max(1) as usize;
    let mut hists = vec![Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?; windows];
    for t in txns {
        // pgbench's clock starts a little after ours (its start-up), so the last
        // transactions may end just past the phase: they count in its last window.
        let i = ((t.end_us.saturating_sub(start_us) / step) as usize).min(windows - 1);
        let _ = hists[i].record((t.latency_us * 1000).max(1));
    }
    Ok(hists
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let mut r = Report::of_window(offset + every * (i as u32 + 1), PhaseKind::Active, h.len(), every, h);
            r.unix = (start_us + step * (i as u64 + 1)) as f64 / 1e6;
            r
        })
        .collect())
}

fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Runs pgbench with `args`, stopping it if `stop` is raised.
fn pgbench_run(s: &Settings, args: &[String], stop: &AtomicBool) -> anyhow::Result<()> {
    let mut child = Command::new(pgbench()?)
        .arg("-h")
        .arg(&s.host)
        .args(["-U", "postgres"])
        .args(args)
        .arg("postgres")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("starting pgbench")?;
    loop {
        if let Some(st) = child.try_wait()? {
            if !st.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                bail!("pgbench {} failed ({st}): {}", args.join(" "), err.trim());
            }
            return Ok(());
        }
        if stop.load(Ordering::Relaxed) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("stopped");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the server to accept connections.
fn wait_for_server(host: &Path, wait: Duration) -> anyhow::Result<()> {
    if !host.is_dir() {
        bail!("PostgreSQL socket directory {}: no such directory", host.display());
    }
    let socket = host.join(".s.PGSQL.5432");
    let end = Instant::now() + wait;
    while !socket.exists() {
        if Instant::now() > end {
            bail!("PostgreSQL did not open {} within {wait:?}", socket.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The socket appears before recovery ends; a connection attempt tells.
    let isready = postgres_tool("pg_isready")?;
    while !Command::new(&isready).arg("-q").arg("-h").arg(host).status()?.success() {
        if Instant::now() > end {
            bail!("PostgreSQL at {} did not get ready within {wait:?}", host.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Initialises (unless told not to) and runs the phases.
pub fn run(s: &Settings, stop: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    if s.scale == 0 {
        bail!("--scale must be at least 1");
    }
    if s.phases.iter().any(|p| p.kind == PhaseKind::Sweep) {
        bail!("a PostgreSQL client has active and idle phases only");
    }
    wait_for_server(&s.host, Duration::from_secs(60))?;
    std::fs::create_dir_all(&s.work)?;
    let started = Instant::now();
    if !s.no_load {
        pgbench_run(s, &["-i".into(), "-q".into(), "-s".into(), s.scale.to_string()], &stop)?;
    }
    let load_secs = if s.no_load { 0.0 } else { started.elapsed().as_secs_f64() };
    if !s.json {
        println!("initialised scale {} in {load_secs:.1}s", s.scale);
    }
    let script = s.work.join("txn.sql");
    std::fs::write(&script, SCRIPT)?;

    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let (mut active_secs, mut offset) = (0.0, Duration::ZERO);
    for (n, phase) in s.phases.iter().enumerate() {
        if phase.kind == PhaseKind::Idle {
            idle_phase(s, phase.duration, offset, &stop)?;
            offset += phase.duration;
            continue;
        }
        // In chunks, so reports come out as the run goes (a run cut short still has
        // them); each chunk reconnects, which costs a few milliseconds.
        let mut left = phase.duration.as_secs().max(1);
        let mut chunk_no = 0;
        while left > 0 && !stop.load(Ordering::Relaxed) {
            let secs = left.min(CHUNK_SECS);
            let chunk = Chunk { name: format!("phase{n}-{chunk_no}"), secs, offset };
            run_chunk(s, &script, &chunk, &stop, &mut total)?;
            offset += Duration::from_secs(secs);
            active_secs += secs as f64;
            left -= secs;
            chunk_no += 1;
        }
    }
    Ok(Summary {
        summary: true,
        load_secs,
        transactions: total.len(),
        tps: if active_secs > 0.0 { total.len() as f64 / active_secs } else { 0.0 },
        p50_us: total.value_at_quantile(0.5) as f64 / 1000.0,
        p99_us: total.value_at_quantile(0.99) as f64 / 1000.0,
        p999_us: total.value_at_quantile(0.999) as f64 / 1000.0,
    })
}

/// An idle phase: no transactions, but its reports, so a timeline shows the gap.
fn idle_phase(s: &Settings, duration: Duration, offset: Duration, stop: &AtomicBool) -> anyhow::Result<()> {
    let (idle, none) = (Instant::now(), Histogram::<u64>::new(3)?);
    while idle.elapsed() < duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(s.report.min(duration.saturating_sub(idle.elapsed())));
        emit(s.json, &Report::of_window(offset + idle.elapsed(), PhaseKind::Idle, 0, s.report, &none));
    }
    Ok(())
}

/// One pgbench run of an active phase: its log files' prefix, its length, and where
/// it starts in the client's timeline.
struct Chunk {
    name: String,
    secs: u64,
    offset: Duration,
}

/// Runs one chunk of transactions, records their latencies in `total` and emits
/// its reports.
fn run_chunk(
    s: &Settings,
    script: &Path,
    c: &Chunk,
    stop: &AtomicBool,
    total: &mut Histogram<u64>,
) -> anyhow::Result<()> {
    let start_us = now_us();
    pgbench_run(
        s,
        &[
            "-n".into(),
            "-c".into(),
            "1".into(),
            "-T".into(),
            c.secs.to_string(),
            "-f".into(),
            script.to_string_lossy().to_string(),
            "-D".into(),
            format!("scale={}", s.scale),
            "-l".into(),
            "--log-prefix".into(),
            s.work.join(&c.name).to_string_lossy().to_string(),
        ],
        stop,
    )?;
    let mut txns = Vec::new();
    for e in std::fs::read_dir(&s.work)?.flatten() {
        if e.file_name().to_string_lossy().starts_with(&format!("{}.", c.name)) {
            txns.extend(std::fs::read_to_string(e.path())?.lines().filter_map(parse_txn));
            let _ = std::fs::remove_file(e.path());
        }
    }
    for t in &txns {
        let _ = total.record((t.latency_us * 1000).max(1));
    }
    for r in reports(&txns, start_us, c.offset, s.report, c.secs as f64)? {
        emit(s.json, &r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transaction_log_becomes_one_report_per_second_from_the_phase_start() {
        let log = "0 1 1500 0 100 200000\n0 2 2500 0 100 900000\n0 3 40000 0 101 500000\nnot a line\n\
                   0 4 100 0 103 10000\n";
        let txns: Vec<Txn> = log.lines().filter_map(parse_txn).collect();
        assert_eq!(txns.len(), 4);
        assert_eq!(txns[0], Txn { end_us: 100_200_000, latency_us: 1500 });
        let r = reports(&txns, 100_000_000, Duration::from_secs(10), Duration::from_secs(1), 3.0).unwrap();
        assert_eq!(r.len(), 3, "one per second of the phase, empty ones too");
        assert_eq!((r[0].t, r[0].ops), (11.0, 2), "t counts from the start of the run");
        assert_eq!(r[1].ops, 1);
        assert!((r[1].p99_us - 40_000.0).abs() < 100.0, "{}", r[1].p99_us);
        assert_eq!(r[2].ops, 1, "a transaction ending just past the phase counts in its last second");
        assert_eq!(r[0].unix, 101.0);
    }
}
