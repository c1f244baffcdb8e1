//! `tierd-bench latency`: memory latency by page size, as the memory-latency tools
//! measure it — a dependent-load pointer chase over a random cyclic permutation of
//! cache lines, so every load waits for the one before and neither the prefetchers
//! nor out-of-order execution hide the miss. Working sets run from below L3 to
//! several GiB; where they outgrow the TLB's reach, page walks show up in ns per load,
//! and huge pages take them away. The report puts the TLB coverage model beside it.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use tierd_core::size::human;
use tierd_core::tlb;
use tierd_sys::hugetlb::{Pool, Reservation};
use tierd_sys::memory::{AnonMemory, PageKind};
use tierd_sys::pagemap::{PageCounts, Pagemap};

use crate::machine::{RunInfo, median};

/// Bytes per chased node: one cache line.
const LINE: usize = 64;

/// A page size the benchmark can back memory with (`name()` is how results show it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Page {
    #[value(name = "4k")]
    Small,
    #[value(name = "2m-thp")]
    Thp,
    #[value(name = "2m-hugetlb")]
    Hugetlb2M,
    #[value(name = "1g-hugetlb")]
    Hugetlb1G,
}

impl Serialize for Page {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Page {
    pub fn name(self) -> &'static str {
        match self {
            Page::Small => "4k",
            Page::Thp => "2m-thp",
            Page::Hugetlb2M => "2m-hugetlb",
            Page::Hugetlb1G => "1g-hugetlb",
        }
    }

    fn kind(self) -> PageKind {
        match self {
            Page::Small => PageKind::Small,
            Page::Thp => PageKind::Thp,
            Page::Hugetlb2M => PageKind::Hugetlb2M,
            Page::Hugetlb1G => PageKind::Hugetlb1G,
        }
    }

    /// The hugetlb page size, for the kinds that come from a pool.
    fn pool_page(self) -> Option<u64> {
        match self {
            Page::Hugetlb2M => Some(2 << 20),
            Page::Hugetlb1G => Some(1 << 30),
            Page::Small | Page::Thp => None,
        }
    }
}

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub sizes: Vec<u64>,
    pub pages: Vec<Page>,
    pub reps: usize,
    /// Dependent loads timed per repetition.
    pub loads: u64,
    /// Grow the hugetlb pools for the run (given back afterwards).
    pub reserve_hugetlb: bool,
    /// TLB entries assumed by the coverage model printed beside the measurements.
    pub tlb_entries: u64,
}

/// One working set on one page size.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub page: Page,
    pub size_bytes: u64,
    /// Median over the repetitions.
    pub ns_per_load: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    /// Share of the working set actually on huge pages (THP can fall short).
    pub huge_fraction: f64,
}

/// A page size that could not be measured, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub page: Page,
    pub size_bytes: Option<u64>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyResults {
    pub run: RunInfo,
    pub tlb_entries: u64,
    pub loads_per_rep: u64,
    pub reps: usize,
    pub points: Vec<Point>,
    pub skipped: Vec<Skipped>,
}

impl LatencyResults {
    fn point(&self, page: Page, size: u64) -> Option<&Point> {
        self.points.iter().find(|p| p.page == page && p.size_bytes == size)
    }
}

/// Links the cache lines of `words` into one random cycle and returns the index of
/// its first node. Every line is written, so every page is touched.
fn link_random_cycle(words: &mut [u64], rng: &mut fastrand::Rng) -> usize {
    let per_line = LINE / 8;
    let lines = words.len() / per_line;
    let mut order: Vec<u32> = (0..lines as u32).collect();
    rng.shuffle(&mut order);
    for w in order.windows(2) {
        words[w[0] as usize * per_line] = (w[1] as usize * per_line) as u64;
    }
    let (first, last) = (order[0] as usize, order[lines - 1] as usize);
    words[last * per_line] = (first * per_line) as u64;
    first * per_line
}

/// Follows `loads` links from `start`; returns ns per load.
fn chase(words: &[u64], start: usize, loads: u64) -> f64 {
    let mut i = start;
    let t = Instant::now();
    for _ in 0..loads {
        i = words[i] as usize;
    }
    let ns = t.elapsed().as_nanos() as f64;
    std::hint::black_box(i);
    ns / loads as f64
}

/// Share of `mem` the kernel maps with huge pages.
fn huge_fraction(mem: &AnonMemory) -> f64 {
    let end = mem.start() + mem.len_bytes() as u64;
    match Pagemap::open(Path::new("/proc"), std::process::id()).and_then(|p| p.scan(mem.start(), end)) {
        Ok(runs) => PageCounts::of(&runs).huge as f64 / mem.len_bytes() as f64,
        Err(_) => 0.0,
    }
}

