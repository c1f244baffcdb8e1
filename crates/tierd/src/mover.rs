//! The movers: demote, prefetch and collapse a tenant's memory from outside it.
//!
//! Each reads the process's page state with `PAGEMAP_SCAN` first so it only sends the
//! ranges that need work (present pages to demote, swapped pages to prefetch, small
//! pages to collapse), then calls `process_madvise` in batches. Prefetched pages are
//! also read through `/proc/PID/mem`, which maps them as the tenant's own.

use std::time::Instant;

use tierd_core::size::HUGE_PAGE as HUGE;
use tierd_sys::madvise::{Advice, AdviseResult, Pidfd};
use tierd_sys::pagemap::{PAGE_IS_HUGE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageRegion, Pagemap, anon_ranges, scan};
use tierd_sys::procfs::ProcFs;
use tierd_sys::procmem::ProcMem;

/// The outcome of one mover pass over one process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Moved {
    pub advise: AdviseResult,
    /// Bytes of pages that were asked to move (present for demotion, swapped for prefetch).
    pub bytes: u64,
    pub scan_errors: u64,
}

impl Moved {
    pub fn add(&mut self, o: Moved) {
        self.bytes += o.bytes;
        self.scan_errors += o.scan_errors;
        add_advice(&mut self.advise, o.advise);
    }
}

fn add_advice(to: &mut AdviseResult, o: AdviseResult) {
    to.bytes += o.bytes;
    to.calls += o.calls;
    to.errors += o.errors;
    to.last_errno = o.last_errno.or(to.last_errno);
}

/// When a run of page moves starts no more batches: at a deadline, or sooner when its
/// caller says to yield (a request waits for the engine, decision 012). Checked before
/// each batch, so a batch under way always finishes.
#[derive(Default)]
pub struct Until {
    at: Option<Instant>,
    yield_now: Option<Box<dyn Fn() -> bool + Send + Sync>>,
}

impl Until {
    /// No deadline: every batch is asked for.
    pub fn never() -> Until {
        Until::default()
    }

    pub fn at(at: Instant) -> Until {
        Until { at: Some(at), yield_now: None }
    }

    /// Also stops once `yield_now` says so.
    pub fn or_yield(self, yield_now: impl Fn() -> bool + Send + Sync + 'static) -> Until {
        Until { yield_now: Some(Box::new(yield_now)), ..self }
    }

    pub fn passed(&self) -> bool {
        self.at.is_some_and(|u| Instant::now() >= u) || self.yield_now.as_ref().is_some_and(|y| y())
    }
}

/// Bytes asked for per `MADV_WILLNEED` call while prefetching; a prefetch's deadline is
/// checked between calls. One region: on a tier throttled to a hard disk's 150 reads/s
/// scattered pages came back at ~1.6 MiB/s, and 16 MiB batches overran a 5 s deadline
/// by 10 s; 512 pages in flight still fill the tier's queue on a fast one.
const PREFETCH_BATCH: u64 = 2 << 20;

fn runs(regions: &[PageRegion], want: u64, limit: u64) -> (Vec<(u64, u64)>, u64) {
    let mut out = Vec::new();
    let mut total = 0;
    for r in regions.iter().filter(|r| r.categories & want != 0) {
        if total >= limit {
            break;
        }
        let len = (r.end - r.start).min(limit - total);
        out.push((r.start, len));
        total += len;
    }
    (out, total)
}

/// Pages out up to `limit` bytes of the process's resident anonymous memory.
pub fn demote(proc: &ProcFs, pidfd: &Pidfd, limit: u64) -> Moved {
    let Some(regions) = scan(proc, pidfd.pid()) else { return Moved { scan_errors: 1, ..Moved::default() } };
    let (ranges, bytes) = runs(&regions, PAGE_IS_PRESENT, limit);
    let advise = pidfd.advise(Advice::PageOut, &ranges);
    crate::crash_point!("demote");
    Moved { advise, bytes, scan_errors: 0 }
}

/// Bytes asked for per `MADV_PAGEOUT` call while demoting; a demotion's deadline is
/// checked between calls. A call returns once the device has taken its writes: on an
/// emulated disk at 3 MiB/s one call for 122 MiB held the control loop and the API 41 s.
const DEMOTE_BATCH: u64 = 4 << 20;

