//! A tenant's memory: for each 2 MiB region and page class, how many pages are where.
//!
//! Pages are resident (mapped), in the swap cache (read ahead by a prefetch and not yet
//! touched, or written out by `MADV_PAGEOUT` and not yet freed), on the tier, or not yet
//! touched at all. Pages on the tier lie in runs of slots (written a region at a time by
//! tierd) or scattered (written by the kernel's reclaim, interleaved with everything
//! else it reclaimed): a fault reads a run's neighbours with it, a scattered page alone.
//! Counts are expected values (a fluid model), so they are fractional.

use crate::access::Layout;
use crate::calib::READAHEAD_PAGES;

/// Where a tenant's pages are, per cell (`region × classes + class`).
#[derive(Debug, Clone)]
pub struct Memory {
    pub classes: usize,
    pub regions: usize,
    alloc: Vec<f32>,
    pub res: Vec<f32>,
    /// Read back by a prefetch, in the swap cache, not mapped yet (from runs / scattered).
    pub pref_run: Vec<f32>,
    pub pref_scat: Vec<f32>,
    /// Written out by `MADV_PAGEOUT` and still in the swap cache, first to be freed.
    pub out_run: Vec<f32>,
    pub out_scat: Vec<f32>,
    pub tier_run: Vec<f32>,
    pub tier_scat: Vec<f32>,
    /// Mean seconds since its resident pages were last touched, per class.
    pub age: Vec<f64>,
    /// Pages of each class per region where it lies (readahead brings that many).
    readahead: Vec<f64>,
    /// Pages each region took in since [`Memory::take_came_in`]: by the tenant's touches
    /// and the fill, and of those from a swap slot (the tier or the swap cache).
    came_in: Vec<f32>,
    from_tier: Vec<f32>,
    /// Pages the fill has reached, in address order.
    filled: f64,
    total_pages: f64,
    /// Per-class sums, computed when asked for after a change (a step reads them
    /// many times between changes).
    cached: std::cell::RefCell<Option<Vec<ClassTotals>>>,
    /// Pages of each class the fill has reached.
    allocated: Vec<f64>,
}

/// What the tenant's accesses did in one step.
#[derive(Debug, Clone, Copy, Default)]
pub struct Touched {
    /// Reads from the tier (major faults), and pages they brought in.
    pub ios: f64,
    pub pages_in: f64,
    /// Of which reads of scattered pages.
    pub scattered_ios: f64,
    /// Minor faults: pages found in the swap cache.
    pub minor: f64,
}

/// Sums over cells of one class.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClassTotals {
    pub res: f64,
    pub pref: f64,
    pub out: f64,
    pub tier_run: f64,
    pub tier_scat: f64,
}

impl Memory {
    pub fn new(layout: &Layout) -> Memory {
        let n = layout.cells.len();
        Memory {
            classes: layout.classes,
            regions: layout.regions,
            alloc: layout.cells.clone(),
            res: vec![0.0; n],
            pref_run: vec![0.0; n],
            pref_scat: vec![0.0; n],
            out_run: vec![0.0; n],
            out_scat: vec![0.0; n],
            tier_run: vec![0.0; n],
            tier_scat: vec![0.0; n],
            age: vec![0.0; layout.classes],
            readahead: layout.density.iter().map(|d| (READAHEAD_PAGES * d).max(1.0)).collect(),
            came_in: vec![0.0; layout.regions],
            from_tier: vec![0.0; layout.regions],
            filled: 0.0,
            total_pages: layout.cells.iter().map(|&c| c as f64).sum(),
            cached: std::cell::RefCell::new(None),
            allocated: vec![0.0; layout.classes],
        }
    }

    /// Forgets the sums: every change to the cells calls this.
    fn changed(&mut self) {
        *self.cached.get_mut() = None;
    }

    pub fn total_pages(&self) -> f64 {
        self.total_pages
    }

    pub fn filled(&self) -> bool {
        self.filled >= self.total_pages - 0.5
    }

    /// Pages in DRAM (the cgroup's usage): resident plus the swap cache.
    pub fn dram_pages(&self) -> f64 {
        self.totals().iter().map(|c| c.res + c.pref + c.out).sum()
    }

