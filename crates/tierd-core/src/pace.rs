//! Whether a tenant is running or at rest, from the CPU time of its processes.
//!
//! Sampling tells what a tenant touched over an interval, so a tenant that stops is
//! seen idle one to two intervals later. In login-storm (users active 20 s, idle 20 s)
//! that lag kept a tenant that had just stopped at its full quota for up to 12 s while
//! a neighbour that had just logged in thrashed beside it. CPU time answers within a
//! second: a tenant whose processes stopped using the CPU, and that is not reading from
//! the tier (a thrashing tenant waits on the tier and uses little CPU too), is at rest.
//! Nor is one with a thread not asleep when it is read: waiting in the kernel (state
//! `D`) — a Redis tenant stalled half a second on reclaim at its quota, with a busy
//! tier, used no CPU and read few pages, was taken for at rest, and its working set
//! went to the tier — or running and waiting for a CPU (`R`): on a hard-disk-like tier
//! busy tenants wait on it for seconds, 20 faults a second each, and the reading that
//! lands just as one wakes from a read sees it `R` with no CPU used; taken for at rest,
//! busy tenants were cut to half and their hot sets demoted (overcommit-sweep/1.4x
//! slow, 6 to 9 times a run).

/// Shortest step between two readings (the daemon reads every 0.5 s). CPU times
/// count in clock ticks (10 ms): over half a second that tells a tenant at a tenth of
/// its usual 0.2 cores or more from one still running; a step of a second left five
/// busy tenants in login-storm's 8 claiming DRAM for a second or two at each change.
const MIN_STEP_SECS: f64 = 0.45;

/// A tenant using less than this share of its usual CPU is at rest...
const REST_SHARE: f64 = 0.1;

/// ...if its usual CPU is at least this (cores): a tenant that never uses much CPU
/// is left to sampling.
const MIN_BUSY_CORES: f64 = 0.05;

/// Back to running at this share of its usual CPU, and at least [`MIN_BUSY_CORES`]:
/// CPU time counts in 10 ms ticks, so over a half-second step one tick of a report
/// thread reads as 0.02 cores, which ended the rest of a tenant whose usual was 0.06.
const RUN_SHARE: f64 = 0.25;

/// A rest that begins this soon after the last one ended continues it: the working
/// set it wakes up to is what it was using before the first (a rest that flapped on
/// a stray tick had anchored its working set on the few seconds in between).
const SPELL_GAP_SECS: f64 = 5.0;

/// A tenant's CPU pace: its use now, its usual use, and since when it has been at rest.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuPace {
    /// The last reading: when (seconds) and the CPU seconds used so far.
    last: Option<(f64, f64)>,
    /// Cores used over the last step.
    pub cores: f64,
    /// Cores used as a rule: an average over about a window, not moved while at rest
    /// (it remembers how busy the tenant was).
    pub usual: f64,
    /// Since when (seconds) it has been at rest.
    pub rest_since: Option<f64>,
    /// When (seconds) its last rest ended: a tenant that starts reading from the tier
    /// just then is waking up, whatever the last interval's samples say (between
    /// intervals they are not taken again).
    pub rest_ended: Option<f64>,
    /// When (seconds) its last rest began, kept after it ends: what it reused in the
    /// window before then is the working set it wakes up to.
    pub rest_began: Option<f64>,
    /// Readings in a row that saw it reading from the tier.
    faulting_readings: u32,
}

/// Readings in a row (0.5 s apart) that must see a tenant at rest reading from the
/// tier, with its CPU past [`REST_SHARE`] of its usual, before it counts as awake. A
/// tenant cut small at rest faults a burst of its own memory back now and then (its
/// report thread; 270 faults in one idle phase here) and uses almost no CPU doing
/// so; read as a wake-up, each burst brought its hot set back only to demote it again.
const WAKING_READINGS: u32 = 2;

/// Readings in a row that end a rest by faults alone, whatever the CPU: a tenant
/// waking to a hot set on a slow tier waits on it and may use little CPU.
const FAULTING_READINGS: u32 = 6;

/// Tier reads a second that end a rest at the first reading, whatever the CPU: a
/// report thread's burst is a few hundred faults over a whole idle phase, while a
/// tenant waking to a hot set on the fast tier reads thousands a second. Waiting for
/// a second reading (and for the control loop, busy laying out a neighbour's working
/// set, to take it) let login-storm's tenants wake 0.3–2.4 s before tierd saw them,
/// while their throughput was nil and tierd went on demoting their regions as at rest.
const WAKE_AT_ONCE_FAULTS: f64 = 1000.0;

/// Tier reads a second that count as reading from the tier.
const FAULTING: f64 = crate::policy::WAKE_MIN_FAULTS;

