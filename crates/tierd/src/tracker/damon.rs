//! The DAMON tracker: activeness from the kernel's own access monitor.
//!
//! One kdamond (a [`DamonHub`], shared by all tenants' trackers) monitors every
//! tenant process. A region DAMON found accessed in its last aggregation was touched
//! just now; one it found idle for `age` aggregations was last touched that long ago.
//! The memory touched within a span is the resident memory of the regions touched
//! within it; page state still comes from the page tables. Unlike sampling, it costs
//! the tenants no faults: the kernel checks accessed bits in its own thread.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tierd_core::estimates::{Estimate, Estimates, WindowTouched};
use tierd_core::snapshot::{Activeness, Range, Region};
use tierd_sys::damon::{DamonError, DamonRegion, Intervals, Kdamond};
use tierd_sys::madvise::Pidfd;
use tierd_sys::pagemap::PageRegion;
use tierd_sys::procfs::ProcFs;

use super::runs::{present_within, region_counts};
use super::{REGION, ReadBack, Tracker, TrackerCost};

/// A page per region checked every 50 ms, counts kept per 200 ms: in the 6.12 guest a
/// fifth of the kdamond CPU of DAMON's defaults (5 ms, 100 ms) for the same reading of a
/// hot set (`bench/results/damon-tracker.md`). Reading the regions waits for the next
/// aggregation, so that stays short.
const INTERVALS: Intervals = Intervals { sample_us: 50_000, aggr_us: 200_000, update_us: 1_000_000 };
/// A process becomes a DAMON target once it has lived this long: short-lived processes
/// (a shell's `sleep`) changed the kdamond's targets at every pass, and beside them a
/// 32 MiB hot set read up to 70 MiB in the 6.12 guest (bench/results/damon-tracker.md).
const SETTLE_SECS: f64 = 10.0;
/// In tierd's state directory while its kdamond exists: after a crash, the one
/// kdamond found at start is known to be tierd's own.
const MARKER: &str = "damon-kdamond";

/// The kdamond and what it last reported, shared by the trackers.
pub type SharedDamon = Arc<Mutex<DamonHub>>;

#[derive(Debug)]
pub struct DamonHub {
    kdamond: Kdamond,
    marker: PathBuf,
    proc: ProcFs,
    /// Each tracker's processes.
    wanted: BTreeMap<u64, Vec<u32>>,
    next_id: u64,
    regions: HashMap<u32, Vec<DamonRegion>>,
    read_at: Option<f64>,
    /// The kdamond's CPU seconds per target so far (its cost, split among tenants by
    /// their processes), and its CPU ticks at the last reading.
    cpu_per_target: f64,
    kdamond_ticks: Option<(u32, u64)>,
    errors: u64,
}

impl DamonHub {
    /// Creates tierd's kdamond (see [`Kdamond::create`]); the error says why DAMON
    /// cannot be used, for the caller to fall back to sampling.
    pub fn start(sys: &Path, state_dir: &Path, proc: ProcFs) -> Result<SharedDamon, DamonError> {
        let marker = state_dir.join(MARKER);
        let kdamond = Kdamond::create(sys, INTERVALS, marker.exists())?;
        // Without the marker a crash would leave a kdamond the next start refuses.
        let _ = std::fs::write(&marker, "tierd created kdamond 0\n");
        Ok(Arc::new(Mutex::new(DamonHub {
            kdamond,
            marker,
            proc,
            wanted: BTreeMap::new(),
            next_id: 0,
            regions: HashMap::new(),
            read_at: None,
            cpu_per_target: 0.0,
            kdamond_ticks: None,
            errors: 0,
        })))
    }

    /// A tracker for one tenant, fed by this hub.
    pub fn tracker(hub: &SharedDamon, proc: ProcFs, window_secs: f64, interval_secs: f64) -> DamonTracker {
        let id = {
            let mut h = hub.lock().unwrap();
            h.next_id += 1;
            h.next_id
        };
        DamonTracker {
            hub: hub.clone(),
            id,
            proc,
            window_secs,
            interval_secs,
            estimates: Estimates::default(),
            blocks: BTreeMap::new(),
            relaid: HashSet::new(),
            window_touched: None,
            cpu_seen: 0.0,
            cost: TrackerCost::default(),
        }
    }

    /// Tracker `id` follows `pids` now; re-reads DAMON's regions when the last reading
    /// is older than `max_age` seconds (the first tracker of a pass reads for all).
    fn refresh(&mut self, id: u64, pids: &[u32], now: f64, max_age: f64) {
        let changed = self.wanted.insert(id, pids.to_vec()).as_deref() != Some(pids);
        let fresh = self.read_at.is_some_and(|t| now - t < max_age);
        // The targets are written (and the kdamond's state read) once a pass, or at a change.
        if fresh && !changed {
            return;
        }
        let mut all: Vec<u32> = self.wanted.values().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        if self.kdamond.set_targets(&all).is_err() {
            // A process exited between listing and writing: next pass lists it no more.
            self.errors += 1;
            return;
        }
        if fresh {
            return;
        }
        self.read_at = Some(now);
        match self.kdamond.regions() {
            Ok(r) => self.regions = r.into_iter().collect(),
            Err(_) => self.errors += 1,
        }
        self.account_cpu(all.len());
    }

