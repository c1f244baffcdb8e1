//! A tracker's per-interval estimates of the memory a tenant touched, kept over the
//! window and turned into its [`Activeness`]: the one estimator the daemon's sampling
//! tracker and the simulator's model of it share.

use std::collections::VecDeque;

use crate::snapshot::Activeness;

/// How long the highest windowed estimate is remembered (what a tenant needs on waking).
pub const PEAK_HORIZON_SECS: f64 = 1800.0;

/// One interval's estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// When it was taken (seconds).
    pub at: f64,
    /// Bytes touched over the interval.
    pub bytes: f64,
    /// Its variance, bytes².
    pub var: f64,
    /// Of which memory that became resident (tier faults, new pages).
    pub faulted: f64,
    /// Share of the interval's samples that came back.
    pub returned: f64,
}

/// Memory touched at any time within the window, as one batch of samples followed
/// through it measured it, with the 95% confidence half-width of that batch.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowTouched {
    pub bytes: u64,
    /// `None` where the tracker does not sample (DAMON).
    pub ci_bytes: Option<u64>,
    /// Memory touched within the latter half of the window, measured alike: with
    /// `bytes`, how often what is not touched every interval is reused (`policy::curve`).
    pub half_bytes: Option<u64>,
}

impl WindowTouched {
    /// `returned` of `sampled` bytes came back, drawn in clusters of `cluster` bytes
    /// from `from` resident bytes; `known` bytes (faulted in, counted whole) add to it
    /// exactly. A cluster's pages neighbour each other and mostly agree, so the
    /// interval counts clusters as the draws: a sample a tight budget shrank says so.
    pub fn from_batch(sampled: f64, returned: f64, cluster: f64, from: f64, known: f64) -> WindowTouched {
        let share = if sampled > 0.0 { (returned / sampled).clamp(0.0, 1.0) } else { 0.0 };
        let draws = (sampled / cluster).max(1.0);
        WindowTouched {
            bytes: (share * from + known) as u64,
            ci_bytes: Some((wilson_half_width(share, draws, 1.96) * from) as u64),
            half_bytes: None,
        }
    }

    /// The same, with what the latter half of the window touched.
    pub fn with_half(self, half: Option<WindowTouched>) -> WindowTouched {
        WindowTouched { half_bytes: half.map(|h| h.bytes.min(self.bytes)), ..self }
    }
}

/// How far from a share `p` seen in `n` draws the farther bound of its Wilson score
/// interval at `z` standard deviations lies. Unlike the normal interval's, it is not
/// zero when every draw agreed; it is off-centre, and a reading ± one half-width is
/// what a status shows, so the farther bound.
pub fn wilson_half_width(p: f64, n: f64, z: f64) -> f64 {
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    (centre - p).abs() + half
}

/// The estimates within the window, and the recent peaks of their average.
#[derive(Debug, Clone, Default)]
pub struct Estimates {
    history: VecDeque<Estimate>,
    peaks: VecDeque<(f64, u64)>,
}

impl Estimates {
    pub fn push(&mut self, e: Estimate) {
        self.history.push_back(e);
    }

    /// At `now`: drops the estimates older than `window` and records the average as a peak.
    pub fn age(&mut self, now: f64, window: f64) {
        while self.history.front().is_some_and(|e| now - e.at > window) {
            self.history.pop_front();
        }
        if let Some(a) = self.activeness(None) {
            self.peaks.push_back((now, a.active_bytes));
            while self.peaks.front().is_some_and(|(t, _)| now - t > PEAK_HORIZON_SECS) {
                self.peaks.pop_front();
            }
        }
    }

    /// Bytes that became resident after `t`, over the estimates kept.
    pub fn faulted_since(&self, t: f64) -> f64 {
        self.history.iter().filter(|e| e.at > t).map(|e| e.faulted).sum()
    }

    /// The window's average with its 95% confidence interval, the peak, the latest
    /// intervals, and `touched_in_window` as the tracker measured it.
    pub fn activeness(&self, touched_in_window: Option<WindowTouched>) -> Option<Activeness> {
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
            recent_bytes: (k >= 2)
                .then(|| self.history.iter().rev().take(2).map(|e| e.bytes.max(0.0) as u64).max().unwrap_or(0)),
            touched_in_window_bytes: touched_in_window.map(|t| t.bytes),
            touched_in_window_ci_bytes: touched_in_window.and_then(|t| t.ci_bytes),
            touched_in_half_window_bytes: touched_in_window.and_then(|t| t.half_bytes),
            returned_share: self.history.back().map(|e| e.returned),
        })
    }
}

/// Share of a tenant's time the refaults of its sampled pages may take when each is a
/// read from the tier. A sampled page that came back from the tier before still has
/// its swap slot, so `MADV_PAGEOUT` frees it at once and its next touch reads the tier:
/// on a hard-disk-like tier (150 reads/s) the default sample's refaults kept four
/// tenants waiting on the disk and they ran at 0.44 of dram, against 0.79 with 64
/// pages an interval (overcommit-sweep/1.4x slow).
pub const REFAULT_TIME_SHARE: f64 = 0.01;