/// Measures one working set on one page size.
fn measure(page: Page, size: u64, s: &Settings, rng: &mut fastrand::Rng) -> anyhow::Result<Point> {
    let mut mem = AnonMemory::new(size as usize, page.kind())
        .map_err(|e| anyhow::anyhow!("cannot map {} on {} pages: {e}", human(size), page.name()))?;
    let len = (size as usize).min(mem.len_bytes()) / 8;
    let start = link_random_cycle(&mut mem.as_mut_slice()[..len], rng);
    let huge = match page {
        Page::Small => 0.0,
        Page::Thp => {
            // The kernel may fall back to small pages at first touch; rebuild them.
            if huge_fraction(&mem) < 0.99 {
                let _ = mem.collapse();
            }
            huge_fraction(&mem)
        }
        Page::Hugetlb2M | Page::Hugetlb1G => 1.0,
    };
    let words = &mem.as_slice()[..len];
    // Warm the caches and TLB with one pass (capped) before timing.
    chase(words, start, (len / (LINE / 8)).min(4_000_000) as u64);
    let runs: Vec<f64> = (0..s.reps).map(|_| chase(words, start, s.loads)).collect();
    Ok(Point {
        page,
        size_bytes: size,
        ns_per_load: median(&runs),
        min_ns: runs.iter().copied().fold(f64::INFINITY, f64::min),
        max_ns: runs.iter().copied().fold(0.0, f64::max),
        huge_fraction: huge,
    })
}

/// Makes sure a hugetlb pool can back `size` bytes, growing it when allowed.
fn pool_for(page: Page, size: u64, s: &Settings) -> Result<Option<Reservation>, String> {
    let Some(page_bytes) = page.pool_page() else { return Ok(None) };
    let pool = Pool::host(page_bytes);
    if !pool.exists() {
        return Err(format!("this kernel or CPU offers no {} pages", human(page_bytes)));
    }
    let need = size.div_ceil(page_bytes);
    let free = pool.free().map_err(|e| e.to_string())?;
    if free >= need {
        return Ok(None);
    }
    if !s.reserve_hugetlb {
        return Err(format!(
            "{need} free {} pages needed, {free} free in the pool: reserve them \
             (echo N > /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages) or pass --reserve-hugetlb",
            human(page_bytes),
            page_bytes >> 10
        ));
    }
    let r = pool.reserve(need).map_err(|e| e.to_string())?;
    if r.free() < need {
        return Err(format!(
            "the kernel found only {} free {} pages of the {need} needed (memory too fragmented for more)",
            r.free(),
            human(page_bytes)
        ));
    }
    Ok(Some(r))
}

/// Runs every size on every page size, writes latency.json, latency.md and
/// latency.svg to `out`.
pub fn run(out: &Path, s: &Settings) -> anyhow::Result<LatencyResults> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut rng = fastrand::Rng::with_seed(42);
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    let total = s.pages.len() * s.sizes.len();
    let mut done = 0;
    for &page in &s.pages {
        for &size in &s.sizes {
            done += 1;
            if crate::harness::interrupted() {
                anyhow::bail!("interrupted");
            }
            eprint!("\r[{done}/{total}] {:<11} {:>9} ", page.name(), human(size));
            let reservation = match pool_for(page, size, s) {
                Ok(r) => r,
                Err(reason) => {
                    eprintln!("skipped: {reason}");
                    skipped.push(Skipped { page, size_bytes: Some(size), reason });
                    continue;
                }
            };
            match measure(page, size, s, &mut rng) {
                Ok(p) => {
                    eprint!("{:.1} ns/load", p.ns_per_load);
                    points.push(p);
                }
                Err(e) => {
                    eprintln!("skipped: {e:#}");
                    skipped.push(Skipped { page, size_bytes: Some(size), reason: format!("{e:#}") });
                }
            }
            drop(reservation);
        }
    }
    eprintln!();
    let r = LatencyResults {
        run: RunInfo::collect(),
        tlb_entries: s.tlb_entries,
        loads_per_rep: s.loads,
        reps: s.reps,
        points,
        skipped,
    };
    std::fs::write(out.join("latency.json"), serde_json::to_string_pretty(&r)?)?;
    std::fs::write(out.join("latency.md"), markdown(&r, s))?;
    std::fs::write(out.join("latency.svg"), chart(&r, s))?;
    Ok(r)
}

fn chart(r: &LatencyResults, s: &Settings) -> String {
    let categories: Vec<String> = s.sizes.iter().map(|&b| human(b)).collect();
    let series: Vec<(&str, Vec<f64>)> = s
        .pages
        .iter()
        .map(|&p| (p.name(), s.sizes.iter().map(|&b| r.point(p, b).map_or(0.0, |x| x.ns_per_load)).collect()))
        .collect();
    crate::chart::bars(
        "Memory latency by page size (pointer chase)",
        "ns per dependent load",
        &categories,
        &series,
        &[],
        None,
    )
}

