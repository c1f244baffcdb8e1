//! The sampling tracker: activeness by statistical sampling, in the spirit of the
//! hypervisor's own method.
//!
//! Each interval it draws a random sample of the tenant's resident pages in clustered
//! runs (16 pages: one `process_madvise` iovec costs about a third per page of a
//! single-page one), unmaps them with `MADV_PAGEOUT`, and at the next interval reads
//! with `PAGEMAP_SCAN` which came back. The returned fraction × resident size, plus the
//! memory that became resident during the interval (faults from the tier and fresh
//! allocations), estimates the memory touched in that interval; the estimates are
//! averaged over the window, with a 95% confidence interval from the spread between
//! clusters. Samples that did not come back are re-checked through the window, so a
//! region's heat is the time since any of its pages was last seen touched (reuse
//! times), not just the last interval's verdict. The sample size adapts per tenant to
//! keep the window estimate within ±5%, between `min_pages` and `max_pages`.
//!
//! Refaults of sampled hot pages are minor faults (the pages wait in the swap cache).
//! Huge pages are not sampled (unmapping part of one would split it); their resident
//! bytes count as active.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use tierd_core::snapshot::{Activeness, Range, Region};
use tierd_sys::madvise::{Advice, Pidfd};
use tierd_sys::pagemap::{PAGE_IS_HUGE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageRegion};
use tierd_sys::procfs::ProcFs;

use super::{Tracker, TrackerCost};
use crate::mover;

const PAGE: u64 = 4096;
/// Heat is kept per 2 MiB region: the huge-page size, and what prefetch moves at once.
pub const REGION: u64 = 2 << 20;
/// How long the peak activeness is remembered (what a waking tenant gets back).
const PEAK_HORIZON_SECS: f64 = 1800.0;

/// Settings of a sampling tracker.
#[derive(Debug, Clone, Copy)]
pub struct SamplingConfig {
    /// Pages to sample per interval at the start.
    pub sample_pages: u32,
    pub min_pages: u32,
    pub max_pages: u32,
    /// Pages per sampled cluster.
    pub cluster_pages: u32,
    pub window_secs: f64,
    pub interval_secs: f64,
    /// Target half-width of the window estimate's 95% confidence interval, relative.
    pub target_rel_ci: f64,
}

impl SamplingConfig {
    pub fn new(sample_pages: u32, window_secs: f64, interval_secs: f64) -> SamplingConfig {
        SamplingConfig {
            sample_pages,
            min_pages: (sample_pages / 4).max(64),
            max_pages: sample_pages.saturating_mul(2).min(65536),
            // 4-page runs: a sample lands in every region of a GiB every other interval,
            // at ~2x the per-page syscall cost of 16-page runs.
            cluster_pages: 4,
            window_secs,
            interval_secs,
            target_rel_ci: 0.05,
        }
    }
}

/// One sampled run of pages.
#[derive(Debug, Clone, Copy)]
struct Sample {
    pid: u32,
    start: u64,
    len: u64,
    drawn: f64,
}

/// What is known about one 2 MiB region.
#[derive(Debug, Clone, Copy, Default)]
struct RegionState {
    last_touched: Option<f64>,
    /// Samples from the region that had not come back at their first check, since it
    /// was last touched: the evidence that it is cold.
    misses: u32,
    /// When the misses began.
    cold_since: Option<f64>,
    /// Resident bytes after this interval's sampling unmapped its samples.
    present: u64,
    swapped: u64,
    huge: u64,
    was_huge: bool,
}

impl RegionState {
    fn touch(&mut self, now: f64) {
        self.last_touched = Some(now);
        self.misses = 0;
        self.cold_since = None;
    }

    /// Seconds since the region was last seen touched; for a region never seen
    /// touched, since its first sample missed.
    fn idle_secs(&self, now: f64) -> Option<f64> {
        self.last_touched.or(self.cold_since).map(|t| now - t)
    }
}

/// One interval's estimate.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    at: f64,
    bytes: f64,
    var: f64,
}

#[derive(Debug)]
pub struct SamplingTracker {
    cfg: SamplingConfig,
    proc: ProcFs,
    rng: fastrand::Rng,
    pages: u32,
    /// Samples drawn at the last observation, to check now.
    fresh: Vec<Sample>,
    /// Samples that have not come back yet, re-checked through the window.
    pending: Vec<Sample>,
    /// Resident non-huge bytes the fresh samples were drawn from.
    sampled_from: u64,
    regions: HashMap<(u32, u64), RegionState>,
    history: VecDeque<Estimate>,
    peaks: VecDeque<(f64, u64)>,
    observed: bool,
    cost: TrackerCost,
}

