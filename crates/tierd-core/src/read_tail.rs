//! The tail of the tier's read latency: sampled reads (submission to completion, timed by
//! the block layer's tracepoints) over a sliding window, their p99, and a histogram of
//! every sample since start for metrics.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How far back the p99 looks: long enough to hold a tail, short enough to follow a
/// device that slows.
pub const WINDOW_SECS: f64 = 10.0;
/// Fewer samples than this in the window give no p99: with fewer, the 99th percentile
/// is just the largest, one stray request.
pub const MIN_SAMPLES: usize = 100;
/// The histogram's upper bounds, in µs (Prometheus `le`, cumulative; +Inf implied).
pub const BUCKETS_US: [u32; 12] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000, 10_000_000];

/// Sampled read latencies: the recent ones and counts of all.
#[derive(Debug, Clone, Default)]
pub struct ReadTail {
    recent: VecDeque<(f64, u32)>,
    /// Samples at or below each of [`BUCKETS_US`] (not cumulative), and above the last.
    counts: [u64; BUCKETS_US.len() + 1],
    sum_us: u64,
}

/// The histogram in Prometheus' terms: cumulative counts at each of [`BUCKETS_US`]; the
/// +Inf bucket is `count`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub le_us: Vec<u32>,
    pub cumulative: Vec<u64>,
    pub sum_secs: f64,
    pub count: u64,
}

impl ReadTail {
    /// Adds the samples that completed by `now` (seconds) and forgets those older than
    /// the window.
    pub fn add(&mut self, now: f64, micros: &[u32]) {
        for &us in micros {
            self.recent.push_back((now, us));
            let bucket = BUCKETS_US.iter().position(|&b| us <= b).unwrap_or(BUCKETS_US.len());
            self.counts[bucket] += 1;
            self.sum_us += us as u64;
        }
        while self.recent.front().is_some_and(|&(at, _)| now - at > WINDOW_SECS) {
            self.recent.pop_front();
        }
    }

    /// The nearest-rank 99th percentile of the window, in µs, once it holds enough.
    pub fn p99_us(&self) -> Option<f64> {
        if self.recent.len() < MIN_SAMPLES {
            return None;
        }
        let mut v: Vec<u32> = self.recent.iter().map(|&(_, us)| us).collect();
        let rank = (v.len() * 99).div_ceil(100) - 1;
        Some(*v.select_nth_unstable(rank).1 as f64)
    }

    pub fn histogram(&self) -> Histogram {
        let cumulative: Vec<u64> = self.counts[..BUCKETS_US.len()]
            .iter()
            .scan(0, |total, n| {
                *total += n;
                Some(*total)
            })
            .collect();
        let count = self.counts.iter().sum();
        Histogram { le_us: BUCKETS_US.to_vec(), cumulative, sum_secs: self.sum_us as f64 / 1e6, count }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p99_is_the_99th_of_a_hundred_and_needs_a_hundred() {
        let mut t = ReadTail::default();
        let fast: Vec<u32> = (1..=98).collect();
        t.add(0.0, &fast);
        assert_eq!(t.p99_us(), None, "98 samples");
        t.add(1.0, &[5_000, 40_000]);
        assert_eq!(t.p99_us(), Some(5_000.0), "the 99th of 100, not the single worst");
    }

    #[test]
    fn the_window_follows_a_device_that_slows() {
        let mut t = ReadTail::default();
        t.add(0.0, &[100; 200]);
        assert_eq!(t.p99_us(), Some(100.0));
        t.add(WINDOW_SECS + 1.0, &[400_000; 150]);
        assert_eq!(t.p99_us(), Some(400_000.0), "the fast samples have left the window");
        assert_eq!(t.histogram().count, 350, "the histogram keeps every sample");
    }

    #[test]
    fn the_histogram_is_cumulative_in_seconds() {
        let mut t = ReadTail::default();
        t.add(0.0, &[40, 50, 51, 3_000, 20_000_000]);
        let h = t.histogram();
        assert_eq!((h.le_us[0], h.cumulative[0]), (50, 2), "a bound is inclusive");
        assert_eq!((h.le_us[1], h.cumulative[1]), (100, 3));
        assert_eq!((h.le_us[6], h.cumulative[6]), (5_000, 4));
        assert_eq!(h.cumulative.last(), Some(&4), "20 s is above every bound");
        assert_eq!((h.count, h.sum_secs), (5, 20.003141));
    }
}