    /// Pages in the swap cache: read back untouched, or written out and not yet freed.
    pub fn swap_cached_pages(&self) -> f64 {
        self.totals().iter().map(|c| c.pref + c.out).sum()
    }

    /// Pages with a swap slot: the swap cache and the tier.
    pub fn swapped_pages(&self) -> f64 {
        self.totals().iter().map(|c| c.pref + c.out + c.tier_run + c.tier_scat).sum()
    }

    pub fn allocated_pages(&self) -> f64 {
        self.filled.min(self.total_pages)
    }

    /// Pages of each class that exist (the fill has reached them).
    pub fn class_allocated(&self) -> &[f64] {
        &self.allocated
    }

    /// Per-class sums.
    pub fn totals(&self) -> Vec<ClassTotals> {
        if let Some(t) = self.cached.borrow().as_ref() {
            return t.clone();
        }
        let t = self.sum_cells();
        *self.cached.borrow_mut() = Some(t.clone());
        t
    }

    fn sum_cells(&self) -> Vec<ClassTotals> {
        let mut t = vec![ClassTotals::default(); self.classes];
        for (i, c) in (0..self.res.len()).map(|i| (i, i % self.classes)) {
            let x = &mut t[c];
            x.res += self.res[i] as f64;
            x.pref += (self.pref_run[i] + self.pref_scat[i]) as f64;
            x.out += (self.out_run[i] + self.out_scat[i]) as f64;
            x.tier_run += self.tier_run[i] as f64;
            x.tier_scat += self.tier_scat[i] as f64;
        }
        t
    }

    /// Region `r`'s resident pages and pages with a swap slot.
    pub fn region(&self, r: usize) -> (f64, f64) {
        let (mut res, mut swapped) = (0.0, 0.0);
        for i in r * self.classes..(r + 1) * self.classes {
            res += self.res[i] as f64;
            swapped += (self.pref_run[i]
                + self.pref_scat[i]
                + self.out_run[i]
                + self.out_scat[i]
                + self.tier_run[i]
                + self.tier_scat[i]) as f64;
        }
        (res, swapped)
    }

    /// Share of region `r`'s tier pages that lie in runs.
    pub fn region_in_runs(&self, r: usize) -> f64 {
        let (mut run, mut all) = (0.0, 0.0);
        for i in r * self.classes..(r + 1) * self.classes {
            run += self.tier_run[i] as f64;
            all += (self.tier_run[i] + self.tier_scat[i]) as f64;
        }
        if all > 0.0 { run / all } else { 1.0 }
    }

    /// Expected reads and pages in over `dt` at per-page access rates `lambda`, from
    /// class sums: the fault solver asks this many times a step.
    pub fn faults_at(&self, totals: &[ClassTotals], lambda: &[f64], dt: f64) -> Touched {
        let mut t = Touched::default();
        for (c, x) in totals.iter().enumerate() {
            if lambda[c] <= 0.0 {
                continue;
            }
            let p = 1.0 - (-lambda[c] * dt).exp();
            let ra = self.readahead[c];
            let run_in = x.tier_run * (1.0 - (-lambda[c] * dt * ra).exp());
            let scat_in = x.tier_scat * p;
            t.ios += run_in / ra + scat_in;
            t.scattered_ios += scat_in;
            t.pages_in += run_in + scat_in;
            t.minor += (x.pref + x.out) * p;
        }
        t
    }

