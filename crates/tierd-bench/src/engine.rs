//! `tierd-bench engine`: the foundation's own costs — how fast the movers demote and
//! prefetch, and what tierd itself spends in CPU and memory managing 8 tenants: with
//! fixed quotas, and with the tierd policy tracking 8 GiB (the tracker's budget is
//! under 1% of one core per 8 GiB tracked).

use std::time::{Duration, Instant};

use serde::Serialize;
use tierd::api::{MoveReport, Request};
use tierd_core::TenantName;
use tierd_core::size::{GIB, MIB, human};

use crate::harness::{Tierd, sleep};
use crate::machine::{RunInfo, cpu_seconds, median, rss_bytes};

/// One demote + prefetch round over an idle tenant.
#[derive(Debug, Clone, Serialize)]
pub struct MoverRound {
    pub demoted_bytes: u64,
    /// `process_madvise(MADV_PAGEOUT)` alone.
    pub demote_gib_per_sec: f64,
    /// Freeing the swap cache afterwards (cgroup v1 squeeze).
    pub freed_bytes: u64,
    pub reclaim_gib_per_sec: f64,
    /// Demotion end to end: page-out plus freeing DRAM.
    pub demote_total_gib_per_sec: f64,
    pub prefetched_bytes: u64,
    /// From the `MADV_WILLNEED` call until the tenant's memory is resident again.
    pub prefetch_gib_per_sec: f64,
}

/// tierd's cost with many tenants.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    pub policy: String,
    pub tenants: usize,
    pub tenant_bytes: u64,
    pub interval: String,
    pub window_secs: f64,
    /// tierd's CPU over the window, in % of one core.
    pub cpu_percent: f64,
    /// The trackers' own thread CPU over the window, in % of one core (tierd policy only).
    pub tracker_cpu_percent: Option<f64>,
    /// Pages the trackers sampled in their last interval, all tenants together.
    pub sample_pages: Option<u64>,
    /// What that bought: the median tenant's 95% confidence interval on its active
    /// memory, relative to the estimate, at the end.
    #[serde(default)]
    pub active_ci_relative: Option<f64>,
    pub rss_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineResults {
    pub run: RunInfo,
    pub tenant_bytes: u64,
    pub rounds: Vec<MoverRound>,
    pub median_demote_gib_per_sec: f64,
    pub median_demote_total_gib_per_sec: f64,
    pub median_prefetch_gib_per_sec: f64,
    pub overhead: Vec<Overhead>,
}

fn gibps(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 { 0.0 } else { bytes as f64 / GIB as f64 / secs }
}

/// Measures demotion and prefetch over a `size`-byte idle tenant, `reps` times, each
/// on a fresh tenant whose memory is all mapped (after a prefetch the pages sit in the
/// swap cache, unmapped, until touched, which would skew the next round).
fn movers(size: u64, reps: usize) -> anyhow::Result<Vec<MoverRound>> {
    let mut t = Tierd::start(&["--dram-budget".into(), format!("{}", 2 * size), "--policy".into(), "static".into()])?;
    let sz = format!("{size}");
    let mut rounds = Vec::new();
    for rep in 0..reps {
        eprintln!("movers: round {}/{reps}", rep + 1);
        let id = format!("m{rep}");
        let name = TenantName::new(&id)?;
        t.run_workload(&id, size, &["--size", &sz, "--hot", "4M", "--phase", "idle:1h", "--no-verify-all"])?;
        t.wait_until("the tenant to fill its memory", Duration::from_secs(120), |s| {
            s.tenants.iter().any(|x| x.name == id && x.dram_bytes >= size * 98 / 100)
        })?;
        let d: MoveReport = serde_json::from_value(t.request(&Request::Demote { name: name.clone(), bytes: None })?)?;
        sleep(Duration::from_secs(1))?;
        let footprint = t.tenant(&id)?.size_bytes;
        let start = Instant::now();
        let p: MoveReport =
            serde_json::from_value(t.request(&Request::Prefetch { name: name.clone(), bytes: Some(u64::MAX) })?)?;
        // The idle tenant is whole again when its cgroup holds (nearly) its footprint.
        let target = footprint * 97 / 100;
        t.wait_until("prefetched memory to be resident", Duration::from_secs(120), |s| {
            s.tenants.iter().any(|x| x.name == id && x.dram_bytes >= target)
        })?;
        let secs = start.elapsed().as_secs_f64();
        rounds.push(MoverRound {
            demoted_bytes: d.bytes,
            demote_gib_per_sec: gibps(d.bytes, d.seconds),
            freed_bytes: d.freed_bytes,
            reclaim_gib_per_sec: gibps(d.freed_bytes, d.reclaim_seconds),
            demote_total_gib_per_sec: gibps(d.bytes, d.seconds + d.reclaim_seconds),
            prefetched_bytes: p.bytes,
            prefetch_gib_per_sec: gibps(p.bytes, secs),
        });
        t.request(&Request::Stop { name: name.clone(), signal: 9 })?;
        t.wait_until("the tenant to exit", Duration::from_secs(60), |s| {
            s.tenants.iter().any(|x| x.name == id && x.state == "exited")
        })?;
        t.request(&Request::Remove { name })?;
    }
    Ok(rounds)
}