/// Pages out the given ranges (the policy chose them), in order, asking for no more once
/// `until` has passed: the rest stay resident for the next pass to choose again.
pub fn demote_ranges(pidfd: &Pidfd, ranges: &[(u64, u64)], until: &Until) -> Moved {
    let mut m = Moved::default();
    advise_until(pidfd, Advice::PageOut, batches(ranges, DEMOTE_BATCH), until, &mut m, |_, _| {
        crate::crash_point!("demote");
    });
    m
}

/// `advice` on each batch in turn, counted in `m`, then `after` the batch; none
/// started once `until` has passed.
fn advise_until(
    pidfd: &Pidfd,
    advice: Advice,
    batches: Vec<Vec<(u64, u64)>>,
    until: &Until,
    m: &mut Moved,
    mut after: impl FnMut(Vec<(u64, u64)>, &mut Moved),
) {
    for batch in batches {
        if until.passed() {
            break;
        }
        add_advice(&mut m.advise, pidfd.advise(advice, &batch));
        m.bytes += batch.iter().map(|r| r.1).sum::<u64>();
        after(batch, m);
    }
}

/// Starts reading up to `limit` bytes of the process's swapped pages back (`MADV_WILLNEED`).
pub fn prefetch(proc: &ProcFs, pidfd: &Pidfd, limit: u64) -> Moved {
    let Some(regions) = scan(proc, pidfd.pid()) else { return Moved { scan_errors: 1, ..Moved::default() } };
    let (ranges, _) = runs(&regions, PAGE_IS_SWAPPED, limit);
    read_in(proc, pidfd, &ranges, 0, &Until::never())
}

/// A prefetch of given ranges: what moved, and how many of the ranges (in the order
/// asked) it read before its time ran out; the rest are for the next pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prefetched {
    pub moved: Moved,
    pub reached: usize,
}

/// Prefetches the swapped pages within the given ranges, in order, asking for no more
/// once `until` has passed.
pub fn prefetch_ranges(proc: &ProcFs, pidfd: &Pidfd, ranges: &[(u64, u64)], until: &Until) -> Prefetched {
    let Ok(pm) = Pagemap::open(proc.root(), pidfd.pid()) else {
        return Prefetched { moved: Moved { scan_errors: 1, ..Moved::default() }, reached: 0 };
    };
    let mut swapped = Vec::new();
    let mut per_range = Vec::with_capacity(ranges.len());
    let mut errors = 0;
    for &(start, len) in ranges {
        let before = swapped.len();
        match pm.scan(start, start + len) {
            Ok(r) => swapped.extend(r.into_iter().filter(|r| r.categories & PAGE_IS_SWAPPED != 0)),
            Err(_) => errors += 1,
        }
        per_range.push(swapped[before..].iter().map(|r| r.end - r.start).sum::<u64>());
    }
    let (runs, _) = runs(&swapped, PAGE_IS_SWAPPED, u64::MAX);
    let moved = read_in(proc, pidfd, &runs, errors, until);
    Prefetched { reached: covered(&per_range, moved.bytes), moved }
}

/// How many leading ranges, of `per_range` bytes each, `read` bytes cover.
fn covered(per_range: &[u64], read: u64) -> usize {
    let mut total = 0;
    per_range
        .iter()
        .take_while(|&&b| {
            total += b;
            total <= read
        })
        .count()
}

/// `MADV_WILLNEED` on `ranges`, then a read of them through `/proc/PID/mem`, which maps
/// the pages as the tenant's own: left in the swap cache, prefetched pages were the
/// first a full cgroup dropped, and a woken tenant faulted them in again one by one.
///
/// In batches of [`PREFETCH_BATCH`], each batch's reads in flight while the one before
/// is mapped, and none started after `until`: the control loop waits on a prefetch, and
/// on a tier throttled to a hard disk's 150 reads/s one wake-up's 248 MiB held it (and
/// with it status, quotas and the API) for 123 s.
fn read_in(proc: &ProcFs, pidfd: &Pidfd, ranges: &[(u64, u64)], scan_errors: u64, until: &Until) -> Moved {
    let mut m = Moved { scan_errors, ..Moved::default() };
    let mem = ProcMem::open(proc.root(), pidfd);
    let map = |batch: &[(u64, u64)], m: &mut Moved| match &mem {
        Ok(mem) => m.advise.errors += mem.touch(batch).errors,
        Err(_) => m.advise.errors += 1,
    };
    let mut in_flight: Option<Vec<(u64, u64)>> = None;
    advise_until(pidfd, Advice::WillNeed, batches(ranges, PREFETCH_BATCH), until, &mut m, |batch, m| {
        crate::crash_point!("prefetch");
        if let Some(prev) = in_flight.replace(batch) {
            map(&prev, m);
        }
    });
    if let Some(last) = in_flight {
        map(&last, &mut m);
    }
    m
}

