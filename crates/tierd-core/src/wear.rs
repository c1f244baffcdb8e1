//! Tier device wear: the bytes written to the tier against what the drive is rated to
//! take per day (its DWPD, drive writes per day, times the drive's size).
//!
//! Tiering writes every demoted page; a write rate the drive cannot sustain wears it
//! out years early, so health compares the sustained rate with the rating. The rate is
//! judged over the last hour: a wake-up's burst extrapolated from a minute would read
//! as many drive writes a day.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::colour::Colour;

/// The rate is judged over this span, once this much has been measured.
pub const JUDGED_SECS: f64 = 3600.0;
/// Writes are remembered this long, for the day's total.
const DAY_SECS: f64 = 86400.0;
/// One point kept per this many seconds (a day of them is 1,440 points).
const POINT_SECS: f64 = 60.0;

/// Cumulative bytes written to the tier, a point a minute over the last day.
#[derive(Debug, Clone, Default)]
pub struct WriteLog {
    /// (seconds, bytes written since tierd started), at least a minute apart.
    points: VecDeque<(f64, u64)>,
    started: Option<f64>,
    last_at: f64,
    total: u64,
}

impl WriteLog {
    /// At `now`, the device has taken `written` more bytes since the last call.
    pub fn add(&mut self, now: f64, written: u64) {
        if self.started.is_none() {
            self.started = Some(now);
            self.points.push_back((now, 0));
        }
        self.total += written;
        self.last_at = now;
        if self.points.back().is_none_or(|(t, _)| now - t >= POINT_SECS) {
            self.points.push_back((now, self.total));
        }
        while self.points.front().is_some_and(|(t, _)| now - t > DAY_SECS) {
            self.points.pop_front();
        }
    }

    /// What the log says at `now`, against `rated_per_day` bytes when the drive's rating is known.
    pub fn wear(&self, now: f64, rated_per_day: Option<f64>) -> Wear {
        let measured = self.started.map_or(0.0, |s| now - s);
        // From the last point at least an hour old: a span of an hour or a minute more.
        let per_day = (measured >= JUDGED_SECS)
            .then(|| self.points.iter().rev().find(|(t, _)| now - t >= JUDGED_SECS).or(self.points.front()))
            .flatten()
            .map(|&(t, b)| (self.total - b) as f64 / (self.last_at - t).max(1.0) * DAY_SECS);
        Wear {
            written_bytes: self.total,
            last_day_bytes: self.total - self.points.front().map_or(0, |p| p.1),
            measured_secs: measured,
            per_day_bytes: per_day,
            rated_per_day_bytes: rated_per_day,
            drive: None,
        }
    }
}

/// The tier's writes as health judges them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Wear {
    /// Since tierd started.
    pub written_bytes: u64,
    /// Over the last day (or since start, if less).
    pub last_day_bytes: u64,
    /// How long writes have been measured.
    pub measured_secs: f64,
    /// The last hour's rate as bytes per day; `None` until an hour is measured.
    pub per_day_bytes: Option<f64>,
    /// DWPD × the drive's size, when the rating is configured.
    pub rated_per_day_bytes: Option<f64>,
    /// The drive's own health log, where it is an NVMe drive.
    #[serde(default)]
    pub drive: Option<DriveHealth>,
}

impl Wear {
    /// Green up to half the rating, yellow up to all of it, red above. Green while
    /// unmeasured or unrated: neither is a fault of the device's.
    pub fn colour(&self) -> Colour {
        let drive = self.drive.map_or(Colour::Green, |d| d.colour());
        drive.max(self.rate_colour())
    }

    fn rate_colour(&self) -> Colour {
        match (self.per_day_bytes, self.rated_per_day_bytes) {
            (Some(rate), Some(rated)) if rated > 0.0 => {
                let share = rate / rated;
                if share <= 0.5 {
                    Colour::Green
                } else if share <= 1.0 {
                    Colour::Yellow
                } else {
                    Colour::Red
                }
            }
            _ => Colour::Green,
        }
    }
}