/// The most small pages a sampling tracker may page out an interval when each read
/// from the tier takes `read_secs`: the refaults its budget affords, at the share of
/// the window's samples that came back (all before any did, a twentieth at the least);
/// however slow the tier, one cluster, so the window keeps an estimate.
pub fn refault_budget_pages(back: f64, sampled: f64, interval_secs: f64, read_secs: f64, cluster_pages: f64) -> f64 {
    let share = if sampled == 0.0 { 1.0 } else { (back / sampled).max(0.05) };
    (REFAULT_TIME_SHARE * interval_secs / read_secs / share).max(cluster_pages)
}

/// Where an interval's `n` sample clusters fall in `total` units of resident memory
/// (bytes or pages, in address order): evenly spaced, the whole comb shifted each
/// `turn` by the golden ratio of one spacing from a `phase` in [0, 1) the tracker drew
/// once. Uniform draws leave about e^(−draws/regions) of a tenant's regions unseen
/// over a window, and a region with no sample back has no reuse: it dropped out of the
/// working set that relayout and the wake-up's prefetch read (wake-up/slow: four of 128
/// hot regions, 8 MiB read back at 150 pages a second). The comb reaches every stretch
/// of its spacing's size within a few turns; each draw stays uniform over `total`.
pub fn spread_draws(total: f64, n: usize, turn: u64, phase: f64) -> Vec<f64> {
    if n == 0 || total <= 0.0 {
        return Vec::new();
    }
    const GOLDEN: f64 = 0.618_033_988_749_895;
    let stride = total / n as f64;
    let offset = (phase + turn as f64 * GOLDEN).fract() * stride;
    (0..n).map(|j| (offset + j as f64 * stride).min(total.next_down())).collect()
}

/// A tracker's comb ([`spread_draws`]): its phase, drawn once, and the turns so far.
#[derive(Debug, Clone, Copy)]
pub struct Comb {
    phase: f64,
    turn: u64,
}

impl Comb {
    pub fn new(phase: f64) -> Comb {
        Comb { phase, turn: 0 }
    }

    /// This interval's `n` draws over `total`; the next call turns the comb.
    pub fn draws(&mut self, total: f64, n: usize) -> Vec<f64> {
        self.turn += 1;
        spread_draws(total, n, self.turn, self.phase)
    }
}

/// Distinct bytes an interval brought in: `faulted_in` counted by residency (each page
/// once) or, where more, `tier_fault_bytes` (a page each fault) folded onto the
/// `tier_bytes` still out plus what came in, as uniform draws over them would land.
/// A thrashing tenant faults the same pages many times a window; counting each fault
/// doubled its hot set. With much cold memory out, this is the per-fault count again.
pub fn distinct_faulted(faulted_in: f64, tier_fault_bytes: f64, tier_bytes: f64) -> f64 {
    let pages = tier_bytes + faulted_in;
    let distinct = if pages > 0.0 { pages * (1.0 - (-tier_fault_bytes / pages).exp()) } else { 0.0 };
    faulted_in.max(distinct)
}

