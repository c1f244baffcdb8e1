//! Carrying a plan out: quotas through the memory controller, page moves through the movers.

use super::*;
use tierd_core::policy::moves::prefetch_room;

impl Engine {
    /// Carries out a plan: the group limit, then quotas (lowered ones first, so the
    /// group never needs more than it has), then page moves: the demotions of those
    /// that prefetch nothing before the prefetches, whose reads then reclaim the clean
    /// pages those demotions left in the swap cache instead of writing a page for each.
    pub(super) fn enforce(&mut self, plan: &Plan) {
        self.moves_started = Instant::now();
        self.set_group_limits(plan);
        self.record_notes(plan);
        let now = now_secs();
        let order = move_order(plan, |name| self.tenants.get(name).and_then(|t| t.quota));
        let woken: Vec<&TenantPlan> = plan.tenants.iter().filter(|tp| tp.woke).collect();
        if woken.is_empty() {
            for tp in order {
                self.apply(tp, now, "", None);
            }
            return;
        }
        // Room ahead of the woken: the neighbours' demotions that come with no cut.
        let mut ahead = Vec::new();
        for tp in order.iter().copied() {
            if !tp.woke && tp.prefetch.is_empty() && !tp.demote.is_empty() && self.falling(tp) == Some(false) {
                ahead.push((tp, self.moves(tp)));
            }
        }
        // A tenant waking up goes first, with as much of its prefetch as the DRAM no
        // tenant holds takes, less the margin every prefetch leaves below its limit. Its
        // quota may take the group's limits past the budget meanwhile; the group limit
        // still holds.
        let group_limit = plan.group_limit.unwrap_or(self.cfg.dram_budget);
        let held: u64 = self.tenants.values().filter(|t| t.is_running()).map(|t| t.measure.dram).sum();
        let mut free = prefetch_room(Some(group_limit), held);
        for tp in &woken {
            let mut head = TenantPlan::quota_only(tp.name.clone(), tp.quota, tp.reason.clone());
            head.woke = true;
            head.prefetch = take_within(&tp.prefetch, &mut free);
            self.apply(&head, now, "ahead of its neighbours' cuts", None);
        }
        // Then the neighbours' cuts: their demotions now, their limits written on a
        // thread of their own while the woken tenants' prefetch goes on as the cuts free
        // DRAM under the group limit (a v1 limit write waits until the kernel has
        // reclaimed down to it; see docs/decisions/001, "Movers" and the wake-up notes).
        let cuts: Vec<&TenantPlan> =
            order.iter().copied().filter(|tp| !tp.woke && self.falling(tp).is_some_and(|f| f)).collect();
        let mut early = Vec::new();
        for tp in &cuts {
            early.push(self.moves(tp));
        }
        let jobs: Vec<(String, Option<u64>)> = match !cuts.is_empty() && self.tier_failing_now() {
            true => Vec::new(),
            false => cuts.iter().map(|tp| (self.tenant_rel(&tp.name), tp.quota)).collect(),
        };
        let cg = Arc::clone(&self.cg);
        let limits = std::thread::scope(|s| {
            let writes = s.spawn(move || {
                jobs.iter().map(|(rel, quota)| mover::timed(|| cg.set_limit(rel, *quota))).collect::<Vec<_>>()
            });
            self.prefetch_as_cuts_free(&woken, group_limit, now, || writes.is_finished());
            writes.join().unwrap_or_default()
        });
        let mut limits = limits.into_iter();
        for (tp, early) in cuts.iter().zip(early) {
            self.apply(tp, now, "", Some(Ahead { early, limit: limits.next() }));
        }
        for &(tp, early) in &ahead {
            self.apply(tp, now, "", Some(Ahead { early, limit: None }));
        }
        // The rest; for the woken, what is left of their prefetch.
        for tp in order {
            if cuts.iter().chain(ahead.iter().map(|a| &a.0)).any(|c| c.name == tp.name) {
                continue;
            }
            let mut rest = tp.clone();
            rest.woke = false;
            self.apply(if tp.woke { &rest } else { tp }, now, "", None);
        }
    }

