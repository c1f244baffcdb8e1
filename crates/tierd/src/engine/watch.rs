//! Between intervals: tasks waiting at a limit, and tenants suddenly faulting from the tier.

use super::*;
use tierd_core::activity::Change;
use tierd_core::policy::moves::limit_margin;
use tierd_core::waits::{ReclaimProgress, Reclaimed};

impl Engine {
    /// Between intervals: wakes tasks waiting at a quota or at the group limit, their
    /// reclaim having made no progress (v1 with the OOM killer off, which would otherwise
    /// have killed them; v2 throttled by `memory.high` again and again, which is given
    /// room). Each tenant's waits are logged once an interval, and one that waits through
    /// `oom_grace` with the tier full has the OOM killer let act on it (`tierd_core::waits`).
    pub fn release_waiters(&mut self) {
        // Every tenant is looked at before anyone is woken: a task woken by the group's
        // raised limit runs for a page and would look, for that moment, as if it did not wait.
        let v2 = self.cg.version() == cgroup::Version::V2;
        let names: Vec<TenantName> =
            self.tenants.iter().filter(|(_, t)| t.is_running()).map(|(n, _)| n.clone()).collect();
        let mut waits: Vec<(TenantName, bool)> = Vec::new();
        for n in names {
            let rel = self.tenant_rel(&n);
            let t = self.tenants.get_mut(&n).expect("listed above");
            let in_vain = waits_in_vain(self.cg.as_ref(), &rel, &mut t.waits.reclaim);
            let pinned = t.waits.gave_up && self.cg.stats(&rel).is_ok_and(|s| t.waits.meets_pinned_limit(s.limit_hits));
            waits.push((n, in_vain || pinned));
        }
        let group = self.group_rel();
        let group_waits = waits_in_vain(self.cg.as_ref(), &group, &mut self.group_reclaim);
        let (now, grace, every) = (now_secs(), self.cfg.oom_grace.as_secs_f64(), self.cfg.interval.as_secs_f64());
        let tier_full = tierd_core::waits::tier_full(self.tier_view.size_bytes, self.tier_view.used_bytes);
        for (name, waiting) in waits {
            let t = self.tenants.get_mut(&name).expect("listed above");
            let step = t.waits.observe(now, waiting, tier_full, grace, every);
            if waiting {
                t.count_error("waited at its quota");
            }
            if let Some(msg) = self.act_on_wait(&name, step, v2) {
                self.events.warn(Some(name.as_str()), msg);
            }
        }
        // The group's waiters are woken last: a task woken first would charge a page
        // while a given-up tenant's limit is pinned at what it holds, failing the pin.
        if group_waits {
            self.wake_group(&group, v2);
        }
    }

    /// What is done for one tenant's wait, and what is said of it.
    fn act_on_wait(&mut self, name: &TenantName, step: Step, v2: bool) -> Option<String> {
        let rel = self.tenant_rel(name);
        let grace = self.cfg.oom_grace.as_secs_f64();
        let t = self.tenants.get_mut(name).expect("a running tenant");
        match step {
            Step::Nothing => None,
            // Once the OOM killer may act, a page: room would undo the pinned limit.
            Step::Wake { log } => {
                let pinned = repin(self.cg.as_ref(), &rel, t);
                match self.cg.release_waiters(&rel, wake_for(&t.waits, t.measure.dram)) {
                    Ok(raised) => {
                        // Recorded apart from the quota, so the next pass writes the quota back.
                        t.room = raised.or(t.room);
                        pinned.or(log.then(|| woken(v2, &show_quota(t.quota), raised)))
                    }
                    Err(e) => pinned.or(log.then(|| format!("waits at its quota and cannot be woken: {e}"))),
                }
            }
            // Its own limit pinned at what it holds, the next charge fails in its own
            // group, where the OOM killer is let act (at the group limit the kernel
            // would pick among all tenants); that wakes the waiters too.
            Step::GiveUp => {
                // Pinning can fail (a charge raced the read, and a v1 limit below usage
                // reclaims in the write): it is tried again at every later look.
                let (quota, held) = (show_quota(t.quota), human(t.measure.dram + t.measure.tier));
                let pinned = pin_limit(self.cg.as_ref(), &rel, t);
                t.waits.pin_pending = pinned.is_err();
                Some(match self.cg.set_oom_killer(&rel, true) {
                    Ok(()) => format!(
                        "waited at its quota {quota} for {grace:.0} s with reclaim making no progress and the tier \
                         full: it holds {held}, more than DRAM and the tier can take; the kernel's OOM killer may now \
                         act on it{}",
                        pinned.err().map(|e| format!(" (at its limit as it was: {e})")).unwrap_or_default()
                    ),
                    Err(e) => format!("waited {grace:.0} s at its quota and the OOM killer cannot be let act: {e}"),
                })
            }
            Step::Recovered => {
                let _ = self.cg.set_oom_killer(&rel, false);
                let _ = self.cg.set_ceiling(&rel, Some(tierd_core::waits::ceiling(self.cfg.dram_budget)));
                Some("no longer waits at its quota: the OOM killer is off again".to_string())
            }
        }
    }

