//! The sampling tracker: activeness by statistical sampling, in the spirit of the
//! hypervisor's own method.
//!
//! Each interval it draws a random sample of the tenant's resident pages in clustered
//! runs (4 pages, see [`SamplingConfig::new`]: a run costs less per page than single
//! pages, and short runs still reach every region), unmaps them with `MADV_PAGEOUT`,
//! and at the next interval reads with `PAGEMAP_SCAN` which came back. The returned
//! fraction × resident size, plus the memory that became resident during the interval
//! (faults from the tier and fresh allocations), estimates the memory touched in that
//! interval; the estimates are averaged over the window, with a 95% confidence interval
//! from the spread between clusters. Samples that did not come back are re-checked
//! through the window, so a region's heat is the time since any of its pages was last
//! seen touched (reuse times), not just the last interval's verdict. The sample size
//! adapts per tenant to keep the window estimate within ±5%, between `min_pages` and
//! `max_pages`.
//!
//! Refaults of sampled hot pages are minor faults (the pages wait in the swap cache).
//!
//! Huge pages are sampled whole, as their own stratum: unmapping part of one would
//! split it, so a few whole 2 MiB pages per interval (one per 64 sampled small pages,
//! 4 to 32) are paged out — written to the tier as one unit — and a page counts as
//! touched by the share of it that came back. A cold one simply stays on the tier
//! (where it belongs); a hot one comes back on small pages and the policy rebuilds it
//! with `MADV_COLLAPSE` at the next interval. The huge stratum's estimate is its
//! returned fraction × the huge resident bytes it was drawn from.

use std::collections::{HashMap, HashSet, VecDeque};

use tierd_core::estimates::{Estimate, Estimates, mean_and_var};
use tierd_core::size::{HUGE_PAGE, PAGE};
use tierd_core::snapshot::{Activeness, Range, Region};
use tierd_sys::madvise::{Advice, Pidfd};
use tierd_sys::pagemap::{PAGE_IS_HUGE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageRegion};
use tierd_sys::procfs::ProcFs;

use super::{Tracker, TrackerCost};

/// Heat is kept per 2 MiB region: the huge-page size, and what prefetch moves at once.
pub const REGION: u64 = HUGE_PAGE;
/// Intervals a huge page whose sample came back counts as hot without being sampled again.
const HUGE_RECHECK_INTERVALS: f64 = 20.0;
/// Known-hot huge pages sampled per interval all the same, to notice a tenant going
/// quiet: when half of them were not touched, every huge page is measured again.
const CANARIES: usize = 2;
/// Share of a tenant's time the refaults of its sampled pages may take when each is a
/// read from the tier. A sampled page that came back from the tier before still has
/// its swap slot, so `MADV_PAGEOUT` frees it at once and its next touch reads the tier:
/// on a hard-disk-like tier (150 reads/s) the default sample's refaults kept four
/// tenants waiting on the disk and they ran at 0.44 of dram, against 0.79 with 64
/// pages an interval (overcommit-sweep/1.4x slow).
const REFAULT_TIME_SHARE: f64 = 0.01;
/// The fewest small pages sampled per interval however slow the tier: 8 clusters,
/// a ±20% window estimate.
const MIN_IO_PAGES: u32 = 32;

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
    /// CPU the tracker may use, as a fraction of one core per 8 GiB it tracks; 0 for
    /// no cap. A tight budget shrinks the sample and widens the confidence interval.
    pub cpu_budget: f64,
}

impl SamplingConfig {
    pub fn new(sample_pages: u32, window_secs: f64, interval_secs: f64) -> SamplingConfig {
        let min_pages = (sample_pages / 4).max(64);
        SamplingConfig {
            sample_pages,
            min_pages,
            // Never under the floor: `--sample-pages 16` (allowed) made a range whose
            // `clamp` panics.
            max_pages: sample_pages.saturating_mul(2).clamp(min_pages, 65536),
            // 4-page runs: a sample lands in every region of a GiB every other interval,
            // at ~2x the per-page syscall cost of 16-page runs.
            cluster_pages: 4,
            window_secs,
            interval_secs,
            target_rel_ci: 0.05,
            cpu_budget: 0.0,
        }
    }

    /// The same with a CPU budget of `percent` of one core per 8 GiB tracked.
    pub fn with_cpu_budget(self, percent: f64) -> SamplingConfig {
        SamplingConfig { cpu_budget: percent / 100.0, ..self }
    }
}

/// One sampled run of pages.
#[derive(Debug, Clone, Copy)]
struct Sample {
    pid: u32,
    start: u64,
    len: u64,
    drawn: f64,
    /// A whole huge page (the huge stratum).
    huge: bool,
    /// A huge page known hot, sampled only to notice when the tenant goes quiet.
    canary: bool,
    /// Bytes of it seen back so far (a small sample stays re-checked until all of it
    /// is: its pages are touched at different times).
    seen: u64,
}

