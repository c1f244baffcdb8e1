//! `tierd`: DRAM goes where it buys the most work, from each tenant's fault curve.
//!
//! A short pipeline, one function a stage:
//! 1. **state**: each tenant is working or resting ([`crate::activity`]: its CPU and
//!    stall time against its usual);
//! 2. **claims**: a working tenant's value for q bytes is its shares × its demand × the
//!    share of its work it gets done ([`Curve`]); a resting tenant's is what keeping its
//!    working set saves it at its next wake-up, by its chance of waking within the
//!    horizon;
//! 3. **allocation** on the claims' concave envelopes ([`allocate`]): whole hot sets
//!    where they pay, floors (reserves, pinned memory) first, limits as caps;
//! 4. **mode**: per-tenant quotas only when DRAM is short and they beat what one shared
//!    limit (plain swap) would do by [`Knobs::quota_margin`] — otherwise the kernel's LRU
//!    under one limit decides, and tierd only moves regions; and a quota moves only when
//!    the work it gains over [`Knobs::horizon_secs`] beats reading back what it sends out;
//! 5. **moves** ([`moves`]): prefetch for working tenants, whole-region demotion ahead of
//!    cuts and of the kernel's reclaim, relayout of resting working sets while the tier
//!    is idle, huge-page rebuilds.

use crate::plan::{Note, Plan, SharedWhy, TenantPlan};
use crate::policy::allocate::{Claim, allocate};
use crate::policy::curve::{Curve, fault_secs};
use crate::policy::moves::Prefetch;
use crate::policy::{Knobs, MIN_QUOTA, moves};
use crate::size::human;
use crate::snapshot::{Range, Region, Snapshot, TenantView};

const PAGE: f64 = crate::size::PAGE as f64;
/// Reads a fault on a region laid out in runs saves by reading its neighbours along.
const RUN_READS_SAVED: f64 = 8.0;
/// Room a resting tenant needs above what it holds to lay its working set out.
const RELAYOUT_ROOM: u64 = 32 << 20;
/// Tier reads a second that mean a working tenant's hot pages are out there.
const FAULTING: f64 = 50.0;
/// Huge-page rebuilds per tenant, bytes per second of interval.
const REBUILD_RATE: u64 = 64 << 20;
/// The least a working tenant keeps.
const WORKING_FLOOR: u64 = 4 << 20;
/// A tenant stalled on memory this share of its time is thrashing.
const THRASHING: f64 = 0.5;

/// The most a tenant can use: its size and what rides on its pages (swap cache in
/// flight, the huge page a rebuild copies into, page tables).
pub fn ceiling(size: u64) -> u64 {
    size + size / 16 + (16 << 20)
}

/// What the pipeline knows of one tenant.
struct State<'a> {
    view: &'a TenantView,
    working: bool,
    curve: Curve,
    floor: u64,
    cap: u64,
    /// Shares × demand: weighted cores of work a second it would do unhindered.
    weight: f64,
    /// Resting: bytes of its working set it holds, and what keeping a byte of it is
    /// worth (weighted work a second).
    kept: u64,
    keep_value: f64,
    /// Working, it touches more every interval than it holds: then what it holds is in
    /// use, however idle its regions last looked (their samples stayed out while it
    /// rested; a sweeper that just woke touches what it only filled as often as the rest).
    touches_more_than_held: bool,
}

impl State<'_> {
    /// Whether it woke from a rest within the last `secs`.
    fn woke_within(&self, secs: f64) -> bool {
        self.view.since_rest_secs.is_some_and(|x| x <= secs)
    }

    /// Working, faulting, and stalled on the tier half its time.
    fn thrashing(&self) -> bool {
        self.working && self.view.tier_faults_per_sec >= FAULTING && self.view.stall_share >= THRASHING
    }
}

/// How DRAM is divided this pass.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// No per-tenant quotas: one limit over all, the kernel's LRU decides.
    Shared { short: bool },
    /// Per-tenant quotas from the allocation.
    Quotas,
}

fn state<'a>(t: &'a TenantView, snap: &Snapshot, k: &Knobs, fault: f64) -> State<'a> {
    let window = snap.window_secs.max(snap.interval_secs);
    let working = t.at_rest_secs.is_none();
    let curve = Curve::of(t, window, snap.interval_secs, fault, k);
    let size = t.size().max(MIN_QUOTA);
    // What lets a tenant go on at all (its report thread, its stack); beyond that a
    // tenant that loses the allocation gets nothing it could not use: a part of a hot
    // set it lacks is worth nothing, and the DRAM is another's whole hot set.
    let least = if working { WORKING_FLOOR } else { k.rest_floor };
    let floor = t.spec.guaranteed().max(t.pinned).max(least.min(size));
    let cap = t.spec.limit.unwrap_or(snap.dram_budget).min(ceiling(size)).max(floor);
    let weight = t.spec.shares as f64 / 100.0 * curve.cores;
    let kept = if working { 0 } else { moves::working_set_held(t, window) };
    // Keeping a byte of its working set saves reading it back when it wakes: a read a
    // page if scattered, a read per run of pages if laid out.
    let runs = moves::laid_out_share(t, window);
    let read_back = fault / PAGE * (runs / RUN_READS_SAVED + (1.0 - runs));
    let wake = t.mean_rest_secs.map_or(0.5, |m| (k.horizon_secs / m.max(1.0)).min(1.0));
    let keep_value = weight * wake * read_back / k.horizon_secs;
    let touches_more_than_held = working && curve.hot > t.dram;
    State { view: t, working, curve, floor, cap, weight, kept, keep_value, touches_more_than_held }
}

/// The value curve of a tenant's claim. Working: the work its DRAM buys it, less, below
/// what it holds now, the reads it would take to get back what a cut sends out (spread
/// over the horizon), so a quota moves only where the move pays. Resting: its keep value.
fn claim(s: &State, k: &Knobs, fault: f64) -> Claim {
    let now = s.view.quota.unwrap_or(s.view.dram).min(s.view.dram.max(s.floor));
    let c = &s.curve;
    // A quota holds pages only past its headroom, as the curve counts it. A resting
    // tenant's cut costs only the read-back at its wake, which its keep value prices.
    let move_cost = |q: u64| {
        if !s.working {
            return 0.0;
        }
        let lost = c.kept(now).min(c.touched()).saturating_sub(c.kept(q)) as f64 / PAGE;
        lost * fault * s.view.spec.shares as f64 / 100.0 / k.horizon_secs
    };
    let mut qs: Vec<u64> = if s.working {
        let (hot, touched) = (c.hot, c.touched());
        let mut qs: Vec<u64> = (0..=8).map(|i| c.quota_for(hot * i / 8)).collect();
        qs.extend((1..=4).map(|i| c.quota_for(hot + (touched - hot) * i / 4)));
        qs
    } else {
        vec![0, c.quota_for(s.kept)]
    };
    qs.push(now);
    qs.sort_unstable();
    qs.dedup();
    let value = |q: u64| {
        let work = if s.working { s.weight * c.useful(q, fault) } else { c.kept(q).min(s.kept) as f64 * s.keep_value };
        work - move_cost(q)
    };
    Claim { floor: s.floor, cap: s.cap, points: qs.into_iter().map(|q| (q, value(q))).collect() }
}

/// Weighted work a second the working tenants get done with `parts`.
fn work(states: &[State], parts: &[u64], fault: f64) -> f64 {
    states.iter().zip(parts).filter(|(s, _)| s.working).map(|(s, &q)| s.weight * s.curve.useful(q, fault)).sum()
}

/// What one shared limit gives working tenants when DRAM is short: each its share of the
/// budget by what it touches (the LRU keeps what was touched lately; short of room,
/// tenants alike thrash alike).
fn shared_parts(states: &[State], budget: u64) -> Vec<u64> {
    let touched: u64 = states.iter().filter(|s| s.working).map(|s| s.curve.touched()).sum::<u64>().max(1);
    states
        .iter()
        .map(|s| if s.working { (s.curve.touched() as u128 * budget as u128 / touched as u128) as u64 } else { 0 })
        .map(|q| q.min(budget))
        .collect()
}

/// Weighted work a second the working tenants measurably get done now: each its share
/// of time not stalled on memory.
fn measured_work(states: &[State]) -> f64 {
    states.iter().filter(|s| s.working).map(|s| s.weight * (1.0 - s.view.stall_share)).sum()
}

/// Spreads what the allocation left: first back to what each holds (nothing is cut for
/// nothing), then to every tenant up to its cap by weight of what it touches.
fn spread(states: &[State], parts: &mut [u64], mut left: u64) {
    for (s, p) in states.iter().zip(parts.iter_mut()) {
        let give = s.view.dram.min(s.cap).saturating_sub(*p).min(left);
        *p += give;
        left -= give;
    }
    let room: Vec<u64> = states.iter().zip(parts.iter()).map(|(s, p)| s.cap.saturating_sub(*p)).collect();
    let total: u64 = room.iter().sum();
    if total == 0 {
        return;
    }
    for (p, r) in parts.iter_mut().zip(&room) {
        *p += (*r as u128 * left.min(total) as u128 / total as u128) as u64;
    }
}

