//! Per-page state of another process with `PAGEMAP_SCAN` (Linux 6.7+), or from the
//! plain eight-byte pagemap entries on older kernels.
//!
//! One ioctl on `/proc/PID/pagemap` returns runs of pages that share categories
//! (present, swapped, huge, file), so a GiB is read in a few milliseconds instead of
//! 262,144 eight-byte pagemap entries. Without the ioctl (6.1 answers `ENOTTY`) the
//! entries are read and merged into the same runs; they do not say which pages are
//! huge, so there every page counts as a small one.
//!
//! Kernel quirk seen on these machines: with a result buffer of more than 512 regions
//! the returned `walk_end` is stale and the next call re-scans, so the buffer is kept
//! at [`MAX_REGIONS`].

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub const PAGE_IS_WPALLOWED: u64 = 1 << 0;
pub const PAGE_IS_WRITTEN: u64 = 1 << 1;
pub const PAGE_IS_FILE: u64 = 1 << 2;
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
pub const PAGE_IS_SWAPPED: u64 = 1 << 4;
pub const PAGE_IS_PFNZERO: u64 = 1 << 5;
pub const PAGE_IS_HUGE: u64 = 1 << 6;

/// `struct page_region` from `<linux/fs.h>`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageRegion {
    pub start: u64,
    pub end: u64,
    pub categories: u64,
}

/// `struct pm_scan_arg` from `<linux/fs.h>`.
#[repr(C)]
#[derive(Debug, Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

const _: () = assert!(std::mem::size_of::<PageRegion>() == 24);
const _: () = assert!(std::mem::size_of::<PmScanArg>() == 96);

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 = (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | ((b'f' as u64) << 8) | 16;
const _: () = assert!(PAGEMAP_SCAN == 0xC060_6610);

/// Most regions asked for per ioctl (see the module comment).
pub const MAX_REGIONS: usize = 512;

/// Set once the kernel has refused `PAGEMAP_SCAN`: every later scan reads entries.
static NO_SCAN_IOCTL: AtomicBool = AtomicBool::new(false);

/// Whether a scan has found this kernel without `PAGEMAP_SCAN`.
fn scan_ioctl_missing() -> bool {
    NO_SCAN_IOCTL.load(Ordering::Relaxed)
}

/// Whether this kernel answers `PAGEMAP_SCAN`, tried on a page of our own stack.
pub fn has_scan_ioctl() -> bool {
    let probe = 0u64;
    let at = &probe as *const u64 as u64 & !4095;
    if let Ok(pm) = Pagemap::open(Path::new("/proc"), std::process::id()) {
        let _ = pm.scan(at, at + 4096);
    }
    !scan_ioctl_missing()
}

/// Plain pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const ENTRY_PRESENT: u64 = 1 << 63;
const ENTRY_SWAPPED: u64 = 1 << 62;
const ENTRY_FILE: u64 = 1 << 61;

/// Entries read per `pread` when there is no ioctl (512 KiB, 256 MiB of memory).
const ENTRIES_PER_READ: u64 = 65536;

/// An open pagemap of one process.
#[derive(Debug)]
pub struct Pagemap {
    file: File,
}

impl Pagemap {
    /// Opens `/proc/PID/pagemap` (root, or ptrace access to the process, is needed).
    pub fn open(proc_root: &Path, pid: u32) -> io::Result<Pagemap> {
        let file = File::open(proc_root.join(pid.to_string()).join("pagemap"))?;
        Ok(Pagemap { file })
    }

    /// Runs of pages in `[start, end)` that are present or swapped, with their
    /// present / swapped / huge / file categories. Pages neither present nor swapped
    /// (never touched) are left out.
    pub fn scan(&self, start: u64, end: u64) -> io::Result<Vec<PageRegion>> {
        if !scan_ioctl_missing() {
            match self.scan_ioctl(start, end) {
                Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => NO_SCAN_IOCTL.store(true, Ordering::Relaxed),
                r => return r,
            }
        }
        self.scan_entries(start, end)
    }

    fn scan_ioctl(&self, start: u64, end: u64) -> io::Result<Vec<PageRegion>> {
        let mut out = Vec::new();
        let mut buf = vec![PageRegion::default(); MAX_REGIONS];
        let mut at = start;
        while at < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                start: at,
                end,
                vec: buf.as_mut_ptr() as u64,
                vec_len: buf.len() as u64,
                category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                return_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_HUGE | PAGE_IS_FILE,
                ..PmScanArg::default()
            };
            // SAFETY: `arg` is a correctly sized pm_scan_arg (checked above) on our
            // stack; `vec`/`vec_len` describe `buf`, which outlives the call and has room
            // for `vec_len` page_regions. The kernel writes only there and into `arg`.
            let n = unsafe { libc::ioctl(self.file.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg as *mut PmScanArg) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            out.extend_from_slice(&buf[..n as usize]);
            if arg.walk_end <= at {
                break;
            }
            at = arg.walk_end;
        }
        Ok(out)
    }
}