    /// Adds the kdamond's CPU time since the last reading, per target.
    fn account_cpu(&mut self, targets: usize) {
        let Some(pid) = self.kdamond.pid() else { return };
        let Ok(ticks) = self.proc.cpu_ticks(pid) else { return };
        if let Some((was_pid, was)) = self.kdamond_ticks.replace((pid, ticks))
            && was_pid == pid
            && targets > 0
        {
            let secs = ticks.saturating_sub(was) as f64 / tierd_sys::process::clock_ticks_per_sec() as f64;
            self.cpu_per_target += secs / targets as f64;
        }
    }

    fn forget(&mut self, id: u64) {
        self.wanted.remove(&id);
    }
}

impl Drop for DamonHub {
    fn drop(&mut self) {
        // The kdamond goes with it (its own Drop).
        let _ = std::fs::remove_file(&self.marker);
    }
}

/// What is known about one 2 MiB block of a tenant process.
#[derive(Debug, Clone, Copy, Default)]
struct Block {
    /// When DAMON last saw any of it accessed (or, for a block never seen accessed,
    /// since when it has been watched idle: the two are alike to the policy).
    touched: Option<f64>,
    /// Aggregations its warmest region has been idle: the evidence it is cold.
    idle_aggregations: u32,
    present: u64,
    swapped: u64,
    huge: u64,
}

/// Resident bytes DAMON saw touched, over the last interval, the window and its latter half.
#[derive(Debug, Default)]
struct Touched {
    interval: u64,
    window: u64,
    half_window: u64,
}

#[derive(Debug)]
pub struct DamonTracker {
    hub: SharedDamon,
    id: u64,
    proc: ProcFs,
    window_secs: f64,
    interval_secs: f64,
    estimates: Estimates,
    blocks: BTreeMap<(u32, u64), Block>,
    /// Blocks tierd laid out since the last observation: rebuilding huge pages maps
    /// them, which DAMON sees as accesses the tenant did not make.
    relaid: HashSet<(u32, u64)>,
    /// Resident bytes touched within the window, at the last observation.
    /// Bytes touched within the window and within its latter half.
    window_touched: Option<(u64, u64)>,
    cpu_seen: f64,
    cost: TrackerCost,
}

impl DamonTracker {
    /// DAMON's regions of `pids`, as the hub last read them, and its CPU share.
    fn damon_regions(&mut self, pids: &[u32], now: f64) -> Vec<(u32, Vec<DamonRegion>)> {
        let mut hub = self.hub.lock().unwrap();
        hub.refresh(self.id, pids, now, self.interval_secs / 2.0);
        self.cost.seconds += (hub.cpu_per_target - self.cpu_seen) * pids.len() as f64;
        self.cpu_seen = hub.cpu_per_target;
        self.cost.errors = hub.errors;
        pids.iter().filter_map(|p| hub.regions.get(p).map(|r| (*p, r.clone()))).collect()
    }

    /// The page runs of each process (`PAGEMAP_SCAN`, or pagemap reads without it).
    fn scan(&mut self, pids: &[u32]) -> Vec<(u32, Vec<PageRegion>)> {
        let mut out = Vec::new();
        for &pid in pids {
            self.cost.syscalls += 1;
            match tierd_sys::pagemap::scan_mappings(&self.proc, pid) {
                Some((_, mut runs)) => {
                    runs.sort_by_key(|r| r.start);
                    out.push((pid, runs));
                }
                None => self.cost.errors += 1,
            }
        }
        out
    }

    /// Page state per block, then DAMON's verdict on each block it covers.
    fn settle(&mut self, scans: &[(u32, Vec<PageRegion>)], damon: &[(u32, Vec<DamonRegion>)], now: f64) -> Touched {
        let mut counts = HashMap::new();
        for (pid, runs) in scans {
            region_counts(*pid, runs, &mut counts);
        }
        let mut blocks: BTreeMap<(u32, u64), Block> = counts
            .into_iter()
            .map(|(key, (present, swapped, huge))| {
                let was = self.blocks.get(&key).copied().unwrap_or_default();
                (key, Block { present, swapped, huge, ..was })
            })
            .collect();
        let spans = Spans { interval: self.interval_secs, window: self.window_secs };
        let touched = judge(&mut blocks, scans, damon, &self.relaid, spans, now);
        self.blocks = blocks;
        self.relaid.clear();
        touched
    }
}