    /// Applies one step of accesses at per-page rates `lambda`: what the tier holds of
    /// touched pages comes in (a run with its neighbours), swap-cache pages are mapped.
    pub fn touch(&mut self, lambda: &[f64], dt: f64) -> Touched {
        let mut tot = self.totals();
        let before: Vec<f64> = tot.iter().map(|t| t.res).collect();
        let k = self.classes;
        let p: Vec<f32> = lambda.iter().map(|l| (1.0 - (-l * dt).exp()) as f32).collect();
        let q: Vec<f32> =
            lambda.iter().zip(&self.readahead).map(|(l, ra)| (1.0 - (-l * dt * ra).exp()) as f32).collect();
        // Nothing to bring in for a class with every page resident: its pages only age.
        let away: Vec<bool> = self.totals().iter().map(|t| t.pref + t.out + t.tier_run + t.tier_scat > 0.0).collect();
        self.changed();
        let mut t = Touched::default();
        let mut came = vec![0f64; k];
        for i in 0..self.res.len() {
            let c = i % k;
            if p[c] <= 0.0 || !away[c] {
                continue;
            }
            let minor = (self.pref_run[i] + self.pref_scat[i] + self.out_run[i] + self.out_scat[i]) * p[c];
            let run_in = self.tier_run[i] * q[c];
            let scat_in = self.tier_scat[i] * p[c];
            if minor + run_in + scat_in == 0.0 {
                continue;
            }
            self.pref_run[i] *= 1.0 - p[c];
            self.pref_scat[i] *= 1.0 - p[c];
            self.out_run[i] *= 1.0 - p[c];
            self.out_scat[i] *= 1.0 - p[c];
            self.tier_run[i] -= run_in;
            self.tier_scat[i] -= scat_in;
            self.res[i] += minor + run_in + scat_in;
            let x = &mut tot[c];
            x.res += (minor + run_in + scat_in) as f64;
            x.pref -= ((self.pref_run[i] + self.pref_scat[i]) * p[c] / (1.0 - p[c]).max(1e-12)) as f64;
            x.out -= ((self.out_run[i] + self.out_scat[i]) * p[c] / (1.0 - p[c]).max(1e-12)) as f64;
            x.tier_run -= run_in as f64;
            x.tier_scat -= scat_in as f64;
            t.ios += (run_in / self.readahead[c] as f32 + scat_in) as f64;
            t.scattered_ios += scat_in as f64;
            t.pages_in += (run_in + scat_in) as f64;
            t.minor += minor as f64;
            came[c] += (minor + run_in + scat_in) as f64;
            self.came_in[i / k] += minor + run_in + scat_in;
            self.from_tier[i / k] += minor + run_in + scat_in;
        }
        for c in 0..k {
            // Touched pages and those just brought in are new in the LRU; the rest age.
            let now = before[c] + came[c];
            if now > 0.0 {
                self.age[c] = (self.age[c] + dt) * (1.0 - p[c] as f64) * before[c] / now;
            }
        }
        for x in &mut tot {
            x.pref = x.pref.max(0.0);
            x.out = x.out.max(0.0);
        }
        *self.cached.get_mut() = Some(tot);
        t
    }

    /// The fill writes `pages` more pages in address order; returns how many it wrote
    /// of each class.
    pub fn fill(&mut self, pages: f64) -> Vec<f64> {
        let before: Vec<f64> = self.totals().iter().map(|t| t.res).collect();
        self.changed();
        let k = self.classes;
        let start = self.filled;
        let end = (start + pages).min(self.total_pages);
        let mut r = (start as usize) / crate::calib::REGION_PAGES;
        let mut came = vec![0f64; k];
        while r < self.regions && ((r * crate::calib::REGION_PAGES) as f64) < end {
            let lo = (r * crate::calib::REGION_PAGES) as f64;
            let region_pages: f32 = (0..k).map(|c| self.alloc[r * k + c]).sum();
            let hi = lo + region_pages as f64;
            let share = ((end.min(hi) - start.max(lo)) / region_pages as f64).max(0.0);
            for (c, came_c) in came.iter_mut().enumerate() {
                let n = self.alloc[r * k + c] * share as f32;
                self.res[r * k + c] += n;
                self.came_in[r] += n;
                self.allocated[c] += n as f64;
                *came_c += n as f64;
            }
            r += 1;
        }
        for c in 0..k {
            let now = before[c] + came[c];
            if now > 0.0 {
                self.age[c] = self.age[c] * before[c] / now;
            }
        }
        self.filled = end;
        came
    }

    /// Frees up to `n` pages written out already (`MADV_PAGEOUT`, the sampler): the
    /// kernel's first victims. Returns the pages freed.
    pub fn free_written(&mut self, n: f64) -> f64 {
        self.changed();
        let have: f64 = self.out_run.iter().zip(&self.out_scat).map(|(a, b)| (a + b) as f64).sum();
        if have <= 0.0 || n <= 0.0 {
            return 0.0;
        }
        let f = (n / have).min(1.0) as f32;
        for i in 0..self.res.len() {
            let (a, b) = (self.out_run[i] * f, self.out_scat[i] * f);
            self.out_run[i] -= a;
            self.out_scat[i] -= b;
            self.tier_run[i] += a;
            self.tier_scat[i] += b;
        }
        have.min(n)
    }