/// What is known about one 2 MiB region.
#[derive(Debug, Clone, Copy, Default)]
struct RegionState {
    last_touched: Option<f64>,
    /// When a sample from the region last came back (evidence of reuse, not just of
    /// a first touch such as a fresh allocation).
    sample_returned: Option<f64>,
    /// When it was last seen reused: a sample came back, or pages came back from the
    /// tier that tierd had not prefetched.
    reused: Option<f64>,
    /// Samples from the region that had not come back at their first check, since it
    /// was last touched: the evidence that it is cold.
    misses: u32,
    /// When the misses began.
    cold_since: Option<f64>,
    /// Resident bytes after this interval's sampling unmapped its samples.
    present: u64,
    swapped: u64,
    huge: u64,
    wants_huge: bool,
}

impl RegionState {
    fn touch(&mut self, now: f64) {
        self.last_touched = Some(now);
        self.misses = 0;
        self.cold_since = None;
    }

    /// What became resident since the last observation, now `present` and `swapped`
    /// bytes (`sampled_back` of it were samples coming back, counted already): a
    /// touch, and reuse if it came back from the tier. A fill's new pages are a first
    /// touch only, and what tierd itself `prefetched` there is neither. Returns the
    /// bytes the tenant brought in.
    fn settle(
        &mut self,
        known: bool,
        present: u64,
        swapped: u64,
        sampled_back: u64,
        prefetched: bool,
        now: f64,
    ) -> u64 {
        if prefetched {
            return 0;
        }
        let before = if known { self.present } else { 0 };
        let came = present.saturating_sub(before).saturating_sub(sampled_back);
        if came > 0 {
            self.touch(now);
            if known && self.swapped > swapped {
                self.reused = Some(now);
            }
        }
        came
    }

    /// Seconds since the region was last seen touched; for a region never seen
    /// touched, since its first sample missed.
    fn idle_secs(&self, now: f64) -> Option<f64> {
        self.last_touched.or(self.cold_since).map(|t| now - t)
    }
}