    /// Prefetches the woken tenants' ranges as the group's usage falls below its margin
    /// under `group_limit`, until the cuts' limit writes are `done`, all is read, or the
    /// pass's time for moves is spent; logs what each got.
    fn prefetch_as_cuts_free(&mut self, woken: &[&TenantPlan], group_limit: u64, now: f64, done: impl Fn() -> bool) {
        let group = self.group_rel();
        let until = self.moves_until();
        let mut left: Vec<(TenantName, Vec<Range>, u64)> =
            woken.iter().map(|tp| (tp.name.clone(), tp.prefetch.clone(), 0)).collect();
        while !done() && !until.passed() && left.iter().any(|l| !l.1.is_empty()) {
            let usage = self.cg.stats(&group).map_or(group_limit, |st| st.usage);
            let mut room = prefetch_room(Some(group_limit), usage);
            for (name, ranges, bytes) in &mut left {
                let now_ranges = take_within(ranges, &mut room);
                if now_ranges.is_empty() {
                    continue;
                }
                ranges.retain(|r| !now_ranges.contains(r));
                let mut piece = TenantPlan::quota_only(name.clone(), None, String::new());
                piece.prefetch = now_ranges;
                *bytes += self.carry_out_moves(&piece).prefetched;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for (name, _, bytes) in left.into_iter().filter(|l| l.2 > 0) {
            let msg = format!("prefetched {} as its neighbours' cuts freed DRAM", human(bytes));
            if let Some(t) = self.tenants.get_mut(&name) {
                t.decide(now, msg.clone());
            }
            self.events.decision(Some(name.as_str()), msg);
        }
    }

    /// The group's limit (the budget, or less) and its protection: the sum of the
    /// running tenants' guarantees.
    fn set_group_limits(&mut self, plan: &Plan) {
        if plan.group_limit != self.group_limit {
            // A v1 limit written below what the group holds reclaims in the write, and
            // fails where reclaim frees nothing: said once, tried again each pass.
            match self.cg.set_limit(&self.group_rel(), plan.group_limit) {
                Ok(()) => (self.group_limit, self.group_limit_failing) = (plan.group_limit, false),
                Err(e) if !self.group_limit_failing => {
                    self.group_limit_failing = true;
                    self.events.warn(None, format!("cannot set the group limit: {e}; tried again at each pass"));
                }
                Err(_) => {}
            }
        }
        // Host-wide reclaim honours a tenant's protection only within its parent's.
        let guaranteed = self.tenants.values().filter(|t| t.is_running()).map(|t| t.spec.guaranteed()).sum();
        if self.group_protected != Some(guaranteed) {
            match self.cg.set_protection(&self.group_rel(), guaranteed) {
                Ok(()) => self.group_protected = Some(guaranteed),
                Err(e) => self.events.warn(None, format!("cannot protect the tenants' guaranteed DRAM: {e}")),
            }
        }
    }

    /// The plan's host-wide notes, logged when their kinds change.
    fn record_notes(&mut self, plan: &Plan) {
        let kinds: Vec<&'static str> = plan.notes.iter().map(|n| n.kind()).collect();
        if kinds != self.note_kinds {
            for note in &plan.notes {
                self.events.decision(None, note.to_string());
            }
            self.note_kinds = kinds;
        }
        self.notes = plan.notes.clone();
        self.quotas_in_force = Some(plan.sets_quotas());
    }

    /// A cut the kernel could not reclaim all the way down to (v1): it freed what it
    /// could. Holds the tenant there so it does not grow back; the next pass cuts again.
    /// (Logged as a warning, this came at nearly every login-storm tenant's rest.)
    fn hold_partway(&mut self, tp: &TenantPlan, rel: &str, now: f64, e: &tierd_sys::cgroup::CgroupError) {
        let Some(t) = self.tenants.get_mut(&tp.name) else { return };
        let partway = self
            .cg
            .stats(rel)
            .ok()
            .map(|s| (s.usage + QUOTA_SLACK).next_multiple_of(4096))
            .filter(|&p| t.quota.is_none_or(|q| p + QUOTA_SLACK < q));
        match partway.map(|p| (p, self.cg.set_limit(rel, Some(p)))) {
            Some((p, Ok(()))) => {
                let msg = format!(
                    "quota {} → {} on its way to {}, as far as the kernel could reclaim for now: {}",
                    show_quota(t.quota),
                    human(p),
                    show_quota(tp.quota),
                    tp.reason
                );
                t.quota_written(Some(p));
                t.reason = tp.reason.clone();
                t.decide(now, msg.clone());
                self.events.decision(Some(tp.name.as_str()), msg);
            }
            _ => self.events.info(
                Some(tp.name.as_str()),
                format!("quota cut to {} waits: the kernel could not reclaim yet ({e})", show_quota(tp.quota)),
            ),
        }
    }

    /// Whether the plan lowers the tenant's quota (`None`: no such running tenant).
    pub(super) fn falling(&self, tp: &TenantPlan) -> Option<bool> {
        let t = self.tenants.get(&tp.name).filter(|t| t.is_running())?;
        Some(quota_change(t.limit_in_force(), tp.quota).1)
    }

    /// Carries out one tenant's plan: its quota (a falling one after its demotions, so
    /// the regions the plan chose reach the tier whole before the kernel reclaims
    /// page by page at the cut), then its page moves; logs what it did, with `note`.
    /// Moves carried out `ahead` (and a limit written there) are only recorded.
    pub(super) fn apply(&mut self, tp: &TenantPlan, now: f64, note: &str, ahead: Option<Ahead>) {
        let rel = self.tenant_rel(&tp.name);
        let Some(t) = self.tenants.get_mut(&tp.name) else { return };
        if !t.is_running() {
            return;
        }
        // A falling quota's demotions go first, so the regions the plan chose
        // reach the tier whole before the kernel reclaims page by page at the cut.
        let (changed, falling) = quota_change(t.limit_in_force(), tp.quota);
        let mut told = false;
        let (early, limit) = match ahead {
            Some(c) => (Some(c.early), c.limit),
            None => (falling.then(|| self.moves(tp)), None),
        };
        if changed && falling && limit.is_none() && self.tier_failing_now() {
            self.hold_quota(tp);
            return;
        }
        let Some(t) = self.tenants.get_mut(&tp.name) else { return };
        if changed {
            crate::crash_point!("quota");
            let (set, secs) = limit.unwrap_or_else(|| mover::timed(|| self.cg.set_limit(&rel, tp.quota)));
            warn_if_slow(&mut self.events, Some(tp.name.as_str()), secs, || {
                format!("setting quota {}", show_quota(tp.quota))
            });
            match set {
                Ok(()) => {
                    // Estimates wobble: every change is applied, but only a change of
                    // 5% or more is worth a line in the decision log.
                    let notable = match (t.quota, tp.quota) {
                        (Some(a), Some(b)) => a.abs_diff(b) as f64 >= 0.05 * a.max(b) as f64,
                        _ => true,
                    };
                    let msg = format!("quota {} → {}: {}", show_quota(t.quota), show_quota(tp.quota), tp.reason);
                    t.quota_written(tp.quota);
                    t.reason = tp.reason.clone();
                    if notable {
                        t.decide(now, msg.clone());
                        self.events.decision(Some(tp.name.as_str()), msg);
                        told = true;
                    }
                }
                Err(e) if falling && e.is_busy() => self.hold_partway(tp, &rel, now, &e),
                Err(e) => {
                    t.count_error("cgroup limit");
                    self.events.warn(Some(tp.name.as_str()), format!("cannot set quota {}: {e}", show_quota(tp.quota)));
                }
            }
        } else {
            t.reason = tp.reason.clone();
        }
        let done = early.unwrap_or_else(|| self.moves(tp));
        let t = self.tenants.get_mut(&tp.name).expect("checked above");
        let did = done.describe(tp.demote.len(), note);
        // A woken tenant's reason says it woke ("woke up: tier faults …"): logged on its
        // own when neither its quota line nor its moves carried it.
        let msg = match did.is_empty() {
            false => Some(format!("{}: {}", did.join(", "), tp.reason)),
            true => (tp.woke && !told).then(|| tp.reason.clone()),
        };
        if let Some(msg) = msg {
            t.decide(now, msg.clone());
            self.events.decision(Some(tp.name.as_str()), msg);
        }
    }

    /// Leaves a tenant's quota as it is, its cut not written: the tier is failing, and
    /// the next plan (one limit, no demotion) follows from that.
    fn hold_quota(&mut self, tp: &TenantPlan) {
        let msg = format!(
            "quota stays {}: the tier device is failing, so the cut to {} is not made",
            show_quota(self.tenants.get(&tp.name).and_then(|t| t.quota)),
            show_quota(tp.quota)
        );
        self.events.warn(Some(tp.name.as_str()), msg);
    }

    /// [`Self::carry_out_moves`], with a warning when it holds up the control loop.
    pub(super) fn moves(&mut self, tp: &TenantPlan) -> MovesDone {
        let (moved, secs) = mover::timed(|| self.carry_out_moves(tp));
        warn_if_slow(&mut self.events, Some(tp.name.as_str()), secs, || {
            format!(
                "page moves ({} demote, {} prefetch, {} collapse, {} relayout ranges)",
                tp.demote.len(),
                tp.prefetch.len(),
                tp.collapse.len(),
                tp.relayout.len()
            )
        });
        moved
    }

    /// Carries out a tenant plan's page moves, counting the CPU they take: the kernel's
    /// paging work (swap-ins, page-outs) runs in tierd's thread and is part of its CPU.
    pub(super) fn carry_out_moves(&mut self, tp: &TenantPlan) -> MovesDone {
        let cpu = tierd_sys::process::thread_cpu_secs();
        let done = self.own_tier_io(|e| e.move_pages(tp));
        self.moving_cpu_secs += (tierd_sys::process::thread_cpu_secs() - cpu).max(0.0);
        done
    }

    fn move_pages(&mut self, tp: &TenantPlan) -> MovesDone {
        // The pass's moves together hold the loop (and the API) for an interval at most;
        // what they did not get to is planned again at the next, which follows at once.
        let until = self.moves_until();
        let relayout_until = self.relayout_until();
        let Some(t) = self.tenants.get_mut(&tp.name) else { return MovesDone::default() };
        let mut done = MovesDone::default();
        let mut failed: Vec<(&str, tierd_sys::madvise::AdviseResult)> = Vec::new();
        let now = now_secs();
        // Once per interval: prefetched pages are mapped as the tenant's, so a region
        // still on the tier an interval later was evicted again and is asked for again.
        let interval = self.cfg.interval.as_secs_f64();
        t.layout.prefetched.retain(|_, at| now - *at < interval * 0.9);
        let fresh: Vec<Range> =
            tp.prefetch.iter().filter(|r| !t.layout.prefetched.contains_key(&(r.pid, r.start))).copied().collect();
        // Only what was read counts as asked for: a region its time ran out before
        // waited an interval (a woken tenant ran at 1% of its speed for 5 s so).
        let mut reached: Vec<Range> = Vec::new();
        let mut relaid = mover::Relaid::default();
        for p in &t.procs {
            let mine = |ranges: &[Range]| -> Vec<(u64, u64)> {
                ranges.iter().filter(|r| r.pid == p.pid()).map(|r| (r.start, r.len)).collect()
            };
            let ranges = mine(&tp.relayout);
            let mut paged = Vec::new();
            if !ranges.is_empty() && !t.layout.relayout_refused() {
                let mut done = Vec::new();
                let r = mover::relayout(&self.proc, p, &ranges, &relayout_until, &mut done, &mut paged);
                t.layout.laid_out.extend(done.iter().map(|&(start, _)| (p.pid(), start)));
                relaid.add(&r);
                failed.push(("relayout (process_madvise)", r.advise));
            }
            // What relayout did not page out (it was in runs already, or its time ran
            // out) goes to the tier the ordinary way.
            let ranges: Vec<(u64, u64)> = mine(&tp.demote).into_iter().filter(|r| !paged.contains(r)).collect();
            if !ranges.is_empty() {
                let m = mover::demote_ranges(p, &ranges, &until);
                done.demoted += m.advise.bytes;
                failed.push(("process_madvise MADV_PAGEOUT", m.advise));
            }
            let ranges = mine(&fresh);
            if !ranges.is_empty() {
                let m = mover::prefetch_ranges(&self.proc, p, &ranges, &until);
                done.prefetched += m.moved.bytes;
                failed.push(("process_madvise MADV_WILLNEED", m.moved.advise));
                reached.extend(fresh.iter().filter(|r| r.pid == p.pid()).take(m.reached));
            }
            let ranges = mine(&tp.collapse);
            if !ranges.is_empty() {
                let r = p.advise(tierd_sys::madvise::Advice::Collapse, &ranges);
                done.collapsed += (r.bytes / tierd_core::size::HUGE_PAGE) as usize;
                failed.push(("process_madvise MADV_COLLAPSE", r));
            }
        }
        for (op, r) in failed {
            t.count_advise(op, &r);
        }
        for r in &reached {
            t.layout.prefetched.insert((r.pid, r.start), now);
        }
        if let Some(tr) = t.tracker.as_mut() {
            tr.read_back(&reached, ReadBack::Prefetch);
            tr.read_back(&tp.relayout, ReadBack::Relayout);
        }
        report_relayout(t, &mut self.events, &mut self.tier_room_warned, &relaid, now);
        done.relayout_read = relaid.read_bytes;
        // Demoted pages now wait in the swap cache, written and clean: the kernel drops
        // them first and without I/O whenever this tenant's DRAM is wanted. Squeezing
        // them out now (as `tierctl demote` does) would also evict the tracker's
        // sampled hot pages, turning their refaults into tier reads.
        done
    }
}

/// Tallies a pass's relayout of a tenant and says what changed: its memory refused,
/// the tier out of free clusters (once), regions laid out.
fn report_relayout(t: &mut Tenant, events: &mut Events, warned: &mut bool, relaid: &mover::Relaid, now: f64) {
    let name = t.spec.name.clone();
    let was_refused = t.layout.relayout_refused();
    t.layout.relayout_tally.0 += relaid.relaid;
    t.layout.relayout_tally.1 += relaid.refused;
    if t.layout.relayout_refused() && !was_refused {
        let msg = "its working set cannot be laid out in runs on the tier: MADV_COLLAPSE refused its memory \
                   (it opted out of huge pages, or they are off), so its wake-ups read the tier at random-read \
                   speed";
        t.decide(now, msg.to_string());
        events.warn(Some(name.as_str()), msg.to_string());
    }
    if relaid.split > 0 && !*warned {
        *warned = true;
        events.warn(
            Some(name.as_str()),
            format!(
                "the tier has no free 2 MiB clusters of slots left: {} huge pages were split on the way out and \
                 their pages scattered again, so relayout stops until room frees up; a larger tier (--tier-size) \
                 keeps wake-ups sequential",
                relaid.split
            ),
        );
    }
    if relaid.relaid > 0 {
        let msg = format!(
            "laid out {} regions of its working set in runs on the tier (they lay in {} runs; {} read back to do \
             so); {} already were",
            relaid.relaid,
            relaid.runs_before,
            human(relaid.read_bytes),
            relaid.in_runs
        );
        t.decide(now, msg.clone());
        events.decision(Some(name.as_str()), msg);
    }
}

/// What a tenant plan's page moves did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct MovesDone {
    pub demoted: u64,
    pub prefetched: u64,
    /// Read back from the tier to lay regions out.
    pub relayout_read: u64,
    /// Regions rebuilt as huge pages.
    pub collapsed: usize,
}

impl MovesDone {
    /// The moves as the decision log says them; `regions` demoted, `note` after the
    /// prefetch (why it went ahead).
    fn describe(&self, regions: usize, note: &str) -> Vec<String> {
        let mut did = Vec::new();
        if self.prefetched > 0 {
            let note = if note.is_empty() { String::new() } else { format!(" {note}") };
            did.push(format!("prefetched {}{note}", human(self.prefetched)));
        }
        if self.demoted > 0 {
            did.push(format!("demoted {} in {regions} cold regions", human(self.demoted)));
        }
        if self.collapsed > 0 {
            did.push(format!("rebuilt {} regions as huge pages", self.collapsed));
        }
        did
    }
}

/// A plan's moves carried out ahead of its bookkeeping (a cut's demotions before its
/// limit is written on a thread, a neighbour's before a woken tenant's prefetch): what
/// they moved, and how a limit written there went, in seconds (`None`: not written
/// there; `apply` writes it, or holds a falling one while the tier fails).
pub(super) struct Ahead {
    early: MovesDone,
    limit: Option<(Result<(), tierd_sys::cgroup::CgroupError>, f64)>,
}

/// The order tenants' plans are carried out in: quotas that fall most first (the group
/// never needs more than it has), and among the rest those that prefetch last, after
/// the demotions that make their room. `quota_now`: a tenant's quota in force.
pub(super) fn move_order(plan: &Plan, quota_now: impl Fn(&TenantName) -> Option<u64>) -> Vec<&TenantPlan> {
    let mut order: Vec<&TenantPlan> = plan.tenants.iter().collect();
    order.sort_by_key(|p| {
        let rise = p.quota.unwrap_or(u64::MAX) as i128 - quota_now(&p.name).unwrap_or(u64::MAX) as i128;
        (rise, !p.prefetch.is_empty())
    });
    order
}

/// Whether a quota moving from `now` to `planned` is a change worth writing, and
/// whether it falls.
pub(super) fn quota_change(now: Option<u64>, planned: Option<u64>) -> (bool, bool) {
    let changed = match (now, planned) {
        (Some(a), Some(b)) => a.abs_diff(b) > QUOTA_SLACK,
        (a, b) => a != b,
    };
    (changed, changed && planned.is_some_and(|b| now.is_none_or(|a| b < a)))
}

/// The leading `ranges` that fit in `room` bytes, taken off it.
pub(super) fn take_within(ranges: &[Range], room: &mut u64) -> Vec<Range> {
    let mut out = Vec::new();
    for r in ranges {
        if r.len > *room {
            break;
        }
        *room -= r.len;
        out.push(*r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision_log_says_what_moved_and_nothing_when_nothing_did() {
        assert!(MovesDone::default().describe(3, "ahead of its neighbours' cuts").is_empty());
        let done = MovesDone { demoted: 4 << 20, prefetched: 8 << 20, relayout_read: 0, collapsed: 2 };
        assert_eq!(
            done.describe(3, "ahead of its neighbours' cuts"),
            vec![
                "prefetched 8 MiB ahead of its neighbours' cuts",
                "demoted 4 MiB in 3 cold regions",
                "rebuilt 2 regions as huge pages"
            ]
        );
    }

    #[test]
    fn a_prefetch_takes_whole_ranges_while_they_fit() {
        let r = |start| Range { pid: 1, start, len: 2 << 20 };
        let mut room = 5 << 20;
        assert_eq!(take_within(&[r(0), r(2 << 20), r(4 << 20)], &mut room), vec![r(0), r(2 << 20)]);
        assert_eq!(room, 1 << 20);
    }

    #[test]
    fn falling_quotas_go_first_and_prefetches_after_the_demotions_that_make_their_room() {
        let r = Range { pid: 1, start: 0, len: 2 << 20 };
        let tp = |name: &str, quota: Option<u64>, prefetch: bool, demote: bool| {
            let mut tp = TenantPlan::quota_only(name.parse().unwrap(), quota, String::new());
            tp.prefetch = if prefetch { vec![r] } else { Vec::new() };
            tp.demote = if demote { vec![r] } else { Vec::new() };
            tp
        };
        let plan = Plan {
            group_limit: None,
            tenants: vec![
                tp("woken", None, true, false),
                tp("busy", None, false, true),
                tp("cut", Some(64), false, true),
            ],
            notes: Vec::new(),
        };
        let now = |name: &TenantName| (name.as_str() == "cut").then_some(128);
        let names: Vec<&str> = move_order(&plan, now).iter().map(|tp| tp.name.as_str()).collect();
        assert_eq!(names, ["cut", "busy", "woken"]);
    }
}

/// The policy's cuts at a tier the kernel says fails writes, through both of the
/// engine's paths (a pass with a wake-up writes its cuts on a thread of their own).
#[cfg(test)]
mod failing_tier {
    use std::sync::Arc;

    use super::super::fixture::{self, FakeCgroups, Write};
    use super::*;

    use tierd_core::size::MIB;
    const DB: &str = "tierd/tenants/db";
    const TIER_WRITE_FAILED: &str = "3,812,9912345,-;Write-error on swap-device (7:0:20480)\n";

    /// Carries out a plan cutting tenant db from 512 to 256 MiB, beside tenant web,
    /// woken or not, on an engine reading `kernel_log`.
    fn cut_db(kernel_log: &str, web_woke: bool) -> (Arc<FakeCgroups>, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let cg = Arc::new(FakeCgroups::default());
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, kernel_log);
        fixture::add_tenant(&mut e, "db", Some(512 * MIB), 400 * MIB);
        fixture::add_tenant(&mut e, "web", None, 100 * MIB);
        let mut web = TenantPlan::quota_only("web".parse().unwrap(), None, "woke up".into());
        web.woke = web_woke;
        let db = TenantPlan::quota_only("db".parse().unwrap(), Some(256 * MIB), "resting".into());
        e.enforce(&Plan { group_limit: None, tenants: vec![db, web], notes: Vec::new() });
        (cg, e)
    }

    fn quota(e: &Engine, name: &str) -> Option<u64> {
        e.tenants[&name.parse::<TenantName>().unwrap()].quota
    }

    #[test]
    fn a_cut_is_written_while_the_tier_is_well() {
        for woke in [false, true] {
            let (cg, e) = cut_db("", woke);
            assert_eq!(cg.limits_of(DB), [Some(256 * MIB)], "woke {woke}");
            assert_eq!(quota(&e, "db"), Some(256 * MIB));
        }
    }

    #[test]
    fn a_cut_is_not_written_once_the_kernel_says_the_tier_fails_writes() {
        for woke in [false, true] {
            let (cg, e) = cut_db(TIER_WRITE_FAILED, woke);
            assert!(
                cg.limits_of(DB).is_empty(),
                "woke {woke}: a limit write would wait on reclaim retrying the writes"
            );
            assert_eq!(quota(&e, "db"), Some(512 * MIB), "woke {woke}");
            let said = fixture::said(&e);
            assert!(
                said.iter()
                    .any(|m| m
                        == "db: quota stays 512 MiB: the tier device is failing, so the cut to 256 MiB is not made"),
                "woke {woke}: {said:?}"
            );
            let writes = cg.writes.lock().unwrap();
            assert!(writes.contains(&Write::OffSwap(DB.into())), "woke {woke}: every tenant is kept off the tier");
        }
    }
}