fn markdown(r: &LatencyResults, s: &Settings) -> String {
    let mut m = String::from("# Memory latency by page size\n\n");
    m.push_str(&r.run.markdown());
    m.push_str(&format!(
        "\nA dependent-load pointer chase over a random cyclic permutation of 64-byte lines; \
         {} loads per repetition, median of {} (min–max in brackets). `huge` is the share of \
         the working set the kernel really mapped with huge pages (THP can fall short).\n\n",
        r.loads_per_rep, r.reps
    ));
    m.push_str("| working set |");
    for p in &s.pages {
        m.push_str(&format!(" {} ns |", p.name()));
    }
    m.push_str(" 2m-thp vs 4k |");
    for (name, _) in tlb::PAGE_SIZES {
        m.push_str(&format!(" TLB model {name} |"));
    }
    m.push('\n');
    m.push_str(&"|---".repeat(s.pages.len() + 2 + tlb::PAGE_SIZES.len()));
    m.push_str("|\n");
    for &size in &s.sizes {
        m.push_str(&format!("| {} |", human(size)));
        for &p in &s.pages {
            match r.point(p, size) {
                Some(x) if p == Page::Thp && x.huge_fraction < 0.9 => m.push_str(&format!(
                    " {:.1} [{:.1}–{:.1}] (huge {:.0}%) |",
                    x.ns_per_load,
                    x.min_ns,
                    x.max_ns,
                    x.huge_fraction * 100.0
                )),
                Some(x) => m.push_str(&format!(" {:.1} [{:.1}–{:.1}] |", x.ns_per_load, x.min_ns, x.max_ns)),
                None => m.push_str(" skipped |"),
            }
        }
        match (r.point(Page::Small, size), r.point(Page::Thp, size)) {
            (Some(a), Some(b)) => m.push_str(&format!(" {:+.1}% |", (b.ns_per_load / a.ns_per_load - 1.0) * 100.0)),
            _ => m.push_str(" – |"),
        }
        for (_, page_bytes) in tlb::PAGE_SIZES {
            m.push_str(&format!(" {} |", tlb::percent(tlb::covered_fraction(r.tlb_entries, page_bytes, size))));
        }
        m.push('\n');
    }
    m.push_str(&format!(
        "\nThe TLB model columns are the share of the working set {} TLB entries cover \
         (`tierctl tlb --entries {} --working-set …`): entries × page size, uniform access.\n\n\
         ![latency by page size](latency.svg)\n",
        r.tlb_entries, r.tlb_entries
    ));
    if !r.skipped.is_empty() {
        m.push_str("\nSkipped:\n\n");
        for k in &r.skipped {
            let size = k.size_bytes.map(human).unwrap_or_default();
            m.push_str(&format!("- {} {}: {}\n", k.page.name(), size, k.reason));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_visits_every_line_once_per_cycle() {
        let mut words = vec![0u64; 1024 * 8];
        let mut rng = fastrand::Rng::with_seed(7);
        let start = link_random_cycle(&mut words, &mut rng);
        let mut seen = vec![false; 1024];
        let mut i = start;
        for _ in 0..1024 {
            assert!(!seen[i / 8], "line {} visited twice before the cycle closed", i / 8);
            seen[i / 8] = true;
            i = words[i] as usize;
        }
        assert_eq!(i, start, "the cycle closes after every line");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn page_names_match_the_command_line() {
        use clap::ValueEnum;
        for p in Page::value_variants() {
            assert_eq!(p.to_possible_value().unwrap().get_name(), p.name());
            assert_eq!(serde_json::to_string(p).unwrap(), format!("\"{}\"", p.name()));
        }
    }

    #[test]
    fn missing_pools_are_skipped_with_a_reason() {
        let s = Settings {
            sizes: vec![1 << 30],
            pages: vec![Page::Hugetlb1G],
            reps: 1,
            loads: 1,
            reserve_hugetlb: false,
            tlb_entries: 2048,
        };
        // Either the pool is absent or too small without --reserve-hugetlb: never a
        // silent success that changes the host's pools.
        let before = Pool::host(1 << 30).total().ok();
        if let Err(reason) = pool_for(Page::Hugetlb1G, 1 << 50, &s) {
            assert!(reason.contains("pages"), "{reason}");
        } else {
            panic!("a 1 PiB working set cannot have enough 1 GiB pages");
        }
        assert_eq!(Pool::host(1 << 30).total().ok(), before);
    }
}