    /// Wakes the tasks waiting at the group limit: v2 gets room, v1 a page (room there
    /// saved no tenant; docs/decisions/005). Either raise is recorded, so the next pass
    /// writes the budget back instead of the limit growing a page a wake.
    fn wake_group(&mut self, group: &str, v2: bool) {
        let wake = if v2 { cgroup::Wake::Room(limit_margin(self.cfg.dram_budget)) } else { cgroup::Wake::Page };
        match self.cg.release_waiters(group, wake) {
            Ok(raised) => self.group_limit = raised.or(self.group_limit),
            Err(e) => self.events.warn(None, format!("cannot wake tasks waiting at the group limit: {e}")),
        }
    }

    /// Between intervals: has a tenant just come to rest or started working again (its
    /// CPU and stall time against its usual, see `tierd_core::activity`)? Reads only each
    /// tenant's processes' fault counters and CPU times, so the daemon can look every
    /// half second and plan at once instead of waiting out the interval.
    pub fn fault_watch(&mut self) -> bool {
        if self.cfg.policy != PolicyKind::Tierd {
            return false;
        }
        let now = Instant::now();
        let secs = now_secs();
        let window = self.cfg.tracker.window.as_secs_f64();
        let shares = self.cfg.knobs.shares();
        let read_secs = self.watch_read_secs();
        let hz = tierd_sys::process::clock_ticks_per_sec().max(1) as f64;
        let mut changed = false;
        let names: Vec<TenantName> =
            self.tenants.iter().filter(|(_, t)| t.is_running()).map(|(n, _)| n.clone()).collect();
        for name in names {
            let rel = self.tenant_rel(&name);
            let (psi, pids) = (self.cg.pressure(&rel), self.cg.procs(&rel));
            let t = self.tenants.get_mut(&name).expect("listed above");
            // A child forked since the last interval works too.
            if let Ok(pids) = pids {
                t.pin_new_procs(&pids);
            }
            let (own_faults, ticks) = t.read_counters(&self.proc);
            t.faults.look(now, own_faults, read_secs + self.cfg.knobs.fault_cpu_secs);
            let stall = t.progress.stall_so_far(psi, t.faults.stall_secs);
            let busy = t.procs.iter().any(|p| self.proc.any_thread_busy(p.pid()).unwrap_or(false));
            if let Some(change) = t.progress.activity.step(secs, ticks as f64 / hz, stall, busy, window, &shares) {
                changed = true;
                let said = match change {
                    // A rest began: what lay in runs before may have been read back and
                    // written out scattered since. Kept when a rest ends: the wake-up's
                    // prefetch reads the regions in runs first.
                    Change::Rested => {
                        t.layout.laid_out.clear();
                        "came to rest: its CPU and stall time fell below a tenth of its usual".to_string()
                    }
                    Change::Woke => {
                        let rested = t.progress.activity.rest_began_secs(secs).unwrap_or(0.0);
                        format!("woke: working again after being at rest for {rested:.0} s")
                    }
                };
                t.decide(secs, said);
            }
        }
        changed
    }