pub fn plan(snap: &Snapshot, k: &Knobs) -> Plan {
    let budget = snap.dram_budget;
    let fault = fault_secs(&snap.tier, k);
    let states: Vec<State> = snap.tenants.iter().map(|t| state(t, snap, k, fault)).collect();
    let claims: Vec<Claim> = states.iter().map(|s| claim(s, k, fault)).collect();
    let (mut parts, left) = allocate(budget, &claims);
    spread(&states, &mut parts, left);

    // Short when the working tenants' steep hot sets do not fit beside what the others
    // hold: per-tenant quotas are for that, where one shared limit lets tenants alike
    // thrash alike. Skewed hot sets and tails reused now and then the kernel's LRU keeps
    // about as well as quotas would, and their estimates move with what they hold.
    let needs: u64 = states
        .iter()
        .map(|s| match (s.working, s.curve.steep || s.view.stall_share >= THRASHING) {
            (true, true) => s.curve.quota_for(s.curve.hot),
            (true, false) => s.curve.hot.min(s.view.dram),
            (false, _) => s.floor,
        })
        .sum::<u64>();
    let short = needs > budget;
    let guarded =
        states.iter().any(|s| s.view.spec.guaranteed() > 0 || s.view.pinned > 0 || s.view.spec.limit.is_some());
    let shared_work = work(&states, &shared_parts(&states, budget), fault);
    let model_work = work(&states, &parts, fault);
    // Under the shared limit, what the tenants get is measured, not predicted: quotas
    // must beat that. The mode in force stays unless the other beats it by the margin
    // (estimates that wobble around the line would flip it every pass), and quotas that
    // fell short of their prediction send the host back (see `Knobs::shortfall`).
    let in_quotas = in_quotas(snap);
    let shared_work = if in_quotas { shared_work } else { shared_work.max(measured_work(&states)) };
    let margin = if in_quotas { 1.0 - k.quota_margin } else { 1.0 + k.quota_margin };
    let fell_short = snap.tenants.iter().any(|t| t.short_secs.is_some_and(|s| s >= 2.0 * snap.window_secs));
    // Under the shared limit quotas must also answer a tenant that measurably thrashes
    // (its estimates are no evidence: under pressure a skewed tenant keeps its head and
    // looks steep, and its tail faults count as hot).
    let thrashing = in_quotas || states.iter().any(|s| s.working && s.view.stall_share >= THRASHING);
    let mode = if guarded || (short && thrashing && !fell_short && model_work > shared_work * margin) {
        Mode::Quotas
    } else {
        Mode::Shared { short }
    };

    let mut notes = Vec::new();
    match mode {
        Mode::Quotas => notes.push(Note::Quotas { needs, budget, model_work, shared_work }),
        // Quotas that fell short are the reason the shared limit stands, short or not
        // (guarded hosts keep quotas, so nothing fell back there).
        Mode::Shared { .. } if fell_short => notes.push(Note::FellShort),
        Mode::Shared { short: true } => {
            let why = if thrashing { SharedWhy::Margin(margin) } else { SharedWhy::NoneThrashing };
            notes.push(Note::SharedWhileShort { needs, budget, why, model_work, shared_work })
        }
        Mode::Shared { short: false } => {}
    }
    let throttled = tier_throttled(snap);
    if let Some(r) = &throttled {
        notes.push(r.clone());
    }
    let mut quotas = quotas_in(mode, &states, &parts);
    let window = snap.window_secs.max(snap.interval_secs);
    let per_tenant = (k.demote_rate as f64 * snap.interval_secs) as u64;
    let thrash_idle = (2.0 * snap.interval_secs).min(window);
    // Computed once: the read room and the room demotions below draw on the same list.
    let cold = cold_regions(&states, window, thrash_idle);
    let offered = match mode {
        Mode::Shared { .. } if throttled.is_none() => Some(shared_read_room(snap, &states, &cold, per_tenant)),
        _ => None,
    };
    let mut read_room = offered.clone();
    let prefetches = prefetches_of(&states, &quotas, &mut read_room, snap, k);
    // What a thrashing tenant reads back is made room for by demoting what it was
    // counted against: reclaim at the shared limit would take from every tenant by its
    // size, hot sets included.
    let drew = offered.zip(read_room).is_some_and(|(o, r)| r.cold < o.cold);
    let min_idle = if drew { thrash_idle } else { window };
    // Nor does a reader that touches more than it holds make room of its own memory:
    // what it holds is as hot as what it reads ([`State::touches_more_than_held`]).
    let reading: Vec<bool> = prefetches.iter().map(|p| p.tier_bytes > 0).collect();
    let cold: Vec<_> = cold.into_iter().filter(|&(i, _)| !reading[i] || !states[i].touches_more_than_held).collect();
    let caps = match mode {
        Mode::Shared { .. } => cache_caps(snap, &states, &prefetches),
        Mode::Quotas => vec![None; states.len()],
    };
    for (q, cap) in quotas.iter_mut().zip(&caps) {
        *q = q.or(*cap);
    }
    let incoming = prefetches.iter().map(|p| p.tier_bytes).sum();
    let free = free_room(snap, k, mode, throttled.is_some(), incoming, &quotas);
    let room = room_demotions(&cold, states.len(), free, min_idle, per_tenant);
    let room = room.into_iter().map(|rs| rs.into_iter().map(|r| r.range).collect());
    let tenants = states
        .iter()
        .zip(parts.iter().zip(&caps))
        .zip(quotas.into_iter().zip(prefetches).zip(room))
        .map(|((s, (&part, cap)), ((quota, prefetch), room))| {
            let mut tp = tenant_plan(s, quota, prefetch, snap, k, room);
            if mode == Mode::Quotas && s.working {
                tp.predicted_useful = Some(s.curve.useful(part, fault));
            }
            if cap.is_some() {
                tp.reason += &format!(
                    "; {} of its page cache was read and not reused since: it fills only DRAM the others do not hold",
                    human(s.view.inactive_file)
                );
            }
            tp
        })
        .collect();
    Plan { group_limit: Some(budget), tenants, notes }
}

/// Whether per-tenant quotas were in force at the last pass: as the snapshot says, or
/// before any pass, whether every tenant has a quota.
fn in_quotas(snap: &Snapshot) -> bool {
    snap.quotas_in_force.unwrap_or_else(|| !snap.tenants.is_empty() && snap.tenants.iter().all(|t| t.quota.is_some()))
}

/// Each tenant's quota in `mode`: its part within its floor and cap, or none under one
/// shared limit.
fn quotas_in(mode: Mode, states: &[State], parts: &[u64]) -> Vec<Option<u64>> {
    let quota = |s: &State, part: u64| match mode {
        Mode::Quotas => Some(part.max(s.floor).min(s.cap)),
        Mode::Shared { .. } => None,
    };
    states.iter().zip(parts).map(|(s, &part)| quota(s, part)).collect()
}

/// Under one shared limit, the caps of the tenants holding page cache they read and
/// have not reused since (the kernel's inactive list), beyond a limit's margin of it
/// (once capped, a quarter of that, or none while it holds well below its cap):
/// together they fill only the DRAM the other tenants neither hold nor read back this
/// pass, less that margin for the others' growth, and each keeps at least what it
/// reuses and twice the margin. The kernel's reclaim at the group's limit takes
/// from each cgroup by its size, not the least recently used pages first: a multi-gen
/// LRU gave a neighbour's hot set to a streamed file's cache
/// (bench/results/page-cache-neighbour.md). Capped, the cache yields in its own cgroup;
/// among caches the kernel's LRU decides. The caps shield only tenants holding hardly
/// any page cache (less than the margin): where every tenant holds more, reclaim takes
/// page cache from each, and caps would only move it between them (postgres/2x lost
/// 4–5% so, its servers re-reading their tables through the cache).
fn cache_caps(snap: &Snapshot, states: &[State], prefetches: &[Prefetch]) -> Vec<Option<u64>> {
    let margin = moves::limit_margin(snap.dram_budget);
    // A quota under the shared limit is a cap; one left from quotas in force is not.
    let capped = !in_quotas(snap);
    let caching: Vec<bool> = states
        .iter()
        .map(|s| match s.view.quota {
            // A cache just dropped (a block device's, at its last close) refills within
            // a pass, and a cap set then would start from what its neighbours lost meanwhile.
            Some(q) => s.view.inactive_file >= margin / 4 || (capped && s.view.dram + margin <= q),
            None => s.view.inactive_file >= margin,
        })
        .collect();
    let shielded = states.iter().zip(&caching).any(|(s, &c)| !c && s.view.page_cache < margin);
    if !shielded {
        return vec![None; states.len()];
    }
    // The others' swap cache counts: on 6.12 a page read back keeps its slot and stays
    // cached while in use, so a thrashing neighbour's hot pages are nearly all in it.
    let others: u64 = states
        .iter()
        .zip(prefetches)
        .zip(&caching)
        .filter(|(_, c)| !**c)
        .map(|((s, p), _)| s.view.dram + p.tier_bytes)
        .sum();
    let left = snap.dram_budget.saturating_sub(others + margin);
    states
        .iter()
        .zip(&caching)
        .map(|(s, &c)| {
            let reused = s.view.dram.saturating_sub(s.view.inactive_file) + 2 * margin;
            c.then(|| left.max(reused).max(s.floor))
        })
        .collect()
}

