//! `tierd`: DRAM quotas from measured activeness.
//!
//! Each tenant *needs* its active memory (the tracker's windowed estimate, or the last
//! interval's if higher, plus the confidence interval) and some headroom so its hot
//! set fits. DRAM is divided with [`divide`]: reserves first, then needs by shares,
//! then the spare in proportion to need × shares. A quota the new division would move
//! by less than a band (a tenth) stays put while it covers the tenant's need (see
//! [`damp`]). A tenant not measured yet is taken as fully active, so a newcomer can grow.
//!
//! Around that:
//! - **wake-up**: a jump in a tenant's tier-1 fault rate together with a jump in what
//!   it touches (or just after it was at rest, see below) means it woke; its need goes back at once to the peak it had before
//!   going idle, and its most recently hot regions still on the tier are prefetched
//!   (then rebuilt as huge pages where they were huge), for one window after the
//!   wake-up, and longer (up to [`WAKE_HOLD_WINDOWS`]) while it still faults from the
//!   tier. A fault-rate jump alone (a hot set pushed out while busy) also prefetches
//!   the recently hot regions, within the tenant's need;
//! - **going quiet**: a tenant that touched under a quarter of its window average in
//!   the last interval (by more than the estimate's confidence interval), and is not
//!   faulting, counts a quarter of its average, so the DRAM it
//!   stopped using moves to a waking neighbour now rather than a window later; the cut
//!   goes to the tier as whole regions. While nobody needs that DRAM it keeps what it
//!   holds (every tenant does, see [`Claim::keep`]): a tenant idle between sessions
//!   finds its hot set still in DRAM when it comes back;
//! - **at rest**: a tenant whose processes stopped using the CPU and that reads nothing
//!   from the tier (seen between intervals, see `tierd::pace`) counts as going quiet at
//!   once, without waiting for an interval of samples to say so, and needs only what
//!   it touches at rest (at least [`REST_QUOTA`]);
//! - **huge pages**: hot regions that belong on huge pages but sit on small ones are
//!   rebuilt with `MADV_COLLAPSE`, hottest first, at up to [`COLLAPSE_RATE`] and
//!   within the room under the quota while the tenant faults from the tier;
//! - **proactive demotion**: regions idle for longer than the tenant's threshold (the
//!   window, or half of it when DRAM is short) are paged out when the tenant comes
//!   within [`burst_room`] of its quota and holds more than it needs, so free room
//!   waits for bursts; only that much (DRAM freed beyond it idles until the tenant
//!   reads the same pages back);
//! - **tier bandwidth**: demotion stops while tier read latency is above 400 µs or the
//!   device is saturated, and the plan says so (all but the regions demoted ahead of a
//!   quota cut: the cut writes as much to the tier either way, only slower and
//!   scattered);
//! - **noisy neighbours**: a tenant that suddenly needs more gets it only from the
//!   spare and its own share; others' needs are met first when DRAM is short.

use crate::health::{self, Colour};
use crate::plan::{Plan, TenantPlan};
use crate::policy::{Claim, MIN_QUOTA, damp, divide};
use crate::size::human;
use crate::snapshot::{Range, Region, Snapshot, TenantView};

/// A tenant wakes when its tier-1 faults reach this rate (per second)…
pub const WAKE_MIN_FAULTS: f64 = 50.0;
/// …and this multiple of its recent average, while it either touched far more in the
/// last interval than over the window (twice, plus [`WAKE_MIN_JUMP_BYTES`]) or had
/// gone quiet (active over the window under an eighth of its peak: right after a
/// wake-up its hot pages are on the tier, where sampling cannot see them yet). The
/// fault rate alone also rises when a busy tenant's sampled pages are reclaimed; the
/// pair says the tenant itself changed phase. The rate floor is low so a slow tier (a
/// few hundred reads a second at most) still shows a wake-up.
pub const WAKE_JUMP: f64 = 4.0;
pub const WAKE_MIN_JUMP_BYTES: u64 = 16 << 20;
/// The longest a woken tenant keeps its peak while it still faults from the tier, in
/// windows (after the first window it is kept only while it faults).
pub const WAKE_HOLD_WINDOWS: f64 = 4.0;
/// Device busy above this fraction counts as saturated.
pub const SATURATED: f64 = 0.9;
/// Proactive demotion per tenant, bytes per second of interval.
pub const DEMOTE_RATE: u64 = 256 << 20;
/// Prefetch per tenant, bytes per second of interval (about what `MADV_WILLNEED` does).
pub const PREFETCH_RATE: u64 = 1 << 30;
/// Unreturned samples a region needs before it may be demoted as cold.
pub const COLD_EVIDENCE: u32 = 2;
/// Huge-page rebuilds per tenant, bytes per second of interval: `MADV_COLLAPSE` copies
/// ~3 GiB/s here, so this costs tierd at most ~2% of a core while a woken tenant's
/// hot set is rebuilt, and brings 512 MiB back to huge pages within one 10 s interval.
pub const COLLAPSE_RATE: u64 = 64 << 20;

const PAGE: u64 = 4096;

/// The least a tenant at rest needs: its processes sleep, so what they touch is a
/// few stacks and buffers; if it wakes, its faults give it its peak back.
pub const REST_QUOTA: u64 = 8 << 20;

/// What laying a resting tenant's working set out in runs may ask of the tier per
/// second of interval (reads of scattered pages, then whole-region writes).
pub const RELAYOUT_RATE: u64 = 256 << 20;

/// Room a resting tenant gets above what it needs while its working set is laid out:
/// the engine reads back 8 regions at a time, and each becomes a new huge page before
/// the small ones are freed. Only from DRAM no one needs: as a need, five resting
/// tenants' room in login-storm's 10 took 160 MiB from five busy ones, each then
/// short of its hot set and reading it from the tier.
pub const RELAYOUT_ROOM: u64 = 32 << 20;

/// Room under any busy tenant's quota for the tracker's samples in flight (up to 4096
/// pages): a sampled hot page comes back at once, and without room each one reclaims
/// another.
pub const SAMPLE_ROOM: u64 = 16 << 20;

/// Room a resting tenant that keeps its hot set gets free above it: its first faults
/// on waking find free pages. At its limit, each reclaimed another of its hot pages
/// until the quota grew, and a woken login-storm tenant did 0.07 M ops/s in its first
/// second (plain swap 1.9 M).
pub const WAKE_ROOM: u64 = 16 << 20;

/// Room above the active set so the hot set fits: 1/8 of it plus [`SAMPLE_ROOM`].
pub fn headroom(active: u64) -> u64 {
    active / 8 + SAMPLE_ROOM
}

/// Free room proactive demotion keeps under a tenant's quota, so a burst of new
/// memory does not wait on reclaim: the headroom of what it touches.
pub fn burst_room(active: u64) -> u64 {
    headroom(active)
}

/// The most a tenant can use: its size plus room for what rides on top of its own
/// pages — swap cache of pages in flight to and from the tier, the new huge page a
/// collapse copies into, page tables. Capping the quota at the bare size kept a fully
/// resident tenant pressed against its limit, and the kernel then split and swapped
/// out its hot huge pages.
pub fn ceiling(size: u64) -> u64 {
    size + size / 16 + (16 << 20)
}

/// What a tenant needs this interval, and why.
struct Need {
    bytes: u64,
    /// The memory it is measured to touch (the part of `bytes` that is not headroom).
    active: u64,
    waking: bool,
    recently_woke: bool,
    /// Faulting from the tier at a jump in rate: its hot pages are there.
    faulting: bool,
    /// Going quiet: what it stopped touching may go to the tier sooner.
    quiet: bool,
    /// Room it could use above `bytes` to lay its working set out ([`RELAYOUT_ROOM`]).
    relayout_room: u64,
    why: String,
}