/// The processes of `pids` that have lived [`SETTLE_SECS`] (those gone are left out).
fn settled(proc: &ProcFs, pids: &[u32]) -> Vec<u32> {
    pids.iter().copied().filter(|&pid| proc.age_secs(pid).is_ok_and(|age| age >= SETTLE_SECS)).collect()
}

/// The spans activeness is counted over, in seconds.
#[derive(Debug, Clone, Copy)]
struct Spans {
    interval: f64,
    window: f64,
}

/// DAMON's verdict on each block that has pages: when it was last touched (the least
/// idle region over it), and the resident bytes touched within each span. Blocks tierd
/// `relaid` itself keep what they had.
fn judge(
    blocks: &mut BTreeMap<(u32, u64), Block>,
    scans: &[(u32, Vec<PageRegion>)],
    damon: &[(u32, Vec<DamonRegion>)],
    relaid: &HashSet<(u32, u64)>,
    spans: Spans,
    now: f64,
) -> Touched {
    let mut touched = Touched::default();
    let mut warmest: HashMap<(u32, u64), (f64, u32)> = HashMap::new();
    let aggr_secs = INTERVALS.aggr_us as f64 / 1e6;
    for (pid, regions) in damon {
        let runs = scans.iter().find(|(p, _)| p == pid).map_or(&[][..], |(_, r)| r.as_slice());
        for r in regions {
            let (idle, aggregations) = if r.nr_accesses > 0 { (0.0, 0) } else { (r.age as f64 * aggr_secs, r.age) };
            // Only blocks with pages: a region may span wide gaps between mappings.
            for (&key, _) in blocks.range((*pid, r.start & !(REGION - 1))..(*pid, r.end)) {
                if relaid.contains(&key) {
                    continue;
                }
                let (from, to) = (r.start.max(key.1), r.end.min(key.1 + REGION));
                let bytes = present_within(runs, from, to - from);
                touched.interval += if idle < spans.interval { bytes } else { 0 };
                touched.window += if idle < spans.window { bytes } else { 0 };
                touched.half_window += if idle < spans.window / 2.0 { bytes } else { 0 };
                let w = warmest.entry(key).or_insert((idle, aggregations));
                if idle < w.0 {
                    *w = (idle, aggregations);
                }
            }
        }
    }
    for (key, (idle, aggregations)) in warmest {
        let b = blocks.get_mut(&key).expect("judged blocks come from the map");
        let at = now - idle;
        b.touched = Some(b.touched.map_or(at, |t| t.max(at)));
        b.idle_aggregations = aggregations;
    }
    touched
}

impl Block {
    fn idle_secs(&self, now: f64) -> Option<f64> {
        self.touched.map(|t| (now - t).max(0.0))
    }
}

impl Tracker for DamonTracker {
    fn observe(&mut self, procs: &[Pidfd], _tier_faults: u64, now: f64, _at_rest: bool) {
        let t0 = tierd_sys::process::thread_cpu_secs();
        let pids: Vec<u32> = procs.iter().map(Pidfd::pid).collect();
        // Page state comes from every process; DAMON's verdict from the settled ones.
        let damon = self.damon_regions(&settled(&self.proc, &pids), now);
        let scans = self.scan(&pids);
        let touched = self.settle(&scans, &damon, now);
        // Nothing from DAMON yet (it has just started): no estimate rather than zero.
        if damon.iter().any(|(_, regions)| !regions.is_empty()) {
            let bytes = touched.interval as f64;
            self.estimates.push(Estimate { at: now, bytes, var: 0.0, faulted: 0.0, returned: 1.0 });
            self.window_touched = Some((touched.window, touched.half_window));
        }
        self.estimates.age(now, self.window_secs);
        self.cost.seconds += tierd_sys::process::thread_cpu_secs() - t0;
    }

    fn activeness(&self) -> Option<Activeness> {
        let touched =
            self.window_touched.map(|(bytes, half)| WindowTouched { bytes, ci_bytes: None, half_bytes: Some(half) });
        let mut a = self.estimates.activeness(touched)?;
        // DAMON counts accesses, not samples coming back: no share to report.
        a.returned_share = None;
        Some(a)
    }

    fn regions(&self, now: f64) -> Vec<Region> {
        self.blocks
            .iter()
            .map(|(&(pid, start), b)| Region {
                range: Range { pid, start, len: REGION },
                idle_secs: b.idle_secs(now),
                reused_secs: b.idle_secs(now),
                laid_out: false,
                cold_samples: b.idle_aggregations,
                dram_bytes: b.present,
                tier_bytes: b.swapped,
                wants_huge: b.huge > 0,
                huge_bytes: b.huge,
            })
            .collect()
    }