/// Bytes tierd demotes ahead of the kernel's reclaim under one shared limit this pass
/// (0 with quotas): what keeps [`Knobs::free_target`] of the budget free once this
/// pass's prefetch (`incoming` bytes) is read back, with each tenant held to its
/// `quotas` (under the shared limit, the page-cache caps), and while the tier is `throttled`
/// only the room that prefetch takes past the limit's margin: the kernel would write
/// that out anyway, a page at a time inside the prefetch's reads (a woken 1 GiB came
/// back at 122 MiB/s so); written ahead, it goes out in whole regions.
fn free_room(snap: &Snapshot, k: &Knobs, mode: Mode, throttled: bool, incoming: u64, quotas: &[Option<u64>]) -> u64 {
    if mode == Mode::Quotas {
        return 0;
    }
    // Swap cache nobody maps is room already: counted as held, each pass would write
    // out more while the last pass's pages sat cached (an idle host wrote 1.6 MiB/s so).
    let held: u64 = snap
        .tenants
        .iter()
        .zip(quotas)
        .map(|(t, q)| t.dram.saturating_sub(t.swap_cached).min(q.unwrap_or(u64::MAX)))
        .sum();
    let after = held + incoming;
    let forced = if incoming > 0 { after.saturating_sub(moves::prefetch_room(Some(snap.dram_budget), 0)) } else { 0 };
    if throttled {
        return forced;
    }
    let want = snap.dram_budget - (snap.dram_budget as f64 * k.free_target) as u64;
    after.saturating_sub(want).max(forced)
}

/// Per tenant, the regions that make `free` bytes of room ahead of the kernel's
/// reclaim: only what the LRU would give up first anyway (of [`cold_regions`]' list
/// for `tenants`, those idle `min_idle`), at most `per_tenant` bytes of each tenant's.
fn room_demotions<'a>(
    cold: &[(usize, &'a Region)],
    tenants: usize,
    free: u64,
    min_idle: f64,
    per_tenant: u64,
) -> Vec<Vec<&'a Region>> {
    let mut out = vec![Vec::new(); tenants];
    let mut taken = vec![0u64; tenants];
    let mut total = 0;
    for &(i, r) in cold.iter().filter(|(_, r)| r.idle_secs.is_some_and(|x| x >= min_idle)) {
        if total + r.dram_bytes > free {
            break;
        }
        if taken[i] + r.dram_bytes <= per_tenant {
            taken[i] += r.dram_bytes;
            total += r.dram_bytes;
            out[i].push(r);
        }
    }
    out
}

/// What tenants without a quota of their own may read back this pass under one shared
/// limit: a read-back beyond it makes the kernel's reclaim take pages someone touches.
#[derive(Debug, Clone)]
struct ReadRoom {
    /// Room for any tenant: [`shared_read_room`].
    cold: u64,
    /// What resting tenants hold: room too for a working set read back whole, which
    /// will all be touched while they touch none of theirs (the kernel's LRU's choice).
    resting: u64,
    /// Per tenant, the part of `cold` that is its own memory, where that is no room for
    /// its own read-back ([`State::touches_more_than_held`]).
    own: Vec<u64>,
}

impl ReadRoom {
    fn for_tenant(&self, i: usize, whole: bool) -> u64 {
        let cold = self.cold.saturating_sub(self.own[i]);
        if whole { cold + self.resting } else { cold }
    }

    /// Draws `bytes`, from the cold room first.
    fn take(&mut self, bytes: u64) {
        let from_resting = bytes.saturating_sub(self.cold);
        self.cold = self.cold.saturating_sub(bytes);
        self.resting = self.resting.saturating_sub(from_resting);
    }
}

/// DRAM held by resting tenants beyond what `cold` counts already, pages cached on the
/// tier aside.
fn resting_held(states: &[State], cold: &[(usize, &Region)]) -> u64 {
    let held: u64 = states.iter().filter(|s| !s.working).map(|s| s.view.dram.saturating_sub(s.view.swap_cached)).sum();
    let counted: u64 = cold.iter().filter(|(i, _)| !states[*i].working).map(|(_, r)| r.dram_bytes).sum();
    held.saturating_sub(counted)
}

/// Under one shared limit, what tenants may read back this pass ([`ReadRoom`]). Its
/// cold part: DRAM under the budget's margin that nobody holds, and the regions of
/// `cold` (idle two intervals: a thrashing hot set touches its pages every interval),
/// which [`room_demotions`] then demotes. A read-back beyond that would make the
/// kernel's reclaim take pages someone touches as often, a neighbour's hot set among them.
fn shared_read_room(snap: &Snapshot, states: &[State], cold: &[(usize, &Region)], per_tenant: u64) -> ReadRoom {
    let held = snap.tenants.iter().map(|t| t.dram.saturating_sub(t.swap_cached)).sum();
    let idle = room_demotions(cold, states.len(), u64::MAX, 0.0, per_tenant);
    let own = idle
        .iter()
        .zip(states)
        .map(|(rs, s)| if s.touches_more_than_held { rs.iter().map(|r| r.dram_bytes).sum() } else { 0 })
        .collect();
    let idle: u64 = idle.iter().flatten().map(|r| r.dram_bytes).sum();
    ReadRoom {
        cold: moves::prefetch_room(Some(snap.dram_budget), held) + idle,
        resting: resting_held(states, cold),
        own,
    }
}

/// Regions the kernel's LRU would give up first, the host's coldest first: seen idle a
/// window (a sample of it stayed out) and not part of a resting or just-woken tenant's
/// working set (a region never seen is no evidence of cold: a resting tenant's
/// unsampled hot pages would go first and fault the moment it wakes).
fn cold_regions<'a>(states: &[State<'a>], window: f64, min_idle: f64) -> Vec<(usize, &'a Region)> {
    let mut cold: Vec<(usize, &Region)> = Vec::new();
    for (i, s) in states.iter().enumerate() {
        // Resting or just woken, its working set is what it touches next, however long
        // it lay idle.
        let in_ws = (!s.working || s.woke_within(window)).then(|| moves::in_working_set(s.view, window));
        // A thrashing tenant's own memory idle less than a window is no room for it or
        // another thrashing one: it reuses it as soon (a sweep would demote what it just
        // swept to read back what it sweeps next).
        let idle = if s.thrashing() { window } else { min_idle };
        let candidate = |r: &&Region| moves::seen_idle(r, idle, 1) && !in_ws.as_ref().is_some_and(|kept| kept(r));
        cold.extend(s.view.regions.iter().filter(candidate).map(|r| (i, r)));
    }
    cold.sort_by(|a, b| b.1.idle_secs.unwrap_or(0.0).total_cmp(&a.1.idle_secs.unwrap_or(0.0)));
    cold
}

/// Why demotion waits: the tier is slow (red average read latency: the policy weighs
/// what faults cost on average; the tail colours health) or saturated.
fn tier_throttled(snap: &Snapshot) -> Option<Note> {
    if let Some(us) = snap.tier.read_latency_us
        && average_latency(us) == crate::health::Colour::Red
    {
        return Some(Note::SlowTier { read_us: us });
    }
    (snap.tier.utilization >= 0.9).then_some(Note::BusyTier { utilization: snap.tier.utilization })
}

/// Whether relayout may read the tier now: it is not slow for others and not busy with
/// their I/O (the read latency is the others' already: tierd's own reads are set apart).
fn relayout_may_read(snap: &Snapshot, k: &Knobs) -> bool {
    let slow = matches!(tier_throttled(snap), Some(Note::SlowTier { .. }));
    !slow && snap.tier.others_utilization < k.relayout_below_utilization
}

/// Why a tenant gets its quota: working or at rest, and what it touches or keeps.
fn reason(s: &State, quota: Option<u64>, window: f64) -> String {
    let t = s.view;
    let mut why = if s.working {
        let woke = match t.since_rest_secs.filter(|x| *x <= window) {
            Some(x) => format!("woke {x:.0} s ago, "),
            None => String::new(),
        };
        format!(
            "{woke}working: touches {} every interval and {} within {:.0} s",
            human(s.curve.hot),
            human(s.curve.touched()),
            window
        )
    } else {
        format!("at rest for {:.0} s: holds {} of its working set", t.at_rest_secs.unwrap_or(0.0), human(s.kept))
    };
    match quota {
        Some(q) => why += &format!("; quota {}", human(q)),
        None => why += "; no quota of its own: one shared limit",
    }
    why += &super::guarantee_note(&t.spec);
    why
}

/// Each tenant's read-back this pass ([`prefetch_of`]); the tenants faulting most take
/// the shared limit's `read_room` first.
fn prefetches_of(
    states: &[State],
    quotas: &[Option<u64>],
    read_room: &mut Option<ReadRoom>,
    snap: &Snapshot,
    k: &Knobs,
) -> Vec<Prefetch> {
    let mut order: Vec<usize> = (0..states.len()).collect();
    order.sort_by(|&a, &b| states[b].view.tier_faults_per_sec.total_cmp(&states[a].view.tier_faults_per_sec));
    let mut out = vec![Prefetch::default(); states.len()];
    for i in order {
        out[i] = prefetch_of(i, &states[i], quotas[i], read_room, snap, k);
    }
    out
}

