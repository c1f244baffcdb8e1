//! The tier device: a read costs its service time plus the wait in the device's queue,
//! one formula for the fast tier, the throttled hard-disk-like tier and saturation.
//!
//! Capacity is reads per second (random 4 KiB) and bytes per second; the share of it
//! in use, ρ, sets the wait of an M/D/1 queue, ρ / (2μ(1 − ρ)). Prefetch runs on what
//! demand faults leave, at the speed its layout allows (runs merge into large reads).

use crate::calib::{
    FAST_BYTES_PER_SEC, FAST_IOPS, FAST_PREFETCH_RUN_BYTES_PER_SEC, FAST_PREFETCH_SCATTERED_BYTES_PER_SEC,
    FAST_READ_SECS, MERGED_READ_PAGES, PAGE, SLOW_BYTES_PER_SEC, SLOW_IOPS,
};

/// A throttle that turns the tier into a hard-disk-like device from `after` seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slow {
    pub after: f64,
    pub iops: f64,
    pub bytes_per_sec: f64,
}

impl Slow {
    pub fn hard_disk(after: f64) -> Slow {
        Slow { after, iops: SLOW_IOPS, bytes_per_sec: SLOW_BYTES_PER_SEC }
    }
}

#[derive(Debug, Clone)]
pub struct Device {
    pub slow: Option<Slow>,
    /// Seconds a demand read takes now (smoothed over a few steps).
    latency: f64,
    /// Share of capacity prefetch used in the last step.
    prefetch_rho: f64,
    /// Totals since the last [`Device::take_interval`]; `reads`, `latency_sum` and
    /// `demand_busy` of the steps tierd read nothing in.
    reads: f64,
    read_bytes: f64,
    write_bytes: f64,
    latency_sum: f64,
    busy: f64,
    /// Of `busy`, the tenants' own demand reads (not tierd's prefetch and relayout).
    demand_busy: f64,
    span: f64,
}

/// Traffic over an interval, as tierd reads it from the counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct IntervalTraffic {
    pub read_latency_us: Option<f64>,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    pub utilization: f64,
    /// Busy with the tenants' demand reads alone.
    pub others_utilization: f64,
}

impl Device {
    pub fn new(slow: Option<Slow>) -> Device {
        Device {
            slow,
            latency: FAST_READ_SECS,
            prefetch_rho: 0.0,
            reads: 0.0,
            read_bytes: 0.0,
            write_bytes: 0.0,
            latency_sum: 0.0,
            busy: 0.0,
            demand_busy: 0.0,
            span: 0.0,
        }
    }

    fn throttled(&self, now: f64) -> Option<Slow> {
        self.slow.filter(|s| now >= s.after)
    }

    /// Reads per second and bytes per second the device serves at `now`.
    pub fn capacity(&self, now: f64) -> (f64, f64) {
        match self.throttled(now) {
            Some(s) => (s.iops, s.bytes_per_sec),
            None => (FAST_IOPS, FAST_BYTES_PER_SEC),
        }
    }

    /// Seconds a demand read waits now.
    pub fn read_latency(&self) -> f64 {
        self.latency
    }

    /// Seconds a read takes at load `rho` of capacity `iops` (the stall model).
    pub fn latency_at(rho: f64, iops: f64) -> f64 {
        let rho = rho.clamp(0.0, 0.98);
        FAST_READ_SECS + rho / (2.0 * iops * (1.0 - rho))
    }

    /// The share of capacity `reads` of `pages` each take over `dt`.
    fn rho(&self, now: f64, reads: f64, pages: f64, dt: f64) -> f64 {
        let (iops, bw) = self.capacity(now);
        (reads / iops + pages * PAGE / bw) / dt
    }

    /// Scales demand reads down to what the device can serve in the step: returns the
    /// share of the asked reads it serves (1 when under capacity).
    pub fn admit(&self, now: f64, reads: f64, pages: f64, dt: f64) -> f64 {
        let rho = self.rho(now, reads, pages, dt);
        if rho <= 0.97 { 1.0 } else { 0.97 / rho }
    }

    /// Pages a prefetch can read in the step after demand reads took `demand_rho` of
    /// the device: (from runs, scattered), each as if it had the device to itself.
    pub fn prefetch_room(&self, now: f64, demand_rho: f64, dt: f64) -> (f64, f64) {
        let left = (1.0 - demand_rho).clamp(0.05, 1.0) * dt;
        match self.throttled(now) {
            Some(s) => {
                let runs = (s.iops * MERGED_READ_PAGES).min(s.bytes_per_sec / PAGE);
                (runs * left, s.iops * left)
            }
            None => {
                (FAST_PREFETCH_RUN_BYTES_PER_SEC / PAGE * left, FAST_PREFETCH_SCATTERED_BYTES_PER_SEC / PAGE * left)
            }
        }
    }