/// The small samples drawn at one observation, followed through the window: the
/// share that came back at any re-check is the share of memory touched within it.
#[derive(Debug, Clone, Copy)]
struct Batch {
    drawn: f64,
    sampled: u64,
    /// Resident bytes they were drawn from.
    from: u64,
    returned: u64,
    /// Drawn while the tenant was at rest: nothing was sampled, which says nothing
    /// about what it touched after it woke.
    at_rest: bool,
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
    /// Resident non-huge bytes the fresh small samples were drawn from.
    sampled_from: u64,
    /// Resident huge-page bytes the fresh huge samples were drawn from.
    huge_sampled_from: u64,
    /// Resident bytes left out of sampling and counted active whole: regions queued
    /// for a huge-page rebuild and huge pages known hot.
    counted_whole_bytes: u64,
    regions: HashMap<(u32, u64), RegionState>,
    /// Mappings (pid, start) the kernel has put huge pages in: THP is on for them.
    huge_mappings: HashSet<(u32, u64)>,
    estimates: Estimates,
    observed: bool,
    cost: TrackerCost,
    batches: VecDeque<Batch>,
    /// The most pages the CPU budget allows per interval, and when the last
    /// observation ended (to know what the budget was over it).
    budget_pages: u32,
    last_observed: Option<f64>,
    /// Regions tierd prefetched since the last observation: what became resident
    /// there was tierd's doing, not the tenant's touch.
    prefetched: HashSet<(u32, u64)>,
    /// Seconds a read from the tier takes lately, when known.
    tier_read_secs: Option<f64>,
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
            huge_sampled_from: 0,
            counted_whole_bytes: 0,
            regions: HashMap::new(),
            huge_mappings: HashSet::new(),
            estimates: Estimates::default(),
            observed: false,
            cost: TrackerCost::default(),
            budget_pages: u32::MAX,
            last_observed: None,
            batches: VecDeque::new(),
            prefetched: HashSet::new(),
            tier_read_secs: None,
        }
    }

    /// The most small pages the tier's read time allows per interval (see
    /// [`REFAULT_TIME_SHARE`]): the sampled pages that will come back, at the share that
    /// came back over the window (all of them before any did), each a read.
    fn io_budget_pages(&self) -> u32 {
        let Some(read) = self.tier_read_secs.filter(|s| *s > 0.0) else { return u32::MAX };
        let (back, sampled) = self.batches.iter().fold((0, 0), |(b, s), x| (b + x.returned, s + x.sampled));
        let share = if sampled == 0 { 1.0 } else { (back as f64 / sampled as f64).max(0.05) };
        let refaults = REFAULT_TIME_SHARE * self.cfg.interval_secs / read;
        (refaults / share).clamp(MIN_IO_PAGES as f64, (u32::MAX - 1) as f64) as u32
    }

    /// `back` bytes of a small sample drawn at `drawn` came back.
    fn batch_returned(&mut self, drawn: f64, back: u64) {
        if let Some(b) = self.batches.iter_mut().find(|b| b.drawn == drawn) {
            b.returned += back;
        }
    }

    /// Memory touched within the window: the share of the samples drawn a window ago
    /// that came back at any check since, times what they were drawn from, plus what
    /// became resident over the window and what is counted whole. `None` until a
    /// batch of samples is a window old.
    fn touched_in_window(&self, now: f64) -> Option<u64> {
        let window = self.cfg.window_secs;
        let old = self.batches.iter().position(|b| now - b.drawn >= window - self.cfg.interval_secs / 2.0)?;
        // A batch drawn at rest measures nothing: the first drawn since stands in (a
        // little short of a window). None since: at rest the whole window.
        let b = self.batches.iter().skip(old).find(|b| !b.at_rest).unwrap_or(&self.batches[old]);
        let share = if b.sampled == 0 { 0.0 } else { b.returned as f64 / b.sampled as f64 };
        let faulted = self.estimates.faulted_since(b.drawn);
        Some((share * b.from as f64 + faulted) as u64 + self.counted_whole_bytes)
    }

    /// After an observation that took `spent` CPU seconds with `drawn` pages sampled,
    /// over a tenant of `tracked` bytes: the pages the budget allows next. A page-out
    /// costs about the same per page, and scanning a fixed amount per interval, so
    /// scaling the sample by budget / spent converges on the sample the budget buys.
    fn update_budget(&mut self, spent: f64, drawn: u64, tracked: u64, now: f64) {
        let Some(prev) = self.last_observed.replace(now) else { return };
        if self.cfg.cpu_budget <= 0.0 || drawn == 0 || spent <= 0.0 {
            return;
        }
        let budget = self.cfg.cpu_budget * (now - prev).max(0.0) * tracked as f64 / (8u64 << 30) as f64;
        let allowed = drawn as f64 * budget / spent;
        // Half-way each interval: one slow interval (a busy CPU) does not halve it.
        let was = if self.budget_pages == u32::MAX { allowed } else { self.budget_pages as f64 };
        // Never under the smallest sample: below it the estimate is noise, and a tenant
        // small enough to hit it costs little anyway.
        self.budget_pages = ((was + allowed) / 2.0).clamp(self.cfg.min_pages as f64, u32::MAX as f64 - 1.0) as u32;
    }

    /// Pages sampled per interval now (after adaptation).
    pub fn sample_pages(&self) -> u32 {
        self.pages
    }

    /// `back` bytes of a sample from region `key` came back: it was touched.
    fn came_back(&mut self, key: (u32, u64), back: u64, now: f64, returned: &mut HashMap<(u32, u64), u64>) {
        *returned.entry(key).or_default() += back;
        if let Some(r) = self.regions.get_mut(&key) {
            r.touch(now);
            r.sample_returned = Some(now);
            r.reused = Some(now);
        }
    }

    /// A region that belongs on huge pages, sits on small ones, and was touched in the
    /// last interval: the policy is about to rebuild it, so it is not sampled. (Two
    /// intervals kept a tenant that had just stopped looking busy for one more.)
    fn queued(&self, r: &RegionState, now: f64) -> bool {
        r.wants_huge && r.huge == 0 && r.last_touched.is_some_and(|t| now - t <= 1.5 * self.cfg.interval_secs)
    }

    /// Resident bytes of the regions [`Self::queued`] for a rebuild: active for certain.
    fn queued_for_collapse(&self, now: f64) -> u64 {
        self.regions.values().filter(|r| self.queued(r, now)).map(|r| r.present).sum()
    }

    /// Whole huge pages sampled per interval: one per 64 small pages, 4 to 32 (each is
    /// 2 MiB written to the tier, so far fewer than small samples).
    fn huge_samples(&self) -> usize {
        (self.pages as usize / 64).clamp(4, 32)
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

/// The mapping (of address-ordered, disjoint `ranges`) that holds all of the region
/// starting at `block`, if any.
fn mapping_holding(ranges: &[(u64, u64)], block: u64) -> Option<(u64, u64)> {
    let i = ranges.partition_point(|r| r.0 <= block);
    let r = *ranges.get(i.checked_sub(1)?)?;
    (block >= r.0 && block + REGION <= r.1).then_some(r)
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

impl SamplingTracker {
    /// Draws clustered samples from the present, non-huge runs of each process and
    /// unmaps them. Returns the samples and the bytes they were drawn from.
    fn draw(&mut self, scans: &[(u32, Vec<PageRegion>)], now: f64, any_queued: bool) -> (Vec<Sample>, u64) {
        // Regions waiting to be rebuilt as huge pages are left alone: a sample in flight
        // makes `MADV_COLLAPSE` fail (EAGAIN) on the whole region. They were just seen
        // touched, and count as active whole (see `queued_for_collapse`). Without any,
        // runs need no splitting at region boundaries.
        let skip = |pid: u32, block: u64| self.regions.get(&(pid, block)).is_some_and(|r| self.queued(r, now));
        let mut pool: Vec<(u32, PageRegion)> = Vec::new();
        for (pid, runs) in scans {
            for r in runs.iter().filter(|r| r.categories & PAGE_IS_PRESENT != 0 && r.categories & PAGE_IS_HUGE == 0) {
                if !any_queued {
                    pool.push((*pid, *r));
                    continue;
                }
                let mut at = r.start;
                while at < r.end {
                    let block = at & !(REGION - 1);
                    let end = (block + REGION).min(r.end);
                    if !skip(*pid, block) {
                        pool.push((*pid, PageRegion { start: at, end, categories: r.categories }));
                    }
                    at = end;
                }
            }
        }
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
        let pages = self.pages as u64;
        let clusters = (pages * PAGE).div_ceil(cluster).min(total.div_ceil(cluster)).max(1);
        let mut picked: Vec<Sample> = Vec::with_capacity(clusters as usize);
        for _ in 0..clusters {
            let x = self.rng.u64(0..total);
            let i = cum.partition_point(|&c| c <= x);
            let (pid, run) = pool[i];
            let addr = run.start + (x - (cum[i] - (run.end - run.start)));
            let start = (addr & !(cluster - 1)).max(run.start);
            let end = ((addr & !(cluster - 1)) + cluster).min(run.end);
            picked.push(Sample { pid, start, len: end - start, drawn: now, huge: false, canary: false, seen: 0 });
        }
        picked.sort_by_key(|s| (s.pid, s.start));
        picked.dedup_by_key(|s| (s.pid, s.start));
        (picked, total)
    }

    /// Huge pages whose sample came back within [`HUGE_RECHECK_INTERVALS`] are known hot:
    /// they count as active whole and are not sampled again until that knowledge ages,
    /// so each hot huge page spends about one interval in twenty split.
    fn known_hot_huge(&self, pid: u32, block: u64, now: f64) -> bool {
        let horizon = HUGE_RECHECK_INTERVALS * self.cfg.interval_secs;
        self.regions.get(&(pid, block)).is_some_and(|r| r.sample_returned.is_some_and(|t| now - t <= horizon))
    }

    /// Draws whole huge pages at random from those not known hot. Returns the samples,
    /// the huge resident bytes they were drawn from, and the known-hot huge bytes.
    fn draw_huge(&mut self, scans: &[(u32, Vec<PageRegion>)], now: f64) -> (Vec<Sample>, u64, u64) {
        let mut blocks: Vec<(u32, u64)> = Vec::new();
        let mut hot: Vec<(u32, u64)> = Vec::new();
        let mut known_hot = 0;
        for (pid, runs) in scans {
            for r in runs.iter().filter(|r| r.categories & PAGE_IS_PRESENT != 0 && r.categories & PAGE_IS_HUGE != 0) {
                let mut at = r.start.next_multiple_of(REGION);
                while at + REGION <= r.end {
                    if self.known_hot_huge(*pid, at, now) {
                        known_hot += REGION;
                        hot.push((*pid, at));
                    } else {
                        blocks.push((*pid, at));
                    }
                    at += REGION;
                }
            }
        }
        let from = blocks.len() as u64 * REGION;
        let mut picked = Vec::new();
        for (pool, k, canary) in [(&mut blocks, self.huge_samples(), false), (&mut hot, CANARIES, true)] {
            let k = k.min(pool.len());
            for i in 0..k {
                let j = self.rng.usize(i..pool.len());
                pool.swap(i, j);
            }
            picked.extend(pool[..k].iter().map(|&(pid, start)| Sample {
                pid,
                start,
                len: REGION,
                drawn: now,
                huge: true,
                canary,
                seen: 0,
            }));
        }
        picked.sort_by_key(|s| (s.pid, s.start));
        (picked, from, known_hot)
    }
}

impl Tracker for SamplingTracker {
    fn observe(&mut self, procs: &[Pidfd], tier_faults: u64, now: f64, at_rest: bool) {
        let t0 = tierd_sys::process::thread_cpu_secs();
        let mut scans: Vec<(u32, Vec<PageRegion>)> = Vec::new();
        let mut mappings: HashMap<u32, tierd_sys::pagemap::Mappings> = HashMap::new();
        for p in procs {
            self.cost.syscalls += 1;
            match tierd_sys::pagemap::scan_mappings(&self.proc, p.pid()) {
                Some((ranges, mut runs)) => {
                    runs.sort_by_key(|r| r.start);
                    scans.push((p.pid(), runs));
                    mappings.insert(p.pid(), ranges);
                }
                None => self.cost.errors += 1,
            }
        }
        let runs_of = |pid: u32| scans.iter().find(|(p, _)| *p == pid).map(|(_, r)| r.as_slice()).unwrap_or(&[]);

        // 1. Which of last interval's samples came back, and which older ones did now.
        let mut fracs = Vec::with_capacity(self.fresh.len());
        let mut huge_fracs = Vec::new();
        let mut returned: HashMap<(u32, u64), u64> = HashMap::new();
        let fresh = std::mem::take(&mut self.fresh);
        let (mut canaries, mut canaries_missed) = (0, 0);
        for s in fresh {
            let back = present_within(runs_of(s.pid), s.start, s.len);
            if s.canary {
                canaries += 1;
                canaries_missed += u32::from(back == 0);
            } else {
                if s.huge { &mut huge_fracs } else { &mut fracs }.push(back as f64 / s.len as f64);
            }
            let key = (s.pid, s.start & !(REGION - 1));
            let small = !s.huge && !s.canary;
            if back > 0 && small {
                self.batch_returned(s.drawn, back);
            }
            if back > 0 {
                self.came_back(key, back, now, &mut returned);
                if small && back < s.len {
                    self.pending.push(Sample { seen: back, ..s });
                }
            } else {
                if let Some(r) = self.regions.get_mut(&key) {
                    r.misses += 1;
                    r.cold_since.get_or_insert(s.drawn);
                }
                self.pending.push(s);
            }
        }
        // Known-hot huge pages that were not touched: the tenant is going quiet, so
        // what was known hot must be measured again.
        if canaries >= CANARIES as u32 && canaries_missed * 2 >= canaries {
            for r in self.regions.values_mut() {
                r.sample_returned = None;
            }
        }
        let window = self.cfg.window_secs;
        let mut still = Vec::with_capacity(self.pending.len());
        for s in std::mem::take(&mut self.pending) {
            if now - s.drawn > window {
                continue;
            }
            let back = present_within(runs_of(s.pid), s.start, s.len);
            let new = back.saturating_sub(s.seen);
            if new > 0 {
                if !s.huge && !s.canary {
                    self.batch_returned(s.drawn, new);
                }
                self.came_back((s.pid, s.start & !(REGION - 1)), new, now, &mut returned);
            }
            // Small samples wait for all their pages; a huge one is done once any is back.
            let done = if s.huge { back > 0 } else { back >= s.len };
            if !done {
                still.push(Sample { seen: s.seen.max(back), ..s });
            }
        }
        self.pending = still;

        // 2. Memory that became resident during the interval (tier faults, new pages).
        let mut counts: HashMap<(u32, u64), (u64, u64, u64)> = HashMap::new();
        for (pid, runs) in &scans {
            region_counts(*pid, runs, &mut counts);
        }
        let mapping_of = |pid: u32, block: u64| mapping_holding(mappings.get(&pid).map_or(&[], Vec::as_slice), block);
        self.huge_mappings.retain(|&(pid, start)| mappings.get(&pid).is_some_and(|m| m.iter().any(|r| r.0 == start)));
        for (&(pid, block), c) in &counts {
            if c.2 > 0
                && let Some((start, _)) = mapping_of(pid, block)
            {
                self.huge_mappings.insert((pid, start));
            }
        }
        let mut faulted_in = 0u64;
        let mut next: HashMap<(u32, u64), RegionState> = HashMap::with_capacity(counts.len());
        for (key, &(present, swapped, huge)) in &counts {
            let known = self.regions.get(key).copied();
            let mut st = known.unwrap_or_default();
            if self.observed {
                let sampled_back = returned.get(key).copied().unwrap_or(0);
                faulted_in +=
                    st.settle(known.is_some(), present, swapped, sampled_back, self.prefetched.contains(key), now);
            }
            st.present = present;
            st.swapped = swapped;
            st.huge = huge;
            let in_huge_mapping =
                mapping_of(key.0, key.1).is_some_and(|(start, _)| self.huge_mappings.contains(&(key.0, start)));
            if huge >= REGION / 2 || in_huge_mapping {
                st.wants_huge = true;
            }
            next.insert(*key, st);
        }
        self.regions = next;
        self.prefetched.clear();

        // 3. This interval's estimate: small stratum + huge stratum + what came in.
        // Also when nothing was sampled (everything resident was queued for a rebuild,
        // or nothing is resident): a stale last interval kept a tenant that had just
        // gone idle looking busy until its queued regions aged.
        if self.observed {
            let (mean, var) = mean_and_var(&fracs);
            let r = self.sampled_from as f64;
            let hr = self.huge_sampled_from as f64;
            // Huge pages resident at the last draw were always sampled, so `hr` is 0
            // exactly when there are no huge fractions.
            let (huge_mean, huge_var) = mean_and_var(&huge_fracs);
            // Under pressure pages fault in and are evicted again within one interval,
            // so region counts miss some: every major fault was a touched page too.
            let faulted = faulted_in.max(tier_faults * PAGE) as f64;
            self.estimates.push(Estimate {
                at: now,
                bytes: mean * r + huge_mean * hr + self.counted_whole_bytes as f64 + faulted,
                var: var * r * r + huge_var * hr * hr,
                faulted,
                returned: mean,
            });
            // Adapt the sample size so the window's estimate has the precision wanted:
            // k intervals averaged shrink the per-interval interval by √k. Both strata
            // count: the huge sample count follows the small one.
            // Nothing sampled (a rest) is no evidence to size the next sample by.
            if !fracs.is_empty() || !huge_fracs.is_empty() {
                let est = (mean * r + huge_mean * hr).max((4 << 20) as f64);
                let k = (window / self.cfg.interval_secs).max(1.0);
                let rel = 1.96 * (var * r * r + huge_var * hr * hr).sqrt() / est / k.sqrt();
                if rel > self.cfg.target_rel_ci {
                    self.pages = (self.pages as f64 * 1.25) as u32;
                } else if rel < self.cfg.target_rel_ci / 2.5 {
                    self.pages = (self.pages as f64 / 1.25) as u32;
                }
                self.pages = self.pages.clamp(self.cfg.min_pages, self.cfg.max_pages);
            }
        }
        self.estimates.age(now, window);

        // 4. Next interval's samples: unmap them now, as many as the CPU and IO budgets
        // allow (kept in `pages`, so it does not grow while capped; the first draw
        // comes before any adaptation).
        // None from a tenant at rest: each page sampled out is a fault the moment it
        // wakes (its first second ran at 0.77 of dram where plain swap's ran at 1.00 in
        // the simulator), and it touches nothing there is to see.
        self.pages = self.pages.min(self.budget_pages).min(self.io_budget_pages());
        let queued = self.queued_for_collapse(now);
        let (samples, from, huge_from, known_hot) = if at_rest {
            (Vec::new(), 0, 0, 0)
        } else {
            let (mut samples, from) = self.draw(&scans, now, queued > 0);
            let (huge, huge_from, known_hot) = self.draw_huge(&scans, now);
            samples.extend(huge);
            (samples, from, huge_from, known_hot)
        };
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
                if s.huge {
                    r.huge = 0;
                }
            }
        }
        self.cost.sample_pages = samples.iter().map(|s| s.len / PAGE).sum();
        // The samples were taken off their regions' resident bytes above.
        let samples_bytes = self.cost.sample_pages * PAGE;
        let small: u64 = samples.iter().filter(|s| !s.huge).map(|s| s.len).sum();
        self.batches.push_back(Batch { drawn: now, sampled: small, from, returned: 0, at_rest });
        while self.batches.front().is_some_and(|b| now - b.drawn > window + self.cfg.interval_secs) {
            self.batches.pop_front();
        }
        self.fresh = samples;
        self.sampled_from = from;
        self.huge_sampled_from = huge_from;
        self.counted_whole_bytes = queued + known_hot;
        self.observed = true;
        let spent = tierd_sys::process::thread_cpu_secs() - t0;
        self.cost.seconds += spent;
        let tracked = self.regions.values().map(|r| r.present + r.swapped).sum::<u64>() + samples_bytes;
        self.update_budget(spent, self.cost.sample_pages, tracked, now);
    }

    fn activeness(&self) -> Option<Activeness> {
        self.estimates.activeness(self.last_observed.and_then(|now| self.touched_in_window(now)))
    }

    fn regions(&self, now: f64) -> Vec<Region> {
        let mut out: Vec<Region> = self
            .regions
            .iter()
            .map(|(&(pid, start), r)| Region {
                range: Range { pid, start, len: REGION },
                idle_secs: r.idle_secs(now),
                reused_secs: r.reused.map(|t| now - t),
                laid_out: false,
                cold_samples: r.misses,
                dram_bytes: r.present,
                tier_bytes: r.swapped,
                wants_huge: r.wants_huge,
                huge_bytes: r.huge,
            })
            .collect();
        out.sort_by_key(|r| (r.range.pid, r.range.start));
        out
    }

    fn cost(&self) -> TrackerCost {
        self.cost
    }

    fn tier_read_time(&mut self, secs: f64) {
        self.tier_read_secs = Some(secs);
    }

    fn prefetched(&mut self, ranges: &[Range]) {
        for r in ranges {
            let mut at = r.start & !(REGION - 1);
            while at < r.start + r.len {
                self.prefetched.insert((r.pid, at));
                at += REGION;
            }
        }
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
    fn a_region_belongs_to_a_mapping_only_when_wholly_inside_it() {
        let maps = [(0, 4 * REGION), (10 * REGION, 10 * REGION + REGION / 2), (20 * REGION + 4096, 30 * REGION)];
        assert_eq!(mapping_holding(&maps, 0), Some(maps[0]));
        assert_eq!(mapping_holding(&maps, 3 * REGION), Some(maps[0]));
        assert_eq!(mapping_holding(&maps, 4 * REGION), None, "past the end");
        assert_eq!(mapping_holding(&maps, 10 * REGION), None, "mapping shorter than a region");
        assert_eq!(mapping_holding(&maps, 20 * REGION), None, "region starts before the mapping");
        assert_eq!(mapping_holding(&maps, 21 * REGION), Some(maps[2]));
        assert_eq!(mapping_holding(&[], 0), None);
    }

    #[test]
    fn a_tenant_at_rest_has_nothing_sampled_out() {
        // A child holding 64 MiB it touched: sampled while working, left whole at rest.
        let mut child = std::process::Command::new("python3")
            .args(["-c", "b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint(1, flush=True)\nimport time; time.sleep(60)"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
        let procs = vec![Pidfd::open(child.id()).unwrap()];
        let mut t = SamplingTracker::new(SamplingConfig::new(1024, 30.0, 5.0), ProcFs::new("/proc"), 1);
        t.observe(&procs, 0, 0.0, false);
        let working = t.cost().sample_pages;
        t.observe(&procs, 0, 5.0, true);
        let resting = t.cost().sample_pages;
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(working > 0, "a working tenant is sampled");
        assert_eq!(resting, 0, "none at rest");
        assert!(t.activeness().is_some(), "the rest still counts as an observed interval");
    }

    #[test]
    fn the_smallest_sample_setting_still_makes_a_range() {
        for pages in [16, 31, 32, 1024, 65536] {
            let cfg = SamplingConfig::new(pages, 30.0, 5.0);
            assert!(cfg.min_pages <= cfg.max_pages, "{pages}: {cfg:?}");
        }
    }

    #[test]
    fn a_slow_tier_shrinks_the_sample_to_the_refaults_it_can_afford() {
        let cfg = SamplingConfig::new(1024, 30.0, 5.0);
        let mut t = SamplingTracker::new(cfg, ProcFs::new("/proc"), 1);
        assert_eq!(t.io_budget_pages(), u32::MAX, "no tier read timed yet: no cap");
        // A hard disk: 7 ms a read leaves 1% of 5 s for 7 refaults; before any sample
        // came back, every sampled page counts as one.
        t.tier_read_time(0.007);
        assert_eq!(t.io_budget_pages(), MIN_IO_PAGES, "7 pages is under the floor");
        // NVMe: 150 µs a read, a quarter of the samples come back: 333 refaults.
        t.tier_read_time(150e-6);
        t.batches.push_back(Batch {
            drawn: 0.0,
            sampled: 400 * PAGE,
            from: 1 << 30,
            returned: 100 * PAGE,
            at_rest: false,
        });
        assert_eq!(t.io_budget_pages(), 1333);
        // None came back: a twentieth is assumed, the cap is not lifted altogether.
        t.batches[0].returned = 0;
        assert_eq!(t.io_budget_pages(), 6666);
    }

    #[test]
    fn the_cpu_budget_sizes_the_sample_to_what_it_buys() {
        // 1% of a core over 8 GiB at 10 s intervals: 0.1 s of CPU per interval.
        let cfg = SamplingConfig::new(1024, 60.0, 10.0).with_cpu_budget(1.0);
        let mut t = SamplingTracker::new(cfg, ProcFs::new("/proc"), 1);
        t.update_budget(0.2, 2000, 8 << 30, 0.0);
        assert_eq!(t.budget_pages, u32::MAX, "nothing to go by before one whole interval");
        t.update_budget(0.2, 2000, 8 << 30, 10.0);
        assert_eq!(t.budget_pages, 1000, "twice the budget spent: half the pages");
        t.update_budget(0.05, 1000, 8 << 30, 20.0);
        assert_eq!(t.budget_pages, 1500, "half spent: moves half-way to twice as many");
        for k in 3..20 {
            t.update_budget(1.0, 1000, 64 << 20, k as f64 * 10.0);
        }
        assert_eq!(t.budget_pages, cfg.min_pages, "a small tenant keeps the smallest sample");

        let mut free = SamplingTracker::new(SamplingConfig::new(1024, 60.0, 10.0), ProcFs::new("/proc"), 1);
        free.update_budget(0.2, 2000, 8 << 30, 0.0);
        free.update_budget(5.0, 2000, 8 << 30, 10.0);
        assert_eq!(free.budget_pages, u32::MAX, "no budget: no cap");
    }

    #[test]
    fn touched_in_window_follows_a_batch_of_samples_through_a_whole_window() {
        let mut t = SamplingTracker::new(SamplingConfig::new(1024, 30.0, 5.0), ProcFs::new("/proc"), 1);
        let mib = 1u64 << 20;
        let batch = |drawn| Batch { drawn, sampled: 400 * PAGE, from: 1024 * mib, returned: 0, at_rest: false };
        t.batches.push_back(batch(0.0));
        t.batches.push_back(batch(5.0));
        // A quarter came back at the first check, another quarter at later re-checks.
        t.batch_returned(0.0, 100 * PAGE);
        t.batch_returned(0.0, 100 * PAGE);
        t.batch_returned(5.0, 400 * PAGE);
        for at in [5.0, 10.0, 15.0, 20.0, 25.0, 30.0] {
            t.estimates.push(Estimate { at, bytes: 0.0, var: 0.0, faulted: (mib * 2) as f64, returned: 0.0 });
        }
        assert_eq!(t.touched_in_window(20.0), None, "no batch is a window old yet");
        assert_eq!(
            t.touched_in_window(30.0),
            Some(512 * mib + 12 * mib),
            "half the samples came back within the window, plus what faulted in over it"
        );
    }

    #[test]
    fn a_rest_a_window_ago_does_not_read_as_nothing_touched_since() {
        let mut t = SamplingTracker::new(SamplingConfig::new(1024, 30.0, 5.0), ProcFs::new("/proc"), 1);
        let mib = 1u64 << 20;
        let rest = |drawn| Batch { drawn, sampled: 0, from: 0, returned: 0, at_rest: true };
        t.batches.push_back(rest(0.0));
        t.batches.push_back(Batch { drawn: 5.0, sampled: 400 * PAGE, from: 1024 * mib, returned: 0, at_rest: false });
        t.batch_returned(5.0, 200 * PAGE);
        assert_eq!(t.touched_in_window(30.0), Some(512 * mib), "the first batch drawn after it woke stands in");
        // At rest all along: what it touched is what faulted in.
        t.batches = [rest(0.0), rest(5.0)].into();
        t.estimates.push(Estimate { at: 10.0, bytes: 0.0, var: 0.0, faulted: (mib * 2) as f64, returned: 0.0 });
        assert_eq!(t.touched_in_window(30.0), Some(2 * mib));
    }

    #[test]
    fn only_pages_back_from_the_tier_are_reuse_and_tierds_own_prefetch_is_not_a_touch() {
        let mib = 1u64 << 20;
        let known = |present, swapped| RegionState { present, swapped, ..RegionState::default() };
        // Filled: new pages, nothing came from the tier.
        let mut fill = known(0, 0);
        assert_eq!(fill.settle(true, 2 * mib, 0, 0, false, 10.0), 2 * mib);
        assert_eq!((fill.last_touched, fill.reused), (Some(10.0), None), "a first touch, not reuse");
        // Faulted back from the tier by the tenant: reuse.
        let mut back = known(mib, mib);
        assert_eq!(back.settle(true, 2 * mib, 0, 0, false, 10.0), mib);
        assert_eq!(back.reused, Some(10.0));
        // The same pages read back by tierd's prefetch: nothing the tenant did.
        let mut fetched = known(mib, mib);
        assert_eq!(fetched.settle(true, 2 * mib, 0, 0, true, 10.0), 0);
        assert_eq!((fetched.last_touched, fetched.reused), (None, None));
        // Samples that came back are counted where they are found, not twice.
        let mut sampled = known(mib, 0);
        assert_eq!(sampled.settle(true, mib + 16384, 0, 16384, false, 10.0), 0);
        assert_eq!(sampled.last_touched, None);
        // A region seen for the first time has no past to come back from.
        let mut new = RegionState::default();
        assert_eq!(new.settle(false, mib, mib, 0, false, 10.0), mib);
        assert_eq!(new.reused, None);
    }

    #[test]
    fn cluster_variance_shrinks_with_more_clusters() {
        let few = mean_and_var(&[1.0, 0.0, 1.0, 0.0]);
        let many = mean_and_var(&[1.0, 0.0].repeat(50));
        assert!((few.0 - 0.5).abs() < 1e-9 && (many.0 - 0.5).abs() < 1e-9);
        assert!(many.1 < few.1 / 10.0);
    }
}
