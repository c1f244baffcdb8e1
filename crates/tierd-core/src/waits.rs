//! A tenant's waits at its memory limit, and when waiting must end.
//!
//! On cgroup v1 tierd turns the OOM killer off in its groups: a quota is a placement,
//! not worth a process, so a task whose reclaim at the limit makes no progress waits and
//! tierd wakes it to try again. That must never become an endless wait: when the tenant
//! grew beyond what DRAM and the tier hold, no retry helps. After a grace of continuous
//! waiting with the tier full, the kernel's OOM killer may act on the tenant (the one that
//! outgrew, not a neighbour); while it waits health says so by name. With room on the
//! tier a wait is reclaim behind a slow tier, and a quota is never worth a process: it is
//! woken and named, never killed.

use serde::{Deserialize, Serialize};

/// The hard ceiling over a tenant where the kernel may kill it in its own cgroup (v2
/// `memory.max`; v1's one limit is the quota): a quarter above the whole DRAM budget,
/// so it is met only by a tenant whose reclaim failed far past every soft limit (a full
/// tier), never by one throttled at its quota or at the shared limit (where a slow
/// tier makes that untrue: docs/decisions/007).
pub fn ceiling(dram_budget: u64) -> u64 {
    dram_budget.saturating_add(dram_budget / 4)
}

/// Seconds of continuous waiting after which health turns red: a short wait is the
/// kernel's reclaim catching up with a slow tier, one this long is not.
pub const RED_AFTER_SECS: f64 = 5.0;

/// What to do after a look at whether the tenant waits at its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not waiting, nothing to undo.
    Nothing,
    /// Waiting within the grace: wake it to try again (`log`: say so, once an interval).
    Wake { log: bool },
    /// Waited through the grace: let the OOM killer act on it.
    GiveUp,
    /// No longer waiting after the OOM killer was let act: turn it off again, so a
    /// later quota never kills.
    Recovered,
}

/// The wait state of one tenant, in seconds on a monotonic clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Waits {
    /// When the current continuous wait began.
    pub since: Option<f64>,
    /// When a wait was last logged.
    logged: Option<f64>,
    /// The OOM killer was let act on the tenant.
    pub gave_up: bool,
    /// Given up, but its limit could not yet be pinned at what it holds: until it is, a
    /// tenant with no quota of its own waits at the group's limit, where no killer acts.
    #[serde(default)]
    pub pin_pending: bool,
    /// Whether its reclaim moves anything (v2).
    #[serde(skip)]
    pub reclaim: ReclaimProgress,
    /// Charges that had met its hard limit at the last look since it was given up.
    #[serde(skip)]
    limit_hits: Option<u64>,
}

/// Whether reclaim at a v2 `memory.high` moves anything, look by look: a tenant's, or
/// the group's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReclaimProgress {
    /// What reclaim had moved at the last look that found it throttled.
    throttled: Option<Reclaimed>,
}

/// What reclaim has moved out of a cgroup so far: its bytes on the tier (up as soon as
/// a page's write starts) and the pages reclaimed, anonymous or page cache (up as each
/// is freed: a page-cache tenant's reclaim moves nothing to the tier). Pages that fault
/// straight back still count: a tenant thrashing under a quota smaller than its hot set
/// is the quota at work (docs/decisions/007).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reclaimed {
    pub swap_bytes: u64,
    pub pages: u64,
}

impl Reclaimed {
    /// Whether reclaim freed anything since `before`.
    fn freed_since(self, before: Reclaimed) -> bool {
        self.swap_bytes > before.swap_bytes || self.pages > before.pages
    }
}

impl Waits {
    /// One look at `now`: whether a task of the tenant waits at its limit, and whether
    /// the tier is full (see [`tier_full`]).
    pub fn observe(&mut self, now: f64, waiting: bool, tier_full: bool, grace_secs: f64, log_every_secs: f64) -> Step {
        if !waiting {
            self.since = None;
            self.limit_hits = None;
            self.pin_pending = false;
            return if std::mem::take(&mut self.gave_up) { Step::Recovered } else { Step::Nothing };
        }
        let since = *self.since.get_or_insert(now);
        if self.gave_up {
            return Step::Wake { log: false };
        }
        if tier_full && now - since >= grace_secs {
            self.gave_up = true;
            return Step::GiveUp;
        }
        let log = self.logged.is_none_or(|at| now - at >= log_every_secs);
        if log {
            self.logged = Some(now);
        }
        Step::Wake { log }
    }

    /// Whether a tenant given up still meets its pinned limit (`hits`: the charges that
    /// met its hard limit so far). Its tasks then reclaim in the charge and are killed
    /// there, not asleep where `waiting` looks (v2's `memory.high` throttle, v1's
    /// `under_oom`), and recovering would lift the pin before the kill: a flip-flop
    /// (docs/decisions/007). The first look after giving up counts as meeting it.
    pub fn meets_pinned_limit(&mut self, hits: u64) -> bool {
        self.gave_up && self.limit_hits.replace(hits).is_none_or(|before| hits > before)
    }

    /// Seconds of the current continuous wait.
    pub fn waiting_secs(&self, now: f64) -> Option<f64> {
        self.since.map(|s| (now - s).max(0.0))
    }
}