/// A region whose tier pages lie in at most this many runs of slots reads back at
/// sequential speed: it is left as it is.
pub const IN_RUNS: u32 = 4;

/// Regions re-laid per batch: their reads are in flight together.
const RELAYOUT_BATCH: usize = 8;

/// What a relayout pass did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Relaid {
    /// Regions whose tier pages already lay in runs (or that had none): left alone.
    pub in_runs: u64,
    /// Regions read back, rebuilt as a huge page and written out whole.
    pub relaid: u64,
    /// Bytes read back from the tier to do so.
    pub read_bytes: u64,
    /// Runs of slots the re-laid regions were in before.
    pub runs_before: u64,
    /// Regions `MADV_COLLAPSE` refused with `EINVAL`: their mapping opted out of huge
    /// pages (`MADV_NOHUGEPAGE`, `PR_SET_THP_DISABLE`) or THP is off.
    pub refused: u64,
    /// Regions left alone because no one anonymous mapping holds all of their 2 MiB
    /// (a small heap, a mapping's ragged ends): no huge page can be built there.
    pub unfit: u64,
    /// Huge pages the kernel split on the way out (`thp_swpout_fallback`): the tier
    /// had no free cluster of 512 slots for them, so their pages went to scattered
    /// holes again. Relayout stops there; it needs a tier with room.
    pub split: u64,
    pub advise: AdviseResult,
    pub scan_errors: u64,
}

impl Relaid {
    pub fn add(&mut self, o: &Relaid) {
        self.in_runs += o.in_runs;
        self.relaid += o.relaid;
        self.read_bytes += o.read_bytes;
        self.runs_before += o.runs_before;
        self.refused += o.refused;
        self.unfit += o.unfit;
        self.split += o.split;
        add_advice(&mut self.advise, o.advise);
        self.scan_errors += o.scan_errors;
    }
}

