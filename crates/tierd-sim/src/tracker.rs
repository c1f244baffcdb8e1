//! The sampling tracker, modelled: what `tierd`'s tracker would report of a tenant.
//!
//! Each interval it draws clusters of 4 resident pages (spread over regions and classes
//! by what each holds) and pages them out. A sampled page comes back when the tenant
//! touches it: with probability 1 − e^(−Λ), Λ its class's accesses per page since the
//! draw. From there the estimates follow the real tracker: the returned share times the
//! resident memory sampled, plus what the tenant faulted in; averaged over the window
//! with a confidence interval from the spread between clusters; per-region heat from
//! samples that came back or missed, and from the tenant's own faults; the sample size
//! adapts to a ±5% window estimate within a CPU budget. Huge pages are not modelled.

use std::collections::VecDeque;

use tierd_core::estimates::{
    Comb, Estimate, Estimates, WindowTouched, distinct_faulted, mean_and_var, refault_budget_pages,
};
use tierd_core::snapshot::{Activeness, Range, Region};

use crate::calib::{PAGE, REGION, SAMPLE_CPU_SECS, SCAN_CPU_SECS_PER_GIB};
use crate::memory::Memory;

const CLUSTER: f64 = 4.0;
const TARGET_REL_CI: f64 = 0.05;

#[derive(Debug, Clone, Copy)]
struct Sample {
    region: usize,
    class: usize,
    drawn: f64,
    /// The class's exposure when last checked (at the draw, then at each check).
    exposure: f64,
    /// Pages of it seen back so far.
    seen: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct RegionState {
    last_touched: Option<f64>,
    reused: Option<f64>,
    misses: u32,
    cold_since: Option<f64>,
}

impl RegionState {
    fn touch(&mut self, now: f64) {
        self.last_touched = Some(now);
        self.misses = 0;
        self.cold_since = None;
    }
}

#[derive(Debug, Clone, Copy)]
struct Batch {
    drawn: f64,
    sampled: f64,
    from: f64,
    returned: f64,
}

/// The tracker of one tenant.
#[derive(Debug, Clone)]
pub struct Tracker {
    window: f64,
    interval: f64,
    pages: f64,
    min_pages: f64,
    max_pages: f64,
    budget_pages: f64,
    cpu_budget: f64,
    fresh: Vec<Sample>,
    pending: Vec<Sample>,
    sampled_from: f64,
    regions: Vec<RegionState>,
    estimates: Estimates,
    batches: VecDeque<Batch>,
    observed: bool,
    last_observed: Option<f64>,
    /// Regions tierd prefetched since the last observation.
    pub prefetched: Vec<bool>,
    /// CPU seconds spent so far.
    pub cpu_secs: f64,
    /// Where samples fall ([`Comb`]), its phase drawn at the first draw.
    comb: Option<Comb>,
}

/// What the tracker is told at an observation.
pub struct Observation<'a> {
    pub now: f64,
    pub mem: &'a mut Memory,
    /// Accesses per page of each class since the start.
    pub exposure: &'a [f64],
    /// Pages each region took in since the last observation (faults, fill).
    pub came_in: &'a [f64],
    /// Of those, pages brought back from the tier (faults on swapped pages).
    pub from_tier: &'a [f64],
    /// The tenant's own major faults since the last observation.
    pub own_faults: f64,
    /// Seconds a tier read takes lately.
    pub read_secs: Option<f64>,
    /// The tenant is at rest (its CPU and stall far below its usual).
    pub at_rest: bool,
}

impl Tracker {
    pub fn new(regions: usize, window: f64, interval: f64, sample_pages: f64, cpu_budget_percent: f64) -> Tracker {
        let min_pages = (sample_pages / 4.0).max(64.0);
        Tracker {
            window,
            interval,
            pages: sample_pages,
            min_pages,
            max_pages: (sample_pages * 2.0).clamp(min_pages, 65536.0),
            budget_pages: f64::INFINITY,
            cpu_budget: cpu_budget_percent / 100.0,
            fresh: Vec::new(),
            pending: Vec::new(),
            sampled_from: 0.0,
            regions: vec![RegionState::default(); regions],
            estimates: Estimates::default(),
            batches: VecDeque::new(),
            observed: false,
            last_observed: None,
            prefetched: vec![false; regions],
            cpu_secs: 0.0,
            comb: None,
        }
    }

    /// Pages of a sample that came back between two exposures.
    fn returned(rng: &mut fastrand::Rng, pages: f64, from: f64, to: f64) -> f64 {
        let p = 1.0 - (-(to - from).max(0.0)).exp();
        (0..pages as usize).filter(|_| rng.f64() < p).count() as f64
    }

