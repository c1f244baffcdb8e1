//! Drawing next interval's samples: clustered small pages and whole huge pages.

use tierd_core::size::PAGE;
use tierd_sys::pagemap::{PAGE_IS_HUGE, PAGE_IS_PRESENT, PageRegion};

use super::{CANARIES, HUGE_RECHECK_INTERVALS, REGION, Sample, SamplingTracker};

impl SamplingTracker {
    /// Draws clustered samples from the present, non-huge runs of each process, spread
    /// over them as a comb that turns each interval (`estimates::Comb`), and unmaps
    /// them. Returns the samples and the bytes they were drawn from.
    pub(super) fn draw(&mut self, scans: &[(u32, Vec<PageRegion>)], now: f64, any_queued: bool) -> (Vec<Sample>, u64) {
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
        for x in self.comb.draws(total as f64, clusters as usize) {
            let x = (x as u64).min(total - 1);
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
    pub(super) fn draw_huge(&mut self, scans: &[(u32, Vec<PageRegion>)], now: f64) -> (Vec<Sample>, u64, u64) {
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
