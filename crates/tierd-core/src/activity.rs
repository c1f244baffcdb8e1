//! Whether a tenant is working or at rest: one signal, the time its threads spend on a
//! CPU or waiting for memory, against its usual.
//!
//! Sampling tells what a tenant touched over an interval, so a tenant that stops is
//! seen one to two intervals late; CPU time answers within a second. CPU alone misses a
//! tenant that waits on the tier (thrashing, or waking to a hot set on a slow disk: it
//! uses almost no CPU), which is why the time it stalls on memory counts too: the
//! kernel's pressure stall time where there is one (cgroup v2), its own major faults
//! times the tier's read latency otherwise. Stall time already carries the device's
//! speed, so the same shares hold for a fast tier, a hard disk and a saturated one.
//!
//! A tenant with a thread not asleep (running, waiting for a CPU or in the kernel) is
//! not at rest, whatever its counters say: on a busy host a running tenant can show no
//! CPU over half a second.

use serde::{Deserialize, Serialize};

/// The shares that turn the signal into running or resting (see [`crate::policy::Knobs`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    /// At rest below this share of its usual activity...
    pub rest: f64,
    /// ...running again at this share...
    pub wake: f64,
    /// ...if its usual is at least this (cores): a tenant that never does much is left
    /// to sampling.
    pub min_busy_cores: f64,
}

/// Shortest step between two readings (the daemon reads every 0.5 s): CPU time counts
/// in 10 ms ticks, and over half a second one tick is 0.02 cores.
const MIN_STEP_SECS: f64 = 0.45;

/// A rest that begins this soon after the last one ended continues it: what it wakes
/// up to is what it was working on before the first.
const SPELL_GAP_SECS: f64 = 5.0;

/// CPU time its usual would have used over a quiet spell before the spell counts as a
/// rest: ten clock ticks, so a tenant at 0.05 cores is not taken for at rest because
/// half a second passed between two of its ticks.
const QUIET_EVIDENCE_CPU_SECS: f64 = 0.1;

/// Activity kept up this long, at this many times the rest share of its usual, ends
/// a rest even below the wake share: the tenant works again, at a lower level than
/// before (a batch job that now serves), and only sampling can see what it touches.
const SUSTAINED_SECS: f64 = 5.0;
const SUSTAINED_OF_REST: f64 = 1.5;

/// What changed at a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Rested,
    Woke,
}

/// A tenant's activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    /// The last reading: when, CPU seconds and stall seconds so far.
    last: Option<(f64, f64, f64)>,
    /// Cores of activity (CPU + stall) over the last step, and of CPU alone.
    pub cores: f64,
    pub cpu: f64,
    /// Its activity as a rule while running, averaged over about a window; not moved
    /// while at rest (it remembers how busy the tenant was).
    pub usual: f64,
    /// The same for CPU alone. A tenant whose usual CPU is below the busy floor is
    /// left to sampling: its activity is mostly stall, much of it faults on tierd's
    /// own samples, which stop when it rests, so it would never look awake again.
    #[serde(default)]
    pub usual_cpu: f64,
    /// When its activity last fell below the rest share, with the counters then.
    #[serde(default)]
    quiet: Option<(f64, f64, f64)>,
    /// Its activity while at rest, averaged over [`SUSTAINED_SECS`].
    #[serde(default)]
    pub rest_level: f64,
    /// Share of its activity that was stall, over the last step.
    pub stall_share: f64,
    pub rest_since: Option<f64>,
    pub rest_ended: Option<f64>,
    /// When its last rest began, kept after it ends: what it reused before then is what
    /// it wakes up to.
    pub rest_began: Option<f64>,
    /// Mean length of its finished rests, and how many there were.
    pub mean_rest_secs: Option<f64>,
    pub rests: u32,
}

