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

/// Huge-page advice for a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HugeAdvice {
    /// `MADV_HUGEPAGE`: back with transparent huge pages where possible.
    Huge,
    /// `MADV_NOHUGEPAGE`: 4 KiB pages only.
    Small,
}

impl AnonMemory {
    /// Maps `len` bytes (rounded up to 2 MiB so huge pages can align).
    pub fn new(len: usize, advice: HugeAdvice) -> io::Result<AnonMemory> {
        let len = len.div_ceil(2 << 20) * (2 << 20);
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let adv = match advice {
            HugeAdvice::Huge => libc::MADV_HUGEPAGE,
            HugeAdvice::Small => libc::MADV_NOHUGEPAGE,
        };
        // SAFETY: advising the mapping just created, over its exact extent.
        unsafe { libc::madvise(p, len, adv) };
        Ok(AnonMemory { ptr: p.cast(), len })
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
        let mut m = AnonMemory::new(3 << 20, HugeAdvice::Small).unwrap();
        assert_eq!(m.len_bytes(), 4 << 20);
        m.as_mut_slice()[12345] = 42;
        assert_eq!(m.as_slice()[12345], 42);
        assert_eq!(m.start() % 4096, 0);
    }
}