impl Pagemap {
    /// [`Pagemap::scan`] from the plain entries, merged into runs of equal categories.
    fn scan_entries(&self, start: u64, end: u64) -> io::Result<Vec<PageRegion>> {
        use std::os::unix::fs::FileExt;
        let mut out: Vec<PageRegion> = Vec::new();
        let mut page = start / 4096;
        let last = end.div_ceil(4096);
        let mut raw = Vec::new();
        while page < last {
            let n = ENTRIES_PER_READ.min(last - page);
            raw.resize(n as usize * 8, 0);
            self.file.read_exact_at(&mut raw, page * 8)?;
            for (i, c) in raw.chunks_exact(8).enumerate() {
                let e = u64::from_le_bytes(c.try_into().expect("8 bytes"));
                let categories = entry_categories(e);
                if categories == 0 {
                    continue;
                }
                let at = (page + i as u64) * 4096;
                match out.last_mut() {
                    Some(r) if r.end == at && r.categories == categories => r.end += 4096,
                    _ => out.push(PageRegion { start: at, end: at + 4096, categories }),
                }
            }
            page += n;
        }
        Ok(out)
    }
}

/// A plain entry's categories as `PAGEMAP_SCAN` would return them (0: neither present
/// nor swapped, left out).
fn entry_categories(e: u64) -> u64 {
    let mut c = 0;
    if e & ENTRY_PRESENT != 0 {
        c |= PAGE_IS_PRESENT;
    }
    if e & ENTRY_SWAPPED != 0 {
        c |= PAGE_IS_SWAPPED;
    }
    if c != 0 && e & ENTRY_FILE != 0 {
        c |= PAGE_IS_FILE;
    }
    c
}

/// Where a range's swapped pages lie on the swap areas: how many there are, and in how
/// many runs of consecutive slots (in address order), beside how many are resident. A
/// range paged out whole in one go is one run and reads back at sequential speed; one
/// paged out by the kernel's reclaim, page by page alongside others, is hundreds of
/// runs read at random speed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapLayout {
    pub swapped_pages: u32,
    pub runs: u32,
    pub present_pages: u32,
    /// Swapped pages in runs of at least [`SwapLayout::LONG_RUN`] slots: what reads
    /// back at sequential speed, whatever a few stray pages do to the mean run.
    pub long_run_pages: u32,
}

impl SwapLayout {
    /// A run this long (256 KiB) is read back in large sequential requests.
    pub const LONG_RUN: u32 = 64;

    /// From raw pagemap entries (bit 63 present; bit 62 swapped; bits 0–4 the swap
    /// area, 5–54 the slot).
    pub fn of(entries: &[u64]) -> SwapLayout {
        let mut out = SwapLayout::default();
        let mut prev: Option<u64> = None;
        let mut run = 0;
        for &e in entries {
            if e >> 63 == 1 {
                out.present_pages += 1;
            }
            let slot = (e >> 62 & 1 == 1).then_some(e & ((1 << 55) - 1));
            if slot.is_none() || prev != slot.map(|s| s.wrapping_sub(1 << 5)) {
                out.end_run(run);
                run = 0;
            }
            prev = slot;
            if slot.is_some() {
                out.swapped_pages += 1;
                out.runs += u32::from(run == 0);
                run += 1;
            }
        }
        out.end_run(run);
        out
    }

