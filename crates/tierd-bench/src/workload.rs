//! The workload generator: a tenant with a known hot set and verifiable memory.
//!
//! It maps `size` bytes, fills every 4 KiB page with content derived from the page's
//! index and a seed, then runs phases: `active` reads (and optionally rewrites) random
//! cache lines of pages in the hot set, `idle` sleeps, `sweep` walks all memory at
//! random (a noisy neighbour). Every read is verified; a wrong byte ends the run with
//! exit code 2. At the end every page is verified. Throughput and latency percentiles
//! go to stdout each report interval, as text or JSON lines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde::Serialize;
use tierd_sys::memory::{AnonMemory, PageKind};

pub const PAGE: usize = tierd_core::size::PAGE as usize;
const WORDS: usize = PAGE / 8;
/// Words in one cache line: what an access reads.
const LINE: usize = 8;

/// What a phase does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Active,
    Idle,
    Sweep,
}

/// One phase of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub duration: Duration,
}

/// Parses `active:30s,idle:1m,active:2m`.
pub fn parse_phases(s: &str) -> anyhow::Result<Vec<Phase>> {
    s.split(',')
        .map(|p| {
            let (kind, dur) =
                p.split_once(':').with_context(|| format!("phase `{p}`: write KIND:DURATION, e.g. active:30s"))?;
            let kind = match kind.trim() {
                "active" => PhaseKind::Active,
                "idle" => PhaseKind::Idle,
                "sweep" => PhaseKind::Sweep,
                k => bail!("phase kind `{k}`: choose active, idle or sweep"),
            };
            let duration = humantime_like(dur.trim()).with_context(|| format!("phase `{p}`: bad duration"))?;
            Ok(Phase { kind, duration })
        })
        .collect()
}

/// `500ms`, `30s`, `2m`, `1h`.
pub fn humantime_like(s: &str) -> anyhow::Result<Duration> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().with_context(|| format!("`{s}` is not a duration"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        u => bail!("unknown duration unit `{u}` in `{s}`: use ms, s, m or h"),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// Hot-set access distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Uniform,
    Zipf,
}

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub size: usize,
    pub hot: usize,
    /// Start of the hot set within the memory, in bytes.
    pub hot_offset: usize,
    pub pattern: Pattern,
    pub phases: Vec<Phase>,
    pub report: Duration,
    pub json: bool,
    /// Fraction of accesses that rewrite their page.
    pub write_ratio: f64,
    /// What backs its memory: as the system gives (the default), huge pages asked for
    /// (`--thp`), or small pages only (`--small-pages`).
    pub pages: PageKind,
    pub seed: u64,
    /// Verify every page at the end (faults all of it back in).
    pub verify_all: bool,
    /// Accesses per second in active and sweep phases; 0 for as fast as it can. A slow
    /// rate makes memory that is touched now and then rather than all the time.
    pub rate: u64,
}

/// Value of word `w` of page `p` at generation `g`.
#[inline]
fn expected(seed: u64, p: usize, w: usize, g: u32) -> u64 {
    let mut z = seed ^ ((p as u64) << 20 | (w as u64) << 4) ^ ((g as u64) << 52);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D1_049B_B133_111B);
    z ^ (z >> 31)
}

/// A report line.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub t: f64,
    /// Wall-clock time of the report, seconds since the Unix epoch.
    pub unix: f64,
    pub phase: PhaseKind,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// With `--thp`: the share of the hot set mapped by huge pages right now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_huge: Option<f64>,
    /// Major faults the process took in the window: pages it waited on the disk for.
    /// A page tierd read back ahead is a minor fault, so this falls to about zero once
    /// the hot set is in DRAM, whatever the throughput does meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
}

/// The final summary line.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub summary: bool,
    pub active_ops: u64,
    pub active_secs: f64,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub verified_pages: u64,
    pub corrupt_pages: u64,
    pub fill_secs: f64,
    pub verify_secs: f64,
}

