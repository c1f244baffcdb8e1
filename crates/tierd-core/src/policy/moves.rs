//! Which regions to move: prefetch, demotion, relayout and huge-page rebuilds.
//!
//! Each move is an investment of tier reads or writes now for faults avoided later:
//! prefetch reads back what a working tenant will touch, runs first (a region laid out
//! in runs comes back in a few reads, a scattered one in one read a page); demotion
//! sends the coldest regions out whole, so they lie in runs when they are read back;
//! relayout rewrites a resting tenant's scattered working set in runs while the tier is
//! idle, so its wake-up reads it at sequential speed.

use std::collections::HashSet;

use crate::snapshot::{Range, Region, TenantView};

/// The regions a tenant was working on when it last went to rest: those it reused
/// within `window` before its rest began, and since. With no rest seen, the window
/// ends at its most recent reuse of a region it still has on the tier. Reuse, not any
/// touch: memory only filled, or read back by tierd's own prefetch, is not worked on.
pub fn working_set(t: &TenantView, window: f64) -> impl Iterator<Item = &Region> {
    let member = in_working_set(t, window);
    t.regions.iter().filter(move |r| member(r))
}

/// Whether a region of `t` is in its [`working_set`]: the anchor is found once, so a
/// caller asks per region in constant time rather than searching a collected set.
pub fn in_working_set(t: &TenantView, window: f64) -> impl Fn(&Region) -> bool + use<> {
    let rested_lately = t.at_rest_secs.is_some() || t.since_rest_secs.is_some_and(|s| s <= 4.0 * window);
    let anchor = t
        .rest_began_secs
        .filter(|_| rested_lately)
        .or_else(|| t.regions.iter().filter(|r| r.tier_bytes > 0).filter_map(|r| r.reused_secs).reduce(f64::min));
    move |r| anchor.is_some_and(|a| r.reused_secs.is_some_and(|s| s <= a + window))
}

/// Bytes of its working set a tenant holds in DRAM.
pub fn working_set_held(t: &TenantView, window: f64) -> u64 {
    working_set(t, window).map(|r| r.dram_bytes).sum()
}

/// Share of its working set's tier bytes that lie in runs (1 with none on the tier).
pub fn laid_out_share(t: &TenantView, window: f64) -> f64 {
    let (runs, all) = working_set(t, window)
        .fold((0u64, 0u64), |(r, a), x| (r + if x.laid_out { x.tier_bytes } else { 0 }, a + x.tier_bytes));
    if all == 0 { 1.0 } else { runs as f64 / all as f64 }
}

/// At least an eighth of the region is on the tier: worth laying out. Less is what
/// sampling leaves of a hot region kept resident; laying it out would send all of it
/// to the tier for a few pages.
fn worth_laying_out(r: &Region) -> bool {
    r.tier_bytes > 0 && r.tier_bytes * 8 >= r.dram_bytes + r.tier_bytes
}

/// Most recently reused first: the order a woken tenant will want its regions back.
fn by_recent_reuse(regions: &mut [&Region]) {
    regions.sort_by(|a, b| a.reused_secs.unwrap_or(f64::MAX).total_cmp(&b.reused_secs.unwrap_or(f64::MAX)));
}

/// The ranges of `regions`, in order, while they add up to at most `budget` bytes.
fn within(regions: Vec<&Region>, budget: u64, bytes: impl Fn(&Region) -> u64) -> Vec<Range> {
    let mut total = 0;
    regions
        .into_iter()
        .take_while(|r| {
            total += bytes(r);
            total <= budget
        })
        .map(|r| r.range)
        .collect()
}

/// Free room kept below a limit of `limit` bytes: 16 MiB or a sixteenth of it,
/// whichever is more. A prefetch stops that far below a limit, and a wake of tasks
/// waiting at one raises it that far above what the cgroup holds.
pub fn limit_margin(limit: u64) -> u64 {
    (16u64 << 20).max(limit / 16)
}

