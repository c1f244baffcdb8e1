//! Anonymous memory for test tenants (the workload generator): a private mapping
//! with the huge-page advice chosen up front.

use std::io;

/// A private anonymous mapping, unmapped on drop.
#[derive(Debug)]
pub struct AnonMemory {
    ptr: *mut u64,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value; moving it to another thread
// moves that ownership.
unsafe impl Send for AnonMemory {}

/// What backs a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// What the system's THP setting gives a program that does not ask (no advice):
    /// under `madvise`, small pages at first touch, which `MADV_COLLAPSE` may still
    /// rebuild as huge ones (tierd does, to lay a resting tenant's memory out on the tier).
    Default,
    /// 4 KiB pages only (`MADV_NOHUGEPAGE`: the program opted out of huge pages).
    Small,
    /// Transparent huge pages where the kernel can have them (`MADV_HUGEPAGE`).
    Thp,
    /// 2 MiB hugetlbfs pages from the reserved pool (`MAP_HUGETLB`): never swapped.
    Hugetlb2M,
    /// 1 GiB hugetlbfs pages from the reserved pool.
    Hugetlb1G,
}

impl PageKind {
    /// The size mappings of this kind are rounded up to.
    pub fn granule(self) -> usize {
        match self {
            PageKind::Default | PageKind::Small | PageKind::Thp | PageKind::Hugetlb2M => 2 << 20,
            PageKind::Hugetlb1G => 1 << 30,
        }
    }
}

impl AnonMemory {
    /// Maps `len` bytes (rounded up to 2 MiB, or 1 GiB for 1 GiB pages, so huge pages
    /// can align). hugetlb mappings fail with `ENOMEM` when the pool is short.
    pub fn new(len: usize, kind: PageKind) -> io::Result<AnonMemory> {
        let len = len.div_ceil(kind.granule()) * kind.granule();
        let flags = match kind {
            PageKind::Default | PageKind::Small | PageKind::Thp => libc::MAP_NORESERVE,
            PageKind::Hugetlb2M => libc::MAP_HUGETLB | libc::MAP_HUGE_2MB,
            PageKind::Hugetlb1G => libc::MAP_HUGETLB | libc::MAP_HUGE_1GB,
        };
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // A tenant's memory, never locked even in a process that locks its own (tierd,
        // `lock_own_memory`): the kernel probes' advice must act on it as on a tenant's.
        // SAFETY: unlocking the mapping just created, over its exact extent.
        unsafe { libc::munlock(p, len) };
        let advice = match kind {
            PageKind::Thp => Some(libc::MADV_HUGEPAGE),
            PageKind::Small => Some(libc::MADV_NOHUGEPAGE),
            PageKind::Default | PageKind::Hugetlb2M | PageKind::Hugetlb1G => None,
        };
        if let Some(adv) = advice {
            // SAFETY: advising the mapping just created, over its exact extent.
            unsafe { libc::madvise(p, len, adv) };
        }
        Ok(AnonMemory { ptr: p.cast(), len })
    }

    /// Rebuilds huge pages over the whole mapping now (`MADV_COLLAPSE`), for memory
    /// the kernel could not back with huge pages at first touch.
    pub fn collapse(&self) -> io::Result<()> {
        // SAFETY: advising this value's own mapping over its exact extent.
        let r = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_COLLAPSE) };
        if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    pub fn len_bytes(&self) -> usize {
        self.len
    }

    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is `len` bytes, readable and writable, 8-byte aligned
        // (page aligned) and exclusively borrowed through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len / 8) }
    }

    pub fn as_slice(&self) -> &[u64] {
        // SAFETY: as above, shared borrow.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len / 8) }
    }

    pub fn start(&self) -> u64 {
        self.ptr as u64
    }
}

impl Drop for AnonMemory {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this value owns; no borrows outlive it.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_rounds_and_holds_data() {
        let mut m = AnonMemory::new(3 << 20, PageKind::Small).unwrap();
        assert_eq!(m.len_bytes(), 4 << 20);
        m.as_mut_slice()[12345] = 42;
        assert_eq!(m.as_slice()[12345], 42);
        assert_eq!(m.start() % 4096, 0);
    }
}