/// Lays each 2 MiB region of `regions` out in one run of slots on the tier, for a
/// tenant at rest: its swapped pages are read back (`MADV_WILLNEED`, then mapped
/// through `/proc/PID/mem`), the region is rebuilt as one huge page (`MADV_COLLAPSE`,
/// which frees the small pages and their scattered slots) and paged out whole
/// (`MADV_PAGEOUT`: a huge page is written to one free cluster of 512 slots). Swap-in
/// is 4 KiB at a time, so the tenant is back on small pages once it reads them; the
/// huge page is only the vehicle. A region wholly on the tier in runs ([`IN_RUNS`]) is
/// left as it is; one wholly or partly resident goes the same way (nothing or little to
/// read back): paged out page by page, its pages would land wherever reclaim puts them.
/// Returns the regions done, in `done`, so the caller need not check them again, and
/// those it paged out, in `paged`. No batch starts after `until`.
///
/// Why: the kernel's reclaim writes a page at a time, interleaved with every other
/// reclaimer, and a page read back keeps its slot; a woken 1 GiB hot set laid out so
/// (1.3 pages per run) came back at ~140 MiB/s, in runs at ~1.5 GiB/s.
pub fn relayout(
    proc: &ProcFs,
    pidfd: &Pidfd,
    regions: &[(u64, u64)],
    until: &Until,
    done: &mut Vec<(u64, u64)>,
    paged: &mut Vec<(u64, u64)>,
) -> Relaid {
    let mut out = Relaid::default();
    let Ok(pm) = Pagemap::open(proc.root(), pidfd.pid()) else {
        out.scan_errors += 1;
        return out;
    };
    let mappings = anon_ranges(proc, pidfd.pid());
    let mut todo = Vec::new();
    for &(start, len) in regions {
        if !mappings.iter().any(|&(s, e)| s <= start && start + len <= e) {
            out.unfit += 1;
            done.push((start, len));
            continue;
        }
        match pm.swap_layout(start, len) {
            Ok(l) if l.runs > IN_RUNS || l.present_pages > 0 => {
                out.runs_before += l.runs as u64;
                todo.push((start, len, l.swapped_pages as u64 * 4096));
            }
            Ok(_) => {
                out.in_runs += 1;
                done.push((start, len));
            }
            Err(_) => out.scan_errors += 1,
        }
    }
    let mem = ProcMem::open(proc.root(), pidfd);
    for batch in todo.chunks(RELAYOUT_BATCH) {
        if until.passed() || (out.refused >= RELAYOUT_BATCH as u64 && out.relaid == 0) {
            break;
        }
        let ranges: Vec<(u64, u64)> = batch.iter().map(|&(s, l, _)| (s, l)).collect();
        add_advice(&mut out.advise, pidfd.advise(Advice::WillNeed, &ranges));
        match &mem {
            Ok(mem) => out.advise.errors += mem.touch(&ranges).errors,
            Err(_) => out.advise.errors += 1,
        }
        out.read_bytes += batch.iter().map(|b| b.2).sum::<u64>();
        let mut whole = Vec::with_capacity(ranges.len());
        for &r in &ranges {
            let c = pidfd.advise(Advice::Collapse, &[r]);
            if c.errors == 0 {
                whole.push(r);
            } else if c.refused() {
                out.refused += 1;
            }
            add_advice(&mut out.advise, c);
        }
        crate::crash_point!("relayout");
        // Paged out either way: what was read back goes where it was. One try per
        // rest: a region that failed is tried again when the tenant next rests.
        let before = swpout_fallbacks(proc);
        add_advice(&mut out.advise, pidfd.advise(Advice::PageOut, &ranges));
        // Host-wide counter: another process's split in the same instant would count
        // here too, which only stops this pass early.
        let split = swpout_fallbacks(proc).saturating_sub(before).min(whole.len() as u64);
        out.split += split;
        out.relaid += whole.len() as u64 - split;
        done.extend(&ranges);
        paged.extend(ranges);
        if split > 0 {
            break;
        }
    }
    out
}

/// Huge pages the kernel has split for want of a free swap cluster, host-wide.
fn swpout_fallbacks(proc: &ProcFs) -> u64 {
    proc.vmstat().ok().and_then(|v| v.get("thp_swpout_fallback").copied()).unwrap_or(0)
}

/// `ranges` cut into consecutive batches of at most `max` bytes each.
fn batches(ranges: &[(u64, u64)], max: u64) -> Vec<Vec<(u64, u64)>> {
    let mut out = vec![Vec::new()];
    let mut room = max;
    for &(mut start, mut len) in ranges {
        while len > 0 {
            if room == 0 {
                out.push(Vec::new());
                room = max;
            }
            let take = len.min(room);
            out.last_mut().expect("never empty").push((start, take));
            (start, len, room) = (start + take, len - take, room - take);
        }
    }
    out.retain(|b| !b.is_empty());
    out
}

/// 2 MiB blocks of anonymous memory that are mostly resident on small pages: the
/// candidates for `MADV_COLLAPSE`.
pub fn collapsible(regions: &[PageRegion], ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    use std::collections::BTreeMap;
    let mut small: BTreeMap<u64, u64> = BTreeMap::new();
    for r in regions.iter().filter(|r| r.categories & PAGE_IS_PRESENT != 0 && r.categories & PAGE_IS_HUGE == 0) {
        let mut at = r.start;
        while at < r.end {
            let block = at & !(HUGE - 1);
            let end = (block + HUGE).min(r.end);
            *small.entry(block).or_insert(0) += end - at;
            at = end;
        }
    }
    small
        .into_iter()
        .filter(|&(block, bytes)| bytes >= HUGE / 2 && ranges.iter().any(|&(s, e)| s <= block && block + HUGE <= e))
        .map(|(block, _)| (block, HUGE))
        .collect()
}

/// Rebuilds huge pages where anonymous memory sits on small pages (up to `limit` bytes).
pub fn collapse(proc: &ProcFs, pidfd: &Pidfd, limit: u64) -> Moved {
    let Some(regions) = scan(proc, pidfd.pid()) else { return Moved { scan_errors: 1, ..Moved::default() } };
    let mut blocks = collapsible(&regions, &anon_ranges(proc, pidfd.pid()));
    blocks.truncate((limit / HUGE) as usize);
    let bytes = blocks.len() as u64 * HUGE;
    Moved { advise: pidfd.advise(Advice::Collapse, &blocks), bytes, scan_errors: 0 }
}

