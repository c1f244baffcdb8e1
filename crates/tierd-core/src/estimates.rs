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
    pub fn activeness(&self, touched_in_window: Option<u64>) -> Option<Activeness> {
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
            touched_in_window_bytes: touched_in_window,
            returned_share: self.history.back().map(|e| e.returned),
        })
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

    fn at(at: f64, bytes: f64) -> Estimate {
        Estimate { at, bytes, var: 0.0, faulted: 1.0, returned: 0.5 }
    }

    #[test]
    fn the_window_average_forgets_old_intervals_and_the_peak_remembers_them() {
        let mut e = Estimates::default();
        for (t, b) in [(0.0, 400.0), (5.0, 400.0), (10.0, 100.0), (15.0, 100.0)] {
            e.push(at(t, b));
            e.age(t, 10.0);
        }
        let a = e.activeness(Some(7)).unwrap();
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
