//! Faulting another process's pages in through `/proc/PID/mem`.
//!
//! `MADV_WILLNEED` starts the reads of swapped pages at full queue depth, but leaves
//! them unmapped in the swap cache: clean, unreferenced, the first pages reclaim drops
//! when the tenant's cgroup is full — a woken tenant then faults them in again, one at
//! a time. Reading the same ranges through `/proc/PID/mem` maps them into the process
//! as referenced pages (the read waits only for reads still in flight). The bytes read
//! pass through a buffer here and are not kept.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::madvise::Pidfd;

/// Most read at once: one huge page.
const CHUNK: usize = 2 << 20;

/// An open `/proc/PID/mem` of a process still running.
pub struct ProcMem {
    file: File,
}

/// What a [`ProcMem::touch`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Touched {
    pub bytes: u64,
    /// Ranges that could not be read (unmapped meanwhile, or the process exited).
    pub errors: u64,
}

impl ProcMem {
    /// Opens the memory of the process behind `pidfd` (under procfs at `proc_root`).
    pub fn open(proc_root: &Path, pidfd: &Pidfd) -> io::Result<ProcMem> {
        let file = File::open(proc_root.join(pidfd.pid().to_string()).join("mem"))?;
        // A live process's PID cannot be reused, so if the pidfd's process is still
        // running now, the file opened above is its memory.
        if pidfd.has_exited() {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(ProcMem { file })
    }

    /// Reads every byte of `ranges` (start, length), which faults them in.
    pub fn touch(&self, ranges: &[(u64, u64)]) -> Touched {
        let mut buf = vec![0u8; CHUNK];
        let mut done = Touched::default();
        for &(start, len) in ranges {
            let mut at = start;
            let end = start.saturating_add(len);
            while at < end {
                let n = ((end - at) as usize).min(CHUNK);
                match self.file.read_at(&mut buf[..n], at) {
                    Ok(0) | Err(_) => {
                        done.errors += 1;
                        break;
                    }
                    Ok(read) => {
                        done.bytes += read as u64;
                        at += read as u64;
                    }
                }
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{AnonMemory, PageKind};

    #[test]
    fn touching_reads_the_ranges_of_a_live_process() {
        // Our own memory, through our own /proc/PID/mem.
        let mem = AnonMemory::new(4 << 20, PageKind::Small).unwrap();
        let pidfd = Pidfd::open(std::process::id()).unwrap();
        let pm = ProcMem::open(Path::new("/proc"), &pidfd).unwrap();
        let start = mem.start();
        let t = pm.touch(&[(start, 4 << 20), (start + 4096, 8192)]);
        assert_eq!(t, Touched { bytes: (4 << 20) + 8192, errors: 0 });
        // An unmapped address is an error, and the rest goes on.
        let t = pm.touch(&[(0x1000, 4096), (start, 4096)]);
        assert_eq!(t, Touched { bytes: 4096, errors: 1 });
    }
}