    /// The tier's read time since the last watch, from the disk's counters less tierd's
    /// own moves (the interval's figure is up to an interval old: a tier that turned
    /// slow would count a waking tenant's reads as quick ones for that long); the last
    /// known otherwise.
    pub(super) fn watch_read_secs(&mut self) -> f64 {
        let disk = self.tier_disk().map(|d| self.others_of(d));
        if let (Some(now), Some(before)) = (disk, std::mem::replace(&mut self.watch_disk, disk))
            && let Some(us) = now.read_latency_us_since(&before)
        {
            self.watch_read_us = us;
        }
        self.watch_read_us.max(1.0) / 1e6
    }
}

/// Whether the tasks of cgroup `rel` wait at its limit in vain: v1's wait is a charge
/// that failed; v2's throttle is one only while its reclaim moves nothing.
fn waits_in_vain(cg: &dyn MemoryController, rel: &str, reclaim: &mut ReclaimProgress) -> bool {
    let waiting = cg.waiting_at_limit(rel).unwrap_or(false);
    if cg.version() != cgroup::Version::V2 {
        return waiting;
    }
    let seen = |s: cgroup::MemoryStats| Reclaimed { swap_bytes: s.swap, pages: s.reclaimed_pages };
    reclaim.stalled(waiting.then(|| cg.stats(rel).map(seen).ok()).flatten())
}

/// How far the wake of a tenant holding `held` raises its limit: room, unless the OOM
/// killer was let act on it (its limit pinned at what it holds, which room would undo).
fn wake_for(waits: &tierd_core::waits::Waits, held: u64) -> cgroup::Wake {
    if waits.gave_up { cgroup::Wake::Page } else { cgroup::Wake::Room(limit_margin(held)) }
}

/// What a woken tenant's event says: v2 throttled it, v1 let it wait (and would have killed it).
fn woken(v2: bool, quota: &str, raised: Option<u64>) -> String {
    match (v2, raised) {
        (true, Some(room)) => format!(
            "throttled at its quota {quota} with reclaim making no progress: given room up to {} at once",
            human(room)
        ),
        (false, Some(room)) => format!(
            "waited at its quota {quota}: reclaim made no progress (the kernel would have killed it); given room up \
             to {} at once",
            human(room)
        ),
        (_, None) => format!("waited at its quota {quota}: reclaim made no progress; it has no limit to raise"),
    }
}

/// Sets a cgroup's limit to what it holds now and records it as its quota (so the next
/// plan's write, whatever it is, counts as a change and is applied). A charge between
/// the read and the write makes the write fail (EBUSY on v1), so it reads again, thrice.
pub(super) fn pin_limit(cg: &dyn MemoryController, rel: &str, t: &mut Tenant) -> Result<(), cgroup::CgroupError> {
    let mut tries = 0;
    loop {
        let held = cg.stats(rel)?.usage;
        match cg.set_limit(rel, Some(held)) {
            Ok(()) => {
                t.quota_written(Some(held));
                return Ok(());
            }
            Err(e) if tries >= 2 => return Err(e),
            Err(_) => tries += 1,
        }
    }
}