fn need(t: &TenantView, window: f64, interval: f64) -> Need {
    let size = t.size().max(MIN_QUOTA);
    let Some(a) = t.activeness else {
        return Need {
            bytes: size,
            active: size,
            waking: false,
            recently_woke: false,
            faulting: false,
            quiet: false,
            relayout_room: 0,
            why: format!("not measured yet: taken as fully active ({})", human(size)),
        };
    };
    // Its CPU stopped and it reads nothing from the tier (seen between intervals): at
    // rest now, whatever the last interval says (it was busy for part of it). In
    // login-storm the interval's lag kept a tenant that had just stopped at its full
    // quota for up to 12 s while a neighbour that had just logged in thrashed.
    let at_rest = t.at_rest_secs.is_some();
    // Just after its rest ended, reading from the tier at all is a jump: what it read
    // before (busy and squeezed before its rest, or faulting a burst back at rest)
    // says nothing of what it needs now. Asked for four times its average rate, a
    // tenant waking on a hard-disk-like tier (150 reads/s at most) was never seen
    // waking and stayed at its rest quota for two minutes.
    let rested = t.since_rest_secs.is_some_and(|s| s <= interval);
    let faulting = !at_rest
        && t.tier_faults_per_sec >= WAKE_MIN_FAULTS
        && (rested || t.tier_faults_per_sec >= WAKE_JUMP * t.tier_faults_per_sec_avg);
    let jumped = a.last_interval_bytes >= 2 * a.active_bytes + WAKE_MIN_JUMP_BYTES;
    // An eighth, not a quarter: a busy tenant squeezed after a burst (a sweep) sits near
    // a quarter of that burst's peak and faults when squeezed; that is no wake-up.
    // Or it was at rest until moments ago: between intervals no samples are taken,
    // so the last interval cannot show the jump yet.
    let was_quiet = a.active_bytes < a.peak_bytes / 8 || rested;
    let waking = faulting && (jumped || was_quiet);
    // Held for a window after waking, and on (up to [`WAKE_HOLD_WINDOWS`]) while it still
    // reads from the tier: on a slow tier a woken hot set takes minutes to come back,
    // and a quota let go after one window pushed it out again (it then "woke" again).
    let still_reading = t.tier_faults_per_sec >= WAKE_MIN_FAULTS;
    let recently_woke =
        !at_rest && t.woke_secs_ago.is_some_and(|s| s < window || (still_reading && s < WAKE_HOLD_WINDOWS * window));
    // A tenant that touched under a quarter of its window average in the last
    // interval (and is not faulting) is going quiet: count a quarter of its average, so
    // the DRAM it no longer uses moves to a tenant waking up now rather than a window
    // later (half was not enough: a waking neighbour with a hot set half the budget
    // still thrashed for 30 s). If it comes back, its faults give it its peak again.
    // Only a drop past the estimate's noise: a pusher back to its 128 MiB hot set after
    // a sweep read "0 B in the last interval" on a thin sample (active 56 ±56 MiB), was
    // cut by 694 MiB, faulted its hot set back and was taken for waking to its peak.
    let dropped = a.last_interval_bytes + a.ci_bytes < a.active_bytes / 4;
    let quiet = at_rest || (dropped && t.tier_faults_per_sec < WAKE_MIN_FAULTS);
    // At rest it needs only what it touches at rest: what it touched over the last
    // interval once that was all at rest (just after it stopped, the interval holds
    // its busy part). Its hot set is still kept while nobody needs the DRAM (see
    // [`Claim::keep`]); a quarter of its average as need took 32 MiB from each of
    // login-storm's four idle tenants while the busy ones were cut under their hot sets.
    // Two intervals, not one: a pass between intervals comes up to an interval after
    // the last samples were checked (at rest 5–6 s, login-storm tenants still counted
    // their whole busy interval, 193 MiB, as touched at rest).
    let rest_interval = t.at_rest_secs.is_some_and(|s| s >= 2.0 * interval);
    // Its phase shrank: the last two intervals each touched under half its window
    // average, and it does not read from the tier (a neighbour back to its hot set
    // after sweeping all of its memory). What it touches now counts: the average holds
    // the sweep for a whole window, and two such neighbours' claims kept a woken
    // tenant's quota under its hot set, DRAM short on paper, for 3 s after it woke.
    let shrunk =
        !quiet && t.tier_faults_per_sec < WAKE_MIN_FAULTS && a.recent_bytes.is_some_and(|r| r < a.active_bytes / 2);
    let recent = match (at_rest, quiet) {
        (true, _) => 0,
        (false, true) => a.active_bytes / 4,
        (false, false) if shrunk => a.recent_bytes.unwrap_or(0),
        (false, false) => a.active_bytes,
    };
    let last = if at_rest && !rest_interval { 0 } else { a.last_interval_bytes };
    let measured = recent.max(last) + a.ci_bytes;
    let mut why = format!(
        "active {} ±{} over {:.0} s, {} in the last interval",
        human(a.active_bytes),
        human(a.ci_bytes),
        window,
        human(a.last_interval_bytes)
    );
    if let Some(secs) = t.at_rest_secs {
        why += &format!(": at rest for {secs:.0} s (its CPU stopped), only what it touches at rest counts");
    } else if quiet {
        why += ": going quiet, a quarter of its average counts";
    } else if shrunk {
        why += &format!(": its phase shrank, what it touched in the last two intervals ({}) counts", human(recent));
    }
    let mut active = measured;
    if waking {
        active = active.max(a.peak_bytes);
        why = format!(
            "woke up: tier faults {:.0}/s vs {:.0}/s before, so back to its peak active {}",
            t.tier_faults_per_sec,
            t.tier_faults_per_sec_avg,
            human(a.peak_bytes)
        );
    } else if recently_woke {
        active = active.max(a.peak_bytes);
        let woke = t.woke_secs_ago.unwrap_or(0.0);
        let hold = if woke < window { "for one window" } else { "while it still reads from the tier" };
        why = format!("woke {woke:.0} s ago: kept at its peak active {} {hold}", human(a.peak_bytes));
    }
    // Headroom is room for bursts; a tenant going quiet has none coming (if it comes
    // back, its faults give it its peak). Given anyway, four quiet tenants' headroom
    // in login-storm's 8 took the DRAM the four busy ones' hot sets needed.
    let going_quiet = quiet && !waking && !recently_woke;
    let mut bytes = active + if going_quiet { 0 } else { headroom(active) };
    // What it left on the tier when it went idle: the peak alone misses the part of
    // its hot set that was on the tier while it was last busy (sampling sees resident
    // pages only), and the woken tenant then came back a fault at a time.
    if waking || recently_woke {
        // Only what those regions hold: DRAM also holds memory untouched since the fill.
        // With headroom, as any busy tenant: without it a woken 1 GiB hot set got a
        // quota 2% under it and thrashed for the 10 s until the next pass.
        let left: u64 = working_set(t, window).map(|r| r.dram_bytes + r.tier_bytes).sum();
        if left + headroom(left) > bytes {
            bytes = left + headroom(left);
            active = left;
            why += &format!(" or what it was using when it went idle, {}", human(left));
        }
    }
    // A tenant reading from the tier at a high rate needs more than it holds, whatever
    // the estimate says (under pressure, sampling sees less than is touched): grow it
    // by what it faults in over an interval, and again at the next while it still
    // faults. (Half a window was too much: a tenant reading back a 192 MiB hot set at
    // 7000 pages/s claimed 475 MiB, and its neighbours' idle hot sets were cut for it.)
    // Shares still bound what it gets. Only when what it reads back over a window is
    // more than the headroom of what it holds: a tenant squeezed by its neighbours'
    // growth at the group limit reads back a few pages a second (68/s in a test) and
    // then claimed all it held, cold memory too, as need.
    let faulted_in_window = t.tier_faults_per_sec * PAGE as f64 * window;
    if !at_rest && t.tier_faults_per_sec >= WAKE_MIN_FAULTS && faulted_in_window >= headroom(t.dram) as f64 {
        let held_and_faulting = t.dram + (t.tier_faults_per_sec * PAGE as f64 * interval) as u64;
        if held_and_faulting > bytes {
            bytes = held_and_faulting;
            active = held_and_faulting;
            why +=
                &format!("; reads {:.0} pages/s from the tier, so it needs more than it holds", t.tier_faults_per_sec);
        }
    }
    let floor = if at_rest { REST_QUOTA } else { MIN_QUOTA };
    let bytes = bytes.clamp(floor.min(size), ceiling(size));
    // Laying its working set out in runs reads scattered regions back a batch at a
    // time: room for the batch and the huge pages it is rebuilt into, if DRAM allows.
    let relayout_room = if at_rest && relayout_pending(t, window) { RELAYOUT_ROOM } else { 0 };
    if faulting && !waking {
        why += &format!("; faulting from the tier at {:.0}/s", t.tier_faults_per_sec);
    }
    let plus = if going_quiet { "" } else { " + headroom" };
    Need {
        bytes,
        active: active.min(bytes),
        waking,
        recently_woke,
        faulting,
        quiet,
        relayout_room,
        why: format!("{why}{plus} → needs {}", human(bytes)),
    }
}

fn throttle_reason(snap: &Snapshot) -> Option<String> {
    if let Some(us) = snap.tier.read_latency_us
        && health::tier_read_latency(us) == Colour::Red
    {
        return Some(format!("demotion throttled: tier read latency {us:.0} µs is above 400 µs"));
    }
    if snap.tier.utilization >= SATURATED {
        return Some(format!("demotion throttled: tier device busy {:.0}% of the time", snap.tier.utilization * 100.0));
    }
    None
}

/// The regions a tenant was working on when it went idle: those it reused within
/// `window` before its last rest began, and since. With no rest seen (a tenant that
/// never uses much CPU, or one that went quiet without stopping), the window ends at
/// the most recent reuse of a region it still has on the tier. Reuse, not any touch:
/// a region only filled, or only read back by tierd's own prefetch, is not worked on.
/// (Anchored at the newest *touched* region on the tier, a woken tenant whose hot set
/// was back in DRAM anchored on memory it had only filled, and claimed and prefetched
/// all it had: 510 MiB for a 192 MiB hot set in login-storm.)
fn working_set(t: &TenantView, window: f64) -> impl Iterator<Item = &Region> {
    let rested_lately = t.at_rest_secs.is_some() || t.since_rest_secs.is_some_and(|s| s <= WAKE_HOLD_WINDOWS * window);
    let anchor = t
        .rest_began_secs
        .filter(|_| rested_lately)
        .or_else(|| t.regions.iter().filter(|r| r.tier_bytes > 0).filter_map(|r| r.reused_secs).reduce(f64::min));
    t.regions.iter().filter(move |r| anchor.is_some_and(|a| r.reused_secs.is_some_and(|s| s <= a + window)))
}

/// What a resting tenant keeps, DRAM allowing, before busy tenants' headroom: all it
/// holds but the regions outside its working set, and [`WAKE_ROOM`] above that. Its
/// page tables and swap cache count (held against the working set alone, its quota
/// sat under its usage, and each pass cut and demoted 20 MiB of its hot set: 192 →
/// 153 MiB over a 13 s rest).
fn resting_hot_set(t: &TenantView, window: f64) -> u64 {
    let kept: u64 = working_set(t, window).map(|r| r.dram_bytes).sum();
    if kept == 0 {
        return 0;
    }
    let outside = t.regions.iter().map(|r| r.dram_bytes).sum::<u64>() - kept;
    t.dram.saturating_sub(outside) + WAKE_ROOM
}

/// Some region of a resting tenant's working set is on the tier in good part
/// ([`worth_laying_out`]) and not known to lie in runs.
fn relayout_pending(t: &TenantView, window: f64) -> bool {
    working_set(t, window).any(|r| worth_laying_out(r) && !r.laid_out)
}

/// At least an eighth of the region is on the tier. Less is what sampling leaves of a
/// hot region kept resident (1–2% in login-storm): a wake-up reads those few pages
/// back, where laying the region out would send the whole of it to the tier.
fn worth_laying_out(r: &Region) -> bool {
    r.tier_bytes > 0 && r.tier_bytes * 8 >= r.dram_bytes + r.tier_bytes
}

/// Most recently reused first: the order a woken tenant will want its regions back.
fn sort_by_recent_reuse(regions: &mut [&Region]) {
    regions.sort_by(|a, b| a.reused_secs.unwrap_or(f64::MAX).total_cmp(&b.reused_secs.unwrap_or(f64::MAX)));
}

/// The ranges of `regions`, in their order, as long as they add up to at most `budget`.
fn ranges_within(regions: Vec<&Region>, budget: u64) -> Vec<Range> {
    let mut total = 0;
    regions
        .into_iter()
        .take_while(|r| {
            total += r.range.len;
            total <= budget
        })
        .map(|r| r.range)
        .collect()
}

/// Regions of a resting tenant to lay out in runs on the tier this pass: those of its
/// working set going there now (`demote`) or there in good part already, not known to
/// lie in runs (a region with a few pages on the tier stays: it is the hot set the
/// quota keeps, and sampling leaves a few pages of every hot region on the tier — laid
/// out, a resting login-storm tenant sent 73 such regions out with 2.4 MiB read back,
/// and its kept hot set fell from 176 to 29 MiB);
/// up to `budget` bytes, most recently reused first (the first it will want back).
/// Only those going there anyway (`read_back` false) while the tier is throttled —
/// reading scattered pages back to re-lay them is work a slow tier cannot spare — and
/// before the rest has lasted an interval: a Redis tenant stalled for half a second
/// looked at rest, and reading 410 MiB back held the control loop for 5.7 s.
fn relayout_regions(t: &TenantView, window: f64, demote: &[Range], budget: u64, read_back: bool) -> Vec<Range> {
    let mut ws: Vec<&Region> = working_set(t, window)
        .filter(|r| !r.laid_out)
        .filter(|r| demote.contains(&r.range) || (worth_laying_out(r) && read_back))
        .collect();
    sort_by_recent_reuse(&mut ws);
    ranges_within(ws, budget)
}

/// Regions to prefetch for a waking tenant: those of its working set with pages on
/// the tier, those laid out in runs first, then most recently reused first, up to
/// `room` bytes. Memory it has not reused stays on the tier: read back, it would push
/// out neighbours' hot sets for nothing. Runs first because they are cheap: on the
/// hard-disk-like tier a region in runs comes back in a read or two, a scattered one
/// in ~260 (it lay in 2-page runs), 1.7 s at 150 reads/s; in recency order a woken
/// tenant's 53 scattered regions held back its 75 laid-out ones for minutes.
fn prefetch_regions(t: &TenantView, window: f64, room: u64) -> Vec<Range> {
    let mut hot: Vec<&Region> = working_set(t, window).filter(|r| r.tier_bytes > 0).collect();
    sort_by_recent_reuse(&mut hot);
    hot.sort_by_key(|r| !r.laid_out);
    let mut out = Vec::new();
    let mut total = 0;
    for r in hot {
        if total >= room {
            break;
        }
        total += r.tier_bytes;
        out.push(r.range);
    }
    out
}

