//! Whether a tenant is running or at rest, from the CPU time of its processes.
//!
//! Sampling tells what a tenant touched over an interval, so a tenant that stops is
//! seen idle one to two intervals later. In login-storm (users active 20 s, idle 20 s)
//! that lag kept a tenant that had just stopped at its full quota for up to 12 s while
//! a neighbour that had just logged in thrashed beside it. CPU time answers within a
//! second: a tenant whose processes stopped using the CPU, and that is not reading from
//! the tier (a thrashing tenant waits on the tier and uses little CPU too), is at rest.

/// Shortest step between two readings: CPU times count in clock ticks (10 ms), so a
/// shorter step cannot tell 2% of a core from nothing.
const MIN_STEP_SECS: f64 = 1.0;

/// A tenant using less than this share of its usual CPU is at rest...
const REST_SHARE: f64 = 0.1;

/// ...if its usual CPU is at least this (cores): a tenant that never uses much CPU
/// is left to sampling.
const MIN_BUSY_CORES: f64 = 0.05;

/// Back to running at this share of its usual CPU.
const RUN_SHARE: f64 = 0.25;

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
}

impl CpuPace {
    /// Takes a reading: `cpu_secs` used so far by its processes at time `now`, and
    /// whether it read from the tier lately. Returns true when it has just come to rest.
    pub fn step(&mut self, now: f64, cpu_secs: f64, faulting: bool, window_secs: f64) -> bool {
        // Reading from the tier is waking up: never at rest then, not even until the
        // next full step (the wake-up is planned for at once).
        if faulting {
            self.rest_since = None;
        }
        let Some((at, before)) = self.last else {
            self.last = Some((now, cpu_secs));
            return false;
        };
        let dt = now - at;
        if dt < MIN_STEP_SECS {
            return false;
        }
        self.last = Some((now, cpu_secs));
        // A process that exits takes its CPU time with it: never a negative rate.
        self.cores = (cpu_secs - before).max(0.0) / dt;
        let resting = self.usual >= MIN_BUSY_CORES && self.cores < REST_SHARE * self.usual && !faulting;
        match self.rest_since {
            Some(_) if faulting || self.cores >= RUN_SHARE * self.usual => {
                self.rest_since = None;
            }
            Some(_) => return false,
            None if resting => {
                self.rest_since = Some(now);
                return true;
            }
            None => {}
        }
        self.usual += (self.cores - self.usual) * (dt / window_secs.max(dt)).min(1.0);
        false
    }

    /// Seconds it has been at rest, if it is.
    pub fn rest_secs(&self, now: f64) -> Option<f64> {
        self.rest_since.map(|s| (now - s).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `secs` seconds at `cores`, one reading a second, from `t`; returns the
    /// time after, the CPU seconds so far, and whether it came to rest on the way.
    fn run(p: &mut CpuPace, t: &mut f64, cpu: &mut f64, secs: u32, cores: f64, faulting: bool) -> bool {
        let mut came = false;
        for _ in 0..secs {
            *t += 1.0;
            *cpu += cores;
            came |= p.step(*t, *cpu, faulting, 30.0);
        }
        came
    }

    #[test]
    fn a_busy_tenant_that_stops_is_at_rest_within_two_seconds_and_runs_again_when_it_starts() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, false, 30.0);
        assert!(!run(&mut p, &mut t, &mut cpu, 40, 0.9, false), "busy: {p:?}");
        assert!(p.usual > 0.6, "{p:?}");
        assert!(run(&mut p, &mut t, &mut cpu, 2, 0.0, false), "stopped: {p:?}");
        let usual = p.usual;
        assert!(!run(&mut p, &mut t, &mut cpu, 60, 0.0, false), "came to rest once");
        assert_eq!(p.rest_secs(t), Some(61.0));
        assert_eq!(p.usual, usual, "how busy it was is remembered while it rests");
        run(&mut p, &mut t, &mut cpu, 1, 0.5, false);
        assert_eq!(p.rest_secs(t), None, "running again");
    }

    #[test]
    fn a_thrashing_tenant_waits_on_the_tier_and_is_not_at_rest() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, false, 30.0);
        run(&mut p, &mut t, &mut cpu, 40, 0.9, false);
        assert!(!run(&mut p, &mut t, &mut cpu, 10, 0.02, true), "{p:?}");
        assert_eq!(p.rest_secs(t), None);
        // At rest, then faulting again (waking): running.
        run(&mut p, &mut t, &mut cpu, 3, 0.0, false);
        assert!(p.rest_secs(t).is_some());
        run(&mut p, &mut t, &mut cpu, 1, 0.0, true);
        assert_eq!(p.rest_secs(t), None);
        // Faulting ends the rest even between full steps.
        run(&mut p, &mut t, &mut cpu, 3, 0.0, false);
        assert!(p.rest_secs(t).is_some());
        p.step(t + 0.5, cpu, true, 30.0);
        assert_eq!(p.rest_secs(t + 0.5), None);
    }

    #[test]
    fn a_tenant_that_never_uses_much_cpu_is_left_to_sampling() {
        let (mut p, mut t, mut cpu) = (CpuPace::default(), 0.0, 0.0);
        p.step(t, cpu, false, 30.0);
        run(&mut p, &mut t, &mut cpu, 60, 0.02, false);
        assert!(!run(&mut p, &mut t, &mut cpu, 10, 0.0, false), "{p:?}");
    }

    #[test]
    fn readings_closer_than_a_second_wait_and_exits_never_make_a_negative_rate() {
        let mut p = CpuPace::default();
        p.step(0.0, 10.0, false, 30.0);
        assert!(!p.step(0.5, 10.4, false, 30.0));
        assert_eq!(p.cores, 0.0, "not read yet");
        p.step(1.0, 10.8, false, 30.0);
        assert!((p.cores - 0.8).abs() < 1e-9, "{p:?}");
        p.step(2.0, 3.0, false, 30.0);
        assert_eq!(p.cores, 0.0, "a process exited");
    }
}