    fn read_back(&mut self, ranges: &[Range], how: ReadBack) {
        // DAMON checks accessed bits in page tables a prefetch leaves alone: what it sees
        // in a prefetched block is the tenant's own touch. Ignoring such blocks left a
        // tenant whose hot set tierd kept reading back looking idle.
        if how == ReadBack::Relayout {
            self.relaid.extend(super::blocks_of(ranges));
        }
    }

    fn cost(&self) -> TrackerCost {
        self.cost
    }
}

impl Drop for DamonTracker {
    fn drop(&mut self) {
        if let Ok(mut hub) = self.hub.lock() {
            hub.forget(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use tierd_sys::pagemap::PAGE_IS_PRESENT;

    use super::*;

    #[test]
    fn a_process_becomes_a_damon_target_once_it_has_lived_long_enough() {
        let t = tempfile::tempdir().unwrap();
        let hz = tierd_sys::process::clock_ticks_per_sec() as f64;
        std::fs::write(t.path().join("uptime"), "100.00 150.00\n").unwrap();
        // 10 started at boot, 11 a second before the settling ends, 12 (a `sleep`) just now.
        for (pid, started) in [(10, 0.0), (11, 100.0 - SETTLE_SECS + 1.0), (12, 100.0)] {
            std::fs::create_dir(t.path().join(pid.to_string())).unwrap();
            let ticks = (started * hz) as u64;
            let stat = format!("{pid} (sh) S 1 {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {ticks} 0 0\n");
            std::fs::write(t.path().join(format!("{pid}/stat")), stat).unwrap();
        }
        let proc = ProcFs::new(t.path());
        assert_eq!(settled(&proc, &[10, 11, 12]), vec![10], "the young ones wait");
        assert_eq!(settled(&proc, &[10, 13]), vec![10], "one gone is left out");
    }

    /// DAMON's age, in aggregations, of a region idle for `secs`.
    fn aged(secs: f64) -> u32 {
        (secs * 1e6 / INTERVALS.aggr_us as f64).round() as u32
    }

    fn idle_of(b: &Block) -> f64 {
        b.idle_secs(100.0).expect("judged")
    }

    #[test]
    fn blocks_are_as_warm_as_their_warmest_region_and_tierds_own_reads_are_no_touch() {
        // Three resident blocks; DAMON saw the first one and a half accessed just now,
        // the rest idle for 6 s; a region over a wide gap has no pages.
        let runs = vec![PageRegion { start: 0, end: 3 * REGION, categories: PAGE_IS_PRESENT }];
        let region = |start, end, nr_accesses, age| DamonRegion { start, end, nr_accesses, age };
        let damon = vec![(
            7,
            vec![
                region(0, REGION + REGION / 2, 5, 3),
                region(REGION + REGION / 2, 3 * REGION, 0, aged(6.0)),
                region(3 * REGION, 1 << 40, 0, 10),
            ],
        )];
        let fresh = || -> BTreeMap<(u32, u64), Block> {
            (0..3).map(|i| ((7, i * REGION), Block { present: REGION, ..Block::default() })).collect()
        };
        let spans = Spans { interval: 2.0, window: 16.0 };
        let scans = vec![(7, runs)];
        let mut blocks = fresh();
        let t = judge(&mut blocks, &scans, &damon, &HashSet::new(), spans, 100.0);
        assert_eq!((t.interval, t.window), (REGION + REGION / 2, 3 * REGION));
        let idle: Vec<f64> = blocks.values().map(idle_of).collect();
        assert_eq!(idle[..2], [0.0, 0.0], "a block is as warm as its warmest region");
        assert!((idle[2] - 6.0).abs() < 1e-6, "{idle:?}");
        assert_eq!(blocks[&(7, 2 * REGION)].idle_aggregations, aged(6.0), "the evidence it is cold");
        // The first block was laid out by tierd itself: DAMON's access is not the tenant's.
        let mut blocks = fresh();
        let t = judge(&mut blocks, &scans, &damon, &HashSet::from([(7, 0)]), spans, 100.0);
        assert_eq!(t.interval, REGION / 2);
        assert_eq!(blocks[&(7, 0)].touched, None, "it keeps what it had");
        // Older than the window: not counted, and the block stays as warm as it was seen.
        let cold = vec![(7, vec![region(0, 3 * REGION, 0, aged(40.0))])];
        let mut blocks = fresh();
        blocks.get_mut(&(7, 0)).unwrap().touched = Some(95.0);
        let t = judge(&mut blocks, &scans, &cold, &HashSet::new(), spans, 100.0);
        assert_eq!((t.interval, t.window), (0, 0));
        assert_eq!(blocks[&(7, 0)].idle_secs(100.0), Some(5.0), "seen touched 5 s ago, it stays so");
        assert!((idle_of(&blocks[&(7, REGION)]) - 40.0).abs() < 1e-6);
    }
}
