//! Moving a process's memory between tiers from outside it: `process_madvise`.
//!
//! A [`Pidfd`] pins the process (no PID-reuse races). [`Pidfd::advise`] sends ranges in
//! batches of up to `IOV_MAX` iovecs per call, which is what makes demotion run at
//! GiB/s instead of one syscall per range.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What to do with a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Advice {
    /// Write the pages to swap now (`MADV_PAGEOUT`): demotion to the tier.
    PageOut,
    /// Read swapped pages back ahead of use (`MADV_WILLNEED`): prefetch.
    WillNeed,
    /// Move the pages to the inactive list (`MADV_COLD`): a hint, no I/O.
    Cold,
    /// Rebuild huge pages synchronously (`MADV_COLLAPSE`).
    Collapse,
}

impl Advice {
    pub const fn raw(self) -> i32 {
        match self {
            Advice::PageOut => 21,
            Advice::WillNeed => 3,
            Advice::Cold => 20,
            Advice::Collapse => 25,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Advice::PageOut => "MADV_PAGEOUT",
            Advice::WillNeed => "MADV_WILLNEED",
            Advice::Cold => "MADV_COLD",
            Advice::Collapse => "MADV_COLLAPSE",
        }
    }
}

/// Most iovecs one `process_madvise` call takes (`UIO_MAXIOV`).
pub const IOV_MAX: usize = 1024;

/// A process file descriptor: names one process for its whole life.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
    pid: u32,
}

/// The outcome of an advise call over many ranges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdviseResult {
    /// Bytes the kernel reported as advised.
    pub bytes: u64,
    /// Syscalls made.
    pub calls: u64,
    /// Syscalls that failed (their ranges were skipped).
    pub errors: u64,
    /// The errno of the last failure.
    pub last_errno: Option<i32>,
}

impl AdviseResult {
    /// The last failure was `EINVAL`: the advice does not apply to this memory (for
    /// `MADV_COLLAPSE`, the process opted out of huge pages or they are off).
    pub fn refused(&self) -> bool {
        self.last_errno == Some(libc::EINVAL)
    }
}

impl Pidfd {
    /// Opens a pidfd for `pid`.
    pub fn open(pid: u32) -> io::Result<Pidfd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory
        // is passed.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this fd to us and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Pidfd { fd, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// True once the process has exited (the pidfd becomes readable).
    pub fn has_exited(&self) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd on our stack, count 1, zero timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n > 0 && pfd.revents & libc::POLLIN != 0
    }

    /// Applies `advice` to `ranges` (start, length) in the process, batching up to
    /// [`IOV_MAX`] ranges per call. A failing batch is counted and the rest go on.
    pub fn advise(&self, advice: Advice, ranges: &[(u64, u64)]) -> AdviseResult {
        let mut res = AdviseResult::default();
        for chunk in ranges.chunks(IOV_MAX) {
            let iov: Vec<libc::iovec> = chunk
                .iter()
                .map(|&(start, len)| libc::iovec { iov_base: start as *mut libc::c_void, iov_len: len as usize })
                .collect();
            res.calls += 1;
            // SAFETY: `iov` is a live array of `iov.len()` iovecs for the duration of the
            // call. The addresses name memory of the *target* process; the kernel
            // validates them there and never dereferences them in ours.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_process_madvise,
                    self.fd.as_raw_fd(),
                    iov.as_ptr(),
                    iov.len(),
                    advice.raw(),
                    0u32,
                )
            };
            if n < 0 {
                res.errors += 1;
                res.last_errno = io::Error::last_os_error().raw_os_error();
                // One bad range (unmapped since we looked) fails the whole batch; retry
                // the batch range by range so the good ones still move.
                if chunk.len() > 1 {
                    for &(start, len) in chunk {
                        let one = self.advise(advice, &[(start, len)]);
                        res.bytes += one.bytes;
                        res.calls += one.calls;
                        res.errors += one.errors;
                        res.last_errno = one.last_errno.or(res.last_errno);
                    }
                }
            } else {
                res.bytes += n as u64;
                // A short count: the kernel stopped at a range it could not advise (unmapped
                // since we looked) and returned what it had done, with no error. Skip that
                // range and go on with the ones behind it: a cut's demotion of 340 regions
                // once moved 4 MiB and silently left the rest to the kernel's reclaim.
                let mut done = n as u64;
                if let Some(bad) = chunk.iter().position(|&(_, len)| {
                    let whole = done >= len;
                    done = done.saturating_sub(len);
                    !whole
                }) {
                    res.errors += 1;
                    let rest = self.advise(advice, &chunk[bad + 1..]);
                    res.bytes += rest.bytes;
                    res.calls += rest.calls;
                    res.errors += rest.errors;
                    res.last_errno = rest.last_errno.or(res.last_errno);
                }
            }
        }
        res
    }
}

impl AsRawFd for Pidfd {
    fn as_raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_numbers_match_the_uapi() {
        assert_eq!(Advice::PageOut.raw(), libc::MADV_PAGEOUT);
        assert_eq!(Advice::Cold.raw(), libc::MADV_COLD);
        assert_eq!(Advice::WillNeed.raw(), libc::MADV_WILLNEED);
    }

    #[test]
    fn pidfd_of_self_is_alive_and_advises_own_memory() {
        let me = Pidfd::open(std::process::id()).unwrap();
        assert!(!me.has_exited());
        let buf = vec![7u8; 1 << 20];
        let page = 4096u64;
        let start = (buf.as_ptr() as u64).div_ceil(page) * page;
        let r = me.advise(Advice::Cold, &[(start, 16 * page)]);
        assert_eq!(r.errors, 0, "{r:?}");
        assert_eq!(r.bytes, 16 * page);
        assert_eq!(buf[4096 * 3], 7);
    }

    #[test]
    fn bad_ranges_are_counted_not_fatal() {
        let me = Pidfd::open(std::process::id()).unwrap();
        let buf = vec![1u8; 1 << 20];
        let page = 4096u64;
        let good = (buf.as_ptr() as u64).div_ceil(page) * page;
        // Address 4096 is never mapped in a Rust process.
        let r = me.advise(Advice::Cold, &[(page, page), (good, page)]);
        assert!(r.errors >= 1, "{r:?}");
        assert_eq!(r.bytes, page, "the good range still moved: {r:?}");
    }

    #[test]
    fn a_bad_range_after_good_ones_does_not_drop_the_ranges_behind_it() {
        // The kernel stops at the bad range and returns the bytes done so far, with no
        // error: the ranges after it must still be advised.
        let me = Pidfd::open(std::process::id()).unwrap();
        let buf = vec![1u8; 1 << 20];
        let page = 4096u64;
        let good = (buf.as_ptr() as u64).div_ceil(page) * page;
        let r = me.advise(Advice::Cold, &[(good, page), (page, page), (good + 2 * page, 2 * page)]);
        assert!(r.errors >= 1, "{r:?}");
        assert_eq!(r.bytes, 3 * page, "both good ranges moved: {r:?}");
    }

    #[test]
    fn absent_pid_is_an_error() {
        assert!(Pidfd::open(u32::MAX / 2).is_err());
    }
}