/// tierd's CPU and RSS while `n` tenants of `each` bytes run at 2x overcommit under
/// `policy`.
fn overhead(policy: &str, n: usize, each: u64, interval: &str, window: Duration) -> anyhow::Result<Overhead> {
    let budget = n as u64 * each / 2;
    let args = [
        "--dram-budget".to_string(),
        budget.to_string(),
        "--ratio".into(),
        "1.5".into(),
        "--policy".into(),
        policy.into(),
        "--interval".into(),
        interval.into(),
    ];
    let mut t = Tierd::start(&args)?;
    let size = each.to_string();
    let hot = (each / 8).to_string();
    let dur = format!("{}s", window.as_secs() + 60);
    for i in 0..n {
        t.run_workload(
            &format!("t{i}"),
            each,
            &["--size", &size, "--hot", &hot, "--duration", &dur, "--no-verify-all"],
        )?;
    }
    // Let them fill and settle before measuring.
    t.wait_until("tenants to fill", Duration::from_secs(180), |s| {
        s.tenants.iter().all(|x| x.size_bytes >= each * 9 / 10)
    })?;
    sleep(Duration::from_secs(5))?;
    let pid = t.pid();
    let c0 = cpu_seconds(pid);
    let mut last = t.status()?;
    let tr0 = last.tracker_seconds();
    let start = Instant::now();
    let mut rss = 0;
    while start.elapsed() < window {
        rss = rss.max(rss_bytes(pid));
        // Status calls are part of a real deployment's load too: one every 5 s.
        last = t.status()?;
        sleep(Duration::from_secs(5))?;
    }
    let secs = start.elapsed().as_secs_f64();
    let tracking = policy == "tierd";
    Ok(Overhead {
        policy: policy.into(),
        tracker_cpu_percent: tracking.then(|| (last.tracker_seconds() - tr0) / secs * 100.0),
        sample_pages: tracking.then(|| last.tenants.iter().map(|x| x.tracker_sample_pages).sum()),
        active_ci_relative: tracking
            .then(|| {
                let rel: Vec<f64> = last
                    .tenants
                    .iter()
                    .filter_map(|x| Some(x.active_ci_bytes? as f64 / x.active_bytes.filter(|&a| a > 0)? as f64))
                    .collect();
                (!rel.is_empty()).then(|| median(&rel))
            })
            .flatten(),
        tenants: n,
        tenant_bytes: each,
        interval: interval.into(),
        window_secs: secs,
        cpu_percent: (cpu_seconds(pid) - c0) / secs * 100.0,
        rss_bytes: rss,
    })
}