/// An NVMe drive's SMART / health log, the fields that tell wear and failure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriveHealth {
    /// The vendor's estimate of the drive's rated life used, in percent (may pass 100).
    pub percentage_used: u8,
    /// Critical warning bits (0: spare below threshold, 1: temperature, 2: reliability
    /// degraded, 3: read-only, 4: volatile backup failed, 5: persistent memory read-only).
    pub critical_warning: u8,
    pub available_spare_percent: u8,
    pub available_spare_threshold_percent: u8,
    /// Over the drive's life, by every writer (the log counts thousands of 512-byte units).
    pub written_bytes: u64,
    pub media_errors: u64,
}

/// Yellow from this share of the drive's rated life used.
const LIFE_YELLOW_PERCENT: u8 = 80;

impl DriveHealth {
    /// From the 512-byte log page (NVMe base specification, "SMART / Health Information").
    pub fn from_smart_log(log: &[u8; 512]) -> DriveHealth {
        // 16-byte little-endian counters; a u64 holds 9 EB of writes.
        let counter =
            |at: usize| u128::from_le_bytes(log[at..at + 16].try_into().unwrap()).min(u64::MAX as u128) as u64;
        DriveHealth {
            critical_warning: log[0],
            available_spare_percent: log[3],
            available_spare_threshold_percent: log[4],
            percentage_used: log[5],
            written_bytes: counter(48).saturating_mul(512_000),
            media_errors: counter(160),
        }
    }

    /// Red when the drive warns or its rated life is used up, yellow from 80% of it.
    pub fn colour(&self) -> Colour {
        if self.critical_warning != 0 || self.percentage_used >= 100 {
            Colour::Red
        } else if self.percentage_used >= LIFE_YELLOW_PERCENT {
            Colour::Yellow
        } else {
            Colour::Green
        }
    }

    /// The warnings the drive raises, in words.
    pub fn warnings(&self) -> Vec<&'static str> {
        const BITS: [&str; 6] = [
            "spare capacity below its threshold",
            "temperature out of range",
            "reliability degraded",
            "read-only",
            "volatile memory backup failed",
            "persistent memory region read-only",
        ];
        BITS.iter().enumerate().filter(|(i, _)| self.critical_warning & (1 << i) != 0).map(|(_, w)| *w).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::size::GIB;

    /// A log fed `per_min` bytes every minute for `mins` minutes.
    fn steady(per_min: u64, mins: u32) -> (WriteLog, f64) {
        let mut log = WriteLog::default();
        for m in 0..=mins {
            log.add(m as f64 * 60.0, if m == 0 { 0 } else { per_min });
        }
        (log, mins as f64 * 60.0)
    }

    #[test]
    fn the_rate_is_judged_only_after_an_hour_and_then_over_the_last_hour() {
        let (log, now) = steady(GIB, 59);
        let w = log.wear(now, Some(1.0));
        assert_eq!(w.per_day_bytes, None, "59 minutes is not an hour");
        assert_eq!(w.colour(), Colour::Green, "unmeasured is not a fault");
        assert_eq!(w.written_bytes, 59 * GIB);

        let (mut log, now) = steady(GIB, 120);
        let w = log.wear(now, None);
        let per_day = w.per_day_bytes.unwrap();
        assert!((per_day / (1440.0 * GIB as f64) - 1.0).abs() < 0.02, "1 GiB a minute is 1440 GiB a day: {per_day}");
        // An hour of quiet after it: the rate falls to nothing, the day's total stays.
        for m in 1..=61 {
            log.add(now + m as f64 * 60.0, 0);
        }
        let w = log.wear(now + 61.0 * 60.0, None);
        assert_eq!(w.per_day_bytes, Some(0.0));
        assert_eq!(w.last_day_bytes, 120 * GIB);
    }