impl SamplingTracker {
    pub fn new(cfg: SamplingConfig, proc: ProcFs, seed: u64) -> SamplingTracker {
        SamplingTracker {
            cfg,
            proc,
            rng: fastrand::Rng::with_seed(seed),
            pages: cfg.sample_pages,
            fresh: Vec::new(),
            pending: Vec::new(),
            sampled_from: 0,
            regions: HashMap::new(),
            history: VecDeque::new(),
            peaks: VecDeque::new(),
            observed: false,
            cost: TrackerCost::default(),
        }
    }

    /// Pages sampled per interval now (after adaptation).
    pub fn sample_pages(&self) -> u32 {
        self.pages
    }
}

/// Bytes of `[start, start+len)` that `runs` (sorted, of one process) mark present.
fn present_within(runs: &[PageRegion], start: u64, len: u64) -> u64 {
    let end = start + len;
    let first = runs.partition_point(|r| r.end <= start);
    runs[first..]
        .iter()
        .take_while(|r| r.start < end)
        .filter(|r| r.categories & PAGE_IS_PRESENT != 0)
        .map(|r| r.end.min(end) - r.start.max(start))
        .sum()
}

/// Splits page runs (sorted by address) into per-region (present, swapped, huge) byte
/// counts. Fragmented memory has hundreds of thousands of runs per GiB, so the counts
/// of one region are gathered locally and the map is touched once per region.
fn region_counts(pid: u32, runs: &[PageRegion], out: &mut HashMap<(u32, u64), (u64, u64, u64)>) {
    let mut cur: Option<(u64, (u64, u64, u64))> = None;
    let flush = |c: Option<(u64, (u64, u64, u64))>, out: &mut HashMap<(u32, u64), (u64, u64, u64)>| {
        if let Some((block, (p, sw, h))) = c {
            let e = out.entry((pid, block)).or_default();
            e.0 += p;
            e.1 += sw;
            e.2 += h;
        }
    };
    for r in runs {
        let mut at = r.start;
        while at < r.end {
            let block = at & !(REGION - 1);
            let end = (block + REGION).min(r.end);
            if cur.is_none_or(|(b, _)| b != block) {
                flush(cur.take(), out);
                cur = Some((block, (0, 0, 0)));
            }
            let counts = &mut cur.as_mut().expect("set above").1;
            let len = end - at;
            if r.categories & PAGE_IS_PRESENT != 0 {
                counts.0 += len;
                if r.categories & PAGE_IS_HUGE != 0 {
                    counts.2 += len;
                }
            }
            if r.categories & PAGE_IS_SWAPPED != 0 {
                counts.1 += len;
            }
            at = end;
        }
    }
    flush(cur, out);
}

/// Mean and variance-of-the-mean of cluster return fractions.
fn mean_and_var(fracs: &[f64]) -> (f64, f64) {
    let m = fracs.len() as f64;
    if m == 0.0 {
        return (0.0, 0.0);
    }
    let mean = fracs.iter().sum::<f64>() / m;
    if m < 2.0 {
        return (mean, mean * (1.0 - mean));
    }
    let var = fracs.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (m - 1.0);
    // When every cluster agrees the spread is zero, which overstates the certainty of
    // m samples: keep at least the variance of one cluster in m flipping.
    (mean, (var / m).max(1.0 / (m * m)))
}

impl SamplingTracker {
    /// Draws clustered samples from the present, non-huge runs of each process and
    /// unmaps them. Returns the samples and the bytes they were drawn from.
    fn draw(&mut self, scans: &[(u32, Vec<PageRegion>)], now: f64) -> (Vec<Sample>, u64) {
        let small = |r: &&PageRegion| r.categories & PAGE_IS_PRESENT != 0 && r.categories & PAGE_IS_HUGE == 0;
        let pool: Vec<(u32, PageRegion)> =
            scans.iter().flat_map(|(pid, runs)| runs.iter().filter(small).map(move |r| (*pid, *r))).collect();
        let total: u64 = pool.iter().map(|(_, r)| r.end - r.start).sum();
        if total == 0 {
            return (Vec::new(), 0);
        }
        let mut cum = Vec::with_capacity(pool.len());
        let mut acc = 0;
        for (_, r) in &pool {
            acc += r.end - r.start;
            cum.push(acc);
        }
        let cluster = self.cfg.cluster_pages as u64 * PAGE;
        let clusters = (self.pages as u64 * PAGE).div_ceil(cluster).min(total.div_ceil(cluster)).max(1);
        let mut picked: Vec<Sample> = Vec::with_capacity(clusters as usize);
        for _ in 0..clusters {
            let x = self.rng.u64(0..total);
            let i = cum.partition_point(|&c| c <= x);
            let (pid, run) = pool[i];
            let addr = run.start + (x - (cum[i] - (run.end - run.start)));
            let start = (addr & !(cluster - 1)).max(run.start);
            let end = ((addr & !(cluster - 1)) + cluster).min(run.end);
            picked.push(Sample { pid, start, len: end - start, drawn: now });
        }
        picked.sort_by_key(|s| (s.pid, s.start));
        picked.dedup_by_key(|s| (s.pid, s.start));
        (picked, total)
    }
}