    /// The share of the device demand reads take in a step.
    pub fn demand_rho(&self, now: f64, reads: f64, pages: f64, dt: f64) -> f64 {
        self.rho(now, reads, pages, dt)
    }

    /// Ends a step: demand `reads` bringing `pages`, prefetch reads using `prefetch_rho`
    /// of the device, `written` pages. Moves the latency toward the load's.
    pub fn step(&mut self, now: f64, dt: f64, reads: f64, pages: f64, prefetch_rho: f64, written: f64) {
        let (iops, _) = self.capacity(now);
        let demand = self.rho(now, reads, pages, dt);
        let rho = demand + prefetch_rho;
        let target = Device::latency_at(rho, iops);
        // Smoothed: the queue builds and drains over a few steps.
        self.latency += (target - self.latency) * 0.3;
        self.prefetch_rho = prefetch_rho;
        self.read_bytes += pages * PAGE;
        self.write_bytes += written * PAGE;
        self.busy += rho.min(1.0) * dt;
        self.span += dt;
        // As the daemon counts: the disk's counters over tierd's own reads are set apart,
        // with the tenants' reads made meanwhile.
        if prefetch_rho <= 0.0 {
            self.reads += reads;
            self.latency_sum += reads * self.latency;
            self.demand_busy += demand.min(1.0) * dt;
        }
    }

    /// Read and write traffic since the last call, as the daemon's counters show it.
    pub fn take_interval(&mut self) -> IntervalTraffic {
        let span = self.span.max(1e-9);
        let t = IntervalTraffic {
            read_latency_us: (self.reads >= 1.0).then(|| self.latency_sum / self.reads * 1e6),
            read_bytes_per_sec: self.read_bytes / span,
            write_bytes_per_sec: self.write_bytes / span,
            utilization: (self.busy / span).min(1.0),
            others_utilization: (self.demand_busy / span).min(1.0),
        };
        self.reads = 0.0;
        self.read_bytes = 0.0;
        self.write_bytes = 0.0;
        self.latency_sum = 0.0;
        self.busy = 0.0;
        self.demand_busy = 0.0;
        self.span = 0.0;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_fast_tier_reads_in_its_service_time_and_a_busy_one_queues() {
        assert!((Device::latency_at(0.0, FAST_IOPS) - FAST_READ_SECS).abs() < 1e-9);
        // As measured (calib-swapin.md): 40 k reads/s took 68–70 µs, 57 k 125–131 µs.
        let at = |reads: f64| Device::latency_at(reads / FAST_IOPS, FAST_IOPS) * 1e6;
        assert!((60.0..75.0).contains(&at(40e3)), "{}", at(40e3));
        assert!((110.0..140.0).contains(&at(57e3)), "{}", at(57e3));
        // The hard-disk-like tier at 80% of its 150 reads/s: each read waits ~13 ms.
        let slow = Device::latency_at(0.8, SLOW_IOPS);
        assert!((slow - 0.0134).abs() < 0.001, "{slow}");
    }

    #[test]
    fn prefetch_of_runs_is_ten_times_faster_than_of_scattered_pages_and_slow_on_a_disk() {
        let d = Device::new(Some(Slow::hard_disk(10.0)));
        let (runs, scattered) = d.prefetch_room(0.0, 0.0, 1.0);
        assert!((runs * PAGE / (1u64 << 30) as f64 - 1.5).abs() < 0.01);
        assert!((runs / scattered - 10.24).abs() < 0.01);
        let (runs, scattered) = d.prefetch_room(20.0, 0.0, 1.0);
        assert_eq!(scattered, 150.0, "one page a read on the disk");
        assert_eq!(runs, 4800.0, "128 KiB a read");
    }

    #[test]
    fn demand_beyond_capacity_is_cut_to_it() {
        let d = Device::new(Some(Slow::hard_disk(0.0)));
        let share = d.admit(1.0, 300.0, 300.0, 1.0);
        assert!((share * 300.0 - 0.97 * 150.0 / (1.0 + 150.0 * PAGE / SLOW_BYTES_PER_SEC)).abs() < 1.0, "{share}");
        assert_eq!(d.admit(1.0, 10.0, 10.0, 1.0), 1.0);
    }
}