    fn end_run(&mut self, len: u32) {
        if len >= Self::LONG_RUN {
            self.long_run_pages += len;
        }
    }

    /// The share of its swapped pages that lie in long runs.
    pub fn long_run_share(&self) -> f64 {
        self.long_run_pages as f64 / self.swapped_pages.max(1) as f64
    }
}

impl Pagemap {
    /// The layout of `[start, start + len)`'s swapped pages, from the plain pagemap
    /// entries (`PAGEMAP_SCAN` does not say where a page lies; root sees the slots).
    pub fn swap_layout(&self, start: u64, len: u64) -> io::Result<SwapLayout> {
        use std::os::unix::fs::FileExt;
        let pages = (len / 4096) as usize;
        let mut raw = vec![0u8; pages * 8];
        self.file.read_exact_at(&mut raw, start / 4096 * 8)?;
        let entries: Vec<u64> =
            raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        Ok(SwapLayout::of(&entries))
    }
}

/// Byte totals of a scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub present: u64,
    pub swapped: u64,
    pub huge: u64,
}

impl PageCounts {
    pub fn of(regions: &[PageRegion]) -> PageCounts {
        let mut c = PageCounts::default();
        for r in regions {
            let len = r.end - r.start;
            if r.categories & PAGE_IS_PRESENT != 0 {
                c.present += len;
            }
            if r.categories & PAGE_IS_SWAPPED != 0 {
                c.swapped += len;
            }
            if r.categories & PAGE_IS_HUGE != 0 {
                c.huge += len;
            }
        }
        c
    }
}

/// Private anonymous ranges of a process: the memory that can live on the tier.
pub fn anon_ranges(proc: &crate::procfs::ProcFs, pid: u32) -> Vec<(u64, u64)> {
    proc.maps(pid)
        .map(|m| m.into_iter().filter(|m| m.is_anon_private()).map(|m| (m.start, m.end)).collect())
        .unwrap_or_default()
}

/// Page runs of the anonymous memory of `pid`; `None` if the scan failed.
pub fn scan(proc: &crate::procfs::ProcFs, pid: u32) -> Option<Vec<PageRegion>> {
    scan_mappings(proc, pid).map(|(_, runs)| runs)
}

/// Bytes of a process's private anonymous memory its page tables say are swapped out
/// (0 when they cannot be read). With no swap area behind them, these are the poisoned
/// entries `swapoff` leaves where a read failed.
pub fn swapped_bytes(proc: &crate::procfs::ProcFs, pid: u32) -> u64 {
    scan(proc, pid)
        .unwrap_or_default()
        .iter()
        .filter(|r| r.categories & PAGE_IS_SWAPPED != 0)
        .map(|r| r.end - r.start)
        .sum()
}

/// Address ranges `[start, end)` of a process's mappings, in address order.
pub type Mappings = Vec<(u64, u64)>;