    #[test]
    fn a_burst_within_the_hour_counts_at_its_share_of_the_hour() {
        let mut log = WriteLog::default();
        for m in 0..=90 {
            // 60 GiB in one minute, 30 minutes ago; nothing else.
            log.add(m as f64 * 60.0, if m == 60 { 60 * GIB } else { 0 });
        }
        let per_day = log.wear(90.0 * 60.0, None).per_day_bytes.unwrap();
        assert!((per_day / (24.0 * 60.0 * GIB as f64) - 1.0).abs() < 0.02, "60 GiB an hour: {per_day}");
    }

    #[test]
    fn colours_at_half_and_all_of_the_rating() {
        let wear = |rate: f64, rated: Option<f64>| Wear {
            per_day_bytes: Some(rate),
            rated_per_day_bytes: rated,
            ..Wear::default()
        };
        assert_eq!(wear(50.0, Some(100.0)).colour(), Colour::Green);
        assert_eq!(wear(50.1, Some(100.0)).colour(), Colour::Yellow);
        assert_eq!(wear(100.0, Some(100.0)).colour(), Colour::Yellow);
        assert_eq!(wear(100.1, Some(100.0)).colour(), Colour::Red);
        assert_eq!(wear(1e15, None).colour(), Colour::Green, "no rating, no judgement");
    }

    /// A log page as a drive answers it: `used` percent of its life, `warning` bits.
    fn smart_log(used: u8, warning: u8) -> [u8; 512] {
        let mut log = [0u8; 512];
        log[0] = warning;
        (log[1], log[2]) = (0x41, 0x01); // 321 K
        (log[3], log[4], log[5]) = (100, 10, used);
        log[48..64].copy_from_slice(&3_000_000u128.to_le_bytes());
        log[160..176].copy_from_slice(&2u128.to_le_bytes());
        log
    }

    #[test]
    fn the_drives_health_log_is_read_and_judged() {
        let d = DriveHealth::from_smart_log(&smart_log(3, 0));
        assert_eq!(d.percentage_used, 3);
        assert_eq!((d.available_spare_percent, d.available_spare_threshold_percent), (100, 10));
        assert_eq!(d.written_bytes, 3_000_000 * 512_000, "thousands of 512-byte units");
        assert_eq!(d.media_errors, 2);
        assert_eq!(d.colour(), Colour::Green);
        assert_eq!(DriveHealth::from_smart_log(&smart_log(80, 0)).colour(), Colour::Yellow);
        assert_eq!(DriveHealth::from_smart_log(&smart_log(100, 0)).colour(), Colour::Red, "rated life used up");
        let warned = DriveHealth::from_smart_log(&smart_log(3, 0b1100));
        assert_eq!(warned.colour(), Colour::Red);
        assert_eq!(warned.warnings(), ["reliability degraded", "read-only"]);
        // The drive's word counts beside the write rate: the worse of the two.
        let wear =
            Wear { per_day_bytes: Some(1.0), rated_per_day_bytes: Some(100.0), drive: Some(warned), ..Wear::default() };
        assert_eq!(wear.colour(), Colour::Red);
        let wear = Wear { per_day_bytes: Some(90.0), drive: Some(d), ..wear };
        assert_eq!(wear.colour(), Colour::Yellow);
    }

    #[test]
    fn the_log_keeps_a_point_a_minute_for_a_day() {
        let mut log = WriteLog::default();
        for s in 0..(2 * 86400 / 10) {
            log.add(s as f64 * 10.0, 4096);
        }
        assert!(log.points.len() <= 1441 + 1, "{} points", log.points.len());
        let w = log.wear(2.0 * 86400.0 - 10.0, None);
        let day = 86400 / 10 * 4096;
        assert!((w.last_day_bytes as f64 / day as f64 - 1.0).abs() < 0.01, "{} vs {day}", w.last_day_bytes);
        assert_eq!(w.written_bytes, 2 * day);
    }
}