    /// One observation: checks the samples, updates heat and estimates, draws anew.
    /// Returns the CPU seconds it took.
    pub fn observe(&mut self, mut o: Observation<'_>, rng: &mut fastrand::Rng) -> f64 {
        let mut back_in = vec![0.0; self.regions.len()];
        let fracs = self.check_fresh(&o, rng, &mut back_in);
        self.recheck_pending(&o, rng, &mut back_in);
        let faulted_in = self.settle(&o, &back_in);
        if self.observed {
            let tier_bytes = o.mem.swapped_pages() * PAGE;
            self.estimate(&fracs, faulted_in, o.own_faults, tier_bytes, o.now);
        }
        self.estimates.age(o.now, self.window);
        self.sample_next(&mut o, rng)
    }

    /// Which of last interval's samples came back (their shares); the others, and
    /// those only partly back, are re-checked through the window.
    fn check_fresh(&mut self, o: &Observation<'_>, rng: &mut fastrand::Rng, back_in: &mut [f64]) -> Vec<f64> {
        let mut fracs = Vec::with_capacity(self.fresh.len());
        for mut s in std::mem::take(&mut self.fresh) {
            let back = Tracker::returned(rng, CLUSTER, s.exposure, o.exposure[s.class]);
            s.exposure = o.exposure[s.class];
            fracs.push(back / CLUSTER);
            if back > 0.0 {
                self.batch_returned(s.drawn, back);
                self.came_back(s.region, back, o.now, back_in);
                if back < CLUSTER {
                    self.pending.push(Sample { seen: back, ..s });
                }
            } else {
                let r = &mut self.regions[s.region];
                r.misses += 1;
                r.cold_since.get_or_insert(s.drawn);
                self.pending.push(s);
            }
        }
        fracs
    }

    /// Older samples that came back since their last check; a window old, dropped.
    fn recheck_pending(&mut self, o: &Observation<'_>, rng: &mut fastrand::Rng, back_in: &mut [f64]) {
        let mut still = Vec::with_capacity(self.pending.len());
        for s in std::mem::take(&mut self.pending) {
            if o.now - s.drawn > self.window {
                continue;
            }
            let new = Tracker::returned(rng, CLUSTER - s.seen, s.exposure, o.exposure[s.class]);
            if new > 0.0 {
                self.batch_returned(s.drawn, new);
                self.came_back(s.region, new, o.now, back_in);
            }
            if s.seen + new < CLUSTER {
                still.push(Sample { seen: s.seen + new, exposure: o.exposure[s.class], ..s });
            }
        }
        self.pending = still;
    }

    /// What became resident through the tenant's own touches (not tierd's prefetch,
    /// not samples coming back): a touch, and reuse where it came from the tier.
    fn settle(&mut self, o: &Observation<'_>, back_in: &[f64]) -> f64 {
        let mut faulted_in = 0.0;
        for (r, st) in self.regions.iter_mut().enumerate() {
            if self.prefetched[r] {
                continue;
            }
            let came = (o.came_in[r] - back_in[r]).max(0.0);
            if came * PAGE >= 1.0 && self.observed {
                st.touch(o.now);
                if o.from_tier[r] > 0.5 {
                    st.reused = Some(o.now);
                }
                faulted_in += came * PAGE;
            }
        }
        self.prefetched.iter_mut().for_each(|p| *p = false);
        faulted_in
    }

    /// This interval's estimate, and the sample size its precision asks for.
    fn estimate(&mut self, fracs: &[f64], faulted_in: f64, own_faults: f64, tier_bytes: f64, now: f64) {
        let (mean, var) = mean_and_var(fracs);
        let r = self.sampled_from;
        let faulted = distinct_faulted(faulted_in, own_faults * PAGE, tier_bytes);
        self.estimates.push(Estimate { at: now, bytes: mean * r + faulted, var: var * r * r, faulted, returned: mean });
        // Nothing sampled (a rest) is no evidence to size the next sample by.
        if !fracs.is_empty() {
            let est = (mean * r).max((4u64 << 20) as f64);
            let k = (self.window / self.interval).max(1.0);
            let rel = 1.96 * (var * r * r).sqrt() / est / k.sqrt();
            if rel > TARGET_REL_CI {
                self.pages *= 1.25;
            } else if rel < TARGET_REL_CI / 2.5 {
                self.pages /= 1.25;
            }
            self.pages = self.pages.clamp(self.min_pages, self.max_pages);
        }
    }

    /// Next interval's samples; none from a tenant at rest: it touches nothing there is
    /// to see, and each page sampled out is a fault the moment it wakes. Returns the
    /// CPU seconds the observation cost.
    fn sample_next(&mut self, o: &mut Observation<'_>, rng: &mut fastrand::Rng) -> f64 {
        let now = o.now;
        self.pages = self.pages.min(self.budget_pages).min(self.io_budget_pages(o.read_secs));
        let from = if o.at_rest {
            self.fresh.clear();
            0.0
        } else {
            self.draw(o.mem, o.exposure, now, rng)
        };
        let sampled = self.fresh.len() as f64 * CLUSTER;
        self.batches.push_back(Batch { drawn: now, sampled: sampled * PAGE, from, returned: 0.0 });
        while self.batches.front().is_some_and(|b| now - b.drawn > self.window + self.interval) {
            self.batches.pop_front();
        }
        self.sampled_from = from;
        self.observed = true;
        let tracked = o.mem.allocated_pages() * PAGE;
        let spent = sampled * SAMPLE_CPU_SECS + SCAN_CPU_SECS_PER_GIB * tracked / (1u64 << 30) as f64;
        self.cpu_secs += spent;
        self.update_budget(spent, sampled, tracked, now);
        spent
    }