impl CpuPace {
    /// Takes a reading: `cpu_secs` used so far by its processes at time `now`, the rate
    /// (per second) it read from the tier since the last reading, and whether a thread
    /// of it is not asleep now (`busy`: running, waiting for a CPU or waiting in the
    /// kernel). Returns true when it has just come to rest or its rest has just ended.
    pub fn step(&mut self, now: f64, cpu_secs: f64, fault_rate: f64, busy: bool, window_secs: f64) -> bool {
        let faulting = fault_rate >= FAULTING;
        self.faulting_readings = if faulting { self.faulting_readings + 1 } else { 0 };
        let mut changed = false;
        if self.rest_since.is_some() {
            // The CPU since the last full step, also between steps.
            let cores = self.last.map_or(0.0, |(at, before)| {
                if now - at >= 0.25 { (cpu_secs - before).max(0.0) / (now - at) } else { self.cores }
            });
            let woke = (self.faulting_readings >= WAKING_READINGS && cores >= REST_SHARE * self.usual)
                || self.faulting_readings >= FAULTING_READINGS
                || fault_rate >= WAKE_AT_ONCE_FAULTS;
            // Reading from the tier and busy again is waking up: not at rest then, not
            // even until the next full step (the wake-up is planned for at once).
            if woke {
                self.rest_since = None;
                self.rest_ended = Some(now);
                changed = true;
            }
        }
        let Some((at, before)) = self.last else {
            self.last = Some((now, cpu_secs));
            return false;
        };
        let dt = now - at;
        if dt < MIN_STEP_SECS {
            return changed;
        }
        self.last = Some((now, cpu_secs));
        // A process that exits takes its CPU time with it: never a negative rate.
        self.cores = (cpu_secs - before).max(0.0) / dt;
        let resting = self.usual >= MIN_BUSY_CORES && self.cores < REST_SHARE * self.usual && !faulting && !busy;
        match self.rest_since {
            Some(_) if self.cores >= (RUN_SHARE * self.usual).max(MIN_BUSY_CORES) => {
                self.rest_since = None;
                self.rest_ended = Some(now);
                changed = true;
            }
            Some(_) => return false,
            None if resting => {
                self.rest_since = Some(now);
                if self.rest_ended.is_none_or(|e| now - e > SPELL_GAP_SECS) {
                    self.rest_began = Some(now);
                }
                return true;
            }
            None => {}
        }
        self.usual += (self.cores - self.usual) * (dt / window_secs.max(dt)).min(1.0);
        changed
    }

    /// Seconds it has been at rest, if it is.
    pub fn rest_secs(&self, now: f64) -> Option<f64> {
        self.rest_since.map(|s| (now - s).max(0.0))
    }

    /// Seconds since its last rest began, if it has rested (whether it still does).
    pub fn rest_began_secs(&self, now: f64) -> Option<f64> {
        self.rest_began.map(|s| (now - s).max(0.0))
    }