impl ReclaimProgress {
    /// On v2 a task over `memory.high` sleeps in the kernel's throttle while reclaim
    /// frees its memory (to the tier, or page cache dropped): the quota at work, not a
    /// wait. It waits in vain when reclaim moves nothing: `now` (`None` when it is not
    /// throttled) grew in neither count since the last look. The first throttled look
    /// is not yet a wait (room at every throttle let a fast-growing tenant run past its
    /// quota up to its `memory.max`).
    pub fn stalled(&mut self, now: Option<Reclaimed>) -> bool {
        let before = std::mem::replace(&mut self.throttled, now);
        matches!((before, now), (Some(b), Some(n)) if !n.freed_since(b))
    }
}

/// Whether the tier can take no more: less than 1% of it, or 16 MiB, is free.
pub fn tier_full(size: u64, used: u64) -> bool {
    size.saturating_sub(used) < (size / 100).max(16 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttled_tenant_waits_only_while_its_reclaim_moves_nothing_to_the_tier() {
        let seen = |swap_bytes, pages| Some(Reclaimed { swap_bytes, pages });
        let mut w = ReclaimProgress::default();
        assert!(!w.stalled(seen(10, 0)), "one throttled look is not yet a wait");
        assert!(!w.stalled(seen(20, 0)), "reclaim moved 10 bytes out: the quota at work");
        assert!(w.stalled(seen(20, 0)), "nothing moved: it waits in vain");
        assert!(!w.stalled(None), "not throttled");
        assert!(!w.stalled(seen(20, 0)), "a new throttle starts afresh");
        assert!(!w.stalled(seen(20, 300)), "page cache dropped, nothing written: the quota at work");
        assert!(!w.stalled(seen(12, 301)), "pages swapped in while others were reclaimed: still progress");
        assert!(w.stalled(seen(12, 301)), "neither moved");
    }

    #[test]
    fn a_wait_is_woken_logged_once_an_interval_and_given_up_after_the_grace() {
        let mut w = Waits::default();
        assert_eq!(w.observe(0.0, false, true, 30.0, 10.0), Step::Nothing);
        assert_eq!(w.observe(1.0, true, true, 30.0, 10.0), Step::Wake { log: true });
        assert_eq!(w.observe(1.5, true, true, 30.0, 10.0), Step::Wake { log: false });
        assert_eq!(w.observe(11.0, true, true, 30.0, 10.0), Step::Wake { log: true }, "an interval later");
        assert_eq!(w.waiting_secs(11.0), Some(10.0));
        assert_eq!(w.observe(31.0, true, true, 30.0, 10.0), Step::GiveUp, "30 s of continuous waiting");
        assert_eq!(w.observe(31.5, true, true, 30.0, 10.0), Step::Wake { log: false }, "given up once");
        assert_eq!(w.observe(32.0, false, true, 30.0, 10.0), Step::Recovered);
        assert_eq!(w.observe(33.0, false, true, 30.0, 10.0), Step::Nothing);
        assert_eq!(w.waiting_secs(33.0), None);
    }

    #[test]
    fn a_tenant_given_up_waits_while_its_charges_meet_the_pinned_limit() {
        let mut w = Waits::default();
        assert!(!w.meets_pinned_limit(5), "not given up: its own quota's throttle is what counts");
        w.observe(0.0, true, true, 0.0, 10.0);
        assert!(w.gave_up);
        assert!(w.meets_pinned_limit(5), "the first look after giving up");
        assert!(w.meets_pinned_limit(9), "four more charges met it");
        assert_eq!(w.observe(2.0, true, true, 0.0, 10.0), Step::Wake { log: false }, "still given up");
        assert!(!w.meets_pinned_limit(9), "none since");
        assert_eq!(w.observe(3.0, false, true, 0.0, 10.0), Step::Recovered);
        assert!(!w.meets_pinned_limit(12), "recovered: no longer given up");
    }

    #[test]
    fn a_wait_that_ends_starts_the_grace_over() {
        let mut w = Waits::default();
        w.observe(0.0, true, true, 30.0, 10.0);
        w.observe(25.0, true, true, 30.0, 10.0);
        w.observe(26.0, false, true, 30.0, 10.0);
        assert_eq!(w.observe(27.0, true, true, 30.0, 10.0), Step::Wake { log: false }, "logged 2 s before");
        assert_eq!(w.observe(50.0, true, true, 30.0, 10.0), Step::Wake { log: true });
        assert_eq!(w.observe(57.0, true, true, 30.0, 10.0), Step::GiveUp, "30 s after the second wait began");
    }

    #[test]
    fn with_room_on_the_tier_a_wait_is_woken_and_never_given_up() {
        let mut w = Waits::default();
        w.observe(0.0, true, false, 30.0, 10.0);
        assert_eq!(w.observe(300.0, true, false, 30.0, 10.0), Step::Wake { log: true });
        assert_eq!(w.waiting_secs(300.0), Some(300.0), "still named in health");
        assert_eq!(w.observe(301.0, true, true, 30.0, 10.0), Step::GiveUp, "the tier filled up");
        assert!(tier_full(256 << 20, (256 << 20) - (8 << 20)));
        assert!(!tier_full(4 << 30, 3 << 30));
    }
}