    fn batch_returned(&mut self, drawn: f64, back: f64) {
        if let Some(b) = self.batches.iter_mut().find(|b| b.drawn == drawn) {
            b.returned += back * PAGE;
        }
    }

    fn came_back(&mut self, region: usize, back: f64, now: f64, back_in: &mut [f64]) {
        back_in[region] += back;
        let r = &mut self.regions[region];
        r.touch(now);
        r.reused = Some(now);
    }

    fn io_budget_pages(&self, read_secs: Option<f64>) -> f64 {
        let Some(read) = read_secs.filter(|s| *s > 0.0) else { return f64::INFINITY };
        let (back, sampled) = self.batches.iter().fold((0.0, 0.0), |(b, s), x| (b + x.returned, s + x.sampled));
        refault_budget_pages(back, sampled, self.interval, read, CLUSTER)
    }

    fn update_budget(&mut self, spent: f64, drawn: f64, tracked: f64, now: f64) {
        let Some(prev) = self.last_observed.replace(now) else { return };
        if self.cpu_budget <= 0.0 || drawn == 0.0 || spent <= 0.0 {
            return;
        }
        let budget = self.cpu_budget * (now - prev).max(0.0) * tracked / (8u64 << 30) as f64;
        let allowed = drawn * budget / spent;
        let was = if self.budget_pages.is_finite() { self.budget_pages } else { allowed };
        self.budget_pages = ((was + allowed) / 2.0).max(self.min_pages);
    }

    /// Draws clusters from resident pages, pages them out; returns the bytes drawn from.
    fn draw(&mut self, mem: &mut Memory, exposure: &[f64], now: f64, rng: &mut fastrand::Rng) -> f64 {
        let k = mem.classes;
        let mut cum = Vec::with_capacity(mem.res.len());
        let mut acc = 0.0;
        for &r in &mem.res {
            acc += r as f64;
            cum.push(acc);
        }
        if acc < CLUSTER {
            self.fresh.clear();
            return 0.0;
        }
        let clusters = (self.pages / CLUSTER).ceil().min(acc / CLUSTER).max(1.0) as usize;
        let comb = self.comb.get_or_insert_with(|| Comb::new(rng.f64()));
        self.fresh = comb
            .draws(acc, clusters)
            .into_iter()
            .map(|x| {
                let i = cum.partition_point(|&c| c <= x).min(cum.len() - 1);
                let (region, class) = (i / k, i % k);
                mem.page_out_some(region, class, CLUSTER);
                Sample { region, class, drawn: now, exposure: exposure[class], seen: 0.0 }
            })
            .collect();
        acc * PAGE
    }

    /// Memory touched within the window and within its latter half (see the real tracker).
    fn touched_in_window(&self, now: f64) -> Option<WindowTouched> {
        let old_enough = |span: f64| move |b: &&Batch| now - b.drawn >= span - self.interval / 2.0;
        let window = self.batches.iter().find(old_enough(self.window))?;
        let half = self.batches.iter().rev().find(old_enough(self.window / 2.0));
        Some(self.touched_since(window).with_half(half.map(|b| self.touched_since(b))))
    }

    fn touched_since(&self, b: &Batch) -> WindowTouched {
        let faulted = self.estimates.faulted_since(b.drawn);
        WindowTouched::from_batch(b.sampled, b.returned, CLUSTER * PAGE, b.from, faulted)
    }

    pub fn activeness(&self) -> Option<Activeness> {
        self.estimates.activeness(self.last_observed.and_then(|now| self.touched_in_window(now)))
    }

    /// Heat per region, as the snapshot carries it (`pid` stands for the tenant).
    pub fn regions(&self, mem: &Memory, pid: u32, now: f64, laid_out: &[bool]) -> Vec<Region> {
        (0..mem.regions)
            .filter_map(|r| {
                let (res, swapped) = mem.region(r);
                if res + swapped < 0.5 {
                    return None;
                }
                let st = &self.regions[r];
                Some(Region {
                    range: Range { pid, start: r as u64 * REGION, len: REGION },
                    idle_secs: st.last_touched.or(st.cold_since).map(|t| now - t),
                    reused_secs: st.reused.map(|t| now - t),
                    laid_out: laid_out[r],
                    cold_samples: st.misses,
                    dram_bytes: (res * PAGE) as u64,
                    tier_bytes: (swapped * PAGE) as u64,
                    wants_huge: false,
                    huge_bytes: 0,
                })
            })
            .collect()
    }
}