/// What a tenant under `quota` reads back this pass: a working tenant whose working
/// set is out on the tier, within its room. Whole when it just woke, or when it is
/// steep and faulting (every page out there will be touched). Otherwise, thrashing
/// under one shared limit (a hot set thrashing slowly returns too few samples to read
/// steep), only into the cold part of `read_room` ([`ReadRoom`]): what it touched
/// within the window ranks above memory idle a window, but not above a neighbour's hot
/// set. A whole read-back too stays within `read_room`, which exists only at the shared limit.
fn prefetch_of(
    i: usize,
    s: &State,
    quota: Option<u64>,
    read_room: &mut Option<ReadRoom>,
    snap: &Snapshot,
    k: &Knobs,
) -> Prefetch {
    let t = s.view;
    let window = snap.window_secs.max(snap.interval_secs);
    let faulting = t.tier_faults_per_sec >= FAULTING;
    let whole = s.woke_within(window) || (s.curve.steep && faulting);
    // There is a read room only at the shared limit, whose reclaim takes what anyone
    // reads back from someone: a sweeper that woke would push out its neighbours' hot
    // sets (noisy-neighbour).
    let into_room = read_room.as_mut().filter(|_| whole || s.thrashing());
    if !s.working || !(whole || into_room.is_some()) {
        return Prefetch::default();
    }
    // A quota is filled to its margin at most ([`moves::prefetch_room`]), and what it
    // touches to what of that it lacks: DRAM it holds beyond its working set (pages
    // left from a fill or a sweep) is the kernel's to reclaim, not a reason to wait.
    let want = s.curve.quota_for(s.curve.touched());
    let room = moves::prefetch_room(quota, t.dram)
        .min(want.saturating_sub(moves::working_set_held(t, window)))
        .min((k.prefetch_rate as f64 * snap.interval_secs) as u64)
        .min(into_room.as_deref().map_or(u64::MAX, |r| r.for_tenant(i, whole)));
    // Scattered regions only where a read is quick (a green tier: hundreds of
    // thousands of reads a second to spare); on a slow device they queue ahead of
    // the demand faults of everyone.
    let spare_reads = snap.tier.read_latency_us.is_none_or(|us| average_latency(us) == crate::health::Colour::Green);
    let p = moves::prefetch(t, window, room, spare_reads);
    if let Some(left) = into_room {
        left.take(p.tier_bytes);
    }
    p
}

fn average_latency(us: f64) -> crate::health::Colour {
    crate::health::tier_read_latency(crate::health::TierReadLatency::Average(us))
}