/// Bytes a whole-tenant prefetch may read back into a cgroup charged `charged` now
/// under `limit`: up to the limit less a margin, so the tenant's own next charges find
/// free room. Filled to the limit with pages it just mapped, the cgroup can only
/// reclaim by writing recent pages out, and on v1 a charge the kernel makes outside
/// the tenant's own fault (a send from its memory, a read into it) fails at once.
pub fn prefetch_room(limit: Option<u64>, charged: u64) -> u64 {
    match limit {
        Some(l) => l.saturating_sub(limit_margin(l)).saturating_sub(charged),
        None => u64::MAX,
    }
}

/// Regions of its working set a working tenant has on the tier, by faults avoided per
/// read: laid out in runs first (a few reads a region), then, when `scattered` (the
/// tier has reads to spare: a scattered region costs a read a page, as demand faults
/// would, and floods a slow device's queue ahead of them), the most recently reused;
/// up to `room` bytes read back.
pub fn prefetch(t: &TenantView, window: f64, room: u64, scattered: bool) -> Prefetch {
    let mut hot: Vec<&Region> =
        working_set(t, window).filter(|r| r.tier_bytes > 0 && (r.laid_out || scattered)).collect();
    by_recent_reuse(&mut hot);
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
    Prefetch { ranges: out, tier_bytes: total }
}

/// Regions to read back, and the bytes of them on the tier (the DRAM they will take).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prefetch {
    pub ranges: Vec<Range>,
    pub tier_bytes: u64,
}

/// A region in DRAM seen idle `min_idle` with `evidence` cold samples (with none asked
/// for, one never seen counts as idle).
pub fn seen_idle(r: &Region, min_idle: f64, evidence: u32) -> bool {
    r.dram_bytes > 0 && r.cold_samples >= evidence && idle_for(r, evidence).is_some_and(|s| s >= min_idle)
}

/// How long a region lay idle, where one never seen counts as idle for ever when no
/// evidence is asked for.
fn idle_for(r: &Region, evidence: u32) -> Option<f64> {
    r.idle_secs.or((evidence == 0).then_some(f64::MAX))
}

