//! The soak: tenants cycling through work, rest and sweeps under the `tierd` policy for
//! an hour. It answers what a short benchmark cannot: does tierd's own memory, open
//! files or CPU creep, does any page come back wrong after hundreds of round trips to
//! the tier, and what does it warn about when nothing is wrong.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tierd_core::health::Colour;

use crate::harness::{Tierd, sleep};
use crate::machine::{RunInfo, cpu_seconds};

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakSpec {
    pub secs: u64,
    pub tenants: usize,
    pub tenant_size: u64,
    pub hot: u64,
    pub budget: u64,
    /// Seconds between readings of tierd's process.
    pub every: u64,
}

/// One reading of tierd's process and the host's health.
#[derive(Debug, Clone, Serialize)]
pub struct Reading {
    pub at_secs: f64,
    pub rss_bytes: u64,
    pub open_files: usize,
    /// tierd's CPU since the last reading, percent of one core.
    pub cpu_percent: f64,
    pub health: Colour,
    /// The checks that were red, by name.
    pub red: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct TenantOutcome {
    pub name: String,
    pub exit_code: Option<i32>,
    pub verified_pages: u64,
    pub corrupt_pages: u64,
}

/// A kind of warning (numbers masked) and how often tierd logged it.
#[derive(Debug, Serialize)]
pub struct Warning {
    pub kind: String,
    pub count: usize,
    pub example: String,
}

#[derive(Debug, Serialize)]
pub struct SoakResults {
    pub run: RunInfo,
    pub secs: u64,
    pub tenants: usize,
    pub tenant_size_bytes: u64,
    pub hot_bytes: u64,
    pub budget_bytes: u64,
    pub readings: Vec<Reading>,
    /// Least-squares slopes over the second half (the first fills memory).
    pub rss_slope_mib_per_hour: f64,
    pub open_files_slope_per_hour: f64,
    pub cpu_slope_percent_per_hour: f64,
    pub outcomes: Vec<TenantOutcome>,
    pub warnings: Vec<Warning>,
    pub red_readings: usize,
}

impl SoakResults {
    /// Every page verified, none wrong, every tenant done with exit code 0.
    pub fn nothing_lost(&self) -> bool {
        self.outcomes.iter().all(|o| o.exit_code == Some(0) && o.corrupt_pages == 0 && o.verified_pages > 0)
    }
}

/// A cycle of work, rest and a sweep, started at a tenant's own offset so they overlap
/// the way a host's tenants do; repeated to fill `secs`.
fn phases(i: usize, secs: u64) -> String {
    let cycle = [("active", 60), ("idle", 45), ("sweep", 10), ("active", 30), ("idle", 90)];
    let mut out = vec![format!("idle:{}s", 1 + i * 13)];
    let mut left = secs.saturating_sub(1 + i as u64 * 13) as i64;
    while left > 0 {
        for (kind, len) in cycle {
            let len = len.min(left);
            if len > 0 {
                out.push(format!("{kind}:{len}s"));
            }
            left -= len;
        }
    }
    out.join(",")
}

/// Runs the soak and writes `soak.json` and `soak.md` to `out`.
pub fn run(spec: &SoakSpec, out: &Path) -> anyhow::Result<SoakResults> {
    let args: Vec<String> =
        ["--policy", "tierd", "--dram-budget", &spec.budget.to_string()].iter().map(|s| s.to_string()).collect();
    let mut t = Tierd::start(&args)?;
    let (size, hot) = (spec.tenant_size.to_string(), spec.hot.to_string());
    for i in 0..spec.tenants {
        let phase = phases(i, spec.secs);
        let seed = (i + 1).to_string();
        let argv = ["--size", &size, "--hot", &hot, "--phase", &phase, "--report", "60s", "--json", "--seed", &seed];
        t.run_workload(&format!("s{i}"), spec.tenant_size, &argv)?;
    }
    let readings = watch(&t, spec)?;
    let outcomes = wait_for_tenants(&t, spec)?;
    let r = results(spec, readings, outcomes, &t.log());
    drop(t);
    write(&r, out)?;
    Ok(r)
}

/// Reads tierd's process every `spec.every` seconds until the tenants' phases are over.
fn watch(t: &Tierd, spec: &SoakSpec) -> anyhow::Result<Vec<Reading>> {
    let start = Instant::now();
    let mut last_cpu = cpu_seconds(t.pid());
    let mut last_at = 0.0;
    let mut readings = Vec::new();
    while start.elapsed().as_secs() < spec.secs {
        sleep(Duration::from_secs(spec.every))?;
        let at = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds(t.pid());
        let status = t.status()?;
        let health = status.health.iter().map(|c| c.colour).max().unwrap_or(Colour::Green);
        let red = status.health.iter().filter(|c| c.colour == Colour::Red).map(|c| c.name.clone()).collect();
        readings.push(Reading {
            at_secs: at,
            rss_bytes: status.tierd_rss_bytes,
            open_files: open_files(t.pid())?,
            cpu_percent: 100.0 * (cpu - last_cpu) / (at - last_at).max(1e-3),
            health,
            red,
        });
        (last_cpu, last_at) = (cpu, at);
        if readings.len() % (300 / spec.every.max(1)).max(1) as usize == 0 {
            let r = readings.last().expect("just pushed");
            eprintln!(
                "  soak {:.0} of {} s: tierd RSS {} MiB, {} open files, {:.1}% CPU, health {}",
                at,
                spec.secs,
                r.rss_bytes >> 20,
                r.open_files,
                r.cpu_percent,
                r.health
            );
        }
    }
    Ok(readings)
}

/// Waits for every tenant to exit (each verifies all its pages at the end).
fn wait_for_tenants(t: &Tierd, spec: &SoakSpec) -> anyhow::Result<Vec<TenantOutcome>> {
    let timeout = Duration::from_secs(600);
    t.wait_until("the tenants to verify their memory and exit", timeout, |s| {
        s.tenants.iter().all(|x| x.state != "running")
    })?;
    let status = t.status()?;
    let mut outcomes = Vec::new();
    for i in 0..spec.tenants {
        let name = format!("s{i}");
        let exit_code = status.tenants.iter().find(|x| x.name == name).and_then(|x| x.exit_code);
        let summary = t.tenant_stdout(&name).lines().rev().find(|l| l.contains("\"summary\":true")).map(str::to_string);
        let summary: serde_json::Value = summary.map(|l| serde_json::from_str(&l)).transpose()?.unwrap_or_default();
        outcomes.push(TenantOutcome {
            name,
            exit_code,
            verified_pages: summary["verified_pages"].as_u64().unwrap_or(0),
            corrupt_pages: summary["corrupt_pages"].as_u64().unwrap_or(0),
        });
    }
    Ok(outcomes)
}

fn results(spec: &SoakSpec, readings: Vec<Reading>, outcomes: Vec<TenantOutcome>, log: &str) -> SoakResults {
    let second_half: Vec<&Reading> = readings.iter().filter(|r| r.at_secs >= spec.secs as f64 / 2.0).collect();
    let slope = |f: &dyn Fn(&Reading) -> f64| {
        let pts: Vec<(f64, f64)> = second_half.iter().map(|r| (r.at_secs / 3600.0, f(r))).collect();
        least_squares_slope(&pts)
    };
    SoakResults {
        run: RunInfo::collect(),
        secs: spec.secs,
        tenants: spec.tenants,
        tenant_size_bytes: spec.tenant_size,
        hot_bytes: spec.hot,
        budget_bytes: spec.budget,
        rss_slope_mib_per_hour: slope(&|r| r.rss_bytes as f64 / (1u64 << 20) as f64),
        open_files_slope_per_hour: slope(&|r| r.open_files as f64),
        cpu_slope_percent_per_hour: slope(&|r| r.cpu_percent),
        red_readings: readings.iter().filter(|r| r.health == Colour::Red).count(),
        readings,
        outcomes,
        warnings: warnings(log),
    }
}

/// The slope of y over x by least squares; 0 with fewer than two distinct x.
pub fn least_squares_slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return 0.0;
    }
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// tierd's warnings grouped by kind: the message with its numbers masked.
pub fn warnings(log: &str) -> Vec<Warning> {
    let mut kinds: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for line in log.lines() {
        let Some((_, msg)) = line.split_once(" warning") else { continue };
        let msg = msg.trim_start_matches(|c: char| c != ':').trim_start_matches(':').trim();
        let e = kinds.entry(mask_numbers(msg)).or_insert((0, msg.to_string()));
        e.0 += 1;
    }
    let mut out: Vec<Warning> =
        kinds.into_iter().map(|(kind, (count, example))| Warning { kind, count, example }).collect();
    out.sort_by_key(|w| std::cmp::Reverse(w.count));
    out
}