/// Regions idle for at least `threshold` seconds, with the evidence of `evidence`
/// unreturned samples, that still hold DRAM; coldest first, up to `budget` bytes. With
/// no evidence asked for, regions never seen touched count as the coldest of all.
fn cold_regions(regions: &[Region], threshold: f64, budget: u64, evidence: u32) -> Vec<Range> {
    let idle = |r: &Region| r.idle_secs.or((evidence == 0).then_some(f64::MAX));
    let mut cold: Vec<&Region> = regions
        .iter()
        .filter(|r| r.dram_bytes > 0 && r.cold_samples >= evidence && idle(r).is_some_and(|s| s >= threshold))
        .collect();
    cold.sort_by(|a, b| idle(b).unwrap_or(0.0).total_cmp(&idle(a).unwrap_or(0.0)));
    let mut out = Vec::new();
    let mut total = 0;
    for r in cold {
        if total + r.dram_bytes > budget {
            break;
        }
        total += r.dram_bytes;
        out.push(r.range);
    }
    out
}

/// Regions that belong on huge pages, are (nearly) whole in DRAM on small pages and
/// were touched within `window` seconds: hottest first, up to `budget` bytes. Cold regions
/// stay split (they are the next to go to the tier, and a split page goes 4 KiB at a
/// time, only as far as needed).
fn collapse_regions(regions: &[Region], window: f64, budget: u64) -> Vec<Range> {
    let mut hot: Vec<&Region> = regions
        .iter()
        .filter(|r| r.wants_huge && r.huge_bytes == 0 && r.dram_bytes >= r.range.len / 2)
        // A few pages on the tier (the kernel's own reclaim at the limit takes some of
        // a split region) do not stop a rebuild: `MADV_COLLAPSE` reads them back.
        .filter(|r| r.tier_bytes <= r.range.len / 4)
        .filter(|r| r.idle_secs.is_some_and(|s| s <= window))
        .collect();
    hot.sort_by(|a, b| a.idle_secs.unwrap_or(f64::MAX).total_cmp(&b.idle_secs.unwrap_or(f64::MAX)));
    ranges_within(hot, budget)
}