/// One tenant's plan: its quota, its `prefetch` ([`prefetch_of`]) and moves; `room` is
/// its share of the demotions ahead of the kernel's reclaim ([`room_demotions`]).
fn tenant_plan(
    s: &State,
    quota: Option<u64>,
    prefetch: Prefetch,
    snap: &Snapshot,
    k: &Knobs,
    room: Vec<Range>,
) -> TenantPlan {
    let t = s.view;
    let window = snap.window_secs.max(snap.interval_secs);
    let interval = snap.interval_secs;
    let mut tp = TenantPlan::quota_only(t.spec.name.clone(), quota, reason(s, quota, window));
    tp.woke = s.woke_within(interval) && t.at_rest_secs.is_none();
    let limit = quota.unwrap_or(u64::MAX);
    tp.prefetch = prefetch.ranges;
    if !tp.prefetch.is_empty() {
        tp.reason += &format!("; prefetching {} regions", tp.prefetch.len());
    }
    let rate = (k.demote_rate as f64 * interval) as u64;
    // Demotion: whole regions ahead of a cut (coldest first), and under one shared limit
    // ahead of the kernel's own reclaim, so what goes out lies in runs. Page cache not
    // reused since it was read is what the kernel's reclaim takes first: that part of a
    // cut needs no demotion.
    let cut = t.dram.saturating_sub(t.inactive_file).saturating_sub(limit);
    tp.demote = if cut > 0 {
        let evidence = if s.working { 2 } else { 0 };
        moves::coldest(&t.regions, 0.0, evidence, cut.min(rate))
    } else {
        room
    };
    if !tp.demote.is_empty() {
        tp.reason += &format!("; demoting {} regions whole", tp.demote.len());
    }
    // Relayout: a resting tenant's working set in runs, while the tier is idle.
    if let Some(rest) = t.at_rest_secs {
        let idle_tier = relayout_may_read(snap, k);
        let room = limit >= t.dram + RELAYOUT_ROOM;
        tp.relayout = moves::relayout(t, window, &tp.demote, rate, idle_tier && room && rest >= interval);
        if !tp.relayout.is_empty() {
            tp.reason += &format!("; laying {} regions of its working set out in runs", tp.relayout.len());
        }
    }
    let mut budget = (REBUILD_RATE as f64 * interval) as u64;
    if t.tier_faults_per_sec >= FAULTING {
        budget = budget.min(limit.saturating_sub(t.dram));
    }
    tp.collapse = moves::rebuild(&t.regions, window, budget);
    tp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;
    use crate::snapshot::{Range, Region, TierView};

    const K: Knobs = Knobs::DEFAULT;

    /// A working tenant of `size` that touches `hot` every interval, all of its samples
    /// back (`returned` 1: a uniform hot set), holding `dram`, stalled `stall` of its time.
    fn working(name: &str, size: u64, hot: u64, dram: u64, stall: f64) -> TenantView {
        let mut t = tenant(name, size);
        t.activeness = Some(uniform(hot));
        t.dram = dram;
        t.tier = size - dram;
        t.demand_cores = 0.4;
        t.stall_share = stall;
        t
    }

    fn snap_of(budget: u64, tenants: Vec<TenantView>) -> Snapshot {
        let mut s = snap(budget, tenants);
        s.tier = TierView { read_latency_us: Some(90.0), ..TierView::default() };
        s
    }

    fn quotas(p: &Plan) -> Vec<Option<u64>> {
        p.tenants.iter().map(|t| t.quota).collect()
    }

    #[test]
    fn hot_sets_that_fit_share_one_limit() {
        let p = plan(
            &snap_of(
                GIB,
                vec![
                    working("a", 512 * MIB, 128 * MIB, 300 * MIB, 0.0),
                    working("b", 512 * MIB, 256 * MIB, 400 * MIB, 0.0),
                ],
            ),
            &K,
        );
        assert_eq!(p.group_limit, Some(GIB));
        assert_eq!(quotas(&p), vec![None, None]);
        assert!(p.tenants[0].reason.contains("one shared limit"), "{}", p.tenants[0].reason);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    /// A tenant whose DRAM is page cache it reads through once (a file streamed over and
    /// over), holding `dram` of which `inactive` sits on the kernel's inactive list.
    fn streamer(dram: u64, inactive: u64) -> TenantView {
        let mut t = working("reader", 16 * MIB, MIB, dram, 0.0);
        (t.footprint, t.tier, t.inactive_file, t.page_cache) = (MIB, 0, inactive, dram - MIB);
        t
    }

    #[test]
    fn a_streamed_files_cache_fills_only_the_dram_its_neighbours_do_not_hold() {
        // The 6.12 guest's case: a 32 MiB hot set left with 7 MiB beside 89 MiB of cache
        // under 96 MiB. The cache yields what the neighbour will fault back, less a
        // margin, and the neighbour stays under the shared limit.
        let hot = working("hot", 64 * MIB, 32 * MIB, 7 * MIB, 0.9);
        let p = plan(&snap_of(96 * MIB, vec![hot.clone(), streamer(89 * MIB, 85 * MIB)]), &K);
        let margin = moves::limit_margin(96 * MIB);
        let (h, r) = (&p.tenants[0], &p.tenants[1]);
        assert_eq!(h.quota, None, "{}", h.reason);
        let cap = r.quota.expect("the cache is capped");
        let prefetch = h.prefetch.iter().map(|x| x.len).sum::<u64>();
        assert_eq!(cap, 96 * MIB - 7 * MIB - prefetch - margin, "{}", r.reason);
        assert!(r.reason.contains("85 MiB of its page cache was read and not reused"), "{}", r.reason);
        // With the neighbour holding nearly all, the cache keeps what it reuses and twice
        // the margin to read through.
        let mut full = hot.clone();
        full.dram = 70 * MIB;
        let p = plan(&snap_of(96 * MIB, vec![full, streamer(26 * MIB, 20 * MIB)]), &K);
        assert_eq!(p.tenants[1].quota, Some(6 * MIB + 2 * margin));
        // Cache below the margin is no streamer's: one shared limit as before; once
        // capped, a quarter of it keeps the cap.
        let p = plan(&snap_of(96 * MIB, vec![hot.clone(), streamer(20 * MIB, margin - 1)]), &K);
        assert_eq!(quotas(&p), vec![None, None]);
        // A cut the cache covers demotes none of the tenant's own memory.
        let mut cold = streamer(89 * MIB, 85 * MIB);
        cold.regions = (0..2).map(|i| Region { cold_samples: 4, ..region(i, 300.0, 2 * MIB, 0, false) }).collect();
        let p = plan(&snap_of(96 * MIB, vec![hot.clone(), cold]), &K);
        assert!(
            p.tenants[1].quota.is_some_and(|q| q < 89 * MIB) && p.tenants[1].demote.is_empty(),
            "{}",
            p.tenants[1].reason
        );
        let mut capped = streamer(20 * MIB, margin / 4);
        capped.quota = Some(70 * MIB);
        let p = plan(&snap_of(96 * MIB, vec![hot.clone(), capped]), &K);
        assert_eq!(p.tenants[1].quota, Some(96 * MIB - 7 * MIB - margin));
        // A capped cache just dropped (a block device's, at its last close) stays capped
        // while it holds well below its cap; one that fills its cap with memory it reuses
        // is let go.
        let mut dropped = streamer(2 * MIB, 0);
        dropped.quota = Some(34 * MIB);
        let p = plan(&snap_of(96 * MIB, vec![hot.clone(), dropped.clone()]), &K);
        assert!(p.tenants[1].quota.is_some(), "{}", p.tenants[1].reason);
        let mut after_quotas = snap_of(96 * MIB, vec![hot.clone(), dropped.clone()]);
        after_quotas.quotas_in_force = Some(true);
        let p = plan(&after_quotas, &K);
        assert!(
            !p.tenants[1].reason.contains("not reused"),
            "a quota left from quotas is no cap: {}",
            p.tenants[1].reason
        );
        dropped.dram = 34 * MIB - margin + 1;
        let p = plan(&snap_of(96 * MIB, vec![hot.clone(), dropped]), &K);
        assert_eq!(p.tenants[1].quota, None, "{}", p.tenants[1].reason);
        // Capped caches do not make the host look as if it were under quotas.
        let mut capped = streamer(89 * MIB, 85 * MIB);
        capped.quota = Some(73 * MIB);
        let mut s = snap_of(96 * MIB, vec![capped]);
        assert!(in_quotas(&s), "before any pass the quotas say");
        s.quotas_in_force = Some(false);
        assert!(!in_quotas(&s), "the last pass says");
        // Caches side by side share what the others leave; with no other tenant, the
        // kernel's LRU alone decides among them.
        let p =
            plan(&snap_of(96 * MIB, vec![hot.clone(), streamer(40 * MIB, 30 * MIB), streamer(45 * MIB, 40 * MIB)]), &K);
        assert_eq!(quotas(&p), vec![None, Some(cap), Some(cap)]);
        let p = plan(&snap_of(96 * MIB, vec![streamer(40 * MIB, 30 * MIB), streamer(50 * MIB, 40 * MIB)]), &K);
        assert_eq!(quotas(&p), vec![None, None]);
        // Nor where the tenant with little unreused cache holds much page cache it
        // reuses (postgres/2x's servers re-read their tables through it): reclaim takes
        // page cache from each, and a cap would only move it between them. A tenant
        // with less page cache than the margin is shielded.
        let reusing = |cache: u64| streamer(cache + MIB, margin - 1);
        let p = plan(&snap_of(96 * MIB, vec![reusing(40 * MIB), streamer(50 * MIB, 40 * MIB)]), &K);
        assert_eq!(quotas(&p), vec![None, None]);
        let p = plan(&snap_of(96 * MIB, vec![reusing(margin - 1), streamer(50 * MIB, 40 * MIB)]), &K);
        assert!(p.tenants[1].quota.is_some(), "{}", p.tenants[1].reason);
        // A neighbour holding nothing now (all of it on the tier) still has the margin
        // kept for it.
        let mut out = hot.clone();
        out.dram = 0;
        let p = plan(&snap_of(96 * MIB, vec![out, streamer(89 * MIB, 85 * MIB)]), &K);
        assert_eq!(p.tenants[1].quota, Some(96 * MIB - margin));
        // A neighbour's swap-cached pages are its own: on 6.12 a page read back stays
        // in the swap cache while in use.
        let mut cached = hot;
        cached.swap_cached = 7 * MIB;
        let p = plan(&snap_of(96 * MIB, vec![cached, streamer(89 * MIB, 85 * MIB)]), &K);
        assert_eq!(p.tenants[1].quota, Some(cap));
    }

    #[test]
    fn thrashing_tenants_whose_hot_sets_do_not_fit_get_whole_hot_sets_or_the_floor() {
        // Six 192 MiB hot sets on 1 GiB, every tenant thrashing under one limit: five fit.
        let ts: Vec<TenantView> =
            (1..=6).map(|i| working(&format!("u{i}"), 512 * MIB, 192 * MIB, 160 * MIB, 0.8)).collect();
        let p = plan(&snap_of(GIB, ts), &K);
        let q: Vec<u64> = quotas(&p).into_iter().map(|q| q.expect("per-tenant quotas")).collect();
        // Whole: the hot set and the headroom for what rides on its pages.
        let whole = 192 * MIB + (192.0 * MIB as f64 * K.headroom) as u64;
        assert_eq!(q.iter().filter(|&&x| x >= whole).count(), 5, "{q:?}");
        assert!(q.iter().any(|&x| x <= 64 * MIB), "the sixth gets what is left, not a part of the others': {q:?}");
        assert!(q.iter().sum::<u64>() <= GIB);
        assert!(matches!(p.notes[0], Note::Quotas { .. } | Note::SharedWhileShort { .. }), "{:?}", p.notes);
        assert!(p.tenants.iter().filter(|t| t.quota >= Some(whole)).all(|t| t.predicted_useful > Some(0.9)));
    }

    #[test]
    fn quotas_for_the_thrashing_leave_a_tenant_running_on_what_it_holds_all_of_it() {
        // A pass of login-storm/12 in the simulator: four hot sets held whole and running,
        // three tenants thrashing, five at rest. `over`'s estimate is 4 MiB over what it
        // holds (its confidence margin); priced as thrashing there, it was cut to 15 MiB.
        let held = |name: &str, hot: u64, warm: u64, cores: f64| {
            let mut t = working(name, 512 * MIB, hot * MIB, 193 * MIB, 0.0);
            t.activeness.as_mut().unwrap().touched_in_window_bytes = Some((hot + warm) * MIB);
            t.demand_cores = cores;
            t
        };
        let mut ts = vec![held("over", 196, 62, 0.25), held("a", 192, 0, 0.32), held("b", 192, 102, 0.32)];
        ts.push(held("c", 192, 0, 0.28));
        for (name, dram) in [("out1", 147), ("out2", 41), ("out3", 49)] {
            let mut t = working(name, 512 * MIB, 191 * MIB, dram * MIB, 0.87);
            t.demand_cores = 0.27;
            ts.push(t);
        }
        for i in 1..=5 {
            let mut t = tenant(&format!("rest{i}"), 512 * MIB);
            (t.at_rest_secs, t.dram, t.tier) = (Some(10.0), 2 * MIB, 510 * MIB);
            ts.push(t);
        }
        let p = plan(&snap_of(GIB, ts), &K);
        let q: Vec<u64> = quotas(&p).into_iter().map(|q| q.expect("per-tenant quotas")).collect();
        assert!(q[..4].iter().all(|&x| x >= 193 * MIB), "{q:?}");
    }

    #[test]
    fn a_woken_tenant_gets_its_hot_set_from_a_resting_one_on_a_slow_tier() {
        // A pass of login-storm/12 on the machine, the tier at 500 µs a read: four hot
        // sets held whole, two tenants just woke and thrash, one rests on 160 MiB of its
        // working set (a little of it scattered on the tier). Its cut was priced at twice
        // its read-back: both woken tenants thrashed.
        let mut ts: Vec<TenantView> =
            (1..=4).map(|i| working(&format!("u{i}"), 512 * MIB, 176 * MIB, 184 * MIB, 0.0)).collect();
        for name in ["woke1", "woke2"] {
            let mut t = working(name, 512 * MIB, 192 * MIB, 16 * MIB, 0.9);
            t.since_rest_secs = Some(2.0);
            ts.push(t);
        }
        let mut rest = tenant("rest", 512 * MIB);
        (rest.at_rest_secs, rest.rest_began_secs, rest.mean_rest_secs) = (Some(5.0), Some(5.0), Some(20.0));
        (rest.dram, rest.tier, rest.demand_cores) = (160 * MIB, 352 * MIB, 0.4);
        rest.regions = (0..80).map(|i| region(i, 8.0, 2 * MIB - MIB / 16, MIB / 16, false)).collect();
        ts.push(rest);
        let mut snap = snap_of(GIB, ts);
        snap.tier.read_latency_us = Some(500.0);
        let p = plan(&snap, &K);
        let q: Vec<u64> = quotas(&p).into_iter().map(|q| q.expect("per-tenant quotas")).collect();
        assert!(q[4].max(q[5]) >= 192 * MIB, "a woken tenant's hot set, whole: {q:?}");
        assert!(q[6] <= 96 * MIB, "the resting tenant gives up what that takes: {q:?}");
    }

    #[test]
    fn a_reserve_is_a_floor_and_what_is_left_goes_whole_to_the_tenant_with_more_shares() {
        let mut reserved = working("reserved", 512 * MIB, 400 * MIB, 450 * MIB, 0.0);
        reserved.spec.reserve = 450 * MIB;
        let mut heavy = working("shares200", 632 * MIB, 568 * MIB, 280 * MIB, 0.8);
        heavy.spec.shares = 200;
        let light = working("shares100", 632 * MIB, 568 * MIB, 280 * MIB, 0.8);
        let p = plan(&snap_of(GIB, vec![reserved, heavy, light]), &K);
        let q: Vec<u64> = quotas(&p).into_iter().map(Option::unwrap).collect();
        assert!(q[0] >= 450 * MIB, "{q:?}");
        assert!(q[1] >= 568 * MIB, "the tenant with twice the shares gets all of its hot set: {q:?}");
        assert!(q[2] < 32 * MIB, "{q:?}");
    }

    #[test]
    fn skewed_tenants_under_pressure_are_left_to_the_lru() {
        // Four Zipf tenants (a third of their samples stay out), faulting a little.
        let ts: Vec<TenantView> = (1..=4)
            .map(|i| {
                let mut t = working(&format!("r{i}"), 1152 * MIB, 700 * MIB, 576 * MIB, 0.15);
                t.activeness.as_mut().unwrap().returned_share = Some(0.65);
                t.tier_faults_per_sec = 800.0;
                t
            })
            .collect();
        let p = plan(&snap_of(2304 * MIB, ts), &K);
        assert_eq!(quotas(&p), vec![None; 4], "{:?}", p.notes);
    }

    #[test]
    fn a_cut_costs_the_pages_it_sends_out_not_the_bytes_of_quota() {
        // A tenant that holds its whole hot set at a quota with the headroom on top: a cut
        // to the quota of seven eighths of it sends out an eighth of its pages.
        let snap = snap_of(GIB, vec![working("a", 512 * MIB, 192 * MIB, 0, 0.0)]);
        let fault = fault_secs(&snap.tier, &K);
        let value_at = |holds: u64, q: u64| {
            let mut t = snap.tenants[0].clone();
            // Holding the floor it barely runs, as measured; holding it whole, not stalled.
            (t.quota, t.dram, t.stall_share) = (Some(holds), holds, if holds == WORKING_FLOOR { 1.0 } else { 0.0 });
            let s = state(&t, &snap, &K, fault);
            claim(&s, &K, fault).points.into_iter().find(|p| p.0 == q).expect("a point at the cut").1
        };
        let c = state(&snap.tenants[0], &snap, &K, fault).curve;
        let (whole, cut) = (c.quota_for(c.hot), c.quota_for(c.hot * 7 / 8));
        let cost = value_at(WORKING_FLOOR, cut) - value_at(whole, cut);
        let eighth = (c.hot / 8) as f64 / PAGE * fault / K.horizon_secs;
        assert!((cost / eighth - 1.0).abs() < 0.01, "cost {cost} for an eighth of its pages, {eighth}");
    }

    fn region(i: u64, reused: f64, dram: u64, tier: u64, laid_out: bool) -> Region {
        Region {
            range: Range { pid: 1, start: i << 21, len: 2 * MIB },
            idle_secs: Some(reused),
            reused_secs: Some(reused),
            laid_out,
            cold_samples: 0,
            dram_bytes: dram,
            tier_bytes: tier,
            wants_huge: false,
            huge_bytes: 0,
        }
    }

    /// A tenant back from a rest to a 128 MiB hot set that its fill (or a neighbour)
    /// pushed to the tier, holding 1 GiB of cold pages: it faults hard, few of its
    /// samples come back, and the fault-rate estimate alone says gigabytes.
    fn woke_holding_cold_pages() -> TenantView {
        let mut t = working("filled", 2 * GIB, 32 * MIB, GIB, 0.8);
        t.activeness.as_mut().unwrap().returned_share = Some(0.02);
        t.tier_faults_per_sec = 12_000.0;
        (t.since_rest_secs, t.rest_began_secs) = (Some(2.0), Some(40.0));
        let hot = (0..64).map(|i| region(i, 45.0, 0, 2 * MIB, false));
        let cold =
            (64..576).map(|i| Region { reused_secs: None, idle_secs: Some(50.0), ..region(i, 0.0, 2 * MIB, 0, false) });
        t.regions = hot.chain(cold).collect();
        t
    }

    #[test]
    fn a_tenant_thrashing_at_its_quota_is_taken_to_need_more_than_the_quota_keeps() {
        // The simulator's host-06: 1.9 GiB at a 1.9 GiB quota, faulting 9,000 pages a
        // second, its regions reused lately 1.7 GiB (1.4 of it in DRAM: the rest of its
        // charge is not its pages) and a tenth of its time working.
        let mut t = working("h3", 3 * GIB, 1600 * MIB, 1900 * MIB, 0.9);
        t.quota = Some(1900 * MIB);
        t.activeness.as_mut().unwrap().returned_share = Some(0.5);
        t.tier_faults_per_sec = 9000.0;
        t.regions = (0..850)
            .map(|i| if i < 700 { region(i, 5.0, 2 * MIB, 0, false) } else { region(i, 5.0, 0, 2 * MIB, false) })
            .collect();
        let c = Curve::of(&t, 60.0, 10.0, 100e-6, &K);
        assert!(c.hot > c.kept(1900 * MIB), "hot {} MiB", c.hot / MIB);
        let done = c.useful(1900 * MIB, 100e-6);
        assert!((done - 0.1).abs() < 0.02, "at its quota it did a tenth, not {done:.2}");
        // Woken 2 s ago from a 2 s rest instead, it faults on what its rest left out:
        // its regions say.
        (t.since_rest_secs, t.rest_began_secs) = (Some(2.0), Some(4.0));
        assert_eq!(Curve::of(&t, 60.0, 10.0, 100e-6, &K).hot, 1700 * MIB);
    }

    #[test]
    fn a_tenant_holding_cold_pages_is_sized_by_what_it_reuses_and_prefetches_its_hot_set_past_them() {
        let t = woke_holding_cold_pages();
        let c = Curve::of(&t, 60.0, 10.0, 100e-6, &K);
        // Its hot set is the regions it reuses, not the gigabyte it holds (which grew
        // its estimate, its quota with it, and starved a neighbour).
        assert_eq!(c.hot, 128 * MIB, "hot {} MiB", c.hot / MIB);
        // Under one shared limit its hot set comes back though it holds more than that:
        // the cold pages are the kernel's to reclaim.
        let p = plan(&snap_of(4 * GIB, vec![t]), &K);
        let tp = &p.tenants[0];
        assert_eq!(tp.quota, None, "{}", tp.reason);
        assert_eq!(tp.prefetch.len(), 64, "its whole hot set: {}", tp.reason);
    }

    /// wake-up/fast's first 30 s as measured (bench/results/thrash-at-start.md): `sleepy`
    /// (a uniform 1 GiB hot set) holds 768 MiB, faults 5,300 pages a second with 13% of
    /// its samples back, and is stalled on the tier `stall` of its time; two neighbours
    /// each hold 600 MiB, 128 MiB of it hot and the rest filled `fill_idle` s ago.
    fn thrashing_at_start(stall: f64, fill_idle: f64) -> Snapshot {
        let mut sleepy = working("sleepy", 1280 * MIB, GIB, 768 * MIB, stall);
        sleepy.activeness.as_mut().unwrap().returned_share = Some(0.13);
        sleepy.tier_faults_per_sec = 5300.0;
        sleepy.regions =
            (0..512).map(|i| region(i, 4.0, (i < 384) as u64 * 2 * MIB, (i >= 384) as u64 * 2 * MIB, false)).collect();
        let pushers = (1..=2).map(|i| {
            let mut p = working(&format!("pusher{i}"), GIB, 128 * MIB, 600 * MIB, 0.0);
            let filled = |j| Region { cold_samples: 1, ..region(1000 * i + j, fill_idle, 2 * MIB, 0, false) };
            p.regions = (0..300)
                .map(|j| if j < 64 { region(1000 * i + j, 1.0, 2 * MIB, 0, false) } else { filled(j) })
                .collect();
            p
        });
        let mut s = snap_of(2 * GIB, std::iter::once(sleepy).chain(pushers).collect());
        s.interval_secs = 5.0;
        s.window_secs = 30.0;
        s
    }

    #[test]
    fn a_hot_set_thrashing_at_the_shared_limit_is_read_back_into_memory_idle_longer() {
        let snap = thrashing_at_start(0.75, 20.0);
        let curve = Curve::in_snapshot(&snap.tenants[0], &snap, &K);
        assert!(!curve.steep, "so slow that its samples read as a gentle slope");
        let p = plan(&snap, &K);
        let tp = &p.tenants[0];
        assert_eq!(tp.quota, None, "its hot set fits beside the others': {}", tp.reason);
        assert_eq!(tp.prefetch.len(), 128, "what it lacks of its working set, in bulk: {}", tp.reason);
        // The neighbours' fill, idle four intervals, makes the room, demoted whole.
        let demoted: usize = p.tenants[1..].iter().map(|t| t.demote.len()).sum();
        assert!(demoted >= 128, "{demoted} regions: {}", p.tenants[1].reason);
        // Stalled a fifth of its time, its pages out there are a tail the kernel's LRU
        // weighs against the others' pages, page by page.
        let tail = plan(&thrashing_at_start(0.2, 20.0), &K);
        assert_eq!(tail.tenants[0].prefetch, Vec::new(), "{}", tail.tenants[0].reason);
        // Neighbours that touched all they hold within two intervals keep it: a
        // read-back would make reclaim take pages touched as often as the ones read.
        let busy = plan(&thrashing_at_start(0.75, 6.0), &K);
        assert_eq!(busy.tenants[0].prefetch, Vec::new(), "{}", busy.tenants[0].reason);
    }

    #[test]
    fn a_tenant_that_just_woke_gets_its_working_set_back_runs_first_and_scattered_only_on_a_quick_tier() {
        let mut t = working("sleepy", 512 * MIB, 4 * MIB, 8 * MIB, 0.9);
        t.since_rest_secs = Some(1.0);
        t.rest_began_secs = Some(40.0);
        t.tier_faults_per_sec = 3000.0;
        t.regions = (0..64).map(|i| region(i, 45.0, 0, 2 * MIB, i < 32)).collect();
        let fast = plan(&snap_of(GIB, vec![t.clone()]), &K);
        let tp = &fast.tenants[0];
        assert!(tp.reason.starts_with("woke 1 s ago"), "{}", tp.reason);
        assert_eq!(tp.prefetch.len(), 64, "its whole working set: {}", tp.reason);
        assert!(tp.prefetch[..32].iter().all(|r| r.start < 32 << 21), "the regions in runs first");
        assert!(tp.woke);
        let mut slow = snap_of(GIB, vec![t]);
        slow.tier.read_latency_us = Some(7000.0);
        assert_eq!(plan(&slow, &K).tenants[0].prefetch.len(), 32, "a slow tier reads runs only");
    }

    /// noisy-neighbour at a pass after the sweeper woke: three steady tenants hold
    /// 300 MiB each, 128 MiB of it touched every interval and all of it within the
    /// window; `noisy` woke 10 s ago, sweeps its 1200 MiB at random and holds 100 MiB.
    fn sweeper_woke_beside(steady: impl Fn(&str) -> TenantView) -> Snapshot {
        let mut noisy = working("noisy", 1200 * MIB, 1200 * MIB, 100 * MIB, 0.9);
        (noisy.since_rest_secs, noisy.rest_began_secs) = (Some(10.0), Some(35.0));
        noisy.tier_faults_per_sec = 20_000.0;
        noisy.regions =
            (0..600).map(|i| region(i, 5.0, (i < 50) as u64 * 2 * MIB, (i >= 50) as u64 * 2 * MIB, false)).collect();
        let others = (1..=3).map(|i| {
            let mut s = steady(&format!("s{i}"));
            s.regions =
                (0..150).map(|j| region(1000 * i + j, if j < 64 { 1.0 } else { 21.0 }, 2 * MIB, 0, false)).collect();
            s
        });
        let mut s = snap_of(GIB, others.chain(std::iter::once(noisy)).collect());
        (s.interval_secs, s.window_secs) = (5.0, 30.0);
        s
    }

    #[test]
    fn a_woken_tenant_without_a_quota_reads_back_only_what_its_neighbours_leave_idle_or_rest_on() {
        let working_steady = |name: &str| {
            let mut t = working(name, 512 * MIB, 128 * MIB, 300 * MIB, 0.0);
            t.activeness.as_mut().unwrap().touched_in_window_bytes = Some(300 * MIB);
            t
        };
        let p = plan(&sweeper_woke_beside(working_steady), &K);
        let noisy = &p.tenants[3];
        assert_eq!(noisy.quota, None, "{}", noisy.reason);
        // DRAM is full and the neighbours touched all they hold within the window: a
        // read-back would push out their pages, which they touch as often.
        assert_eq!(noisy.prefetch, Vec::new(), "{}", noisy.reason);
        // Resting, what they hold is what the sweeper's working set may take.
        let resting = |name: &str| {
            let mut t = working(name, 512 * MIB, 128 * MIB, 300 * MIB, 0.0);
            t.activeness = Some(uniform(0));
            t.demand_cores = 0.0;
            (t.at_rest_secs, t.rest_began_secs) = (Some(20.0), Some(20.0));
            t
        };
        let p = plan(&sweeper_woke_beside(resting), &K);
        let noisy = &p.tenants[3];
        let read: u64 = noisy.prefetch.iter().map(|r| r.len).sum();
        assert_eq!(read, 900 * MIB, "all three hold, no more (DRAM is full): {}", noisy.reason);
    }

    #[test]
    fn a_woken_sweeper_makes_no_room_for_its_read_back_from_memory_it_only_filled() {
        // noisy-neighbour 3 s after the sweeper woke (2026-12-07's real run): it filled
        // 1200 MiB, rested 25 s and now sweeps all of it, 800 MiB an interval. It holds
        // 500 MiB it only filled (idle 40 s, samples stayed out while it rested); the
        // rest, on the tier, it faulted on since it woke. The neighbours hold their hot
        // sets and 200 MiB is free.
        let mut noisy = working("noisy", 1200 * MIB, 800 * MIB, 500 * MIB, 0.9);
        (noisy.since_rest_secs, noisy.rest_began_secs) = (Some(3.0), Some(28.0));
        noisy.tier_faults_per_sec = 20_000.0;
        noisy.regions = (0..600)
            .map(|i| {
                let filled = i < 250;
                let mut r = region(i, 2.0, filled as u64 * 2 * MIB, !filled as u64 * 2 * MIB, false);
                if filled {
                    (r.idle_secs, r.reused_secs, r.cold_samples) = (Some(40.0), None, 1);
                }
                r
            })
            .collect();
        let steady = (1..=3).map(|i| {
            let mut t = working(&format!("s{i}"), 512 * MIB, 100 * MIB, 100 * MIB, 0.0);
            t.regions = (0..50).map(|j| region(1000 * i + j, 1.0, 2 * MIB, 0, false)).collect();
            t
        });
        let mut s = snap_of(GIB, steady.chain(std::iter::once(noisy)).collect());
        (s.interval_secs, s.window_secs) = (5.0, 30.0);
        let p = plan(&s, &K);
        let noisy = &p.tenants[3];
        assert_eq!(noisy.quota, None, "{}", noisy.reason);
        // It touches more than it holds, so what it filled is in use too: demoting
        // that to read back what it faulted on trades its pages for as hot ones. Only
        // the DRAM nobody holds is room.
        assert!(noisy.demote.is_empty(), "{}", noisy.reason);
        let read: u64 = noisy.prefetch.iter().map(|r| r.len).sum();
        let free = moves::prefetch_room(Some(GIB), 800 * MIB);
        assert!(read > 0 && read <= free, "read {} of {} free: {}", human(read), human(free), noisy.reason);
    }

    #[test]
    fn a_resting_working_set_is_laid_out_while_only_tierds_own_moves_keep_the_tier_busy() {
        // At rest 20 s, its 128 MiB working set scattered on the tier; the neighbour is quiet.
        let mut t = working("sleepy", 512 * MIB, 128 * MIB, 0, 0.0);
        t.activeness = Some(uniform(0));
        t.demand_cores = 0.0;
        t.at_rest_secs = Some(20.0);
        t.rest_began_secs = Some(20.0);
        t.regions = (0..64).map(|i| region(i, 20.0, 0, 2 * MIB, false)).collect();
        let relaid = |utilization: f64, others: f64| {
            let mut s = snap_of(GIB, vec![t.clone()]);
            s.tier.utilization = utilization;
            s.tier.others_utilization = others;
            plan(&s, &K).tenants[0].relayout.len()
        };
        assert!(relaid(0.0, 0.0) > 0, "an idle tier");
        // Last pass's relayout kept the device busy half the interval: no one else's I/O.
        assert_eq!(relaid(0.5, 0.02), relaid(0.0, 0.0), "its own moves do not count");
        assert_eq!(relaid(0.5, 0.4), 0, "tenants reading the tier come first");
        let relaid_at = |read_us: f64| {
            let mut s = snap_of(GIB, vec![t.clone()]);
            s.tier.read_latency_us = Some(read_us);
            plan(&s, &K).tenants[0].relayout.len()
        };
        assert_eq!(relaid_at(150.0), relaid(0.0, 0.0), "a quick tier");
        assert_eq!(relaid_at(2000.0), 0, "a tier slow for the tenants' own reads");
    }

    #[test]
    fn a_waking_tenant_under_a_quota_is_read_back_to_its_margin_not_to_the_brim() {
        // Its own limit (128 MiB) binds; it holds 64 MiB and wants 128 MiB back.
        let mut t = working("capped", 512 * MIB, 128 * MIB, 64 * MIB, 0.9);
        t.spec.limit = Some(128 * MIB);
        t.since_rest_secs = Some(1.0);
        t.rest_began_secs = Some(40.0);
        t.regions = (0..64).map(|i| region(i, 45.0, 0, 2 * MIB, true)).collect();
        let p = plan(&snap_of(GIB, vec![t]), &K);
        let tp = &p.tenants[0];
        assert_eq!(tp.quota, Some(128 * MIB), "{}", tp.reason);
        // 128 MiB less 16 MiB kept free, less the 64 MiB held: 48 MiB, 24 regions.
        assert_eq!(tp.prefetch.len(), 24, "{}", tp.reason);
    }

    #[test]
    fn quotas_that_fell_short_of_their_prediction_give_way_to_one_shared_limit() {
        let mut ts: Vec<TenantView> =
            (1..=6).map(|i| working(&format!("u{i}"), 512 * MIB, 192 * MIB, 160 * MIB, 0.8)).collect();
        for t in &mut ts {
            t.quota = Some(160 * MIB);
        }
        // Two windows (60 s each here) below its prediction.
        ts[0].short_secs = Some(121.0);
        let p = plan(&snap_of(GIB, ts), &K);
        assert_eq!(quotas(&p), vec![None; 6]);
        assert!(p.notes.contains(&Note::FellShort), "{:?}", p.notes);
        assert!(
            !p.notes.iter().any(|n| matches!(n, Note::SharedWhileShort { .. })),
            "the reason the shared limit stays is said once: {:?}",
            p.notes
        );
    }

    #[test]
    fn the_shared_limit_stays_while_nobody_thrashes_under_it_and_the_note_says_so() {
        // Six 192 MiB hot sets on 1 GiB, none stalled: short by the estimates alone.
        let ts: Vec<TenantView> =
            (1..=6).map(|i| working(&format!("u{i}"), 512 * MIB, 192 * MIB, 160 * MIB, 0.0)).collect();
        let p = plan(&snap_of(GIB, ts), &K);
        assert_eq!(quotas(&p), vec![None; 6]);
        let note = p.notes.iter().find(|n| matches!(n, Note::SharedWhileShort { .. })).expect("short");
        assert!(matches!(note, Note::SharedWhileShort { why: SharedWhy::NoneThrashing, .. }), "{note:?}");
        assert!(note.to_string().contains("no working tenant thrashes"), "{note}");
    }

    #[test]
    fn quotas_that_would_not_beat_the_shared_limit_by_the_margin_leave_it_and_the_note_gives_both_figures() {
        let note = Note::SharedWhileShort {
            needs: 1200 * MIB,
            budget: GIB,
            why: SharedWhy::Margin(1.05),
            model_work: 1.02,
            shared_work: 1.0,
        };
        let text = note.to_string();
        assert!(
            text.contains("buy 1.02 cores") && text.contains("against 1.00") && text.contains("the 1.05× they must"),
            "{text}"
        );
    }

    /// 640 MiB in DRAM of which the last 384 MiB were seen idle 200 s (two samples out).
    fn busy_with_an_idle_tail() -> TenantView {
        let mut busy = working("busy", 768 * MIB, 256 * MIB, 640 * MIB, 0.0);
        busy.regions = (0..320).map(|i| region(i, if i < 128 { 1.0 } else { 200.0 }, 2 * MIB, 0, false)).collect();
        for r in busy.regions.iter_mut().skip(128) {
            r.cold_samples = 2;
        }
        busy
    }

    #[test]
    fn room_ahead_of_the_lru_comes_from_the_hosts_coldest_and_never_from_an_unseen_resting_working_set() {
        // Both fit and the budget is full: room is made ahead of the kernel's reclaim.
        let busy = busy_with_an_idle_tail();
        let mut sleepy = working("sleepy", 384 * MIB, 384 * MIB, 384 * MIB, 0.0);
        sleepy.at_rest_secs = Some(5.0);
        sleepy.rest_began_secs = Some(5.0);
        // Its working set: half seen reused before the rest, half never sampled at all.
        sleepy.regions = (1000..1192)
            .map(|i| {
                let mut r = region(i, 20.0, 2 * MIB, 0, false);
                if i >= 1096 {
                    (r.idle_secs, r.reused_secs) = (None, None);
                }
                r
            })
            .collect();
        let p = plan(&snap_of(GIB, vec![busy, sleepy]), &K);
        let demoted = |name: &str| p.tenants.iter().find(|t| t.name.as_str() == name).unwrap().demote.clone();
        assert!(!demoted("busy").is_empty(), "{:?}", p.tenants[0].reason);
        assert!(demoted("busy").iter().all(|r| r.start >= 128 << 21), "only what it left idle");
        assert_eq!(demoted("sleepy"), Vec::new(), "nothing of the resting tenant: {}", p.tenants[1].reason);
    }

    #[test]
    fn a_wake_up_on_a_full_host_has_the_room_its_prefetch_takes_made_first_even_on_a_slow_tier() {
        // 992 MiB held of 1 GiB; busy left 704 MiB idle for 200 s.
        let mut busy = working("busy", GIB, 256 * MIB, 960 * MIB, 0.0);
        busy.regions = (0..480).map(|i| region(i, if i < 128 { 1.0 } else { 200.0 }, 2 * MIB, 0, false)).collect();
        for r in busy.regions.iter_mut().skip(128) {
            r.cold_samples = 2;
        }
        // sleepy just woke: 16 regions of its working set held (idle through its rest),
        // 48 out on the tier in runs.
        let mut sleepy = working("sleepy", 512 * MIB, 128 * MIB, 32 * MIB, 0.9);
        sleepy.since_rest_secs = Some(1.0);
        sleepy.rest_began_secs = Some(100.0);
        sleepy.tier_faults_per_sec = 3000.0;
        sleepy.regions = (1000..1064)
            .map(|i| {
                let held = i < 1016;
                let mut r = region(i, 90.0, if held { 2 * MIB } else { 0 }, if held { 0 } else { 2 * MIB }, !held);
                r.cold_samples = 2;
                r
            })
            .collect();
        let demoted_for = |snap: &Snapshot| -> (u64, Vec<Range>, usize) {
            let p = plan(snap, &K);
            let busy = &p.tenants[0];
            assert!(busy.demote.iter().all(|r| r.start >= 128 << 21), "only what it left idle: {}", busy.reason);
            (busy.demote.len() as u64 * 2 * MIB, p.tenants[1].demote.clone(), p.tenants[1].prefetch.len())
        };
        let mut slow = snap_of(GIB, vec![busy.clone(), sleepy.clone()]);
        slow.tier.read_latency_us = Some(900.0);
        for snap in [snap_of(GIB, vec![busy.clone(), sleepy.clone()]), slow.clone()] {
            let (room, own, prefetch) = demoted_for(&snap);
            assert_eq!(prefetch, 48, "its working set on the tier comes back");
            // What the 96 MiB read back takes past the limit's 64 MiB margin, at least.
            assert!(room >= 96 * MIB, "room made ahead of the prefetch: {} MiB", room / MIB);
            assert_eq!(own, Vec::new(), "never its own working set, however long it lay idle");
        }
        // At rest, on the slow tier, nothing is read back and nothing written ahead.
        sleepy.since_rest_secs = None;
        sleepy.at_rest_secs = Some(30.0);
        slow.tenants[1] = sleepy;
        assert_eq!(demoted_for(&slow).0, 0);
    }

    #[test]
    fn pages_written_out_and_only_cached_are_room_already() {
        // As above, but the last passes' demotions still sit in busy's swap cache: the
        // room is there, and demoting more each pass only wrote to the tier for nothing.
        let busy = busy_with_an_idle_tail();
        let sleepy = working("sleepy", 384 * MIB, 384 * MIB, 384 * MIB, 0.0);
        let mut cached = busy.clone();
        cached.swap_cached = 64 * MIB;
        let demoted = |busy: TenantView| plan(&snap_of(GIB, vec![busy, sleepy.clone()]), &K).tenants[0].demote.len();
        assert!(demoted(busy) > 0);
        assert_eq!(demoted(cached), 0);
    }

    #[test]
    fn a_quota_cut_demotes_the_coldest_whole_regions_first() {
        let mut ts: Vec<TenantView> =
            (1..=6).map(|i| working(&format!("u{i}"), 512 * MIB, 192 * MIB, 160 * MIB, 0.8)).collect();
        // u6 holds 320 MiB, much of it cold, and will get less.
        ts[5].dram = 320 * MIB;
        ts[5].regions =
            (0..160).map(|i| region(i, if i < 96 { 2.0 } else { 100.0 + i as f64 }, 2 * MIB, 0, false)).collect();
        for r in &mut ts[5].regions {
            r.cold_samples = 2;
        }
        let p = plan(&snap_of(GIB, ts), &K);
        let tp = p.tenants.iter().find(|t| t.quota.is_some_and(|q| q < 320 * MIB) && t.name.as_str() == "u6");
        if let Some(tp) = tp {
            assert!(!tp.demote.is_empty(), "{}", tp.reason);
            assert!(tp.demote.iter().all(|r| r.start >= 96 << 21), "the coldest first: {:?}", tp.demote);
        }
    }

    #[test]
    fn a_tenant_kept_off_the_tier_is_never_demoted_even_past_its_size() {
        let six = |no_tier: bool| {
            let mut ts: Vec<TenantView> =
                (1..=6).map(|i| working(&format!("u{i}"), 512 * MIB, 192 * MIB, 160 * MIB, 0.8)).collect();
            // u6 grew to 320 MiB past the 256 MiB it declared, much of it cold.
            ts[5].spec.size = Some(256 * MIB);
            ts[5].spec.no_tier = no_tier;
            ts[5].dram = 320 * MIB;
            ts[5].regions =
                (0..160).map(|i| region(i, if i < 96 { 2.0 } else { 100.0 + i as f64 }, 2 * MIB, 0, false)).collect();
            for r in &mut ts[5].regions {
                r.cold_samples = 2;
            }
            let p = crate::policy::plan(crate::policy::PolicyKind::Tierd, &snap_of(GIB, ts), &K);
            p.tenants.into_iter().find(|t| t.name.as_str() == "u6").unwrap()
        };
        let tiered = six(false);
        assert!(!tiered.demote.is_empty(), "a tiered tenant past its quota is demoted: {}", tiered.reason);
        let kept = six(true);
        assert!(kept.demote.is_empty() && kept.relayout.is_empty(), "{:?}", kept.demote);
        assert!(kept.quota.is_some_and(|q| q >= 256 * MIB), "its whole size is its floor: {:?}", kept.quota);
        assert!(kept.reason.contains("kept off the tier: all 256 MiB in DRAM"), "{}", kept.reason);
    }
}