/// Zipf(s = 0.99) over `n` ranks by inverse CDF, ranks scattered over the hot pages.
pub(crate) struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub(crate) fn new(n: usize) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 1..=n {
            acc += 1.0 / (k as f64).powf(0.99);
            cdf.push(acc);
        }
        for v in &mut cdf {
            *v /= acc;
        }
        Zipf { cdf }
    }

    pub(crate) fn sample(&self, u: f64) -> usize {
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Runs the workload; returns the summary, or an error on a corrupted page.
pub fn run(s: &Settings, stop: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    if s.hot > s.size || s.hot_offset + s.hot > s.size {
        bail!("the hot set ({} bytes at offset {}) must fit in the memory ({} bytes)", s.hot, s.hot_offset, s.size);
    }
    if s.hot < PAGE {
        bail!("the hot set must be at least one page ({PAGE} bytes)");
    }
    let mut mem = Pages { mem: AnonMemory::new(s.size, s.pages)?, gens: vec![0u32; s.size / PAGE], seed: s.seed };
    let started = Instant::now();
    // Pages written so far: stopped during the fill, only those are verified (the rest
    // never held anything to lose).
    let filled = mem.fill(&stop);
    let fill_secs = started.elapsed().as_secs_f64();
    if !s.json {
        println!("filled {} MiB in {fill_secs:.2}s", s.size >> 20);
    }
    let mut meter = Meter::new(s.report)?;
    run_phases(s, &mut mem, &stop, &mut meter)?;
    let v0 = Instant::now();
    let (verified, corrupt) = if s.verify_all { mem.verify(filled) } else { (0, 0) };
    Ok(Summary {
        summary: true,
        active_ops: meter.active_ops(),
        active_secs: meter.active_secs,
        ops_per_sec: meter.ops_per_sec(),
        p50_us: meter.quantile_us(0.5),
        p99_us: meter.quantile_us(0.99),
        p999_us: meter.quantile_us(0.999),
        verified_pages: verified,
        corrupt_pages: corrupt,
        fill_secs,
        verify_secs: v0.elapsed().as_secs_f64(),
    })
}

/// Runs the phases until their end or `stop`, reporting through `meter`.
fn run_phases(s: &Settings, mem: &mut Pages, stop: &AtomicBool, meter: &mut Meter) -> anyhow::Result<()> {
    let pick = Picker::new(s);
    let mut rng = fastrand::Rng::with_seed(s.seed ^ 0x5EED);
    for phase in &s.phases {
        let end = Instant::now() + phase.duration;
        let phase_start = Instant::now();
        let mut phase_ops = 0u64;
        loop {
            let now = Instant::now();
            if now >= end || stop.load(Ordering::Relaxed) {
                break;
            }
            if let Some(mut r) = meter.report_due(now, phase.kind) {
                r.hot_huge = (s.pages == PageKind::Thp).then(|| huge_share(&mem.mem, s.hot_offset, s.hot));
                emit(s.json, &r);
            }
            if phase.kind == PhaseKind::Idle {
                std::thread::sleep(meter.idle_nap(now, end));
                continue;
            }
            if s.rate > 0 && phase_ops as f64 >= phase_start.elapsed().as_secs_f64() * s.rate as f64 {
                std::thread::sleep(Duration::from_millis(1).min(meter.idle_nap(now, end)));
                continue;
            }
            phase_ops += 64;
            // A batch of accesses between clock checks.
            for _ in 0..64 {
                let p = pick.page(phase.kind, &mut rng);
                let line = rng.usize(0..WORDS / LINE) * LINE;
                let write = s.write_ratio > 0.0 && rng.f64() < s.write_ratio;
                let a = Instant::now();
                mem.access(p, line, write)?;
                meter.record(phase.kind, a.elapsed().as_nanos() as u64);
            }
        }
        meter.phase_done(phase.kind, phase_start);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(())
}

/// Which page an access goes to: anywhere in a sweep, else in the hot set, uniformly
/// or by Zipf rank.
struct Picker {
    pages: usize,
    hot_pages: usize,
    hot_first: usize,
    zipf: Option<Zipf>,
    /// Scatters Zipf ranks over the hot set so the hottest pages are not adjacent.
    stride: usize,
}

impl Picker {
    fn new(s: &Settings) -> Picker {
        let hot_pages = s.hot / PAGE;
        Picker {
            pages: s.size / PAGE,
            hot_pages,
            hot_first: s.hot_offset / PAGE,
            zipf: (s.pattern == Pattern::Zipf).then(|| Zipf::new(hot_pages)),
            stride: scatter_stride(hot_pages),
        }
    }

    #[inline]
    fn page(&self, kind: PhaseKind, rng: &mut fastrand::Rng) -> usize {
        if kind == PhaseKind::Sweep {
            return rng.usize(0..self.pages);
        }
        let rank = match &self.zipf {
            Some(z) => z.sample(rng.f64()),
            None => rng.usize(0..self.hot_pages),
        };
        self.hot_first + (rank * self.stride) % self.hot_pages
    }
}

/// The tenant's memory and the generation each page's content was written at.
struct Pages {
    mem: AnonMemory,
    gens: Vec<u32>,
    seed: u64,
}

impl Pages {
    /// Writes every page's first content; returns the pages written before `stop`.
    fn fill(&mut self, stop: &AtomicBool) -> usize {
        let words = self.mem.as_mut_slice();
        let mut filled = 0;
        for p in 0..self.gens.len() {
            for w in 0..WORDS {
                words[p * WORDS + w] = expected(self.seed, p, w, 0);
            }
            filled = p + 1;
            if p % 4096 == 0 && stop.load(Ordering::Relaxed) {
                break;
            }
        }
        filled
    }

    /// Reads one cache line of page `p` and checks it; a write rewrites the whole page
    /// at the next generation.
    #[inline]
    fn access(&mut self, p: usize, line: usize, write: bool) -> anyhow::Result<()> {
        let words = self.mem.as_mut_slice();
        let g = self.gens[p];
        for w in line..line + LINE {
            let v = words[p * WORDS + w];
            if v != expected(self.seed, p, w, g) {
                bail!("corrupt memory: page {p} word {w} holds {v:#x}, expected {:#x}", expected(self.seed, p, w, g));
            }
        }
        if write {
            let g = g.wrapping_add(1);
            for w in 0..WORDS {
                words[p * WORDS + w] = expected(self.seed, p, w, g);
            }
            self.gens[p] = g;
        }
        Ok(())
    }

    /// Checks every word of the first `filled` pages: (pages verified, corrupt).
    fn verify(&self, filled: usize) -> (u64, u64) {
        let words = self.mem.as_slice();
        let mut corrupt = 0;
        for p in 0..filled {
            let g = self.gens[p];
            if (0..WORDS).any(|w| words[p * WORDS + w] != expected(self.seed, p, w, g)) {
                corrupt += 1;
                eprintln!("corrupt memory: page {p}");
            }
        }
        (filled as u64, corrupt)
    }
}

/// Share of `len` bytes at `offset` in `mem` that the kernel maps with huge pages.
fn huge_share(mem: &AnonMemory, offset: usize, len: usize) -> f64 {
    let start = mem.start() + offset as u64;
    let scan = tierd_sys::pagemap::Pagemap::open(std::path::Path::new("/proc"), std::process::id())
        .and_then(|p| p.scan(start, start + len as u64));
    scan.map_or(0.0, |runs| tierd_sys::pagemap::PageCounts::of(&runs).huge as f64 / len as f64)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A stride coprime to `n`: `rank * stride % n` visits every slot once, spreading
/// neighbouring ranks (the hottest items) far apart.
pub(crate) fn scatter_stride(n: usize) -> usize {
    let mut st = (n as u64 * 7 / 11) | 1;
    while gcd(st, n as u64) != 1 {
        st += 2;
    }
    st as usize
}

impl Report {
    /// The report of a window of `ops` operations over `dt`, `t` into the run, with
    /// latencies (ns) in `hist`.
    pub(crate) fn of_window(t: Duration, phase: PhaseKind, ops: u64, dt: Duration, hist: &Histogram<u64>) -> Report {
        Report {
            t: t.as_secs_f64(),
            unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            phase,
            ops,
            ops_per_sec: ops as f64 / dt.as_secs_f64().max(1e-9),
            p50_us: hist.value_at_quantile(0.5) as f64 / 1000.0,
            p99_us: hist.value_at_quantile(0.99) as f64 / 1000.0,
            p999_us: hist.value_at_quantile(0.999) as f64 / 1000.0,
            hot_huge: None,
            major_faults: None,
        }
    }
}

/// Major faults this process has taken so far (0 where /proc cannot say).
fn major_faults() -> u64 {
    let proc = tierd_sys::procfs::ProcFs::new("/proc");
    proc.counters(std::process::id()).map_or(0, |c| c.major_faults.own)
}

/// The throughput and latency bookkeeping of a load generator: one report window at a
/// time, and the active phases in total.
pub(crate) struct Meter {
    t0: Instant,
    every: Duration,
    next_report: Instant,
    window_start: Instant,
    window: Histogram<u64>,
    window_ops: u64,
    total: Histogram<u64>,
    active_ops: u64,
    active_secs: f64,
    /// Major faults before the window.
    faults_before: u64,
}

impl Meter {
    pub(crate) fn new(every: Duration) -> anyhow::Result<Meter> {
        let t0 = Instant::now();
        let total = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
        Ok(Meter {
            t0,
            every,
            next_report: t0 + every,
            window_start: t0,
            window: total.clone(),
            window_ops: 0,
            total,
            active_ops: 0,
            active_secs: 0.0,
            faults_before: major_faults(),
        })
    }

    /// One operation of `ns` in a phase of `kind`.
    pub(crate) fn record(&mut self, kind: PhaseKind, ns: u64) {
        let _ = self.window.record(ns.max(1));
        if kind == PhaseKind::Active {
            let _ = self.total.record(ns.max(1));
            self.active_ops += 1;
        }
        self.window_ops += 1;
    }

    /// The window's report if one is due at `now` (the window starts over).
    pub(crate) fn report_due(&mut self, now: Instant, kind: PhaseKind) -> Option<Report> {
        if now < self.next_report {
            return None;
        }
        let mut r = Report::of_window(now - self.t0, kind, self.window_ops, now - self.window_start, &self.window);
        let faults = major_faults();
        r.major_faults = Some(faults.saturating_sub(self.faults_before));
        self.faults_before = faults;
        self.window.reset();
        self.window_ops = 0;
        self.window_start = now;
        self.next_report += self.every;
        Some(r)
    }

    /// How long an idle phase may sleep before the next report or `end`.
    pub(crate) fn idle_nap(&self, now: Instant, end: Instant) -> Duration {
        (end - now).min(self.next_report.saturating_duration_since(now)).min(Duration::from_millis(50))
    }

    /// A phase of `kind` that began at `start` is over.
    pub(crate) fn phase_done(&mut self, kind: PhaseKind, start: Instant) {
        if kind == PhaseKind::Active {
            self.active_secs += start.elapsed().as_secs_f64();
        }
    }

    pub(crate) fn active_ops(&self) -> u64 {
        self.active_ops
    }

    /// Active operations per second over the active phases.
    pub(crate) fn ops_per_sec(&self) -> f64 {
        if self.active_secs > 0.0 { self.active_ops as f64 / self.active_secs } else { 0.0 }
    }

    /// A latency quantile (µs) over the active phases.
    pub(crate) fn quantile_us(&self, q: f64) -> f64 {
        self.total.value_at_quantile(q) as f64 / 1000.0
    }
}

pub(crate) fn emit(json: bool, r: &Report) {
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    } else {
        println!(
            "t={:>6.1}s {:<6} {:>10.0} ops/s  p50 {:>7.2}µs  p99 {:>8.2}µs  p999 {:>9.2}µs{}",
            r.t,
            format!("{:?}", r.phase).to_lowercase(),
            r.ops_per_sec,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.hot_huge.map_or(String::new(), |h| format!("  hot on huge pages {:.0}%", h * 100.0))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_parse() {
        let p = parse_phases("active:30s,idle:1m,sweep:500ms").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1], Phase { kind: PhaseKind::Idle, duration: Duration::from_secs(60) });
        assert_eq!(p[2].duration, Duration::from_millis(500));
        assert!(parse_phases("busy:3s").is_err());
        assert!(parse_phases("active").is_err());
        assert!(parse_phases("active:3y").is_err());
    }

    #[test]
    fn zipf_favours_low_ranks() {
        let z = Zipf::new(1000);
        let mut rng = fastrand::Rng::with_seed(1);
        let low = (0..10000).filter(|_| z.sample(rng.f64()) < 100).count();
        assert!(low > 6000, "{low}");
    }

    fn settings(size: usize, hot: usize) -> Settings {
        Settings {
            size,
            hot,
            hot_offset: 0,
            pattern: Pattern::Uniform,
            phases: vec![Phase { kind: PhaseKind::Active, duration: Duration::from_millis(200) }],
            report: Duration::from_secs(10),
            json: true,
            write_ratio: 0.2,
            pages: PageKind::Default,
            seed: 7,
            verify_all: true,
            rate: 0,
        }
    }

    #[test]
    fn a_rate_paces_the_accesses() {
        let mut st = settings(8 << 20, 1 << 20);
        st.rate = 5000;
        st.phases = vec![Phase { kind: PhaseKind::Active, duration: Duration::from_secs(1) }];
        let s = run(&st, Arc::new(AtomicBool::new(false))).unwrap();
        assert!((4800..=5200).contains(&s.active_ops), "5000 accesses a second: {s:?}");
    }

    #[test]
    fn stopped_during_its_fill_it_verifies_what_it_wrote_and_finds_nothing_corrupt() {
        let s = run(&settings(64 << 20, 1 << 20), Arc::new(AtomicBool::new(true))).unwrap();
        assert_eq!((s.corrupt_pages, s.verified_pages), (0, 1), "stopped at the first check, one page written");
    }

    #[test]
    fn a_short_run_verifies_everything() {
        let s = run(&settings(8 << 20, 1 << 20), Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(s.corrupt_pages, 0);
        assert_eq!(s.verified_pages, (8 << 20) / PAGE as u64);
        assert!(s.active_ops > 1000, "{s:?}");
    }

    #[test]
    fn a_hot_set_outside_memory_is_refused() {
        let mut st = settings(8 << 20, 4 << 20);
        st.hot_offset = 6 << 20;
        assert!(run(&st, Arc::new(AtomicBool::new(false))).is_err());
    }
}