pub fn plan(snap: &Snapshot) -> Plan {
    let budget = snap.dram_budget;
    let window = snap.window_secs.max(snap.interval_secs);
    let needs: Vec<Need> = snap.tenants.iter().map(|t| need(t, window, snap.interval_secs)).collect();
    let claims: Vec<Claim> = snap
        .tenants
        .iter()
        .zip(&needs)
        .map(|(t, n)| {
            let floor = t.spec.reserve.max(t.pinned);
            let cap = t.spec.limit.unwrap_or(budget).min(ceiling(t.size().max(MIN_QUOTA))).max(floor);
            let shares = t.spec.shares as u64;
            let at_rest = t.at_rest_secs.is_some();
            // What it reused within the window and holds is kept while nobody needs
            // it: a tenant idle between sessions keeps its hot set instead of reading
            // it back when it returns. (Not all it holds: memory only filled, or only
            // prefetched, would then crowd out the spare of the tenants that use theirs.)
            let recently_hot: u64 =
                t.regions.iter().filter(|r| r.reused_secs.is_some_and(|s| s <= window)).map(|r| r.dram_bytes).sum();
            // Then the rest of what it has reused at all and holds, with a burst's
            // room, up to its quota: re-divided by need each pass, Redis tenants'
            // quotas swung by 100–250 MiB within seconds, and each cut demoted a Zipf
            // tail the tenant then read back (tierd 0.80 of dram where plain swap's
            // one LRU held 1.03). Memory only filled or prefetched is not held.
            let reused: u64 = t.regions.iter().filter(|r| r.reused_secs.is_some()).map(|r| r.dram_bytes).sum();
            let hold = (reused.min(t.dram) + burst_room(n.active)).min(t.quota.unwrap_or(u64::MAX));
            Claim {
                floor,
                demand: n.bytes,
                // What it touches, and room for the samples in flight while it is busy.
                active: (n.active + if at_rest { 0 } else { SAMPLE_ROOM }).min(n.bytes),
                // A resting tenant's hot set, before busy tenants' headroom; a busy
                // one's counts in its need already.
                hot: if at_rest { resting_hot_set(t, window) } else { 0 },
                // Room to lay a resting working set out comes with what it keeps.
                keep: recently_hot.max(n.bytes + n.relayout_room),
                hold,
                cap,
                weight: shares,
                spare_weight: shares * (n.bytes >> 20).max(1),
            }
        })
        .collect();
    // Quotas the new division moves by less than a band stay where they are.
    let now: Vec<Option<u64>> = snap.tenants.iter().map(|t| t.quota).collect();
    let parts = damp(&divide(budget, &claims), &now, &claims);
    let total_need: u64 = claims.iter().map(|c| c.demand.min(c.cap).max(c.floor)).sum();
    let short = total_need > budget;
    let throttle = throttle_reason(snap);
    let total_shares: u64 = snap.tenants.iter().map(|t| t.spec.shares as u64).sum::<u64>().max(1);

    let mut notes = Vec::new();
    if short {
        notes.push(format!(
            "DRAM short: tenants need {} of the {} budget; reserves first, then shares decide",
            human(total_need),
            human(budget)
        ));
    }
    if let Some(r) = &throttle {
        notes.push(r.clone());
    }

    let tenants = snap
        .tenants
        .iter()
        .zip(needs)
        .zip(parts)
        .zip(&claims)
        .map(|(((t, n), part), claim)| {
            let quota = part;
            let mut reason = n.why.clone();
            if quota >= n.bytes {
                if claim.hot > n.bytes && quota > n.bytes {
                    let kept = quota.min(claim.hot);
                    reason += &format!(
                        "; quota {}: keeps {} for the hot set it used before resting and room to wake",
                        human(quota),
                        human(kept)
                    );
                    if quota > kept {
                        reason += &format!(" (+{} spare)", human(quota - kept));
                    }
                } else if quota > n.bytes {
                    reason += &format!("; quota {} (+{} spare)", human(quota), human(quota - n.bytes));
                } else {
                    reason += &format!("; quota {}", human(quota));
                }
            } else if let Some(limit) = t.spec.limit
                && limit < n.bytes
                && quota >= limit.min(claim.cap)
            {
                reason += &format!("; quota {}: capped by --limit {}", human(quota), human(limit));
            } else {
                reason += &format!(
                    "; quota {}: DRAM short, its share is {} of {}",
                    human(quota),
                    t.spec.shares,
                    total_shares
                );
            }
            if t.spec.reserve > 0 {
                reason += &format!(", reserve {}", human(t.spec.reserve));
            }

            let mut tp = TenantPlan::quota_only(t.spec.name.clone(), Some(quota), reason);
            tp.woke = n.waking;
            // A tenant whose hot pages are on the tier gets them back by region, at
            // sequential speed, instead of one demand fault at a time.
            if n.waking || n.recently_woke || n.faulting {
                // Bring back what it needs (its peak), not everything it has on the tier.
                let room =
                    quota.min(n.bytes).saturating_sub(t.dram).min((PREFETCH_RATE as f64 * snap.interval_secs) as u64);
                tp.prefetch = prefetch_regions(t, window, room);
                if !tp.prefetch.is_empty() {
                    let bytes: u64 =
                        t.regions.iter().filter(|r| tp.prefetch.contains(&r.range)).map(|r| r.tier_bytes).sum();
                    tp.reason += &format!("; prefetching {} in {} regions", human(bytes), tp.prefetch.len());
                }
            } else if t.dram > n.bytes.min(quota) && (throttle.is_none() || t.dram > quota) {
                // A quota cut below what a tenant holds makes the kernel reclaim the
                // difference anyway, a page at a time from its LRU, scattering each
                // region over the swap area. Its coldest regions are demoted whole
                // instead, before the cut (the engine does these first), so each lands
                // in a run of swap slots and a later prefetch reads it back sequentially.
                // Only as much as the cut (quotas wobble with the estimates).
                // A slow tier throttles only the latter: the cut writes the same bytes
                // to the tier either way, and the kernel's way is also slower (on
                // cgroup v1 a limit write reclaims 32 pages at a time: ~170 MiB/s here,
                // against 2 GiB/s for `MADV_PAGEOUT`), and the control loop waits on it.
                let cut = t.dram.saturating_sub(quota);
                // Ahead of pressure, only enough to keep room for a burst under the
                // quota: DRAM freed beyond that idles until the tenant reads the same
                // pages back. (Demoting all it held above its need, a Redis tenant whose
                // Zipf tail touches regions less often than once a window lost 17%
                // where plain swap lost nothing: the kernel left that tail resident.)
                let high_water = quota.saturating_sub(burst_room(n.active));
                let ahead = t.dram.saturating_sub(high_water).min(t.dram.saturating_sub(n.bytes));
                let (threshold, budget) = if cut > 0 {
                    (0.0, cut)
                } else if short {
                    (window / 2.0, ahead)
                } else {
                    (window, ahead)
                };
                let budget = budget.min((DEMOTE_RATE as f64 * snap.interval_secs) as u64);
                // A quiet tenant's cut needs no evidence: all it holds above a quarter of
                // its average is done with, and what the kernel would take instead, page
                // by page from its LRU, a wake-up then reads back at random (a woken
                // 1 GiB hot set came back at 150 MiB/s, against 1.5 GiB/s for regions
                // demoted whole).
                let evidence = if cut > 0 && n.quiet { 0 } else { COLD_EVIDENCE };
                tp.demote = cold_regions(&t.regions, threshold, budget, evidence);
                if !tp.demote.is_empty() {
                    if cut > 0 {
                        tp.reason += &format!("; demoting its {} coldest regions ahead of the cut", tp.demote.len());
                    } else {
                        tp.reason += &format!(
                            "; demoting {} regions idle ≥ {:.0} s to keep {} free for bursts",
                            tp.demote.len(),
                            threshold,
                            human(quota - high_water)
                        );
                    }
                }
            }
            // At rest, its working set goes to the tier in runs (see `TenantPlan::relayout`).
            if let Some(rest) = t.at_rest_secs {
                let budget = (RELAYOUT_RATE as f64 * snap.interval_secs) as u64;
                let room = n.relayout_room > 0 && quota >= n.bytes + n.relayout_room;
                if n.relayout_room > 0 {
                    tp.reason += &match room {
                        true => format!("; {} of room to lay its working set out in runs", human(n.relayout_room)),
                        false => "; no room to lay its working set out in runs while DRAM is short".to_string(),
                    };
                }
                let read_back = throttle.is_none() && rest >= snap.interval_secs && room;
                tp.relayout = relayout_regions(t, window, &tp.demote, budget, read_back);
                if !tp.relayout.is_empty() {
                    tp.reason += &format!("; laying {} regions of its working set out in runs", tp.relayout.len());
                }
            }
            // While it faults from the tier, only within the room under its quota: a
            // rebuild allocates and reads in synchronously, and in a thrashing cgroup at
            // its limit that stalled the control loop for 20 s. Otherwise at full rate
            // (its DRAM counts swap cache, so the room alone is too strict).
            let mut budget = (COLLAPSE_RATE as f64 * snap.interval_secs) as u64;
            if t.tier_faults_per_sec >= WAKE_MIN_FAULTS {
                budget = budget.min(quota.saturating_sub(t.dram));
            }
            tp.collapse = collapse_regions(&t.regions, window, budget);
            tp
        })
        .collect();
    Plan { group_limit: Some(budget), tenants, notes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;
    use crate::snapshot::{Activeness, Region};

    fn active(mut t: TenantView, bytes: u64) -> TenantView {
        t.activeness = Some(activeness(bytes, bytes, bytes));
        t
    }

    /// An exact estimate (no confidence interval) without window-wide figures.
    fn activeness(active_bytes: u64, peak_bytes: u64, last_interval_bytes: u64) -> Activeness {
        Activeness {
            active_bytes,
            ci_bytes: 0,
            peak_bytes,
            last_interval_bytes,
            touched_in_window_bytes: None,
            recent_bytes: None,
        }
    }

    fn quota(p: &Plan, name: &str) -> u64 {
        p.tenant(name).unwrap().quota.unwrap()
    }

    fn region(start: u64, idle: Option<f64>, dram: u64, tier: u64) -> Region {
        Region {
            range: Range { pid: 1, start, len: 2 * MIB },
            idle_secs: idle,
            reused_secs: idle,
            laid_out: false,
            cold_samples: 3,
            dram_bytes: dram,
            tier_bytes: tier,
            wants_huge: false,
            huge_bytes: 0,
        }
    }

    #[test]
    fn all_tenants_fit_and_quotas_follow_need() {
        let held = |t: TenantView, bytes: u64| TenantView { dram: bytes, ..t };
        let (ta, tb) = (active(tenant("a", GIB), 100 * MIB), active(tenant("b", GIB), 300 * MIB));
        let p = plan(&snap(GIB, vec![held(ta.clone(), 100 * MIB), held(tb.clone(), 300 * MIB)]));
        let (a, b) = (quota(&p, "a"), quota(&p, "b"));
        assert!(a >= 100 * MIB + headroom(100 * MIB), "{a}");
        assert!(b >= 300 * MIB + headroom(300 * MIB), "{b}");
        assert!(a + b <= GIB);
        assert!(a + b >= GIB - MIB, "the spare is handed out");
        let ratio = b as f64 / a as f64;
        let need_ratio = (300 * MIB + headroom(300 * MIB)) as f64 / (100 * MIB + headroom(100 * MIB)) as f64;
        assert!((ratio - need_ratio).abs() < 0.05, "spare follows need: {ratio} vs {need_ratio}");
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        assert!(p.tenant("a").unwrap().reason.contains("active 100 MiB"), "{}", p.tenant("a").unwrap().reason);
        // What a tenant holds beyond its need is kept before the spare is shared, if it
        // touched it within the window...
        let touched = |t: TenantView, idle: f64| TenantView {
            regions: (0..250).map(|i| region(i * 2 * MIB, Some(idle), 2 * MIB, 0)).collect(),
            ..t
        };
        let recent = touched(held(ta.clone(), 500 * MIB), 40.0);
        let p = plan(&snap(GIB, vec![recent, held(tb.clone(), 300 * MIB)]));
        assert!(quota(&p, "a") >= 500 * MIB, "{}", p.tenant("a").unwrap().reason);
        assert!(quota(&p, "b") >= 300 * MIB + headroom(300 * MIB));
        // ...or ever reused (a Zipf tail reused every minute or two), while nobody needs
        // the DRAM...
        let tail = touched(held(ta.clone(), 500 * MIB), 200.0);
        let p = plan(&snap(GIB, vec![tail, held(tb.clone(), 300 * MIB)]));
        assert!(quota(&p, "a") >= 500 * MIB, "{}", p.tenant("a").unwrap().reason);
        assert!(p.tenant("a").unwrap().demote.is_empty(), "{}", p.tenant("a").unwrap().reason);
        // ...but memory untouched since it was filled does not crowd out the spare.
        let mut stale = touched(held(ta, 500 * MIB), 200.0);
        stale.regions.iter_mut().for_each(|r| r.reused_secs = None);
        let p = plan(&snap(GIB, vec![stale, held(tb, 300 * MIB)]));
        let ratio = quota(&p, "b") as f64 / quota(&p, "a") as f64;
        assert!((ratio - need_ratio).abs() < 0.05, "spare follows need: {ratio} vs {need_ratio}");
    }

    #[test]
    fn quotas_stay_put_while_needs_wander_and_follow_a_need_that_grows() {
        let with = |name: &str, need: u64, quota: Option<u64>| TenantView {
            dram: need,
            quota,
            ..active(tenant(name, GIB), need)
        };
        let first = plan(&snap(GIB, vec![with("a", 100 * MIB, None), with("b", 300 * MIB, None)]));
        let (a, b) = (quota(&first, "a"), quota(&first, "b"));
        // Needs wander by a twentieth: the spare's split would move both quotas as
        // much; they stay.
        let p = plan(&snap(GIB, vec![with("a", 105 * MIB, Some(a)), with("b", 285 * MIB, Some(b))]));
        assert!(p.tenants.iter().all(|t| t.demote.is_empty()), "{p:?}");
        assert_eq!((quota(&p, "a"), quota(&p, "b")), (a, b), "{p:?}");
        // a's need grows past its quota: it gets its new part, and b is cut to pay.
        let p = plan(&snap(GIB, vec![with("a", 300 * MIB, Some(a)), with("b", 300 * MIB, Some(b))]));
        let again = plan(&snap(GIB, vec![with("a", 300 * MIB, None), with("b", 300 * MIB, None)]));
        assert_eq!((quota(&p, "a"), quota(&p, "b")), (quota(&again, "a"), quota(&again, "b")));
        assert!(quota(&p, "a") > a && quota(&p, "b") < b, "{p:?}");
    }

    #[test]
    fn when_activeness_exceeds_dram_shares_decide() {
        let mut a = active(tenant("a", 2 * GIB), GIB);
        a.spec.shares = 300;
        let b = active(tenant("b", 2 * GIB), GIB);
        let p = plan(&snap(GIB, vec![a, b]));
        assert_eq!(quota(&p, "a"), 3 * GIB / 4);
        assert_eq!(quota(&p, "b"), GIB / 4);
        assert!(p.notes[0].contains("DRAM short"), "{:?}", p.notes);
        assert!(p.tenant("b").unwrap().reason.contains("its share is 100 of 400"), "{}", p.tenant("b").unwrap().reason);
    }

    #[test]
    fn a_reserve_is_guaranteed() {
        let mut a = active(tenant("a", GIB), 100 * MIB);
        a.spec.reserve = 600 * MIB;
        let p = plan(&snap(GIB, vec![a, active(tenant("b", 2 * GIB), 2 * GIB)]));
        assert!(quota(&p, "a") >= 600 * MIB);
        assert!(quota(&p, "a") + quota(&p, "b") <= GIB);
    }

    #[test]
    fn a_limit_caps() {
        let mut a = active(tenant("a", GIB), 500 * MIB);
        a.spec.limit = Some(200 * MIB);
        let p = plan(&snap(4 * GIB, vec![a]));
        assert_eq!(quota(&p, "a"), 200 * MIB);
        assert!(p.tenant("a").unwrap().reason.contains("capped by --limit"));
    }

    #[test]
    fn a_waking_tenant_gets_its_peak_back_and_prefetches_its_hot_regions() {
        let mut a = tenant("a", GIB);
        a.activeness = Some(Activeness { ci_bytes: MIB, ..activeness(20 * MIB, 400 * MIB, 90 * MIB) });
        a.dram = 40 * MIB;
        a.tier_faults_per_sec = 3000.0;
        a.tier_faults_per_sec_avg = 5.0;
        a.regions = vec![
            region(0, Some(500.0), 0, 2 * MIB),
            region(2 * MIB, Some(30.0), 0, 2 * MIB),
            region(4 * MIB, Some(1.0), MIB, MIB),
            region(6 * MIB, None, 0, 2 * MIB),
        ];
        let b = active(tenant("b", GIB), 300 * MIB);
        let p = plan(&snap(GIB, vec![a, b]));
        let tp = p.tenant("a").unwrap();
        assert!(tp.woke);
        assert!(tp.quota.unwrap() >= 400 * MIB + headroom(400 * MIB), "{tp:?}");
        let starts: Vec<u64> = tp.prefetch.iter().map(|r| r.start).collect();
        // Most recently hot first; not what it last touched long before (500 s) or
        // never was seen touching (memory only written when it was filled).
        assert_eq!(starts, vec![4 * MIB, 2 * MIB], "most recently hot first");
        assert!(tp.reason.contains("woke up"), "{}", tp.reason);
        assert!(tp.demote.is_empty(), "no demotion while waking");
    }

    #[test]
    fn neighbours_back_to_their_hot_sets_after_a_sweep_leave_a_waking_tenant_its_working_set() {
        // Two neighbours swept all of their 1 GiB 20 s ago and are back to 128 MiB hot
        // sets: their window averages still hold the sweep (450 MiB), the last two
        // intervals touched 140 MiB. A tenant with a 1 GiB working set wakes.
        let neighbour = |name: &str| {
            let mut n = tenant(name, GIB);
            n.activeness = Some(Activeness {
                ci_bytes: 10 * MIB,
                recent_bytes: Some(140 * MIB),
                ..activeness(450 * MIB, 900 * MIB, 130 * MIB)
            });
            n.dram = 600 * MIB;
            n
        };
        let mut w = tenant("w", 1280 * MIB);
        w.activeness = Some(activeness(2 * MIB, 300 * MIB, 60 * MIB));
        w.dram = 16 * MIB;
        w.tier_faults_per_sec = 4500.0;
        w.tier_faults_per_sec_avg = 50.0;
        w.rest_began_secs = Some(60.0);
        w.since_rest_secs = Some(1.0);
        w.regions = (0..512).map(|i| region(i * 2 * MIB, Some(70.0), 0, 2 * MIB)).collect();
        let p = plan(&snap(2 * GIB, vec![neighbour("n1"), neighbour("n2"), w]));
        let tp = p.tenant("w").unwrap();
        assert!(tp.woke, "{}", tp.reason);
        assert!(tp.quota.unwrap() >= GIB + headroom(GIB), "its whole working set at once: {}", tp.reason);
        for n in ["n1", "n2"] {
            let r = &p.tenant(n).unwrap().reason;
            assert!(r.contains("phase shrank"), "{r}");
            assert!(quota(&p, n) >= 150 * MIB + headroom(150 * MIB), "{r}");
        }
        assert!(!p.notes.iter().any(|n| n.contains("DRAM short")), "{:?}", p.notes);
        // One quiet interval is not a phase: the interval before it touched the average.
        let mut bursty = neighbour("b");
        bursty.activeness.as_mut().unwrap().recent_bytes = Some(450 * MIB);
        let p = plan(&snap(2 * GIB, vec![bursty]));
        assert!(!p.tenant("b").unwrap().reason.contains("phase shrank"));
        assert!(quota(&p, "b") >= 460 * MIB, "{}", p.tenant("b").unwrap().reason);
    }

    #[test]
    fn a_quiet_tenant_faulting_at_a_jump_wakes_even_before_sampling_sees_it() {
        // Its hot pages are all on the tier, so the samples (of resident pages) barely
        // move; the fault rate says it woke.
        let mut a = tenant("a", GIB);
        a.activeness = Some(activeness(2 * MIB, 200 * MIB, 8 * MIB));
        a.dram = 40 * MIB;
        a.tier_faults_per_sec = 1300.0;
        a.tier_faults_per_sec_avg = 2.0;
        let p = plan(&snap(GIB, vec![a, active(tenant("b", GIB), 300 * MIB)]));
        let tp = p.tenant("a").unwrap();
        assert!(tp.woke, "{tp:?}");
        assert!(tp.quota.unwrap() >= 200 * MIB + headroom(200 * MIB), "back to its peak: {tp:?}");
    }

    #[test]
    fn a_tenant_faulting_just_after_its_rest_ended_is_waking() {
        // Idle 20 s of a 30 s window (active still half its peak), its last interval
        // quiet: only its rest, which ended a second ago, tells this from a busy tenant
        // squeezed by a neighbour.
        let mut a = active(tenant("a", 512 * MIB), 100 * MIB);
        a.activeness.as_mut().unwrap().peak_bytes = 200 * MIB;
        a.activeness.as_mut().unwrap().last_interval_bytes = 0;
        a.dram = 60 * MIB;
        a.tier_faults_per_sec = 2000.0;
        a.tier_faults_per_sec_avg = 10.0;
        let p = plan(&snap(GIB, vec![a.clone(), active(tenant("b", 512 * MIB), 200 * MIB)]));
        assert!(!p.tenant("a").unwrap().woke, "no sign of a rest: {}", p.tenant("a").unwrap().reason);
        a.since_rest_secs = Some(1.0);
        let p = plan(&snap(GIB, vec![a.clone(), active(tenant("b", 512 * MIB), 200 * MIB)]));
        let tp = p.tenant("a").unwrap();
        assert!(tp.woke, "{}", tp.reason);
        assert!(tp.quota.unwrap() >= 200 * MIB, "back to its peak: {}", tp.reason);
        a.since_rest_secs = Some(60.0);
        let p = plan(&snap(GIB, vec![a.clone(), active(tenant("b", 512 * MIB), 200 * MIB)]));
        assert!(!p.tenant("a").unwrap().woke, "a rest long ago says nothing");
        // On a hard-disk-like tier: 150 reads/s, against 60/s on average over a window
        // that holds its busy, squeezed time before the rest: still a wake-up, just
        // after a rest.
        a.tier_faults_per_sec = 150.0;
        a.tier_faults_per_sec_avg = 60.0;
        a.since_rest_secs = Some(1.0);
        let p = plan(&snap(GIB, vec![a, active(tenant("b", 512 * MIB), 200 * MIB)]));
        assert!(p.tenant("a").unwrap().woke, "{}", p.tenant("a").unwrap().reason);
    }

    #[test]
    fn a_squeezed_tenant_after_a_burst_is_not_waking() {
        // 120 MiB active after a 500 MiB sweep, faulting because its quota was cut.
        let mut a = active(tenant("a", GIB), 120 * MIB);
        a.activeness.as_mut().unwrap().peak_bytes = 500 * MIB;
        a.tier_faults_per_sec = 3300.0;
        a.tier_faults_per_sec_avg = 5.0;
        let p = plan(&snap(2 * GIB, vec![a]));
        assert!(!p.tenant("a").unwrap().woke);
    }

    #[test]
    fn faults_without_more_activity_are_not_a_wake_up() {
        let mut a = active(tenant("a", GIB), 250 * MIB);
        a.activeness.as_mut().unwrap().peak_bytes = 400 * MIB;
        a.tier_faults_per_sec = 600.0;
        a.tier_faults_per_sec_avg = 100.0;
        let p = plan(&snap(GIB, vec![a]));
        assert!(!p.tenant("a").unwrap().woke);
        assert!(p.tenant("a").unwrap().prefetch.is_empty());
    }

    #[test]
    fn a_busy_tenant_faulting_from_the_tier_gets_its_hot_regions_prefetched() {
        let mut a = active(tenant("a", GIB), 60 * MIB);
        a.activeness.as_mut().unwrap().last_interval_bytes = 4 * MIB;
        a.dram = 12 * MIB;
        a.tier_faults_per_sec = 480.0;
        a.tier_faults_per_sec_avg = 1.0;
        a.regions = (0..200).map(|i| region(i * 2 * MIB, Some(i as f64), 0, 2 * MIB)).collect();
        let p = plan(&snap(GIB, vec![a]));
        let tp = p.tenant("a").unwrap();
        assert!(!tp.woke, "busy, not waking");
        let bytes = tp.prefetch.len() as u64 * 2 * MIB;
        let need = 60 * MIB + headroom(60 * MIB);
        assert!(bytes >= need - 12 * MIB - 2 * MIB && bytes <= need - 12 * MIB + 2 * MIB, "{bytes} vs {need}");
        assert_eq!(tp.prefetch[0].start, 0, "most recently hot first");
        assert!(tp.reason.contains("faulting from the tier"), "{}", tp.reason);
    }

    #[test]
    fn a_thrashing_tenant_needs_more_than_it_holds() {
        let mut a = active(tenant("a", 2 * GIB), 200 * MIB);
        a.dram = 800 * MIB;
        a.tier_faults_per_sec = 5000.0;
        a.tier_faults_per_sec_avg = 5000.0;
        let p = plan(&snap(2 * GIB, vec![a, active(tenant("b", GIB), 100 * MIB)]));
        let tp = p.tenant("a").unwrap();
        // By what it faults in over an interval (10 s here), on top of what it holds.
        assert!(tp.quota.unwrap() >= 800 * MIB + 5000 * 4096 * 10, "{tp:?}");
        assert!(tp.reason.contains("pages/s from the tier"), "{}", tp.reason);
    }

    #[test]
    fn a_tenant_at_rest_yields_its_dram_at_once() {
        // It woke 20 s ago and was busy most of the last interval (200 MiB touched,
        // 300 faults/s), but its CPU stopped a second ago. Two busy neighbours.
        let mut r = active(tenant("r", 512 * MIB), 200 * MIB);
        r.woke_secs_ago = Some(20.0);
        r.tier_faults_per_sec = 300.0;
        r.dram = 230 * MIB;
        let busy = |name: &str| active(tenant(name, 512 * MIB), 200 * MIB);
        let p = plan(&snap(600 * MIB, vec![r.clone(), busy("b1"), busy("b2")]));
        assert!(quota(&p, "r") >= 190 * MIB, "the interval alone holds it: {}", p.tenant("r").unwrap().reason);
        r.at_rest_secs = Some(1.0);
        let p = plan(&snap(600 * MIB, vec![r.clone(), busy("b1"), busy("b2")]));
        let tp = p.tenant("r").unwrap();
        assert!(tp.quota.unwrap() < 100 * MIB, "{}", tp.reason);
        assert!(tp.reason.contains("at rest for 1 s"), "{}", tp.reason);
        assert!(
            tp.reason.contains(&format!("needs {}", human(REST_QUOTA))),
            "the busy interval does not count: {}",
            tp.reason
        );
        assert!(!tp.woke, "{}", tp.reason);
        for b in ["b1", "b2"] {
            assert!(quota(&p, b) >= 200 * MIB + headroom(200 * MIB), "{}", p.tenant(b).unwrap().reason);
        }
        // Until two intervals into its rest, the last interval may still hold its busy
        // part (a pass between intervals comes up to an interval after the samples).
        r.at_rest_secs = Some(15.0);
        let p = plan(&snap(600 * MIB, vec![r.clone(), busy("b1"), busy("b2")]));
        let tp = p.tenant("r").unwrap();
        assert!(tp.reason.contains(&format!("needs {}", human(REST_QUOTA))), "{}", tp.reason);
        // Then what it touched over the last interval is what it touches at rest.
        r.at_rest_secs = Some(25.0);
        r.activeness.as_mut().unwrap().last_interval_bytes = 30 * MIB;
        let p = plan(&snap(600 * MIB, vec![r, busy("b1"), busy("b2")]));
        let tp = p.tenant("r").unwrap();
        assert!(tp.reason.contains(&format!("needs {}", human(30 * MIB))), "{}", tp.reason);
    }

    #[test]
    fn quiet_tenants_get_no_headroom_when_busy_ones_need_the_dram() {
        // login-storm's 8: four busy tenants with 190 MiB hot sets, four that went
        // quiet after using 200 MiB, on 1000 MiB.
        let busy = |i: usize| active(tenant(&format!("b{i}"), 512 * MIB), 190 * MIB);
        let quiet = |i: usize| {
            let mut q = active(tenant(&format!("q{i}"), 512 * MIB), 200 * MIB);
            q.activeness.as_mut().unwrap().last_interval_bytes = 0;
            q
        };
        let all: Vec<TenantView> = (0..4).map(busy).chain((0..4).map(quiet)).collect();
        let p = plan(&snap(1000 * MIB, all));
        for i in 0..4 {
            assert!(quota(&p, &format!("b{i}")) >= 190 * MIB, "{}", p.tenant(&format!("b{i}")).unwrap().reason);
            let q = p.tenant(&format!("q{i}")).unwrap();
            assert!(q.quota.unwrap() >= 50 * MIB, "a quarter of its average: {}", q.reason);
            assert!(!q.reason.contains("headroom"), "{}", q.reason);
        }
    }

    #[test]
    fn a_trickle_of_tier_faults_does_not_turn_what_is_held_into_need() {
        // 64 MiB hot in 512 MiB; it holds 125 MiB and reads back 68 pages/s (17 MiB a
        // window, under the headroom of what it holds) as a neighbour grows.
        let mut a = active(tenant("a", 512 * MIB), 64 * MIB);
        a.dram = 125 * MIB;
        a.tier_faults_per_sec = 68.0;
        a.tier_faults_per_sec_avg = 68.0;
        let mut b = active(tenant("b", 512 * MIB), 256 * MIB);
        b.dram = 380 * MIB;
        let p = plan(&snap(512 * MIB, vec![a, b]));
        let ratio = quota(&p, "b") as f64 / quota(&p, "a") as f64;
        let need_ratio = (256 * MIB + headroom(256 * MIB)) as f64 / (64 * MIB + headroom(64 * MIB)) as f64;
        assert!((ratio - need_ratio).abs() < 0.05, "quotas follow the hot sets: {ratio:.2} vs {need_ratio:.2}");
        assert!(!p.tenant("a").unwrap().reason.contains("needs more than it holds"));
    }

    #[test]
    fn wake_up_prefetch_stops_at_need() {
        let mut a = tenant("a", GIB);
        a.activeness = Some(activeness(0, 4 * MIB, 20 * MIB));
        a.tier_faults_per_sec = 500.0;
        a.dram = 0;
        // Touched a second apart over 100 s: only the last window's worth is what it
        // was using when it went idle.
        let window = snap(GIB, Vec::new()).window_secs;
        a.regions = (0..100).map(|i| region(i * 2 * MIB, Some(i as f64), 0, 2 * MIB)).collect();
        let p = plan(&snap(GIB, vec![a.clone()]));
        let tp = p.tenant("a").unwrap();
        assert!(tp.woke);
        let bytes = tp.prefetch.len() as u64 * 2 * MIB;
        let need = (20 * MIB + headroom(20 * MIB)).max(500 * 4096 * 10).max((window as u64 + 1) * 2 * MIB);
        assert!(bytes <= need + 2 * MIB && bytes >= need - 2 * MIB, "prefetch {bytes} for need {need}");
        let newest: Vec<u64> = tp.prefetch.iter().map(|r| r.start).take(3).collect();
        assert_eq!(newest, vec![0, 2 * MIB, 4 * MIB], "most recently touched first");

        // Regions known to lie in runs come back first (cheap reads), newest first
        // among them; then the scattered ones, newest first.
        for i in [5, 9] {
            a.regions[i].laid_out = true;
        }
        let p = plan(&snap(GIB, vec![a]));
        let order: Vec<u64> = p.tenant("a").unwrap().prefetch.iter().map(|r| r.start / (2 * MIB)).take(4).collect();
        assert_eq!(order, vec![5, 9, 0, 1]);
    }

    #[test]
    fn a_woken_tenant_gets_back_what_it_left_on_the_tier_even_past_its_measured_peak() {
        // Its hot set (300 regions) was half on the tier while it was busy, so the
        // peak measured only 200 MiB; it idled 60 s; what it touched only when it
        // filled its memory (100 regions, 150 s ago) stays on the tier.
        let mut a = tenant("a", 2 * GIB);
        a.activeness = Some(activeness(MIB, 200 * MIB, 30 * MIB));
        a.tier_faults_per_sec = 800.0;
        a.tier_faults_per_sec_avg = 1.0;
        a.dram = 0;
        a.regions = (0..300).map(|i| region(i * 2 * MIB, Some(60.0 + (i % 10) as f64), 0, 2 * MIB)).collect();
        a.regions.extend((300..400).map(|i| region(i * 2 * MIB, Some(150.0), 0, 2 * MIB)));
        let p = plan(&snap(4 * GIB, vec![a]));
        let tp = p.tenant("a").unwrap();
        assert!(tp.woke);
        assert!(quota(&p, "a") >= 600 * MIB, "quota {}", quota(&p, "a"));
        assert!(tp.reason.contains("what it was using when it went idle, 600 MiB"), "{}", tp.reason);
        assert_eq!(tp.prefetch.len(), 300, "the hot set, not the memory only touched at fill");
        assert!(tp.prefetch.iter().all(|r| r.start < 600 * MIB));
    }

    #[test]
    fn a_woken_tenant_wants_back_what_it_reused_before_its_rest_not_what_it_filled_or_tierd_prefetched() {
        // Login-storm's u1, 2 s after waking: its 192 MiB hot set (96 regions) was
        // reused up to its rest 22 s ago and is half back in DRAM; the other 160 regions
        // it only filled (touched 40 s ago, never reused), and the last 70 of them tierd
        // had read back (touched 1 s ago, no reuse). Anchored at the newest touched
        // region on the tier, this tenant claimed all 510 MiB and prefetched it.
        let mut u = active(tenant("u1", 512 * MIB), 10 * MIB);
        u.activeness.as_mut().unwrap().peak_bytes = 175 * MIB;
        u.tier_faults_per_sec = 3000.0;
        u.tier_faults_per_sec_avg = 100.0;
        u.rest_began_secs = Some(22.0);
        u.since_rest_secs = Some(2.0);
        u.dram = 96 * MIB;
        let hot =
            |i: u64| Region { idle_secs: Some(1.0), ..region(i * 2 * MIB, Some(22.0 + (i % 8) as f64), MIB, MIB) };
        u.regions = (0..96).map(hot).collect();
        u.regions
            .extend((96..186).map(|i| Region { reused_secs: None, ..region(i * 2 * MIB, Some(40.0), 0, 2 * MIB) }));
        u.regions
            .extend((186..256).map(|i| Region { reused_secs: None, ..region(i * 2 * MIB, Some(1.0), 0, 2 * MIB) }));
        let busy = active(tenant("b", GIB), 700 * MIB);
        let p = plan(&snap(GIB, vec![u.clone(), busy.clone()]));
        let tp = p.tenant("u1").unwrap();
        assert!(tp.woke, "{}", tp.reason);
        assert!(quota(&p, "u1") < 300 * MIB, "its hot set and headroom, not all it has: {}", tp.reason);
        assert_eq!(tp.prefetch.len(), 96, "{}", tp.reason);
        assert!(tp.prefetch.iter().all(|r| r.start < 192 * MIB), "only what it reused");
        // With no rest seen, the window ends at the newest reuse of a region on the tier.
        u.rest_began_secs = None;
        u.since_rest_secs = None;
        u.activeness.as_mut().unwrap().peak_bytes = 1500 * MIB;
        u.activeness.as_mut().unwrap().active_bytes = 10 * MIB;
        let p = plan(&snap(2 * GIB, vec![u, busy]));
        let tp = p.tenant("u1").unwrap();
        assert!(tp.woke, "{}", tp.reason);
        assert_eq!(tp.prefetch.len(), 96, "{}", tp.reason);
    }

    #[test]
    fn a_resting_tenants_working_set_goes_to_the_tier_laid_out_in_runs() {
        // At rest 12 s: its working set (100 regions reused 10–40 s ago) is 60 regions on
        // the tier and 40 in DRAM; 50 more regions it only filled are on the tier. A
        // busy neighbour touches all the DRAM but what the resting tenant needs and its
        // room to lay its working set out (the resting hot set goes before the busy
        // one's headroom, not before what it touches).
        let mut r = active(tenant("r", GIB), 200 * MIB);
        r.at_rest_secs = Some(12.0);
        r.rest_began_secs = Some(12.0);
        r.activeness.as_mut().unwrap().last_interval_bytes = 0;
        r.dram = 80 * MIB;
        let ws = |i: u64, dram: u64| Region {
            idle_secs: Some(10.0),
            ..region(i * 2 * MIB, Some(10.0 + (i % 30) as f64), dram, 2 * MIB - dram)
        };
        r.regions = (0..60).map(|i| ws(i, 0)).collect();
        r.regions.extend((60..100).map(|i| ws(i, 2 * MIB)));
        r.regions
            .extend((100..150).map(|i| Region { reused_secs: None, ..region(i * 2 * MIB, Some(300.0), 0, 2 * MIB) }));
        let busy = active(tenant("busy", 2 * GIB), 700 * MIB);
        let budget = 700 * MIB + SAMPLE_ROOM + REST_QUOTA + RELAYOUT_ROOM;
        let p = plan(&snap(budget, vec![r.clone(), busy.clone()]));
        let tp = p.tenant("r").unwrap();
        // The cut (80 → 40 MiB) sends 20 of the 40 resident regions to the tier.
        assert_eq!(quota(&p, "r"), REST_QUOTA + RELAYOUT_ROOM, "{}", tp.reason);
        assert_eq!(tp.relayout.len(), 80, "its working set on the tier or going there: {}", tp.reason);
        assert!(tp.relayout.iter().all(|x| x.start < 200 * MIB), "not what it only filled");
        assert!(tp.demote.iter().all(|d| tp.relayout.contains(d)), "what the cut sends is laid out, or else demoted");
        assert!(tp.reason.contains("of room to lay its working set out in runs"), "{}", tp.reason);
        // Once every region is known to lie in runs: nothing more to do, no extra room.
        let mut laid = r.clone();
        laid.regions.iter_mut().for_each(|x| x.laid_out = true);
        let p = plan(&snap(budget, vec![laid, busy.clone()]));
        let tp = p.tenant("r").unwrap();
        assert!(tp.relayout.is_empty() && !tp.reason.contains("room to lay"), "{}", tp.reason);
        // On a tier at red latency, only what goes to the tier anyway is laid out.
        let mut slow = snap(budget, vec![r.clone(), busy.clone()]);
        slow.tier.read_latency_us = Some(900.0);
        let p = plan(&slow);
        let tp = p.tenant("r").unwrap();
        assert_eq!(tp.relayout.len(), 20, "{}", tp.reason);
        assert!(tp.relayout.iter().all(|x| (120 * MIB..200 * MIB).contains(&x.start)), "{:?}", tp.relayout);
        // Nor is what lies scattered read back before the rest has lasted an interval
        // (a tenant stalled for a moment looks at rest too).
        let mut fresh = r.clone();
        fresh.at_rest_secs = Some(1.0);
        let p = plan(&snap(budget, vec![fresh, busy.clone()]));
        assert_eq!(p.tenant("r").unwrap().relayout.len(), 20, "{}", p.tenant("r").unwrap().reason);
        // With DRAM short of the busy tenant's need, the room is not given: the cut
        // (80 → 8 MiB) goes to the tier laid out in runs, but nothing is read back.
        let p = plan(&snap(budget - RELAYOUT_ROOM - 16 * MIB, vec![r.clone(), busy.clone()]));
        let tp = p.tenant("r").unwrap();
        assert_eq!(quota(&p, "r"), REST_QUOTA, "{}", tp.reason);
        assert!(tp.reason.contains("no room to lay its working set out"), "{}", tp.reason);
        assert_eq!(tp.relayout.len(), 36, "only the regions the cut sends: {}", tp.reason);
        assert!(tp.relayout.iter().all(|x| (120 * MIB..200 * MIB).contains(&x.start)), "{:?}", tp.relayout);
        // A region with a few pages on the tier (what sampling leaves) is the hot set
        // the quota keeps: it stays, however those few lie.
        let mut sampled = r.clone();
        sampled.regions.iter_mut().filter(|x| x.tier_bytes > 0).for_each(|x| {
            x.dram_bytes = 2 * MIB - 64 * 1024;
            x.tier_bytes = 64 * 1024;
        });
        sampled.dram = 200 * MIB;
        let p = plan(&snap(GIB, vec![sampled, busy.clone()]));
        let tp = p.tenant("r").unwrap();
        assert!(tp.relayout.is_empty() && !tp.reason.contains("room to lay"), "{}", tp.reason);
        // A busy tenant's working set is never laid out: it would fight the kernel.
        let mut b = r;
        b.at_rest_secs = None;
        let p = plan(&snap(budget, vec![b, busy]));
        assert!(p.tenant("r").unwrap().relayout.is_empty());
    }

    #[test]
    fn a_recent_wake_holds_the_peak_for_a_window() {
        let mut a = active(tenant("a", GIB), 50 * MIB);
        a.activeness.as_mut().unwrap().peak_bytes = 400 * MIB;
        a.woke_secs_ago = Some(20.0);
        let p = plan(&snap(GIB, vec![a.clone()]));
        assert!(quota(&p, "a") >= 400 * MIB);
        a.woke_secs_ago = Some(90.0); // the window is 60 s
        let b = active(tenant("b", 4 * GIB), 4 * GIB);
        let p = plan(&snap(2 * GIB, vec![a.clone(), b.clone()]));
        assert!(quota(&p, "a") < 400 * MIB, "the peak is let go after a window");
        // Still reading from the tier (a slow one), it keeps the peak a while longer.
        a.dram = 100 * MIB;
        a.tier_faults_per_sec = 2.0 * WAKE_MIN_FAULTS;
        a.tier_faults_per_sec_avg = 2.0 * WAKE_MIN_FAULTS;
        let p = plan(&snap(2 * GIB, vec![a.clone(), b.clone()]));
        assert!(quota(&p, "a") >= 400 * MIB, "{}", p.tenant("a").unwrap().reason);
        assert!(p.tenant("a").unwrap().reason.contains("still reads from the tier"));
        a.woke_secs_ago = Some(WAKE_HOLD_WINDOWS * 60.0 + 1.0);
        let p = plan(&snap(2 * GIB, vec![a, b]));
        assert!(quota(&p, "a") < 400 * MIB, "but not for ever: {}", p.tenant("a").unwrap().reason);
    }

    #[test]
    fn a_device_at_red_latency_stops_demotion_and_says_so() {
        let mut a = active(tenant("a", GIB), 100 * MIB);
        a.dram = 600 * MIB;
        a.regions = vec![region(0, Some(600.0), 2 * MIB, 0), region(2 * MIB, Some(600.0), 2 * MIB, 0)];
        // At its quota (600 MiB of DRAM), so cold regions are due to make room.
        let mut s = snap(600 * MIB, vec![a.clone()]);
        let p = plan(&s);
        assert_eq!(p.tenant("a").unwrap().demote.len(), 2, "cold regions go while the tier is healthy");
        s.tier.read_latency_us = Some(800.0);
        let p = plan(&s);
        assert!(p.tenant("a").unwrap().demote.is_empty());
        assert!(p.notes.iter().any(|n| n.contains("throttled") && n.contains("800 µs")), "{:?}", p.notes);
        s.tier.read_latency_us = Some(100.0);
        s.tier.utilization = 0.95;
        assert!(plan(&s).tenant("a").unwrap().demote.is_empty(), "a saturated device throttles too");
        // A cut below what it holds is written to the tier either way: its cold
        // regions still go first, whole.
        let b = active(tenant("b", GIB), 900 * MIB);
        let mut s = snap(GIB, vec![a, b]);
        s.tier.read_latency_us = Some(800.0);
        let p = plan(&s);
        assert!(p.tenant("a").unwrap().quota.unwrap() < 600 * MIB, "{}", p.tenant("a").unwrap().reason);
        assert_eq!(p.tenant("a").unwrap().demote.len(), 2, "{}", p.tenant("a").unwrap().reason);
    }

    #[test]
    fn demotion_ahead_of_pressure_keeps_room_for_a_burst_and_no_more() {
        // A Redis-like tenant: 100 MiB active, 1 GiB in all, alone on 512 MiB of DRAM,
        // so its quota (512 MiB) is far above its need. Its Zipf tail leaves regions idle
        // for a window now and then; the tenant reads them back later.
        let mut a = active(tenant("a", GIB), 100 * MIB);
        a.regions = vec![region(0, Some(30.0), 2 * MIB, 0)]; // warm: stays
        a.regions.extend((1..=40).map(|i| region(i * 2 * MIB, Some(100.0 + i as f64), 2 * MIB, 0)));
        a.regions.push(region(41 * 2 * MIB, None, 2 * MIB, 0)); // never seen touched: unknown, stays
        // Well under its quota: nothing is demoted (it would idle as free DRAM until the
        // tenant faults the same pages back).
        a.dram = 300 * MIB;
        let p = plan(&snap(512 * MIB, vec![a.clone()]));
        let tp = p.tenant("a").unwrap();
        assert_eq!(tp.quota, Some(512 * MIB));
        assert!(tp.demote.is_empty(), "{}", tp.reason);
        // At its quota: the coldest regions go, as much as keeps a burst's room free.
        a.dram = 512 * MIB;
        let p = plan(&snap(512 * MIB, vec![a.clone()]));
        let tp = p.tenant("a").unwrap();
        let room = burst_room(100 * MIB);
        let demoted = tp.demote.len() as u64 * 2 * MIB;
        assert!(demoted <= room && demoted + 2 * MIB > room, "{demoted} demoted for {room} of room: {}", tp.reason);
        let coldest_first: Vec<u64> = (0..tp.demote.len() as u64).map(|i| (40 - i) * 2 * MIB).collect();
        assert_eq!(tp.demote.iter().map(|r| r.start).collect::<Vec<_>>(), coldest_first, "coldest first");
        assert!(tp.reason.contains("free for bursts"), "{}", tp.reason);
        // Never below what it needs, however cold the rest.
        let mut small = active(tenant("b", GIB), 100 * MIB);
        small.regions = a.regions.clone();
        small.dram = 100 * MIB + headroom(100 * MIB) + 3 * MIB;
        let p = plan(&snap(small.dram, vec![small]));
        assert_eq!(p.tenant("b").unwrap().demote.len(), 1, "at most the 3 MiB above its need");
    }

    #[test]
    fn an_unmeasured_tenant_counts_as_fully_active() {
        let p = plan(&snap(GIB, vec![tenant("new", 512 * MIB), active(tenant("old", GIB), 900 * MIB)]));
        assert!(quota(&p, "new") >= 400 * MIB, "{}", quota(&p, "new"));
    }

    #[test]
    fn a_noisy_neighbour_takes_only_its_share() {
        let steady: Vec<TenantView> = (0..3).map(|i| active(tenant(&format!("s{i}"), 512 * MIB), 64 * MIB)).collect();
        let mut all = steady;
        all.push(active(tenant("noisy", 2 * GIB), 2 * GIB));
        let p = plan(&snap(GIB, all));
        for i in 0..3 {
            assert!(quota(&p, &format!("s{i}")) >= 64 * MIB + headroom(64 * MIB), "steady hot sets keep their DRAM");
        }
        assert!(quota(&p, "noisy") <= GIB - 3 * (64 * MIB + headroom(64 * MIB)));
    }

    #[test]
    fn huge_regions_are_rebuilt_once_resident() {
        let mut a = active(tenant("a", GIB), 100 * MIB);
        let mut r = region(0, Some(1.0), 2 * MIB, 0);
        r.wants_huge = true;
        let mut on_tier = region(2 * MIB, Some(1.0), MIB, MIB);
        on_tier.wants_huge = true;
        // A few pages taken by the kernel's reclaim: the rebuild reads them back.
        let mut nearly = region(4 * MIB, Some(1.0), 2 * MIB - 256 * 1024, 256 * 1024);
        nearly.wants_huge = true;
        a.regions = vec![r, on_tier, nearly];
        a.dram = 200 * MIB;
        let p = plan(&snap(GIB, vec![a.clone()]));
        assert_eq!(p.tenant("a").unwrap().collapse, vec![r.range, nearly.range]);
        // Not while it faults from the tier with no room under its quota.
        let mut full = a;
        full.dram = GIB;
        full.tier_faults_per_sec = WAKE_MIN_FAULTS;
        assert!(plan(&snap(GIB, vec![full])).tenant("a").unwrap().collapse.is_empty());
    }

    /// A 512 MiB tenant at rest 10 s, holding the 192 MiB hot set (96 regions) it
    /// reused until then.
    fn resting_with_hot_set(name: &str) -> TenantView {
        let mut r = active(tenant(name, 512 * MIB), 192 * MIB);
        r.activeness.as_mut().unwrap().last_interval_bytes = 0;
        r.at_rest_secs = Some(10.0);
        r.rest_began_secs = Some(10.0);
        r.dram = 192 * MIB;
        r.regions = (0..96).map(|j| region(j * 2 * MIB, Some(12.0), 2 * MIB, 0)).collect();
        r
    }

    #[test]
    fn resting_tenants_keep_hot_sets_that_fit_before_busy_ones_get_burst_room() {
        // login-storm's 5 on 1 GiB: three busy tenants with 192 MiB hot sets, two at
        // rest 10 s holding the 192 MiB they used until then. The hot sets fit (960
        // MiB); their headroom does not. The resting ones keep their hot sets, the busy
        // ones get what they touch and what is left as headroom. (With headroom first
        // the resting ones were cut to a median of 42 MiB and read their hot sets back
        // at their next login: 0.53 M ops/s in its first second against swap's 2.18 M.)
        let busy = |i: usize| {
            let mut b = active(tenant(&format!("b{i}"), 512 * MIB), 192 * MIB);
            b.dram = 230 * MIB;
            b
        };
        let resting = |i: usize| {
            let mut r = resting_with_hot_set(&format!("r{i}"));
            r.dram = 200 * MIB;
            r.regions.iter_mut().enumerate().for_each(|(j, x)| x.reused_secs = Some(12.0 + (j % 10) as f64));
            r.regions.extend((96..100).map(|j| region(j * 2 * MIB, None, 2 * MIB, 0)));
            r
        };
        let all: Vec<TenantView> = (0..3).map(busy).chain((0..2).map(resting)).collect();
        let p = plan(&snap(GIB, all.clone()));
        for i in 0..2 {
            let r = p.tenant(&format!("r{i}")).unwrap();
            assert!(r.quota.unwrap() >= 192 * MIB, "its hot set: {}", r.reason);
            assert!(r.reason.contains("for the hot set it used before resting"), "{}", r.reason);
        }
        let busy_total: u64 = (0..3).map(|i| quota(&p, &format!("b{i}"))).sum();
        for i in 0..3 {
            let b = p.tenant(&format!("b{i}")).unwrap();
            assert!(b.quota.unwrap() >= 192 * MIB + SAMPLE_ROOM, "what it touches and room for samples: {}", b.reason);
        }
        assert!(busy_total + 2 * 192 * MIB <= GIB, "{busy_total}");
        // With a little more DRAM each keeps its hot set and room to wake, not the
        // 8 MiB it only filled, and the busy ones share the rest as headroom.
        let p = plan(&snap(1100 * MIB, all.clone()));
        for i in 0..2 {
            assert_eq!(
                quota(&p, &format!("r{i}")),
                192 * MIB + WAKE_ROOM,
                "{}",
                p.tenant(&format!("r{i}")).unwrap().reason
            );
        }
        for i in 0..3 {
            assert!(
                quota(&p, &format!("b{i}")) > 192 * MIB + SAMPLE_ROOM,
                "{}",
                p.tenant(&format!("b{i}")).unwrap().reason
            );
        }
        // A resting hot set never goes before what a busy tenant touches: on 900 MiB
        // the busy ones get 192 MiB each, and the resting ones share the rest.
        let p = plan(&snap(900 * MIB, all));
        for i in 0..3 {
            assert!(quota(&p, &format!("b{i}")) >= 192 * MIB, "{}", p.tenant(&format!("b{i}")).unwrap().reason);
        }
        let rested: u64 = (0..2).map(|i| quota(&p, &format!("r{i}"))).sum();
        assert!((2 * REST_QUOTA..2 * 192 * MIB).contains(&rested), "{rested}");
    }

    #[test]
    fn a_woken_tenants_working_set_goes_before_resting_hot_sets() {
        // login-storm's 6: it woke a second after its rest; its peak estimate is 165 MiB
        // but it was using 192 MiB when it went idle (on the tier now). Two busy
        // neighbours and three resting ones holding 192 MiB each, on 1 GiB: what it was
        // using counts as what it touches, before the resting hot sets. (As headroom
        // over its peak it got 181 MiB while the resting kept 125 MiB each, and it
        // thrashed for 7 s.)
        let mut w = active(tenant("w", 512 * MIB), 165 * MIB);
        w.activeness.as_mut().unwrap().last_interval_bytes = 0;
        w.since_rest_secs = Some(1.0);
        w.rest_began_secs = Some(21.0);
        w.tier_faults_per_sec = 3000.0;
        w.tier_faults_per_sec_avg = 5.0;
        w.dram = 40 * MIB;
        w.regions = (0..96).map(|j| region(j * 2 * MIB, Some(25.0), 0, 2 * MIB)).collect();
        let busy = |i: usize| active(tenant(&format!("b{i}"), 512 * MIB), 192 * MIB);
        let resting = |i: usize| resting_with_hot_set(&format!("r{i}"));
        let all: Vec<TenantView> = std::iter::once(w).chain((0..2).map(busy)).chain((0..3).map(resting)).collect();
        let p = plan(&snap(GIB, all));
        let tp = p.tenant("w").unwrap();
        assert!(tp.woke, "{}", tp.reason);
        assert!(tp.quota.unwrap() >= 192 * MIB + SAMPLE_ROOM, "its working set: {}", tp.reason);
        let rested: u64 = (0..3).map(|i| quota(&p, &format!("r{i}"))).sum();
        assert!(rested <= GIB - 3 * (192 * MIB + SAMPLE_ROOM), "{rested}");
    }

    #[test]
    fn a_tenant_idle_between_sessions_keeps_its_hot_set_while_nobody_needs_the_dram() {
        // Its 400 MiB hot set was touched 25 s ago; now it touches nothing. Two busy
        // neighbours need 500 MiB of the 1.5 GiB: it keeps its hot set. (It used to be
        // cut to a quarter of its average and demoted, and then read it all back when
        // its user logged in again 20 s later: tierd lost 36% where swap lost 2%.)
        let mut q = active(tenant("q", GIB), 400 * MIB);
        q.activeness.as_mut().unwrap().last_interval_bytes = 0;
        q.dram = 560 * MIB;
        q.regions = (0..200).map(|i| region(i * 2 * MIB, Some(25.0), 2 * MIB, 0)).collect();
        q.regions.extend((200..280).map(|i| region(i * 2 * MIB, Some(70.0), 2 * MIB, 0)));
        let busy = |name: &str| {
            let mut b = active(tenant(name, GIB), 200 * MIB);
            b.dram = 250 * MIB;
            b
        };
        let p = plan(&snap(3 * GIB / 2, vec![q.clone(), busy("b1"), busy("b2")]));
        let tp = p.tenant("q").unwrap();
        assert!(tp.quota.unwrap() >= 400 * MIB, "its hot set: {}", tp.reason);
        assert!(tp.reason.contains("going quiet"), "{}", tp.reason);
        // What it reused before the window stays too while nobody needs the DRAM.
        assert!(tp.quota.unwrap() >= 560 * MIB, "{}", tp.reason);
        assert!(tp.demote.is_empty(), "{}", tp.reason);
        // When a neighbour needs that DRAM, the quiet tenant yields it first, the
        // coldest of it first, whole, ahead of the cut.
        let mut big = active(tenant("b1", 2 * GIB), 1100 * MIB);
        big.dram = 250 * MIB;
        let p = plan(&snap(3 * GIB / 2, vec![q.clone(), big, busy("b2")]));
        let tp = p.tenant("q").unwrap();
        assert!(tp.quota.unwrap() < 300 * MIB, "{}", tp.reason);
        assert!(quota(&p, "b2") >= 200 * MIB + headroom(200 * MIB));
        let starts: Vec<u64> = tp.demote.iter().map(|r| r.start).collect();
        assert!(starts.len() >= 80 && starts[..80].iter().all(|&s| s >= 400 * MIB), "{}", tp.reason);
    }

    #[test]
    fn a_quota_cut_below_what_a_tenant_holds_demotes_its_coldest_regions_first() {
        // `a` holds 900 MiB but is active in 300 MiB; `b` needs 600 MiB more than it
        // has. The cut takes `a` to about 350 MiB: its regions idle 8 s (under any
        // idleness threshold) go whole, coldest first, the hot 300 MiB stays.
        let mut a = active(tenant("a", GIB), 300 * MIB);
        a.dram = 900 * MIB;
        a.regions = (0..150).map(|i| region(i * 2 * MIB, Some(1.0), 2 * MIB, 0)).collect();
        a.regions.extend((150..450).map(|i| region(i * 2 * MIB, Some(8.0), 2 * MIB, 0)));
        let b = active(tenant("b", GIB), 600 * MIB);
        let p = plan(&snap(GIB, vec![a.clone(), b.clone()]));
        let tp = p.tenant("a").unwrap();
        let cut = a.dram - tp.quota.unwrap();
        let demoted = tp.demote.len() as u64 * 2 * MIB;
        // Given more room than it needs, a cut demotes only the cut, not all of the spare.
        let mut roomy = active(a.clone(), 100 * MIB);
        roomy.dram = 900 * MIB;
        let mut c = active(tenant("c", GIB), 300 * MIB);
        c.dram = 0;
        let rp = plan(&snap(GIB, vec![roomy.clone(), c]));
        let rt = rp.tenant("a").unwrap();
        let rcut = roomy.dram - rt.quota.unwrap();
        let rdemoted = rt.demote.len() as u64 * 2 * MIB;
        assert!(rt.quota.unwrap() > 200 * MIB, "a has spare beyond its need: {}", rt.reason);
        assert!(rdemoted <= rcut && rdemoted + 2 * MIB > rcut, "{rdemoted} for a cut of {rcut}: {}", rt.reason);
        assert!(demoted + 2 * MIB > cut && demoted <= cut, "demoted {demoted} for a cut of {cut}: {}", tp.reason);
        assert!(tp.demote.iter().all(|r| r.start >= 300 * MIB), "the hot regions stay");
        assert!(tp.reason.contains("ahead of the cut"), "{}", tp.reason);
        // Alone, `a` keeps what it holds: no cut, and 8 s is not idle enough to demote.
        let p = plan(&snap(2 * GIB, vec![a]));
        assert!(p.tenant("a").unwrap().demote.is_empty(), "{}", p.tenant("a").unwrap().reason);
    }

    #[test]
    fn a_quiet_tenant_cut_demotes_whole_regions_without_waiting_for_evidence() {
        // Went quiet this interval: its 600 MiB were touched 3–5 s ago (too recently for
        // two unreturned samples) and 100 MiB never seen touched. A busy neighbour
        // takes its DRAM; the cut goes to the tier as whole regions, never-touched and
        // longest idle first, not page by page from the kernel's LRU.
        let mut q = active(tenant("q", GIB), 600 * MIB);
        q.activeness.as_mut().unwrap().last_interval_bytes = 0;
        q.dram = 700 * MIB;
        let fresh = |start: u64, idle: f64| Region { cold_samples: 0, ..region(start, Some(idle), 2 * MIB, 0) };
        q.regions = (0..150).map(|i| fresh(i * 2 * MIB, 3.0)).collect();
        q.regions.extend((150..300).map(|i| fresh(i * 2 * MIB, 5.0)));
        q.regions.extend((300..350).map(|i| Region { idle_secs: None, reused_secs: None, ..fresh(i * 2 * MIB, 0.0) }));
        let busy = active(tenant("busy", 2 * GIB), 800 * MIB);
        let p = plan(&snap(GIB, vec![q.clone(), busy.clone()]));
        let tp = p.tenant("q").unwrap();
        let cut = q.dram - tp.quota.unwrap();
        let demoted = tp.demote.len() as u64 * 2 * MIB;
        assert!(tp.reason.contains("going quiet"), "{}", tp.reason);
        assert!(demoted <= cut && demoted + 2 * MIB > cut, "demoted {demoted} for a cut of {cut}: {}", tp.reason);
        let starts: Vec<u64> = tp.demote.iter().map(|r| r.start).collect();
        assert!(starts[..50].iter().all(|&s| s >= 600 * MIB), "never-touched regions first");
        assert!(starts[50..150].iter().all(|&s| (300 * MIB..600 * MIB).contains(&s)), "then the longest idle");
        // A busy tenant cut the same way keeps the evidence rule: only regions whose
        // samples did not come back go (the kernel's LRU knows its hot pages better).
        let mut b = q.clone();
        b.activeness.as_mut().unwrap().last_interval_bytes = 600 * MIB;
        let p = plan(&snap(GIB, vec![b.clone(), busy.clone()]));
        assert!(p.tenant("q").unwrap().demote.is_empty(), "{}", p.tenant("q").unwrap().reason);
        for r in &mut b.regions[..10] {
            r.cold_samples = COLD_EVIDENCE;
        }
        let p = plan(&snap(GIB, vec![b, busy]));
        let starts: Vec<u64> = p.tenant("q").unwrap().demote.iter().map(|r| r.start).collect();
        assert_eq!(starts.len(), 10, "{}", p.tenant("q").unwrap().reason);
        assert!(starts.iter().all(|&s| s < 20 * MIB));
    }

    #[test]
    fn a_tenant_going_quiet_yields_most_of_its_average_to_a_busy_one() {
        let mut quiet = active(tenant("quiet", GIB), 800 * MIB);
        quiet.activeness.as_mut().unwrap().last_interval_bytes = 50 * MIB;
        let busy = active(tenant("busy", GIB), 800 * MIB);
        let p = plan(&snap(GIB, vec![quiet, busy]));
        let (q, b) = (quota(&p, "quiet"), quota(&p, "busy"));
        // Without the rule both would get half (512 MiB each).
        assert!(q < 480 * MIB && b > 544 * MIB, "the busy tenant gets what the quiet one stopped using: {q} vs {b}");
        assert!(p.tenant("quiet").unwrap().reason.contains("going quiet"), "{}", p.tenant("quiet").unwrap().reason);
        // Nor is a drop within the estimate's noise (a thin sample read nothing).
        let mut noisy = active(tenant("quiet", GIB), 56 * MIB);
        noisy.activeness.as_mut().unwrap().last_interval_bytes = 0;
        noisy.activeness.as_mut().unwrap().ci_bytes = 55 * MIB;
        let p = plan(&snap(GIB, vec![noisy.clone()]));
        assert!(!p.tenant("quiet").unwrap().reason.contains("going quiet"), "{}", p.tenant("quiet").unwrap().reason);
        noisy.activeness.as_mut().unwrap().ci_bytes = 4 * MIB;
        let p = plan(&snap(GIB, vec![noisy]));
        assert!(p.tenant("quiet").unwrap().reason.contains("going quiet"), "{}", p.tenant("quiet").unwrap().reason);
        // Faulting from the tier is not going quiet, whatever sampling saw.
        let mut faulting = active(tenant("quiet", GIB), 800 * MIB);
        faulting.activeness.as_mut().unwrap().last_interval_bytes = 50 * MIB;
        faulting.tier_faults_per_sec = 2.0 * WAKE_MIN_FAULTS;
        faulting.tier_faults_per_sec_avg = 2.0 * WAKE_MIN_FAULTS;
        let p = plan(&snap(GIB, vec![faulting]));
        assert!(!p.tenant("quiet").unwrap().reason.contains("going quiet"));
    }

    #[test]
    fn hot_regions_are_rebuilt_first_within_the_rate_and_cold_ones_stay_split() {
        let huge = |start: u64, idle: Option<f64>| Region { wants_huge: true, ..region(start, idle, 2 * MIB, 0) };
        let budget = (COLLAPSE_RATE as f64 * 10.0) as u64;
        let n = (budget / (2 * MIB)) as usize;
        // More warm regions than one interval may rebuild, one hotter than all, and
        // two the window has not seen touched.
        let mut regions: Vec<Region> = (0..n as u64 + 10).map(|i| huge(i * 2 * MIB, Some(20.0))).collect();
        regions.push(huge(1000 * MIB, Some(0.5)));
        regions.push(huge(2000 * MIB, Some(300.0)));
        regions.push(huge(3000 * MIB, None));
        let mut a = active(tenant("a", 4 * GIB), 100 * MIB);
        a.regions = regions;
        a.dram = GIB;
        let p = plan(&snap(4 * GIB, vec![a]));
        let c = &p.tenant("a").unwrap().collapse;
        assert_eq!(c.len(), n, "at most COLLAPSE_RATE × interval bytes");
        assert_eq!(c[0].start, 1000 * MIB, "hottest first");
        assert!(
            !c.iter().any(|r| r.start == 2000 * MIB || r.start == 3000 * MIB),
            "cold or unknown regions stay split"
        );
    }
}