    /// Reclaims `n` pages of class `c` (resident or read ahead) by the kernel's LRU:
    /// resident pages are written to scattered slots; pages read ahead and never
    /// touched go back to the slots they came from. Returns the pages written.
    pub fn evict(&mut self, c: usize, n: f64) -> f64 {
        self.changed();
        let k = self.classes;
        let have: f64 = (0..self.regions)
            .map(|r| {
                let i = r * k + c;
                (self.res[i] + self.pref_run[i] + self.pref_scat[i]) as f64
            })
            .sum();
        if have <= 0.0 || n <= 0.0 {
            return 0.0;
        }
        let f = (n / have).min(1.0) as f32;
        let mut written = 0.0;
        for r in 0..self.regions {
            let i = r * k + c;
            let (res, pr, ps) = (self.res[i] * f, self.pref_run[i] * f, self.pref_scat[i] * f);
            self.res[i] -= res;
            self.pref_run[i] -= pr;
            self.pref_scat[i] -= ps;
            self.tier_scat[i] += res + ps;
            self.tier_run[i] += pr;
            written += res as f64;
        }
        written
    }

    /// `MADV_PAGEOUT` of region `r`: its resident pages are written out in one run and
    /// wait in the swap cache. Returns the pages written.
    pub fn page_out(&mut self, r: usize) -> f64 {
        self.changed();
        let mut n = 0.0;
        for i in r * self.classes..(r + 1) * self.classes {
            n += self.res[i] as f64;
            self.out_run[i] += self.res[i];
            self.res[i] = 0.0;
        }
        n
    }

    /// Relayout of region `r` once its pages are read back: they are mapped and the whole
    /// region is written out in one run. Returns the pages written.
    pub fn relay_out(&mut self, r: usize) -> f64 {
        self.changed();
        for i in r * self.classes..(r + 1) * self.classes {
            self.res[i] += self.pref_run[i] + self.pref_scat[i];
            self.pref_run[i] = 0.0;
            self.pref_scat[i] = 0.0;
        }
        self.page_out(r)
    }

    /// Pages out `pages` resident pages of region `r` spread over its classes by what
    /// each holds (the sampler's clusters), scattered. Returns the pages written.
    pub fn page_out_some(&mut self, r: usize, c: usize, pages: f64) -> f64 {
        self.changed();
        let i = r * self.classes + c;
        let n = (pages as f32).min(self.res[i]);
        self.res[i] -= n;
        self.out_scat[i] += n;
        n as f64
    }

    /// Reads region `r`'s tier pages back into the swap cache: up to `run_pages` of
    /// those in runs and `scattered_pages` of the scattered ones. Returns what it read
    /// of each kind, and of each class.
    pub fn read_back(&mut self, r: usize, run_pages: f64, scattered_pages: f64) -> (f64, f64, Vec<f64>) {
        self.changed();
        let (mut run_have, mut scat_have) = (0.0, 0.0);
        for i in r * self.classes..(r + 1) * self.classes {
            run_have += self.tier_run[i] as f64;
            scat_have += self.tier_scat[i] as f64;
        }
        let fr = if run_have > 0.0 { (run_pages / run_have).min(1.0) as f32 } else { 0.0 };
        let fs = if scat_have > 0.0 { (scattered_pages / scat_have).min(1.0) as f32 } else { 0.0 };
        let mut by_class = vec![0.0; self.classes];
        for i in r * self.classes..(r + 1) * self.classes {
            let (a, b) = (self.tier_run[i] * fr, self.tier_scat[i] * fs);
            self.tier_run[i] -= a;
            self.tier_scat[i] -= b;
            self.pref_run[i] += a;
            self.pref_scat[i] += b;
            by_class[i % self.classes] += (a + b) as f64;
        }
        (run_have.min(run_pages), scat_have.min(scattered_pages), by_class)
    }