impl Tracker for SamplingTracker {
    fn observe(&mut self, procs: &[Pidfd], tier_faults: u64, now: f64) {
        let t0 = Instant::now();
        let mut scans: Vec<(u32, Vec<PageRegion>)> = Vec::new();
        for p in procs {
            self.cost.syscalls += 1;
            match mover::scan(&self.proc, p.pid()) {
                Some(mut runs) => {
                    runs.sort_by_key(|r| r.start);
                    scans.push((p.pid(), runs));
                }
                None => self.cost.errors += 1,
            }
        }
        let runs_of = |pid: u32| scans.iter().find(|(p, _)| *p == pid).map(|(_, r)| r.as_slice()).unwrap_or(&[]);

        // 1. Which of last interval's samples came back, and which older ones did now.
        let mut fracs = Vec::with_capacity(self.fresh.len());
        let mut returned: HashMap<(u32, u64), u64> = HashMap::new();
        let fresh = std::mem::take(&mut self.fresh);
        for s in fresh {
            let back = present_within(runs_of(s.pid), s.start, s.len);
            fracs.push(back as f64 / s.len as f64);
            let key = (s.pid, s.start & !(REGION - 1));
            if back > 0 {
                *returned.entry(key).or_default() += back;
                if let Some(r) = self.regions.get_mut(&key) {
                    r.touch(now);
                }
            } else {
                if let Some(r) = self.regions.get_mut(&key) {
                    r.misses += 1;
                    r.cold_since.get_or_insert(s.drawn);
                }
                self.pending.push(s);
            }
        }
        let window = self.cfg.window_secs;
        let mut still = Vec::with_capacity(self.pending.len());
        for s in std::mem::take(&mut self.pending) {
            if now - s.drawn > window {
                continue;
            }
            let back = present_within(runs_of(s.pid), s.start, s.len);
            let key = (s.pid, s.start & !(REGION - 1));
            if back > 0 {
                *returned.entry(key).or_default() += back;
                if let Some(r) = self.regions.get_mut(&key) {
                    r.touch(now);
                }
            } else {
                still.push(s);
            }
        }
        self.pending = still;

        // 2. Memory that became resident during the interval (tier faults, new pages).
        let mut counts: HashMap<(u32, u64), (u64, u64, u64)> = HashMap::new();
        for (pid, runs) in &scans {
            region_counts(*pid, runs, &mut counts);
        }
        let mut faulted_in = 0u64;
        let mut next: HashMap<(u32, u64), RegionState> = HashMap::with_capacity(counts.len());
        for (key, &(present, swapped, huge)) in &counts {
            let mut st = self.regions.get(key).copied().unwrap_or_default();
            let known = self.regions.contains_key(key);
            if self.observed {
                let before = if known { st.present } else { 0 };
                let came = present.saturating_sub(before).saturating_sub(returned.get(key).copied().unwrap_or(0));
                if came > 0 {
                    faulted_in += came;
                    st.touch(now);
                }
            }
            st.present = present;
            st.swapped = swapped;
            st.huge = huge;
            if huge >= REGION / 2 {
                st.was_huge = true;
            }
            next.insert(*key, st);
        }
        self.regions = next;

        // 3. This interval's estimate.
        let huge_resident: u64 = self.regions.values().map(|r| r.huge).sum();
        if self.observed && !fracs.is_empty() {
            let (mean, var) = mean_and_var(&fracs);
            let r = self.sampled_from as f64;
            // Under pressure pages fault in and are evicted again within one interval,
            // so region counts miss some: every major fault was a touched page too.
            let faulted = faulted_in.max(tier_faults * PAGE) as f64;
            self.history.push_back(Estimate {
                at: now,
                bytes: mean * r + faulted + huge_resident as f64,
                var: var * r * r,
            });
            // Adapt the sample size so the window's estimate has the precision wanted:
            // k intervals averaged shrink the per-interval interval by √k.
            let est = (mean * r).max((4 << 20) as f64);
            let k = (window / self.cfg.interval_secs).max(1.0);
            let rel = 1.96 * (var * r * r).sqrt() / est / k.sqrt();
            if rel > self.cfg.target_rel_ci {
                self.pages = (self.pages as f64 * 1.25) as u32;
            } else if rel < self.cfg.target_rel_ci / 2.5 {
                self.pages = (self.pages as f64 / 1.25) as u32;
            }
            self.pages = self.pages.clamp(self.cfg.min_pages, self.cfg.max_pages);
        }
        while self.history.front().is_some_and(|e| now - e.at > window) {
            self.history.pop_front();
        }
        if let Some(a) = self.activeness() {
            self.peaks.push_back((now, a.active_bytes));
            while self.peaks.front().is_some_and(|(t, _)| now - t > PEAK_HORIZON_SECS) {
                self.peaks.pop_front();
            }
        }

        // 4. Next interval's samples: unmap them now.
        let (samples, from) = self.draw(&scans, now);
        for p in procs {
            let ranges: Vec<(u64, u64)> =
                samples.iter().filter(|s| s.pid == p.pid()).map(|s| (s.start, s.len)).collect();
            if ranges.is_empty() {
                continue;
            }
            let r = p.advise(Advice::PageOut, &ranges);
            self.cost.syscalls += r.calls;
            self.cost.errors += r.errors;
        }
        for s in &samples {
            if let Some(r) = self.regions.get_mut(&(s.pid, s.start & !(REGION - 1))) {
                r.present = r.present.saturating_sub(s.len);
            }
        }
        self.cost.sample_pages = samples.iter().map(|s| s.len / PAGE).sum();
        self.fresh = samples;
        self.sampled_from = from;
        self.observed = true;
        self.cost.seconds += t0.elapsed().as_secs_f64();
    }