    /// Seconds since its last rest ended, if it has rested.
    pub fn since_rest_secs(&self, now: f64) -> Option<f64> {
        self.rest_ended.map(|s| (now - s).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tier fault rate that counts as reading from the tier, well short of a wake-up
    /// on its own.
    const READING: f64 = 200.0;

    /// Runs `secs` seconds at `cores`, one reading a second, from `t`; returns the
    /// time after, the CPU seconds so far, and whether it came to rest on the way.
    fn run(p: &mut CpuPace, t: &mut f64, cpu: &mut f64, secs: u32, cores: f64, faulting: bool) -> bool {
        let mut came = false;
        for _ in 0..secs {
            *t += 1.0;
            *cpu += cores;
            came |= p.step(*t, *cpu, if faulting { READING } else { 0.0 }, false, 30.0);
        }
        came
    }

    /// A tenant busy at `cores` for 40 s, then stopped for 3 s (at rest by then); returns
    /// its pace, the time and its CPU seconds.
    fn rested_after(cores: f64) -> (CpuPace, f64, f64) {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, 0.0, false, 30.0);
        run(&mut p, &mut t, &mut cpu, 40, cores, false);
        run(&mut p, &mut t, &mut cpu, 3, 0.0, false);
        assert!(p.rest_secs(t).is_some(), "{p:?}");
        (p, t, cpu)
    }

    #[test]
    fn a_busy_tenant_that_stops_is_at_rest_within_two_seconds_and_runs_again_when_it_starts() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, 0.0, false, 30.0);
        assert!(!run(&mut p, &mut t, &mut cpu, 40, 0.9, false), "busy: {p:?}");
        assert!(p.usual > 0.6, "{p:?}");
        assert!(run(&mut p, &mut t, &mut cpu, 2, 0.0, false), "stopped: {p:?}");
        let usual = p.usual;
        assert!(!run(&mut p, &mut t, &mut cpu, 60, 0.0, false), "came to rest once");
        assert_eq!(p.rest_secs(t), Some(61.0));
        assert_eq!(p.usual, usual, "how busy it was is remembered while it rests");
        assert_eq!(p.since_rest_secs(t), None, "has not rested before");
        assert!(run(&mut p, &mut t, &mut cpu, 1, 0.5, false), "its rest ended");
        assert_eq!(p.rest_secs(t), None, "running again");
        assert_eq!(p.since_rest_secs(t + 2.0), Some(2.0), "its rest just ended");
        assert_eq!(p.rest_began_secs(t), Some(62.0), "when it began is kept after it ends");
    }

    #[test]
    fn a_thrashing_tenant_waits_on_the_tier_and_is_not_at_rest() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, 0.0, false, 30.0);
        run(&mut p, &mut t, &mut cpu, 40, 0.9, false);
        assert!(!run(&mut p, &mut t, &mut cpu, 10, 0.02, true), "{p:?}");
        assert_eq!(p.rest_secs(t), None);
        // At rest, a burst of faults with no CPU (its report thread): still at rest.
        run(&mut p, &mut t, &mut cpu, 3, 0.0, false);
        assert!(p.rest_secs(t).is_some());
        assert!(!run(&mut p, &mut t, &mut cpu, 2, 0.0, true), "a burst of faults is no wake-up");
        assert!(p.rest_secs(t).is_some());
        // Faulting on: its rest ends by faults alone after a while.
        assert!(run(&mut p, &mut t, &mut cpu, 4, 0.0, true), "its rest ended");
        assert_eq!(p.rest_secs(t), None);
        // Faulting and using some CPU ends the rest at the second reading, even between
        // full steps.
        run(&mut p, &mut t, &mut cpu, 3, 0.0, false);
        assert!(p.rest_secs(t).is_some());
        assert!(!p.step(t + 0.5, cpu + 0.05, READING, false, 30.0));
        assert!(p.step(t + 0.7, cpu + 0.07, READING, false, 30.0));
        assert_eq!(p.rest_secs(t + 0.7), None);
        assert_eq!(p.since_rest_secs(t + 0.7), Some(0.0), "woke just now");
    }

    #[test]
    fn a_tenant_at_rest_that_reads_its_hot_set_back_fast_is_awake_at_the_first_reading() {
        let (mut p, t, cpu) = rested_after(0.9);
        // Its report thread's burst (a few hundred faults in half a second): still at rest.
        assert!(!p.step(t + 0.5, cpu, 600.0, false, 30.0), "{p:?}");
        assert!(p.rest_secs(t + 0.5).is_some());
        assert!(!p.step(t + 1.0, cpu, 0.0, false, 30.0));
        // Thousands a second, waiting on the tier with next to no CPU: awake at once,
        // between full steps too.
        assert!(p.step(t + 1.2, cpu + 0.002, 5000.0, false, 30.0), "{p:?}");
        assert_eq!(p.rest_secs(t + 1.2), None);
        assert_eq!(p.since_rest_secs(t + 1.2), Some(0.0), "woke just now");
    }

    #[test]
    fn a_tenant_with_a_thread_not_asleep_is_not_at_rest() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, 0.0, false, 30.0);
        run(&mut p, &mut t, &mut cpu, 40, 0.3, false);
        // No CPU and no tier reads for a second, but its thread waits in the kernel
        // or for a CPU.
        for _ in 0..2 {
            t += 0.5;
            assert!(!p.step(t, cpu, 0.0, true, 30.0), "{p:?}");
        }
        assert_eq!(p.rest_secs(t), None, "busy, not at rest");
        // Asleep in its own right: at rest at the next reading.
        t += 0.5;
        assert!(p.step(t, cpu, 0.0, false, 30.0));
        assert!(p.rest_secs(t).is_some());
    }

    #[test]
    fn a_stray_tick_does_not_end_a_rest_and_a_rest_that_resumes_keeps_when_it_began() {
        let (mut p, mut t, mut cpu) = rested_after(0.1);
        let began = p.rest_began;
        // One 10 ms tick in a second: 0.01 cores, over a quarter of its usual 0.06.
        assert!(!run(&mut p, &mut t, &mut cpu, 1, 0.01, false), "{p:?}");
        assert!(p.rest_secs(t).is_some(), "still at rest");
        // A second of real work ends it; resting again two seconds later resumes it.
        assert!(run(&mut p, &mut t, &mut cpu, 1, 0.2, false));
        assert!(run(&mut p, &mut t, &mut cpu, 2, 0.0, false));
        assert_eq!(p.rest_began, began, "the same spell of rest");
        // After a real session of work, a new rest begins a new spell.
        run(&mut p, &mut t, &mut cpu, 20, 0.1, false);
        run(&mut p, &mut t, &mut cpu, 2, 0.0, false);
        assert!(p.rest_began > began);
    }

    #[test]
    fn a_tenant_that_never_uses_much_cpu_is_left_to_sampling() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, 0.0, false, 30.0);
        run(&mut p, &mut t, &mut cpu, 60, 0.02, false);
        assert!(!run(&mut p, &mut t, &mut cpu, 10, 0.0, false), "{p:?}");
    }

    #[test]
    fn readings_closer_than_half_a_second_wait_and_exits_never_make_a_negative_rate() {
        let mut p = CpuPace::default();
        p.step(0.0, 10.0, 0.0, false, 30.0);
        assert!(!p.step(0.3, 10.4, 0.0, false, 30.0));
        assert_eq!(p.cores, 0.0, "not read yet");
        p.step(1.0, 10.8, 0.0, false, 30.0);
        assert!((p.cores - 0.8).abs() < 1e-9, "{p:?}");
        p.step(2.0, 3.0, 0.0, false, 30.0);
        assert_eq!(p.cores, 0.0, "a process exited");
    }
}
