//! Per-page state of another process with `PAGEMAP_SCAN` (Linux 6.7+).
//!
//! One ioctl on `/proc/PID/pagemap` returns runs of pages that share categories
//! (present, swapped, huge, file), so a GiB is read in a few milliseconds instead of
//! 262,144 eight-byte pagemap entries.
//!
//! Kernel quirk seen on these machines: with a result buffer of more than 512 regions
//! the returned `walk_end` is stale and the next call re-scans, so the buffer is kept
//! at [`MAX_REGIONS`].

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

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
}

impl SwapLayout {
    /// From raw pagemap entries (bit 63 present; bit 62 swapped; bits 0–4 the swap
    /// area, 5–54 the slot).
    pub fn of(entries: &[u64]) -> SwapLayout {
        let mut out = SwapLayout::default();
        let mut prev: Option<u64> = None;
        for &e in entries {
            if e >> 63 == 1 {
                out.present_pages += 1;
            }
            if e >> 62 & 1 == 0 {
                prev = None;
                continue;
            }
            let slot = e & ((1 << 55) - 1);
            out.swapped_pages += 1;
            if prev != Some(slot.wrapping_sub(1 << 5)) {
                out.runs += 1;
            }
            prev = Some(slot);
        }
        out
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
        assert_eq!(SwapLayout::of(&e), SwapLayout { swapped_pages: 7, runs: 4, present_pages: 1 });
        assert_eq!(SwapLayout::of(&[present, 0]), SwapLayout { present_pages: 1, ..SwapLayout::default() });
        let one_run: Vec<u64> = (100..612).map(|s| swapped(2, s)).collect();
        assert_eq!(SwapLayout::of(&one_run), SwapLayout { swapped_pages: 512, runs: 1, present_pages: 0 });
    }

    #[test]
    fn scans_own_memory() {
        let len = 64 << 12;
        // SAFETY: a fresh private anonymous mapping; we own it until munmap below.
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