    fn activeness(&self) -> Option<Activeness> {
        let k = self.history.len();
        if k == 0 {
            return None;
        }
        let mean = self.history.iter().map(|e| e.bytes).sum::<f64>() / k as f64;
        let var = self.history.iter().map(|e| e.var).sum::<f64>() / (k * k) as f64;
        let active = mean.max(0.0) as u64;
        Some(Activeness {
            active_bytes: active,
            ci_bytes: (1.96 * var.sqrt()) as u64,
            peak_bytes: self.peaks.iter().map(|p| p.1).max().unwrap_or(0).max(active),
            last_interval_bytes: self.history.back().map_or(0, |e| e.bytes.max(0.0) as u64),
        })
    }

    fn regions(&self, now: f64) -> Vec<Region> {
        let mut out: Vec<Region> = self
            .regions
            .iter()
            .map(|(&(pid, start), r)| Region {
                range: Range { pid, start, len: REGION },
                idle_secs: r.idle_secs(now),
                cold_samples: r.misses,
                dram_bytes: r.present,
                tier_bytes: r.swapped,
                was_huge: r.was_huge,
                huge_bytes: r.huge,
            })
            .collect();
        out.sort_by_key(|r| (r.range.pid, r.range.start));
        out
    }

    fn cost(&self) -> TrackerCost {
        self.cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, end: u64, categories: u64) -> PageRegion {
        PageRegion { start, end, categories }
    }

    #[test]
    fn present_bytes_within_a_sample() {
        let runs =
            [run(0, 8192, PAGE_IS_PRESENT), run(8192, 16384, PAGE_IS_SWAPPED), run(16384, 40960, PAGE_IS_PRESENT)];
        assert_eq!(present_within(&runs, 4096, 16384), 4096 + 4096);
        assert_eq!(present_within(&runs, 8192, 8192), 0);
        assert_eq!(present_within(&runs, 36864, 65536), 4096);
    }

    #[test]
    fn counts_split_at_region_boundaries() {
        let mut out = HashMap::new();
        region_counts(
            7,
            &[run(REGION - 4096, REGION + 8192, PAGE_IS_PRESENT), run(REGION + 8192, REGION + 12288, PAGE_IS_SWAPPED)],
            &mut out,
        );
        assert_eq!(out[&(7, 0)], (4096, 0, 0));
        assert_eq!(out[&(7, REGION)], (8192, 4096, 0));
    }

    #[test]
    fn cluster_variance_shrinks_with_more_clusters() {
        let few = mean_and_var(&[1.0, 0.0, 1.0, 0.0]);
        let many = mean_and_var(&[1.0, 0.0].repeat(50));
        assert!((few.0 - 0.5).abs() < 1e-9 && (many.0 - 0.5).abs() < 1e-9);
        assert!(many.1 < few.1 / 10.0);
    }
}