/// Runs the engine benchmark and writes `engine.json` and `engine.md` to `out`.
pub fn run(out: &std::path::Path, size: u64, reps: usize, window: Duration) -> anyhow::Result<EngineResults> {
    let run = RunInfo::collect();
    let rounds = movers(size, reps)?;
    let mut over = Vec::new();
    for interval in ["10s", "1s"] {
        eprintln!("overhead: 8 tenants, static quotas, interval {interval}");
        over.push(overhead("static", 8, 512 * MIB, interval, window)?);
    }
    // The tracker's budget is per 8 GiB tracked: 8 tenants of 1 GiB, at the default
    // interval and at the 5 s the suite runs with.
    for interval in ["10s", "5s"] {
        eprintln!("overhead: 8 tenants, tierd policy, interval {interval}");
        over.push(overhead("tierd", 8, GIB, interval, window)?);
    }
    let res = EngineResults {
        run,
        tenant_bytes: size,
        median_demote_gib_per_sec: median(&rounds.iter().map(|r| r.demote_gib_per_sec).collect::<Vec<_>>()),
        median_demote_total_gib_per_sec: median(&rounds.iter().map(|r| r.demote_total_gib_per_sec).collect::<Vec<_>>()),
        median_prefetch_gib_per_sec: median(&rounds.iter().map(|r| r.prefetch_gib_per_sec).collect::<Vec<_>>()),
        rounds,
        overhead: over,
    };
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("engine.json"), serde_json::to_string_pretty(&res)?)?;
    std::fs::write(out.join("engine.md"), markdown(&res))?;
    Ok(res)
}

fn markdown(r: &EngineResults) -> String {
    let mut s = String::from("# Engine benchmark: movers and tierd's own cost\n\n");
    s += &r.run.markdown();
    s += &format!(
        "\n## Movers ({} idle tenant, {} rounds; the tier is a file behind a loop device)\n\n\
         | round | demoted | page-out GiB/s | DRAM freed | free GiB/s | demote end-to-end GiB/s | prefetched | prefetch GiB/s |\n\
         |---|---|---|---|---|---|---|---|\n",
        human(r.tenant_bytes),
        r.rounds.len()
    );
    for (i, x) in r.rounds.iter().enumerate() {
        s += &format!(
            "| {} | {} | {:.2} | {} | {:.2} | {:.2} | {} | {:.2} |\n",
            i + 1,
            human(x.demoted_bytes),
            x.demote_gib_per_sec,
            human(x.freed_bytes),
            x.reclaim_gib_per_sec,
            x.demote_total_gib_per_sec,
            human(x.prefetched_bytes),
            x.prefetch_gib_per_sec
        );
    }
    s += &format!(
        "\nMedians: page-out **{:.2} GiB/s**, demotion end to end (page-out + freeing the swap cache) \
         **{:.2} GiB/s**, prefetch until resident **{:.2} GiB/s**.\n",
        r.median_demote_gib_per_sec, r.median_demote_total_gib_per_sec, r.median_prefetch_gib_per_sec
    );
    s += "\n## tierd's own cost with 8 tenants at 2x overcommit\n\n\
          Each tenant's hot set is an eighth of it. The tracker column is the trackers' own thread CPU \
          (sampling, page-outs of the samples, the page-table scans), the goal being under 1% of one core \
          per 8 GiB tracked, which the trackers hold themselves to (`tracker.cpu_budget`, 0.9%) by shrinking their \
          samples; the CI column is what the samples bought. tierd CPU is the whole daemon (also the demotions the \
          policy asks for).\n\n\
          | policy | tenants | each | interval | window | tierd CPU (% of one core) | tracker CPU (% of one core) | \
          pages sampled per interval | active memory ±95% CI (median tenant) | tierd RSS |\n\
          |---|---|---|---|---|---|---|---|---|---|\n";
    for o in &r.overhead {
        s += &format!(
            "| {} | {} | {} | {} | {:.0} s | {:.2} | {} | {} | {} | {} |\n",
            o.policy,
            o.tenants,
            human(o.tenant_bytes),
            o.interval,
            o.window_secs,
            o.cpu_percent,
            o.tracker_cpu_percent.map_or("—".into(), |c| format!("{c:.2}")),
            o.sample_pages.map_or("—".into(), |n| n.to_string()),
            o.active_ci_relative.map_or("—".into(), |c| format!("±{:.1}%", c * 100.0)),
            human(o.rss_bytes)
        );
    }
    s += "\nPage-out is the `process_madvise(MADV_PAGEOUT)` call; on cgroup v1 the pages it writes stay in the \
          swap cache until reclaim runs, so tierd squeezes the tenant's limit for a moment to free them \
          (\"free GiB/s\"). Prefetch time runs from the `MADV_WILLNEED` call until the tenant's cgroup holds the \
          memory again. These machines are shared and noisy: compare within a run.\n";
    s
}