/// Each number (digits and decimal points) as one `#`.
fn mask_numbers(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for c in msg.chars() {
        let numeric = c.is_ascii_digit() || (c == '.' && out.ends_with('#'));
        match (numeric, out.ends_with('#')) {
            (true, true) => {}
            (true, false) => out.push('#'),
            (false, _) => out.push(c),
        }
    }
    out
}

fn open_files(pid: u32) -> anyhow::Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd")).context("tierd exited")?.count())
}

fn write(r: &SoakResults, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("soak.json"), serde_json::to_string_pretty(r)? + "\n")?;
    std::fs::write(out.join("soak.md"), markdown(r))?;
    Ok(())
}

fn markdown(r: &SoakResults) -> String {
    let mib = |b: u64| b >> 20;
    let first = r.readings.first();
    let last = r.readings.last();
    let mut md = format!(
        "# Soak: {} tenants cycling for {} min under the `tierd` policy\n\n{}\n\
         {} workload tenants of {} MiB ({} MiB hot) on {} MiB of DRAM, each cycling active 60 s, idle 45 s, \
         a 10 s sweep of all its memory, active 30 s, idle 90 s, started 13 s apart; every read verified, \
         every page verified at the end. tierd read every {} s.\n\n",
        r.tenants,
        r.secs / 60,
        r.run.markdown(),
        r.tenants,
        mib(r.tenant_size_bytes),
        mib(r.hot_bytes),
        mib(r.budget_bytes),
        r.readings.get(1).zip(first).map_or(0.0, |(b, a)| b.at_secs - a.at_secs).round()
    );
    md += "| figure | first reading | last reading | slope over the second half |\n|---|---|---|---|\n";
    md += &format!(
        "| tierd RSS | {} MiB | {} MiB | {:+.2} MiB/h |\n",
        first.map_or(0, |x| mib(x.rss_bytes)),
        last.map_or(0, |x| mib(x.rss_bytes)),
        r.rss_slope_mib_per_hour
    );
    md += &format!(
        "| open files | {} | {} | {:+.2}/h |\n",
        first.map_or(0, |x| x.open_files),
        last.map_or(0, |x| x.open_files),
        r.open_files_slope_per_hour
    );
    md += &format!(
        "| CPU | {:.1}% | {:.1}% | {:+.2} points/h |\n\n",
        first.map_or(0.0, |x| x.cpu_percent),
        last.map_or(0.0, |x| x.cpu_percent),
        r.cpu_slope_percent_per_hour
    );
    md += &format!("Health was red in {} of {} readings", r.red_readings, r.readings.len());
    let mut red: BTreeMap<&str, usize> = BTreeMap::new();
    for name in r.readings.iter().flat_map(|x| &x.red) {
        *red.entry(name).or_default() += 1;
    }
    let red: Vec<String> = red.iter().map(|(name, n)| format!("`{name}` {n}")).collect();
    md += &if red.is_empty() { ".\n\n".to_string() } else { format!(" (checks: {}).\n\n", red.join(", ")) };
    md += "| tenant | exit code | pages verified | corrupt |\n|---|---|---|---|\n";
    for o in &r.outcomes {
        let code = o.exit_code.map_or("none".to_string(), |c| c.to_string());
        md += &format!("| {} | {} | {} | {} |\n", o.name, code, o.verified_pages, o.corrupt_pages);
    }
    md += &format!(
        "\nNothing lost: {}.\n\n## Warnings tierd logged\n\n",
        if r.nothing_lost() { "yes, every page of every tenant read back right" } else { "**no**" }
    );
    if r.warnings.is_empty() {
        md += "None.\n";
    }
    for w in &r.warnings {
        md += &format!("- {} × `{}` (e.g. \"{}\")\n", w.count, w.kind, w.example);
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_series_has_no_slope_and_a_leak_shows_per_hour() {
        assert_eq!(least_squares_slope(&[(0.0, 5.0), (0.5, 5.0), (1.0, 5.0)]), 0.0);
        let leak: Vec<(f64, f64)> = (0..10).map(|i| (i as f64 / 10.0, 100.0 + 3.0 * i as f64)).collect();
        assert!((least_squares_slope(&leak) - 30.0).abs() < 1e-9);
        assert_eq!(least_squares_slope(&[(1.0, 2.0)]), 0.0);
    }

    #[test]
    fn warnings_are_counted_by_kind_with_numbers_masked() {
        let log = "tierd: 2026-11-27T09:14:37.182Z warning: control loop: activeness tracking took 1.3 s\n\
                   tierd: 2026-11-27T09:14:42.530Z warning: control loop: activeness tracking took 12.6 s\n\
                   tierd: 2026-11-27T09:15:27.054Z warning [u2]: control loop: page moves (0 demote) took 2.0 s\n\
                   tierd: 2026-11-27T09:15:28.054Z info: started\n";
        let w = warnings(log);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!((w[0].kind.as_str(), w[0].count), ("control loop: activeness tracking took # s", 2));
        assert_eq!(w[1].example, "control loop: page moves (0 demote) took 2.0 s");
    }

    #[test]
    fn each_tenant_cycles_from_its_own_offset_to_the_end() {
        let p = phases(2, 600);
        assert!(p.starts_with("idle:27s,active:60s,idle:45s,sweep:10s"), "{p}");
        let total: u64 =
            p.split(',').map(|x| x.split_once(':').unwrap().1.trim_end_matches('s').parse::<u64>().unwrap()).sum();
        assert_eq!(total, 600);
    }
}