impl Activity {
    /// Takes a reading at `now` (seconds): CPU and stall seconds used so far, and
    /// whether a thread is not asleep. `window` sets how fast the usual follows.
    pub fn step(
        &mut self,
        now: f64,
        cpu_secs: f64,
        stall_secs: f64,
        busy: bool,
        window: f64,
        s: &Shares,
    ) -> Option<Change> {
        let Some((at, cpu0, stall0)) = self.last else {
            self.last = Some((now, cpu_secs, stall_secs));
            return None;
        };
        let dt = now - at;
        if dt < MIN_STEP_SECS {
            return None;
        }
        self.last = Some((now, cpu_secs, stall_secs));
        // The counters only grow, but a restarted daemon counts from zero against the
        // reading its saved state kept: never a negative rate.
        let cpu = (cpu_secs - cpu0).max(0.0) / dt;
        let stall = (stall_secs - stall0).max(0.0) / dt;
        self.cores = cpu + stall;
        self.cpu = cpu;
        self.stall_share = if self.cores > 0.0 { stall / self.cores } else { 0.0 };
        match self.rest_since {
            Some(_) => self.step_at_rest(now, dt, s),
            None => self.step_working(now, (at, cpu0, stall0), (cpu_secs, stall_secs), busy, window, s),
        }
    }

    fn step_at_rest(&mut self, now: f64, dt: f64, s: &Shares) -> Option<Change> {
        self.rest_level += (self.cores - self.rest_level) * (dt / SUSTAINED_SECS).min(1.0);
        let woke = self.cores >= (s.wake * self.usual).max(s.min_busy_cores)
            || self.rest_level >= (SUSTAINED_OF_REST * s.rest * self.usual).max(s.min_busy_cores);
        if !woke {
            return None;
        }
        let len = now - self.rest_since.take().expect("at rest");
        self.mean_rest_secs = Some(match self.mean_rest_secs {
            Some(m) => m + (len - m) / (self.rests as f64 + 1.0).min(8.0),
            None => len,
        });
        self.rests += 1;
        self.rest_ended = Some(now);
        Some(Change::Woke)
    }

    /// A rest begins once the activity has stayed below the rest share for long enough
    /// that its usual would have shown (see [`QUIET_EVIDENCE_CPU_SECS`]).
    fn step_working(
        &mut self,
        now: f64,
        before: (f64, f64, f64),
        counters: (f64, f64),
        busy: bool,
        window: f64,
        s: &Shares,
    ) -> Option<Change> {
        let watched = self.usual_cpu >= s.min_busy_cores && self.usual >= s.min_busy_cores;
        if !watched || busy || self.cores >= s.rest * self.usual {
            self.quiet = None;
            let k = ((now - before.0) / window.max(now - before.0)).min(1.0);
            self.usual += (self.cores - self.usual) * k;
            self.usual_cpu += (self.cpu - self.usual_cpu) * k;
            return None;
        }
        let (since, cpu0, stall0) = *self.quiet.get_or_insert(before);
        let span = now - since;
        let spell = ((counters.0 - cpu0) + (counters.1 - stall0)).max(0.0) / span.max(f64::EPSILON);
        if span < QUIET_EVIDENCE_CPU_SECS / self.usual || spell >= s.rest * self.usual {
            return None;
        }
        self.quiet = None;
        self.rest_since = Some(since);
        self.rest_level = 0.0;
        if self.rest_ended.is_none_or(|e| since - e > SPELL_GAP_SECS) {
            self.rest_began = Some(since);
        }
        Some(Change::Rested)
    }

    /// Seconds it has been at rest, if it is.
    pub fn rest_secs(&self, now: f64) -> Option<f64> {
        self.rest_since.map(|s| (now - s).max(0.0))
    }

    /// Seconds since its last rest began, if it has rested.
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

    const SHARES: Shares = Shares { rest: 0.1, wake: 0.25, min_busy_cores: 0.05 };

    /// Runs `secs` seconds at `cpu` cores and `stall` cores of stall, a reading every
    /// half second; returns the changes seen.
    fn run(a: &mut Activity, t: &mut f64, counters: &mut (f64, f64), secs: f64, cpu: f64, stall: f64) -> Vec<Change> {
        let mut out = Vec::new();
        for _ in 0..(secs * 2.0) as usize {
            *t += 0.5;
            counters.0 += cpu * 0.5;
            counters.1 += stall * 0.5;
            out.extend(a.step(*t, counters.0, counters.1, false, 30.0, &SHARES));
        }
        out
    }