/// The anonymous mappings of `pid` and their page runs.
pub fn scan_mappings(proc: &crate::procfs::ProcFs, pid: u32) -> Option<(Mappings, Vec<PageRegion>)> {
    let pm = Pagemap::open(proc.root(), pid).ok()?;
    let ranges = anon_ranges(proc, pid);
    let mut out = Vec::new();
    for &(start, end) in &ranges {
        out.extend(pm.scan(start, end).ok()?);
    }
    Some((ranges, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_layout_counts_runs_of_consecutive_slots_in_address_order() {
        let swapped = |area: u64, slot: u64| 1 << 62 | slot << 5 | area;
        let present = 1u64 << 63;
        // Slots 10, 11, 12, then 40, 41 after a resident page, then 7, then 8 on another area.
        let e = [
            swapped(0, 10),
            swapped(0, 11),
            swapped(0, 12),
            present,
            swapped(0, 40),
            swapped(0, 41),
            swapped(0, 7),
            swapped(1, 8),
        ];
        assert_eq!(SwapLayout::of(&e), SwapLayout { swapped_pages: 7, runs: 4, present_pages: 1, long_run_pages: 0 });
        assert_eq!(SwapLayout::of(&[present, 0]), SwapLayout { present_pages: 1, ..SwapLayout::default() });
        let one_run: Vec<u64> = (100..612).map(|s| swapped(2, s)).collect();
        let whole = SwapLayout { swapped_pages: 512, runs: 1, present_pages: 0, long_run_pages: 512 };
        assert_eq!(SwapLayout::of(&one_run), whole);
        // A laid-out region with a resident page in it and a stray slot: runs of 63, 59
        // and 1 are short, the 388 after them long.
        let mut e: Vec<u64> = (0..512).map(|s| swapped(0, s)).collect();
        e[63] = present;
        e[123] = swapped(0, 9000);
        let l = SwapLayout::of(&e);
        assert_eq!((l.swapped_pages, l.runs, l.long_run_pages), (511, 4, 388));
        assert!((l.long_run_share() - 388.0 / 511.0).abs() < 1e-9);
    }

    /// A fresh private anonymous mapping of `len` bytes; the test unmaps it.
    fn anon_mapping(len: usize) -> *mut libc::c_void {
        // SAFETY: asks for a new mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p
    }

    #[test]
    fn without_the_ioctl_the_entries_give_the_same_runs() {
        let len = 64 << 12;
        let p = anon_mapping(len);
        // SAFETY: advising the mapping made above.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        // Runs of 1, 2 and 3 pages, then a gap, then 5.
        for i in [0, 2, 3, 5, 6, 7, 20, 21, 22, 23, 24] {
            // SAFETY: i * 4096 < len, inside the mapping.
            unsafe { *(p as *mut u8).add(i * 4096) = 1 };
        }
        let pm = Pagemap::open(Path::new("/proc"), std::process::id()).unwrap();
        let start = p as u64;
        let entries = pm.scan_entries(start, start + len as u64).unwrap();
        let ioctl = pm.scan_ioctl(start, start + len as u64);
        // SAFETY: unmapping the mapping made above, no references remain.
        unsafe { libc::munmap(p, len) };
        let lens: Vec<u64> = entries.iter().map(|r| (r.end - r.start) / 4096).collect();
        assert_eq!(lens, [1, 2, 3, 5], "{entries:?}");
        assert!(entries.iter().all(|r| r.categories == PAGE_IS_PRESENT), "{entries:?}");
        if let Ok(ioctl) = ioctl {
            assert_eq!(entries, ioctl, "the same runs as PAGEMAP_SCAN");
        }
        assert_eq!(entry_categories(ENTRY_SWAPPED | ENTRY_FILE), PAGE_IS_SWAPPED | PAGE_IS_FILE);
        assert_eq!(entry_categories(ENTRY_FILE), 0, "a file bit alone is no page");
    }

    #[test]
    fn scans_own_memory() {
        let len = 64 << 12;
        let p = anon_mapping(len);
        // Touch every other page of the first half.
        for i in (0..32).step_by(2) {
            // SAFETY: i * 4096 < len, inside the mapping.
            unsafe { *(p as *mut u8).add(i * 4096) = 1 };
        }
        let pm = Pagemap::open(Path::new("/proc"), std::process::id()).unwrap();
        let start = p as u64;
        let regions = pm.scan(start, start + len as u64).unwrap();
        let counts = PageCounts::of(&regions);
        // SAFETY: unmapping the mapping made above, no references remain.
        unsafe { libc::munmap(p, len) };
        assert_eq!(counts.present, 16 * 4096, "{regions:?}");
        assert_eq!(counts.swapped, 0);
        assert_eq!(regions.len(), 16, "touched pages are separate runs");
    }
}