    /// Region `r`'s pages on the tier: in runs, scattered.
    pub fn region_tier(&self, r: usize) -> (f64, f64) {
        let (mut a, mut b) = (0.0, 0.0);
        for i in r * self.classes..(r + 1) * self.classes {
            a += self.tier_run[i] as f64;
            b += self.tier_scat[i] as f64;
        }
        (a, b)
    }

    /// Pages each region took in since the last call, and of those from a swap slot.
    pub fn take_came_in(&mut self) -> (Vec<f64>, Vec<f64>) {
        let came = self.came_in.iter().map(|&x| x as f64).collect();
        let tier = self.from_tier.iter().map(|&x| x as f64).collect();
        self.came_in.iter_mut().for_each(|x| *x = 0.0);
        self.from_tier.iter_mut().for_each(|x| *x = 0.0);
        (came, tier)
    }

    /// Region `r`'s pages of class `c` that are resident.
    pub fn cell_res(&self, r: usize, c: usize) -> f64 {
        self.res[r * self.classes + c] as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{App, Layout, Pattern, PhaseKind, TenantModel};

    fn memory(size_mib: u64, hot_mib: u64) -> (Layout, Memory) {
        let t = TenantModel {
            name: "t".into(),
            size: size_mib << 20,
            hot: hot_mib << 20,
            pattern: Pattern::Uniform,
            app: App::Workload,
            phases: vec![(PhaseKind::Active, 1.0)],
            reserve: 0,
            shares: 100,
        };
        let l = Layout::of(&t);
        let m = Memory::new(&l);
        (l, m)
    }

    #[test]
    fn the_fill_writes_in_address_order_and_pages_are_conserved() {
        let (_, mut m) = memory(64, 16);
        assert_eq!(m.fill(8192.0).iter().sum::<f64>(), 8192.0);
        assert!((m.cell_res(0, 0) - 512.0).abs() < 1e-3 && m.cell_res(16, 1) == 0.0);
        m.fill(1e9);
        assert!(m.filled());
        assert!((m.dram_pages() - 16384.0).abs() < 1e-2);
        m.evict(0, 1000.0);
        m.page_out(20);
        let on_tier: f64 = m.totals().iter().map(|c| c.tier_run + c.tier_scat).sum();
        assert!((m.dram_pages() + on_tier - 16384.0).abs() < 1e-1, "the swap cache is in DRAM and has slots");
        assert!((m.swapped_pages() - on_tier - 512.0).abs() < 1e-1);
        m.free_written(1e9);
        assert!((m.dram_pages() - (16384.0 - 1000.0 - 512.0)).abs() < 1e-1);
    }

    #[test]
    fn a_fault_on_a_run_brings_its_neighbours_and_a_scattered_one_comes_alone() {
        let (l, mut m) = memory(64, 64);
        m.fill(1e9);
        m.page_out(0);
        m.free_written(1e9);
        m.evict(0, 512.0); // scattered, from every region
        let lambda: Vec<f64> = l.per_page(PhaseKind::Active).iter().map(|a| a * 1e5).collect();
        let t = m.faults_at(&m.totals(), &lambda, 0.001);
        // Runs: eight pages per read; scattered: one.
        let runs = m.region_tier(0).0;
        assert!(runs > 500.0);
        let got = m.touch(&lambda, 0.001);
        assert!((got.ios - t.ios).abs() < 1e-3 * t.ios.max(1.0), "{got:?} vs {t:?}");
        assert!(got.pages_in > got.ios * 1.5, "runs come in several pages a read: {got:?}");
    }

    #[test]
    fn untouched_pages_age_and_touched_ones_stay_young() {
        let (l, mut m) = memory(8, 4);
        m.fill(1e9);
        let mut lambda = l.per_page(PhaseKind::Active);
        lambda.iter_mut().for_each(|x| *x *= 1e6);
        for _ in 0..1000 {
            m.touch(&lambda, 0.01);
        }
        // Hot pages touched ~1000 times a second: a few ms old on average.
        assert!(m.age[0] < 0.01, "{}", m.age[0]);
        assert!(m.age[1] > 9.0, "cold pages are as old as the run: {}", m.age[1]);
    }
}