    #[test]
    fn a_busy_tenant_that_stops_rests_within_a_second_and_wakes_when_it_starts_again() {
        let (mut a, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
        a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        assert!(run(&mut a, &mut t, &mut c, 40.0, 0.9, 0.0).is_empty());
        assert!(a.usual > 0.6, "{a:?}");
        assert_eq!(run(&mut a, &mut t, &mut c, 1.0, 0.0, 0.0), [Change::Rested]);
        let usual = a.usual;
        assert!(run(&mut a, &mut t, &mut c, 20.0, 0.0, 0.0).is_empty());
        assert_eq!(a.usual, usual, "how busy it was is remembered while it rests");
        assert_eq!(run(&mut a, &mut t, &mut c, 0.5, 0.5, 0.0), [Change::Woke]);
        assert!((a.mean_rest_secs.unwrap() - 21.0).abs() < 0.6, "the 21 s it stopped for: {a:?}");
        assert_eq!(a.since_rest_secs(t), Some(0.0));
    }

    #[test]
    fn waiting_on_the_tier_is_working_on_a_fast_tier_and_on_a_hard_disk_alike() {
        for (cpu, stall) in [(0.05, 0.5), (0.001, 0.9)] {
            let (mut a, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
            a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
            run(&mut a, &mut t, &mut c, 30.0, 0.8, 0.0);
            run(&mut a, &mut t, &mut c, 5.0, 0.0, 0.0);
            assert!(a.rest_since.is_some());
            // It wakes to a hot set on the tier: little CPU, mostly waiting for reads.
            assert_eq!(run(&mut a, &mut t, &mut c, 1.0, cpu, stall), [Change::Woke], "{cpu} {stall}");
            // Thrashing at its quota is working too.
            assert!(run(&mut a, &mut t, &mut c, 20.0, cpu, stall).is_empty());
            assert!(a.stall_share > 0.9);
        }
    }

    #[test]
    fn a_burst_of_faults_at_rest_or_a_thread_not_asleep_changes_nothing() {
        let (mut a, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
        a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        run(&mut a, &mut t, &mut c, 30.0, 0.5, 0.0);
        // Its report thread faults 300 pages back at 80 µs each: 0.05 cores for half a second.
        run(&mut a, &mut t, &mut c, 2.0, 0.0, 0.0);
        assert!(run(&mut a, &mut t, &mut c, 0.5, 0.0, 0.048).is_empty(), "{a:?}");
        assert!(a.rest_since.is_some());
        // Busy but reading no counters yet (a CPU queue): not at rest.
        let (mut b, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
        b.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        run(&mut b, &mut t, &mut c, 30.0, 0.5, 0.0);
        t += 0.5;
        assert_eq!(b.step(t, c.0, c.1, true, 30.0, &SHARES), None);
        assert!(b.rest_since.is_none());
    }

    #[test]
    fn half_a_second_between_clock_ticks_is_no_rest_for_a_lightly_busy_tenant() {
        // 0.06 cores counted in 10 ms ticks: Poisson, 3 a reading, none in 5% of them.
        let (mut a, mut t) = (Activity::default(), 0.0);
        a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut ticks = 0u32;
        let mut none = 0;
        for _ in 0..2000 {
            t += 0.5;
            let (u, mut k, mut p) = (uniform(), 0u32, (-3.0f64).exp());
            let mut cdf = p;
            while u > cdf {
                k += 1;
                p *= 3.0 / k as f64;
                cdf += p;
            }
            none += u32::from(k == 0);
            ticks += k;
            assert_eq!(a.step(t, ticks as f64 * 0.01, 0.0, false, 30.0, &SHARES), None, "at {t}: {a:?}");
        }
        assert!(none > 50, "readings with no tick: {none}");
        assert!(a.usual > 0.05, "{a:?}");
        // It stops: seen within its evidence span, 0.1 CPU-s of its usual.
        let mut changes = Vec::new();
        for _ in 0..8 {
            t += 0.5;
            changes.extend(a.step(t, ticks as f64 * 0.01, 0.0, false, 30.0, &SHARES));
        }
        assert_eq!(changes, [Change::Rested], "{a:?}");
    }

    #[test]
    fn stall_on_tierds_own_samples_does_not_make_a_tenant_one_to_watch_for_rest() {
        // Little CPU, its activity mostly faults on sampled pages.
        let (mut a, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
        a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        run(&mut a, &mut t, &mut c, 60.0, 0.01, 0.2);
        assert!(a.usual > 0.15, "{a:?}");
        // The faults pause: no rest, so its samples (and its faults) go on.
        assert!(run(&mut a, &mut t, &mut c, 5.0, 0.01, 0.0).is_empty(), "{a:?}");
        assert!(a.rest_since.is_none());
    }

    #[test]
    fn a_tenant_that_works_again_at_a_lower_level_wakes_within_seconds() {
        let (mut a, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
        a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        run(&mut a, &mut t, &mut c, 60.0, 1.0, 0.0);
        assert_eq!(run(&mut a, &mut t, &mut c, 10.0, 0.0, 0.0), [Change::Rested]);
        // A fifth of before: under the wake share, but kept up.
        let mut woke_at = None;
        for _ in 0..40 {
            if !run(&mut a, &mut t, &mut c, 0.5, 0.2, 0.0).is_empty() {
                woke_at = Some(t);
                break;
            }
        }
        let after = woke_at.expect("woke") - 70.0;
        assert!((2.0..=8.0).contains(&after), "woke {after} s after it resumed");
        // A blip at rest does not wake it.
        run(&mut a, &mut t, &mut c, 20.0, 0.2, 0.0);
        assert_eq!(run(&mut a, &mut t, &mut c, 10.0, 0.0, 0.0), [Change::Rested]);
        assert!(run(&mut a, &mut t, &mut c, 1.0, 0.1, 0.0).is_empty(), "{a:?}");
        assert!(run(&mut a, &mut t, &mut c, 10.0, 0.0, 0.0).is_empty());
    }

    #[test]
    fn a_tenant_below_its_predicted_progress_is_counted_until_it_catches_up() {
        let mut a = Activity { stall_share: 0.6, ..Activity::default() };
        let mut s = Shortfall::default();
        assert_eq!(s.observe(10.0, Some(0.9), &a, 0.3), Some(0.0));
        assert_eq!(s.observe(15.0, Some(0.9), &a, 0.3), Some(5.0));
        assert_eq!(s.observe(16.0, None, &a, 0.3), None, "no prediction (no quota): nothing to fall short of");
        a.stall_share = 0.05;
        assert_eq!(s.observe(20.0, Some(0.9), &a, 0.3), None);
    }

    #[test]
    fn a_tenant_that_never_does_much_is_left_to_sampling_and_exits_give_no_negative_rate() {
        let (mut a, mut t, mut c) = (Activity::default(), 0.0, (0.0, 0.0));
        a.step(t, 0.0, 0.0, false, 30.0, &SHARES);
        run(&mut a, &mut t, &mut c, 60.0, 0.02, 0.0);
        assert!(run(&mut a, &mut t, &mut c, 10.0, 0.0, 0.0).is_empty());
        a.step(t + 1.0, 0.0, 0.0, false, 30.0, &SHARES);
        assert_eq!(a.cores, 0.0);
    }
}

/// Whether a tenant gets done what the policy predicted: its progress (the share of its
/// activity not stalled) against the prediction of the last plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Shortfall {
    since: Option<f64>,
}

impl Shortfall {
    /// At `now`, with the last plan's `predicted` share and the tenant's activity:
    /// returns the seconds its progress has stayed more than `by` below the prediction.
    pub fn observe(&mut self, now: f64, predicted: Option<f64>, a: &Activity, by: f64) -> Option<f64> {
        let short = predicted.is_some_and(|p| a.rest_since.is_none() && (1.0 - a.stall_share) < p - by);
        if !short {
            self.since = None;
            return None;
        }
        Some(now - *self.since.get_or_insert(now))
    }
}