/// Times a closure, for mover reports.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefetch_cut_short_counts_only_the_ranges_it_read_whole() {
        // 4 KiB swapped, nothing, 8 KiB, 4 KiB: 12 KiB read covers three.
        assert_eq!(covered(&[4096, 0, 8192, 4096], 12288), 3);
        assert_eq!(covered(&[4096, 0, 8192, 4096], 8192), 2);
        assert_eq!(covered(&[4096, 8192], 0), 0);
        assert_eq!(covered(&[0, 0], 0), 2, "nothing to read is read");
    }

    #[test]
    fn a_demotion_asks_in_batches_and_none_after_its_deadline_or_once_told_to_yield() {
        // This process's own memory: with no swap the kernel keeps the pages, and
        // with swap they come back on the next touch.
        let me = Pidfd::open(std::process::id()).unwrap();
        let buf = vec![3u8; 12 << 20];
        let start = (buf.as_ptr() as u64).div_ceil(HUGE) * HUGE;
        let ranges = [(start, 2 * DEMOTE_BATCH)];
        let all = demote_ranges(&me, &ranges, &Until::never());
        assert_eq!((all.bytes, all.advise.calls, all.advise.errors), (2 * DEMOTE_BATCH, 2, 0), "{all:?}");
        let late = demote_ranges(&me, &ranges, &Until::at(Instant::now()));
        assert_eq!((late.bytes, late.advise.calls), (0, 0), "past its deadline it asks for nothing: {late:?}");
        // Told to yield after the first batch (as when a request comes to wait for the
        // engine), the demotion asks for no second, though its deadline is far.
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = std::sync::Arc::clone(&asked);
        let far = Until::at(Instant::now() + std::time::Duration::from_secs(60))
            .or_yield(move || count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 1);
        let cut = demote_ranges(&me, &ranges, &far);
        assert_eq!((cut.bytes, cut.advise.calls), (DEMOTE_BATCH, 1), "one batch, then it yields: {cut:?}");
        assert!(buf.iter().all(|&b| b == 3));
    }

    fn region(start: u64, end: u64, categories: u64) -> PageRegion {
        PageRegion { start, end, categories }
    }

    #[test]
    fn prefetch_batches_split_long_runs_and_keep_order() {
        let got = batches(&[(0, 10), (100, 25), (200, 3)], 16);
        assert_eq!(got, vec![vec![(0, 10), (100, 6)], vec![(106, 16)], vec![(122, 3), (200, 3)]]);
        assert!(batches(&[], 16).is_empty());
        assert_eq!(batches(&[(0, 32)], 16), vec![vec![(0, 16)], vec![(16, 16)]]);
    }

    #[test]
    fn runs_respect_the_limit() {
        let regs = [
            region(0, 8192, PAGE_IS_PRESENT),
            region(8192, 16384, PAGE_IS_SWAPPED),
            region(16384, 32768, PAGE_IS_PRESENT),
        ];
        assert_eq!(runs(&regs, PAGE_IS_PRESENT, u64::MAX), (vec![(0, 8192), (16384, 16384)], 24576));
        assert_eq!(runs(&regs, PAGE_IS_PRESENT, 12288), (vec![(0, 8192), (16384, 4096)], 12288));
        assert_eq!(runs(&regs, PAGE_IS_SWAPPED, u64::MAX), (vec![(8192, 8192)], 8192));
    }

    #[test]
    fn collapse_targets_mostly_resident_small_blocks_inside_mappings() {
        let m = HUGE;
        let regs = [
            region(0, m, PAGE_IS_PRESENT),                    // whole block small: yes
            region(m, 2 * m, PAGE_IS_PRESENT | PAGE_IS_HUGE), // already huge: no
            region(2 * m, 2 * m + 4096, PAGE_IS_PRESENT),     // one page: no
            region(4 * m, 5 * m, PAGE_IS_PRESENT),            // outside the mapping: no
        ];
        let got = collapsible(&regs, &[(0, 4 * m)]);
        assert_eq!(got, vec![(0, m)]);
    }
}