/// A given-up tenant whose pin failed is pinned again; says so once it holds.
fn repin(cg: &dyn MemoryController, rel: &str, t: &mut Tenant) -> Option<String> {
    if !t.waits.pin_pending || pin_limit(cg, rel, t).is_err() {
        return None;
    }
    t.waits.pin_pending = false;
    Some(format!(
        "its limit is now pinned at what it holds, {}: the kernel's OOM killer acts at its next charge",
        show_quota(t.quota)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_woken_tenant_is_told_the_room_it_got() {
        let v1 = woken(false, "192 MiB", Some(208 << 20));
        assert!(
            v1.starts_with("waited at its quota 192 MiB") && v1.ends_with("given room up to 208 MiB at once"),
            "{v1}"
        );
        assert!(woken(true, "64 MiB", Some(80 << 20)).starts_with("throttled at its quota 64 MiB"));
        assert!(woken(false, "unlimited", None).ends_with("no limit to raise"));
    }

    #[test]
    fn a_tenant_left_to_the_oom_killer_gets_a_page_not_room() {
        let mut w = tierd_core::waits::Waits::default();
        assert_eq!(wake_for(&w, 64 << 20), cgroup::Wake::Room(16 << 20));
        assert_eq!(wake_for(&w, 1 << 30), cgroup::Wake::Room(64 << 20), "a sixteenth of a large group");
        w.gave_up = true;
        assert_eq!(wake_for(&w, 1 << 30), cgroup::Wake::Page);
    }
}

/// Tasks waiting at a limit, through the engine's watch over a fake memory controller.
#[cfg(test)]
mod waiters {
    use std::sync::Arc;

    use super::super::fixture::{self, FakeCgroups, Write};
    use super::*;

    use tierd_core::size::MIB;
    const DB: &str = "tierd/tenants/db";

    /// An engine with tenant db holding 64 MiB under a 64 MiB quota and web holding
    /// 32 MiB with none, where the tasks of the cgroups in `waiting` wait at their limit.
    fn engine(waiting: &[&str]) -> (Arc<FakeCgroups>, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let waiting = waiting.iter().map(|w| w.to_string()).collect();
        let cg = Arc::new(FakeCgroups { usage: 64 * MIB, waiting, ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        fixture::add_tenant(&mut e, "db", Some(64 * MIB), 64 * MIB);
        fixture::add_tenant(&mut e, "web", None, 32 * MIB);
        (cg, e)
    }

    #[test]
    fn a_tenant_waiting_at_its_quota_gets_the_margin_above_what_it_holds_and_is_named() {
        let (cg, mut e) = engine(&[DB]);
        e.release_waiters();
        assert_eq!(*cg.writes.lock().unwrap(), [Write::Wake(DB.into(), cgroup::Wake::Room(16 * MIB))]);
        let db = &e.tenants[&"db".parse::<TenantName>().unwrap()];
        assert_eq!(db.room, Some(80 * MIB), "recorded apart from the quota, which the next pass writes back");
        assert_eq!(db.quota, Some(64 * MIB));
        let said = fixture::said(&e);
        assert!(
            said.iter()
                .any(|m| m.starts_with("db: waited at its quota 64 MiB") && m.ends_with("room up to 80 MiB at once")),
            "{said:?}"
        );
    }

    #[test]
    fn on_v2_a_throttled_tenant_gets_room_only_once_its_reclaim_frees_nothing() {
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let waiting = vec![DB.to_string()];
        let cg = Arc::new(FakeCgroups { v2: true, usage: 64 * MIB, waiting, ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        fixture::add_tenant(&mut e, "db", Some(64 * MIB), 64 * MIB);
        e.release_waiters();
        cg.swap.fetch_add(8 * MIB, Relaxed);
        e.release_waiters();
        assert!(cg.writes.lock().unwrap().is_empty(), "throttled while reclaim moves it out: the quota at work");
        cg.reclaimed_pages.fetch_add(2048, Relaxed);
        e.release_waiters();
        assert!(cg.writes.lock().unwrap().is_empty(), "throttled while its page cache is dropped: the quota at work");
        e.release_waiters();
        assert_eq!(*cg.writes.lock().unwrap(), [Write::Wake(DB.into(), cgroup::Wake::Room(16 * MIB))]);
        let said = fixture::said(&e);
        assert!(said.iter().any(|m| m.starts_with("db: throttled at its quota 64 MiB")), "{said:?}");
    }

    #[test]
    fn a_tenant_given_up_stays_so_while_its_charges_meet_the_pinned_limit() {
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let cg = Arc::new(FakeCgroups { v2: true, usage: 64 * MIB, ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        // Given up: pinned at memory.max, where its tasks reclaim in the charge and are
        // not asleep in the memory.high throttle.
        fixture::add_tenant(&mut e, "db", Some(64 * MIB), 64 * MIB).waits.gave_up = true;
        cg.limit_hits.store(40, Relaxed);
        e.release_waiters();
        cg.limit_hits.store(52, Relaxed);
        e.release_waiters();
        let recovered = |e: &Engine| fixture::said(e).iter().any(|m| m.starts_with("db: no longer waits"));
        assert!(!recovered(&e), "its charges meet the pin: the OOM killer stays free to act");
        assert_eq!(cg.writes.lock().unwrap()[0], Write::Wake(DB.into(), cgroup::Wake::Page), "a page, not room");
        e.release_waiters();
        assert!(recovered(&e), "no charge met it since the last look: it no longer waits");
    }

    #[test]
    fn a_tenant_given_up_whose_limit_cannot_be_pinned_yet_is_pinned_at_a_later_look() {
        let dir = tempfile::tempdir().unwrap();
        let waiting = vec![DB.to_string()];
        // The give-up's three tries fail (charges racing each read), the next look's holds.
        let cg = Arc::new(FakeCgroups { usage: 64 * MIB, waiting, refuse_limits: 3.into(), ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        let db = fixture::add_tenant(&mut e, "db", None, 64 * MIB);
        // It has waited through the grace (60 s by default) and the tier is full.
        db.waits.since = Some(now_secs() - 3600.0);
        e.tier_view.used_bytes = e.tier_view.size_bytes;
        e.release_waiters();
        let db = &e.tenants[&"db".parse::<TenantName>().unwrap()];
        assert!(db.waits.gave_up && db.waits.pin_pending);
        assert_eq!(*cg.writes.lock().unwrap(), [Write::OomKiller(DB.into(), true)], "the pin failed, the killer is on");
        let said = fixture::said(&e);
        assert!(said.iter().any(|m| m.contains("OOM killer may now act on it (at its limit as it was")), "{said:?}");
        // With no quota of its own it waits at the group's limit, where no killer acts:
        // the pin is tried again.
        e.release_waiters();
        assert_eq!(cg.limits_of(DB), [Some(64 * MIB)], "pinned at what it holds");
        assert!(!e.tenants[&"db".parse::<TenantName>().unwrap()].waits.pin_pending);
        let said = fixture::said(&e);
        assert!(said.iter().any(|m| m.contains("its limit is now pinned at what it holds, 64 MiB")), "{said:?}");
        e.release_waiters();
        assert_eq!(cg.limits_of(DB).len(), 1, "pinned once");
    }

    #[test]
    fn nothing_is_written_while_no_task_waits() {
        let (cg, mut e) = engine(&[]);
        e.release_waiters();
        assert!(cg.writes.lock().unwrap().is_empty());
        assert!(fixture::said(&e).is_empty());
    }

    #[test]
    fn a_group_limit_the_kernel_will_not_lower_yet_is_said_once_and_tried_again_each_pass() {
        use std::sync::atomic::Ordering::Relaxed;
        let (cg, mut e) = engine(&["tierd/tenants"]);
        let budget = e.cfg.dram_budget;
        e.release_waiters();
        cg.refuse_limits.store(2, Relaxed);
        let plan = Plan { group_limit: Some(budget), tenants: Vec::new(), notes: Vec::new() };
        for _ in 0..3 {
            e.enforce(&plan);
        }
        let said = fixture::said(&e);
        assert_eq!(said.iter().filter(|m| m.contains("cannot set the group limit")).count(), 1, "{said:?}");
        assert_eq!((e.group_limit, cg.limits_of("tierd/tenants")), (Some(budget), vec![Some(budget)]));
    }

    #[test]
    fn a_v1_group_limit_is_raised_by_a_page_that_the_next_pass_takes_back() {
        let (cg, mut e) = engine(&["tierd/tenants"]);
        let budget = e.cfg.dram_budget;
        for _ in 0..3 {
            e.release_waiters();
            assert_eq!(e.group_limit, Some(64 * MIB + 4096), "a page above what the group holds");
            e.enforce(&Plan { group_limit: Some(budget), tenants: Vec::new(), notes: Vec::new() });
            assert_eq!(e.group_limit, Some(budget), "the budget written back");
        }
        let wakes =
            cg.writes.lock().unwrap().iter().filter(|w| matches!(w, Write::Wake(_, cgroup::Wake::Page))).count();
        assert_eq!((wakes, cg.limits_of("tierd/tenants")), (3, vec![Some(budget); 3]), "no page kept for good");
    }
}
