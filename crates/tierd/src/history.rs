//! The in-memory history behind the dashboard and `tierctl top`: one point per
//! resolution step (10 s) for the last hour, host figures and each tenant's. Small
//! enough to keep: 50 tenants for an hour is about 2 MB.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::api::Status;

/// Seconds between points.
pub const RESOLUTION_SECS: f64 = 10.0;
/// Points kept: one hour at [`RESOLUTION_SECS`].
pub const KEEP: usize = 360;

/// One tenant at one point in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantPoint {
    pub dram_bytes: u64,
    pub tier_bytes: u64,
    pub active_bytes: Option<u64>,
    pub quota_bytes: Option<u64>,
    pub tier_read_bytes_per_sec: f64,
    pub tier_write_bytes_per_sec: f64,
    pub major_faults_per_sec: f64,
}

/// The host at one point in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the Unix epoch.
    pub time: f64,
    pub dram_budget_bytes: u64,
    pub dram_used_bytes: u64,
    pub active_bytes: u64,
    pub tier_size_bytes: u64,
    pub tier_used_bytes: u64,
    pub tier_read_bytes_per_sec: f64,
    pub tier_write_bytes_per_sec: f64,
    pub tier_read_latency_us: Option<f64>,
    pub promotions_per_sec: f64,
    pub demotions_per_sec: f64,
    pub tierd_cpu_percent: f64,
    pub tenants: BTreeMap<String, TenantPoint>,
}

impl Point {
    pub fn from_status(s: &Status, time: f64) -> Point {
        Point {
            time,
            dram_budget_bytes: s.dram_budget_bytes,
            dram_used_bytes: s.dram_used_bytes,
            active_bytes: s.active_bytes,
            tier_size_bytes: s.tier.size_bytes,
            tier_used_bytes: s.tier.used_bytes,
            tier_read_bytes_per_sec: s.tier.read_bytes_per_sec,
            tier_write_bytes_per_sec: s.tier.write_bytes_per_sec,
            tier_read_latency_us: s.tier.read_latency_us,
            promotions_per_sec: s.promotions_per_sec,
            demotions_per_sec: s.demotions_per_sec,
            tierd_cpu_percent: s.tierd_cpu_percent,
            tenants: s
                .tenants
                .iter()
                .filter(|t| t.state == "running")
                .map(|t| {
                    (
                        t.name.clone(),
                        TenantPoint {
                            dram_bytes: t.dram_bytes,
                            tier_bytes: t.tier_bytes,
                            active_bytes: t.active_bytes,
                            quota_bytes: t.quota_bytes,
                            tier_read_bytes_per_sec: t.tier_read_bytes_per_sec,
                            tier_write_bytes_per_sec: t.tier_write_bytes_per_sec,
                            major_faults_per_sec: t.major_faults_per_sec,
                        },
                    )
                })
                .collect(),
        }
    }
}

/// A ring of points at a fixed resolution. Clones share the ring, so the API reads it
/// while a control-loop pass holds the engine.
#[derive(Debug, Clone)]
pub struct History {
    points: Arc<Mutex<VecDeque<Point>>>,
    resolution: f64,
    keep: usize,
}

impl Default for History {
    fn default() -> Self {
        History::new(RESOLUTION_SECS, KEEP)
    }
}

impl History {
    pub fn new(resolution: f64, keep: usize) -> History {
        let points = Arc::new(Mutex::new(VecDeque::with_capacity(keep.min(4096))));
        History { points, resolution, keep: keep.max(1) }
    }

    fn points(&self) -> MutexGuard<'_, VecDeque<Point>> {
        self.points.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Is a point due at `now`? (Slightly early counts: the control loop's ticks jitter.)
    pub fn due(&self, now: f64) -> bool {
        self.points().back().is_none_or(|p| now - p.time >= self.resolution * 0.95)
    }

    /// Adds a point, dropping the oldest beyond the hour.
    pub fn record(&mut self, p: Point) {
        let mut points = self.points();
        points.push_back(p);
        while points.len() > self.keep {
            points.pop_front();
        }
    }

    /// Points after `since` (all when `None`), oldest first.
    pub fn since(&self, since: Option<f64>) -> Vec<Point> {
        self.points().iter().filter(|p| since.is_none_or(|s| p.time > s)).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.points().len()
    }

    pub fn is_empty(&self) -> bool {
        self.points().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(time: f64) -> Point {
        Point {
            time,
            dram_budget_bytes: 1,
            dram_used_bytes: 0,
            active_bytes: 0,
            tier_size_bytes: 0,
            tier_used_bytes: 0,
            tier_read_bytes_per_sec: 0.0,
            tier_write_bytes_per_sec: 0.0,
            tier_read_latency_us: None,
            promotions_per_sec: 0.0,
            demotions_per_sec: 0.0,
            tierd_cpu_percent: 0.0,
            tenants: BTreeMap::new(),
        }
    }

    #[test]
    fn keeps_an_hour_at_ten_seconds() {
        let mut h = History::default();
        let mut t = 0.0;
        for _ in 0..400 {
            if h.due(t) {
                h.record(point(t));
            }
            t += 2.0;
        }
        // 800 s of 2 s ticks: one point per 10 s.
        assert_eq!(h.len(), 80);
        for _ in 0..2000 {
            if h.due(t) {
                h.record(point(t));
            }
            t += 2.0;
        }
        assert_eq!(h.len(), KEEP, "an hour, no more");
        let all = h.since(None);
        assert!(all.windows(2).all(|w| (w[1].time - w[0].time - 10.0).abs() < 1e-9), "10 s apart, oldest first");
        assert!(all.last().unwrap().time - all[0].time >= 3590.0);
    }

    #[test]
    fn since_returns_only_newer_points() {
        let mut h = History::new(10.0, 10);
        for t in [0.0, 10.0, 20.0] {
            h.record(point(t));
        }
        let times: Vec<f64> = h.since(Some(10.0)).iter().map(|p| p.time).collect();
        assert_eq!(times, vec![20.0]);
        assert!(!h.due(25.0) && h.due(29.6));
    }
}