/// Regions to demote whole: those holding DRAM, idle at least `min_idle` seconds with
/// `evidence` unreturned samples (with none asked for, regions never seen touched are
/// the coldest of all); coldest first, up to `budget` bytes.
pub fn coldest(regions: &[Region], min_idle: f64, evidence: u32, budget: u64) -> Vec<Range> {
    let idle = |r: &Region| idle_for(r, evidence);
    let mut cold: Vec<&Region> = regions.iter().filter(|r| seen_idle(r, min_idle, evidence)).collect();
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

/// Regions of a resting tenant's working set to lay out in runs: those going to the
/// tier now (`demote`), and, when `read_back` (the tier is idle), those there in good
/// part already and not known to lie in runs; most recently reused first, up to
/// `budget` bytes.
pub fn relayout(t: &TenantView, window: f64, demote: &[Range], budget: u64, read_back: bool) -> Vec<Range> {
    let demoted: HashSet<&Range> = demote.iter().collect();
    let mut ws: Vec<&Region> = working_set(t, window)
        .filter(|r| !r.laid_out)
        .filter(|r| demoted.contains(&r.range) || (worth_laying_out(r) && read_back))
        .collect();
    by_recent_reuse(&mut ws);
    within(ws, budget, |r| r.range.len)
}

/// Regions that belong on huge pages, are (nearly) whole in DRAM on small pages and
/// were touched within `window`: hottest first, up to `budget` bytes. Cold ones stay
/// split: they are the next to go to the tier, 4 KiB at a time.
pub fn rebuild(regions: &[Region], window: f64, budget: u64) -> Vec<Range> {
    let mut hot: Vec<&Region> = regions
        .iter()
        .filter(|r| r.wants_huge && r.huge_bytes == 0 && r.dram_bytes >= r.range.len / 2)
        .filter(|r| r.tier_bytes <= r.range.len / 4)
        .filter(|r| r.idle_secs.is_some_and(|s| s <= window))
        .collect();
    hot.sort_by(|a, b| a.idle_secs.unwrap_or(f64::MAX).total_cmp(&b.idle_secs.unwrap_or(f64::MAX)));
    within(hot, budget, |r| r.range.len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;

    fn region(i: u64, idle: Option<f64>, reused: Option<f64>, dram: u64, tier: u64, laid_out: bool) -> Region {
        Region {
            range: Range { pid: 1, start: i << 21, len: 2 * MIB },
            idle_secs: idle,
            reused_secs: reused,
            laid_out,
            cold_samples: 2,
            dram_bytes: dram,
            tier_bytes: tier,
            wants_huge: false,
            huge_bytes: 0,
        }
    }

    fn resting(regions: Vec<Region>) -> TenantView {
        let mut t = tenant("t", GIB);
        t.at_rest_secs = Some(20.0);
        t.rest_began_secs = Some(20.0);
        t.regions = regions;
        t
    }

    #[test]
    fn the_working_set_is_what_was_reused_in_the_window_before_the_rest() {
        let t = resting(vec![
            region(0, Some(25.0), Some(25.0), 2 * MIB, 0, false),
            region(1, Some(45.0), Some(45.0), 2 * MIB, 0, false),
            region(2, Some(60.0), Some(60.0), 0, 2 * MIB, false),
            region(3, Some(5.0), None, 2 * MIB, 0, false),
        ]);
        let ws: Vec<u64> = working_set(&t, 30.0).map(|r| r.range.start >> 21).collect();
        assert_eq!(ws, [0, 1], "reused within 30 s before the rest began 20 s ago; a first touch is no reuse");
        assert_eq!(working_set_held(&t, 30.0), 4 * MIB);
    }

    #[test]
    fn prefetch_reads_runs_first_then_the_most_recently_reused_within_its_room() {
        let mut t = resting(vec![
            region(0, None, Some(21.0), 0, 2 * MIB, false),
            region(1, None, Some(30.0), 0, 2 * MIB, true),
            region(2, None, Some(22.0), 0, 2 * MIB, false),
        ]);
        t.at_rest_secs = None;
        t.since_rest_secs = Some(1.0);
        let p: Vec<u64> = prefetch(&t, 30.0, 4 * MIB, true).ranges.iter().map(|r| r.start >> 21).collect();
        assert_eq!(p, [1, 0], "the laid-out region, then the most recently reused one");
        let p: Vec<u64> = prefetch(&t, 30.0, 4 * MIB, false).ranges.iter().map(|r| r.start >> 21).collect();
        assert_eq!(p, [1], "a busy or slow tier reads runs only");
        assert!((laid_out_share(&t, 30.0) - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn demotion_takes_the_coldest_whole_regions_with_evidence_and_relayout_skips_what_lies_in_runs() {
        let rs = vec![
            region(0, Some(100.0), Some(100.0), 2 * MIB, 0, false),
            region(1, Some(10.0), Some(10.0), 2 * MIB, 0, false),
            region(2, Some(300.0), None, 2 * MIB, 0, false),
        ];
        let c: Vec<u64> = coldest(&rs, 50.0, 2, 8 * MIB).iter().map(|r| r.start >> 21).collect();
        assert_eq!(c, [2, 0]);
        assert_eq!(coldest(&rs, 50.0, 2, 3 * MIB).len(), 1, "within the budget");
        let t = resting(vec![
            region(0, Some(25.0), Some(25.0), MIB, MIB, false),
            region(1, Some(26.0), Some(26.0), MIB, MIB, true),
            region(2, Some(27.0), Some(27.0), 2 * MIB - 4096, 4096, false),
        ]);
        let r: Vec<u64> = relayout(&t, 30.0, &[], 64 * MIB, true).iter().map(|r| r.start >> 21).collect();
        assert_eq!(r, [0], "in runs already, or a few pages out of a hot region: left alone");
        assert!(relayout(&t, 30.0, &[], 64 * MIB, false).is_empty(), "a busy tier reads nothing back");
    }

    #[test]
    fn a_prefetch_leaves_free_room_below_the_limit() {
        let mib = 1u64 << 20;
        assert_eq!(prefetch_room(Some(512 * mib), 300 * mib), 180 * mib, "a sixteenth of 512 MiB kept free");
        assert_eq!(prefetch_room(Some(128 * mib), 100 * mib), 12 * mib, "at least 16 MiB kept free");
        assert_eq!(prefetch_room(Some(128 * mib), 120 * mib), 0, "within the margin already: nothing");
        assert_eq!(prefetch_room(None, 120 * mib), u64::MAX, "no limit, no cap");
    }
}