/// Mean and variance-of-the-mean of the fractions of sample clusters that came back.
pub fn mean_and_var(fracs: &[f64]) -> (f64, f64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Regions of `region` units out of `total` that no draw reached over `turns`.
    fn unseen(mut draws: impl FnMut(u64) -> Vec<f64>, total: f64, region: f64, turns: u64) -> usize {
        let mut seen = vec![false; (total / region) as usize];
        for t in 0..turns {
            for x in draws(t) {
                seen[(x / region) as usize] = true;
            }
        }
        seen.iter().filter(|s| !**s).count()
    }

    #[test]
    fn a_comb_of_draws_reaches_every_region_within_a_window_where_uniform_draws_miss_some() {
        // 384 MiB in 2 MiB regions, 64 clusters an interval, six intervals a window.
        let (total, region) = (384.0, 2.0);
        let comb = unseen(|t| spread_draws(total, 64, t, 0.37), total, region, 6);
        assert_eq!(comb, 0, "every region drawn from within the window");
        // Uniform draws (splitmix64) over 20 windows.
        let mut state = 7u64;
        let mut uniform = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as f64 / u64::MAX as f64 * total
        };
        let missed: usize = (0..20).map(|_| unseen(|_| (0..64).map(|_| uniform()).collect(), total, region, 6)).sum();
        // e^(-384/192) = 13.5% of 192 regions, 26 a window; 20 windows.
        assert!((300..750).contains(&missed), "uniform draws left {missed} regions unseen in 20 windows");
    }

    #[test]
    fn each_draw_of_the_comb_stays_uniform_over_the_memory() {
        // Over many turns the draws cover [0, total) evenly: each tenth gets a tenth.
        let mut tenths = [0usize; 10];
        for t in 0..1000 {
            for x in spread_draws(100.0, 3, t, 0.5) {
                assert!((0.0..100.0).contains(&x));
                tenths[(x / 10.0) as usize] += 1;
            }
        }
        assert!(tenths.iter().all(|&n| (285..=315).contains(&n)), "{tenths:?}");
        assert!(spread_draws(0.0, 3, 0, 0.5).is_empty() && spread_draws(10.0, 0, 0, 0.5).is_empty());
    }

    fn at(at: f64, bytes: f64) -> Estimate {
        Estimate { at, bytes, var: 0.0, faulted: 1.0, returned: 0.5 }
    }

    /// The chance that a batch of `n` draws at share `p` lands within its own interval.
    fn coverage(p: f64, n: u32) -> f64 {
        let mut chance = (1.0 - p).powi(n as i32);
        let mut covered = 0.0;
        for k in 0..=n {
            let seen = k as f64 / n as f64;
            if (seen - p).abs() <= wilson_half_width(seen, n as f64, 1.96) {
                covered += chance;
            }
            chance *= (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
        }
        covered
    }

    #[test]
    fn the_window_interval_holds_the_truth_as_often_as_it_claims_and_widens_as_the_sample_shrinks() {
        for n in [8, 32, 256] {
            for p in [0.1, 0.3, 0.5, 0.9] {
                let c = coverage(p, n);
                assert!((0.90..=0.999).contains(&c), "share {p} in {n} draws: covered {c:.3} of the time");
            }
        }
        let (cluster, from) = (4.0 * 4096.0, 128.0 * 1048576.0);
        let big = WindowTouched::from_batch(1024.0 * 4096.0, 512.0 * 4096.0, cluster, from, 0.0);
        let small = WindowTouched::from_batch(32.0 * 4096.0, 16.0 * 4096.0, cluster, from, 0.0);
        assert_eq!((big.bytes, small.bytes), (64 << 20, 64 << 20));
        let (big_ci, small_ci) = (big.ci_bytes.unwrap() as f64, small.ci_bytes.unwrap() as f64);
        assert!((0.055..0.065).contains(&(big_ci / from)), "256 draws at half: ±6 points of 100, {big_ci}");
        assert!(small_ci > 3.0 * big_ci, "8 draws know far less: {small_ci} vs {big_ci}");
        let all = WindowTouched::from_batch(1024.0 * 4096.0, 1024.0 * 4096.0, cluster, from, 8.0);
        assert_eq!(all.bytes, (128 << 20) + 8, "what came in counts exactly, beside the share");
        assert!(all.ci_bytes.unwrap() > 0, "every draw back still leaves doubt");
    }

    #[test]
    fn the_window_average_forgets_old_intervals_and_the_peak_remembers_them() {
        let mut e = Estimates::default();
        for (t, b) in [(0.0, 400.0), (5.0, 400.0), (10.0, 100.0), (15.0, 100.0)] {
            e.push(at(t, b));
            e.age(t, 10.0);
        }
        let a = e.activeness(Some(WindowTouched { bytes: 7, ci_bytes: None, half_bytes: None })).unwrap();
        assert_eq!(a.active_bytes, 200, "intervals within 10 s: 400, 100, 100");
        assert_eq!(a.peak_bytes, 400, "the average at 5 s");
        assert_eq!((a.last_interval_bytes, a.recent_bytes), (100, Some(100)));
        assert_eq!(a.touched_in_window_bytes, Some(7));
        assert_eq!(e.faulted_since(5.0), 2.0);
        assert!(Estimates::default().activeness(None).is_none());
    }

    #[test]
    fn a_page_faulted_many_times_counts_once_and_a_wake_up_counts_in_full() {
        let mib = (1u64 << 20) as f64;
        // Waking: everything it read came in and stayed.
        assert_eq!(distinct_faulted(100.0 * mib, 100.0 * mib, 0.0), 100.0 * mib);
        // Thrashing: 164 MiB of faults over 120 MiB out, little net change.
        let thrash = distinct_faulted(2.0 * mib, 164.0 * mib, 120.0 * mib);
        assert!(thrash < 122.0 * mib && thrash > 80.0 * mib, "{}", thrash / mib);
        // With 2 GiB out, 164 MiB of faults are nearly all distinct: the count as it was.
        let cold = distinct_faulted(0.0, 164.0 * mib, 2048.0 * mib);
        assert!(cold > 0.95 * 164.0 * mib && cold <= 164.0 * mib, "{}", cold / mib);
        assert_eq!(distinct_faulted(0.0, 0.0, 0.0), 0.0);
    }

    #[test]
    fn clusters_that_all_agree_still_leave_the_uncertainty_of_their_number() {
        assert_eq!(mean_and_var(&[]), (0.0, 0.0));
        assert_eq!(mean_and_var(&[0.5, 0.5, 0.5, 0.5]), (0.5, 1.0 / 16.0));
        let (m, v) = mean_and_var(&[0.0, 1.0]);
        assert_eq!(m, 0.5);
        assert_eq!(v, 0.25, "variance of the mean: 0.5 / 2");
    }
}
