//! The cost of observability: how long a `/metrics` scrape takes with many tenants
//! (goal: under 50 ms with 50), and how big the page is. Tenants are workload
//! generators that touch their memory briefly and then idle, so the machine's two
//! cores are free for tierd and the scraper; the tracker still samples every tenant.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::harness::{Tierd, sleep};
use crate::machine::{RunInfo, median};

/// The goal of the observability issue.
pub const GOAL_MS: f64 = 50.0;

#[derive(Debug, Serialize)]
pub struct MetricsResults {
    pub run: RunInfo,
    pub tenants: usize,
    pub scrapes: usize,
    pub median_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub page_bytes: usize,
    pub samples: usize,
    /// `/api/status` (the dashboard's poll), for comparison.
    pub status_median_ms: f64,
}

fn get(addr: &str, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").context("no HTTP header")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("GET {path}: {head}");
    }
    Ok(body.to_string())
}

fn timed(addr: &str, path: &str, n: usize) -> anyhow::Result<(Vec<f64>, String)> {
    let mut ms = Vec::with_capacity(n);
    let mut last = String::new();
    for _ in 0..n {
        let t0 = Instant::now();
        last = get(addr, path)?;
        ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        sleep(Duration::from_millis(50))?;
    }
    Ok((ms, last))
}

/// Runs the benchmark and writes `metrics.json` and `metrics.md` to `out`.
pub fn run(out: &Path, tenants: usize, scrapes: usize) -> anyhow::Result<MetricsResults> {
    let args: Vec<String> =
        ["--policy", "tierd", "--dram-budget", "2G", "--interval", "5s", "--window", "30s", "--http", "127.0.0.1:0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let mut t = Tierd::start(&args)?;
    for i in 0..tenants {
        t.run_workload(
            &format!("t{i:02}"),
            16 << 20,
            &["--size", "16M", "--hot", "4M", "--phase", "active:3s,idle:30m", "--report", "60s", "--no-verify-all"],
        )?;
        if (i + 1) % 10 == 0 {
            eprintln!("  {} tenants running", i + 1);
        }
    }
    // Two intervals so every tenant is measured and tracked.
    sleep(Duration::from_secs(15))?;
    let addr = t.status()?.http_address.context("tierd did not report its HTTP address")?;
    let (mut ms, page) = timed(&addr, "/metrics", scrapes)?;
    let (mut status_ms, _) = timed(&addr, "/api/status", scrapes.min(50))?;
    let seen = page.lines().filter(|l| l.starts_with("tierd_tenant_dram_bytes{")).count();
    if seen != tenants {
        bail!("the page lists {seen} tenants, not {tenants}");
    }
    ms.sort_by(f64::total_cmp);
    status_ms.sort_by(f64::total_cmp);
    let p99 = ms[((ms.len() as f64 * 0.99).ceil() as usize).clamp(1, ms.len()) - 1];
    let r = MetricsResults {
        run: RunInfo::collect(),
        tenants,
        scrapes,
        median_ms: median(&ms),
        p99_ms: p99,
        max_ms: *ms.last().unwrap_or(&0.0),
        page_bytes: page.len(),
        samples: page.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).count(),
        status_median_ms: median(&status_ms),
    };
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("metrics.json"), serde_json::to_string_pretty(&r)? + "\n")?;
    let verdict = if r.p99_ms < GOAL_MS { "meets" } else { "misses" };
    let md = format!(
        "# Metrics benchmark: the cost of a `/metrics` scrape\n\n{}\n\
         {} tenants (16 MiB workload generators, idle after a 3 s burst, tracked by the `tierd` policy), \
         {} scrapes 50 ms apart over loopback, each timed from connect to the last byte.\n\n\
         | figure | value |\n|---|---|\n\
         | scrape median | {:.2} ms |\n| scrape p99 | {:.2} ms |\n| scrape max | {:.2} ms |\n\
         | page size | {} bytes, {} samples |\n| `/api/status` median | {:.2} ms |\n\n\
         The goal is under {GOAL_MS:.0} ms with 50 tenants; the p99 {verdict} it.\n",
        r.run.markdown(),
        r.tenants,
        r.scrapes,
        r.median_ms,
        r.p99_ms,
        r.max_ms,
        r.page_bytes,
        r.samples,
        r.status_median_ms
    );
    std::fs::write(out.join("metrics.md"), md)?;
    Ok(r)
}
