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
//! Refaults of sampled hot pages are minor faults: a page written out waits in the swap
//! cache, and one the page-out dropped at once (it kept its swap slot: read back from
//! the tier and not written since) is read straight back there when it is likely hot.
//!
//! Huge pages are sampled whole, as their own stratum: unmapping part of one would
//! split it, so a few whole 2 MiB pages per interval (one per 64 sampled small pages,
//! 4 to 32) are paged out — written to the tier as one unit — and a page counts as
//! touched by the share of it that came back. A cold one simply stays on the tier
//! (where it belongs); a hot one comes back on small pages and the policy rebuilds it
//! with `MADV_COLLAPSE` at the next interval. The huge stratum's estimate is its
//! returned fraction × the huge resident bytes it was drawn from.

mod draw;
mod observe;
mod region;

use std::collections::{HashMap, HashSet, VecDeque};

use tierd_core::estimates::{Comb, Estimates, WindowTouched, refault_budget_pages};
use tierd_core::size::PAGE;
use tierd_core::snapshot::{Activeness, Range, Region};
use tierd_sys::madvise::Pidfd;
use tierd_sys::procfs::ProcFs;

use self::observe::Returns;
use super::{ReadBack, Tracker, TrackerCost};

pub use super::REGION;
/// Intervals a huge page whose sample came back counts as hot without being sampled again.
const HUGE_RECHECK_INTERVALS: f64 = 20.0;
/// Known-hot huge pages sampled per interval all the same, to notice a tenant going
/// quiet: when half of them were not touched, every huge page is measured again.
const CANARIES: usize = 2;

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
    /// Where small-page samples fall ([`Comb`]).
    comb: Comb,
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
            comb: Comb::new(fastrand::Rng::with_seed(seed ^ 0x5eed).f64()),
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

    /// The most small pages the tier's read time allows per interval
    /// ([`refault_budget_pages`]); no cap before a tier read was timed.
    fn io_budget_pages(&self) -> u32 {
        let Some(read) = self.tier_read_secs.filter(|s| *s > 0.0) else { return u32::MAX };
        let (back, sampled) = self.window_returns();
        let cluster = self.cfg.cluster_pages as f64;
        let pages = refault_budget_pages(back as f64, sampled as f64, self.cfg.interval_secs, read, cluster);
        pages.min((u32::MAX - 1) as f64) as u32
    }

    /// Bytes of the window's small samples that came back, and bytes sampled.
    fn window_returns(&self) -> (u64, u64) {
        self.batches.iter().fold((0, 0), |(b, s), x| (b + x.returned, s + x.sampled))
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
    /// batch of samples is a window old. The same over the window's latter half goes
    /// with it (see `WindowTouched`).
    fn touched_in_window(&self, now: f64) -> Option<WindowTouched> {
        let window = self.cfg.window_secs;
        let old_enough = |span: f64| move |b: &Batch| now - b.drawn >= span - self.cfg.interval_secs / 2.0;
        let old = self.batches.iter().position(old_enough(window))?;
        let half = self.batches.iter().rposition(old_enough(window / 2.0));
        Some(self.touched_since(old).with_half(half.map(|i| self.touched_since(i))))
    }

    /// What the samples of batch `i` say was touched since it was drawn. A batch drawn
    /// at rest measures nothing: the first drawn since stands in (a little short of the
    /// span). None since: at rest the whole span.
    fn touched_since(&self, i: usize) -> WindowTouched {
        let b = self.batches.iter().skip(i).find(|b| !b.at_rest).unwrap_or(&self.batches[i]);
        let faulted = self.estimates.faulted_since(b.drawn);
        let cluster = (self.cfg.cluster_pages as u64 * PAGE) as f64;
        let known = faulted + self.counted_whole_bytes as f64;
        WindowTouched::from_batch(b.sampled as f64, b.returned as f64, cluster, b.from as f64, known)
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

impl Tracker for SamplingTracker {
    fn observe(&mut self, procs: &[Pidfd], tier_faults: u64, now: f64, at_rest: bool) {
        let t0 = tierd_sys::process::thread_cpu_secs();
        let scans = self.scan(procs);
        let mut returns = Returns::default();
        self.check_fresh(&scans, now, &mut returns);
        self.recheck_pending(&scans, now, &mut returns);
        let faulted_in = self.settle_regions(&scans, &returns, now);
        let tier_bytes = self.regions.values().map(|r| r.swapped).sum::<u64>();
        if self.observed {
            self.estimate(&returns, faulted_in, tier_faults, tier_bytes, now);
        }
        self.estimates.age(now, self.cfg.window_secs);
        let samples_bytes = self.sample_next(procs, &scans, now, at_rest);
        self.observed = true;
        let spent = tierd_sys::process::thread_cpu_secs() - t0;
        self.cost.seconds += spent;
        // The samples were taken off their regions' resident bytes.
        let tracked = self.regions.values().map(|r| r.present).sum::<u64>() + tier_bytes + samples_bytes;
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

    fn read_back(&mut self, ranges: &[Range], _how: ReadBack) {
        self.prefetched.extend(super::blocks_of(ranges));
    }
}

#[cfg(test)]
mod tests {
    use tierd_core::estimates::{Estimate, mean_and_var};
    use tierd_core::size::PAGE;

    use super::*;

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
        assert_eq!(t.io_budget_pages(), 7);
        // The same disk queued behind thrashing tenants, 60 ms a read: not one refault
        // fits, and one cluster is still drawn.
        t.tier_read_time(0.060);
        assert_eq!(t.io_budget_pages(), cfg.cluster_pages, "one cluster, not the 32 pages that took 38% of its time");
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
        t.batches.push_back(batch(15.0));
        // A quarter came back at the first check, another quarter at later re-checks.
        t.batch_returned(0.0, 100 * PAGE);
        t.batch_returned(0.0, 100 * PAGE);
        t.batch_returned(5.0, 400 * PAGE);
        t.batch_returned(15.0, 100 * PAGE);
        for at in [5.0, 10.0, 15.0, 20.0, 25.0, 30.0] {
            t.estimates.push(Estimate { at, bytes: 0.0, var: 0.0, faulted: (mib * 2) as f64, returned: 0.0 });
        }
        assert_eq!(t.touched_in_window(20.0), None, "no batch is a window old yet");
        let touched = t.touched_in_window(30.0).unwrap();
        assert_eq!(
            touched.bytes,
            512 * mib + 12 * mib,
            "half the samples came back within the window, plus what faulted in over it"
        );
        // The batch drawn half a window ago: a quarter back, and what faulted in since.
        assert_eq!(touched.half_bytes, Some(256 * mib + 6 * mib));
        // 100 clusters of 4 pages, half back: about ±10% of the 1 GiB drawn from.
        let ci = touched.ci_bytes.unwrap() as f64 / (1024 * mib) as f64;
        assert!((0.09..0.11).contains(&ci), "the batch's interval, ±{ci:.3} of what it was drawn from");
    }

    #[test]
    fn a_rest_a_window_ago_does_not_read_as_nothing_touched_since() {
        let mut t = SamplingTracker::new(SamplingConfig::new(1024, 30.0, 5.0), ProcFs::new("/proc"), 1);
        let mib = 1u64 << 20;
        let rest = |drawn| Batch { drawn, sampled: 0, from: 0, returned: 0, at_rest: true };
        t.batches.push_back(rest(0.0));
        t.batches.push_back(Batch { drawn: 5.0, sampled: 400 * PAGE, from: 1024 * mib, returned: 0, at_rest: false });
        t.batch_returned(5.0, 200 * PAGE);
        assert_eq!(
            t.touched_in_window(30.0).map(|w| w.bytes),
            Some(512 * mib),
            "the first batch drawn after it woke stands in"
        );
        // At rest all along: what it touched is what faulted in.
        t.batches = [rest(0.0), rest(5.0)].into();
        t.estimates.push(Estimate { at: 10.0, bytes: 0.0, var: 0.0, faulted: (mib * 2) as f64, returned: 0.0 });
        assert_eq!(
            t.touched_in_window(30.0),
            Some(WindowTouched { bytes: 2 * mib, ci_bytes: Some(0), half_bytes: Some(2 * mib) }),
            "known exactly"
        );
    }

    #[test]
    fn a_sample_is_read_back_when_its_region_or_else_its_tenant_says_it_will_be_touched() {
        let mut t = SamplingTracker::new(SamplingConfig::new(1024, 30.0, 5.0), ProcFs::new("/proc"), 1);
        let region = |start: u64| start * REGION;
        let back_at = |at| RegionState { sample_returned: Some(at), ..RegionState::default() };
        t.regions.insert((7, region(0)), back_at(95.0));
        t.regions.insert((7, region(1)), back_at(60.0));
        t.regions.insert((7, region(2)), RegionState { last_touched: Some(99.0), ..RegionState::default() });
        let small = |start| Sample { pid: 7, start, len: 4 * PAGE, drawn: 100.0, huge: false, canary: false, seen: 0 };
        t.regions.insert((7, region(4)), RegionState { misses: 1, ..back_at(60.0) });
        let expected = |t: &SamplingTracker, s: &Sample, share| t.refault_expected(s, 100.0, share);
        // Most of the tenant's samples stay out: only a region's own recent evidence counts.
        let cold = Some(0.2);
        assert!(expected(&t, &small(region(0) + 8 * PAGE), cold), "a sample came back 5 s ago");
        assert!(!expected(&t, &small(region(1)), cold), "40 s ago: older than the 30 s window");
        assert!(!expected(&t, &small(region(2)), cold), "touched (filled, faulted in), never reused");
        assert!(!expected(&t, &small(region(3)), cold), "a region not seen yet");
        assert!(!expected(&t, &Sample { pid: 8, ..small(region(0)) }, cold), "another process's region");
        // Most come back: a region without a verdict goes with the tenant, one seen cold does not.
        for r in [1, 2, 3] {
            assert!(expected(&t, &small(region(r)), Some(0.9)), "region {r}");
            assert!(!expected(&t, &small(region(r)), None), "region {r}, nothing drawn yet");
        }
        assert!(!expected(&t, &small(region(4)), Some(0.9)), "a sample from it missed since");
        let huge = Sample { len: REGION, huge: true, ..small(region(0)) };
        assert!(!expected(&t, &huge, Some(1.0)), "a huge page comes back on small pages, to be rebuilt");
        assert!(!expected(&t, &Sample { canary: true, ..huge }, Some(1.0)));
    }

    #[test]
    fn the_returned_share_is_over_the_windows_small_samples() {
        let mut t = SamplingTracker::new(SamplingConfig::new(1024, 30.0, 5.0), ProcFs::new("/proc"), 1);
        assert_eq!(t.returned_share(), None);
        let batch = |drawn, sampled, returned| Batch { drawn, sampled, from: 1 << 30, returned, at_rest: false };
        t.batches.push_back(batch(0.0, 400 * PAGE, 300 * PAGE));
        t.batches.push_back(Batch { at_rest: true, ..batch(5.0, 0, 0) });
        t.batches.push_back(batch(10.0, 100 * PAGE, 0));
        assert_eq!(t.returned_share(), Some(0.6));
    }

    #[test]
    fn cluster_variance_shrinks_with_more_clusters() {
        let few = mean_and_var(&[1.0, 0.0, 1.0, 0.0]);
        let many = mean_and_var(&[1.0, 0.0].repeat(50));
        assert!((few.0 - 0.5).abs() < 1e-9 && (many.0 - 0.5).abs() < 1e-9);
        assert!(many.1 < few.1 / 10.0);
    }
}
