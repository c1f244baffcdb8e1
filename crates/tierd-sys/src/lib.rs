//! tierd-sys: every kernel interface tierd uses, and the only crate with `unsafe`.
//!
//! - [`madvise`]: `pidfd_open` + `process_madvise` (demote, prefetch, collapse), batched.
//! - [`procmem`]: `/proc/PID/mem` reads that fault prefetched pages in as the tenant's.
//! - [`pagemap`]: `PAGEMAP_SCAN` on `/proc/PID/pagemap`: present / swapped / huge runs.
//! - [`swap`]: `mkswap`, `swapon`, `swapoff` and `/proc/swaps`.
//! - [`blockdev`]: loop devices and the checks before a block device becomes a tier.
//! - [`blocktrace`]: the tier's read latency request by request (block tracepoints).
//! - [`crypt`]: a dm-crypt mapping over the tier, with a key made at each start.
//! - [`kmsg`]: the kernel's log, where failed swap I/O is reported.
//! - [`nvme`]: an NVMe drive's SMART / health log (its own word on its wear).
//! - [`kernel`]: what the running kernel offers (`tierctl doctor`).
//! - [`damon`]: DAMON's sysfs interface, a kdamond monitoring tenant processes.
//! - [`procfs`] and [`cgroup`]: text files under a root that tests point at fixtures.
//!
//! Every `unsafe` block says why it is sound; sizes of `#[repr(C)]` structs and ioctl
//! numbers are checked at compile time.

pub mod blockdev;
pub mod blocktrace;
pub mod cgroup;
pub mod crypt;
pub mod damon;
pub mod hugetlb;
pub mod kernel;
pub mod kmsg;
pub mod madvise;
pub mod memory;
pub mod nvme;
pub mod pagemap;
pub mod process;
pub mod procfs;
pub mod procmem;
pub mod swap;

use std::io;
use std::path::{Path, PathBuf};

/// An I/O error with the path it happened on. The cause is in the message and not a
/// `source` (in this crate's errors and tierd's), so `{:#}` chains print it once.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {err}")]
pub struct PathError {
    pub path: PathBuf,
    pub err: io::Error,
}

impl PathError {
    pub fn new(path: &Path, source: io::Error) -> Self {
        PathError { path: path.to_path_buf(), err: source }
    }

    /// The errno, when the error came from the kernel.
    pub fn errno(&self) -> Option<i32> {
        self.err.raw_os_error()
    }
}

/// Reads a small text file (procfs, sysfs, cgroupfs).
pub fn read_text(path: &Path) -> Result<String, PathError> {
    std::fs::read_to_string(path).map_err(|e| PathError::new(path, e))
}

/// Writes a value to an existing kernel file in one `write`, as cgroupfs expects.
pub fn write_text(path: &Path, value: &str) -> Result<(), PathError> {
    use std::io::Write;
    let mut f =
        std::fs::OpenOptions::new().write(true).truncate(true).open(path).map_err(|e| PathError::new(path, e))?;
    f.write_all(value.as_bytes()).map_err(|e| PathError::new(path, e))
}

/// Creates (or truncates) a file tierd writes as root, refusing a symlink where the file
/// should be: a link planted in the state directory must not aim tierd's writes elsewhere.
pub fn create_no_follow(path: &Path) -> Result<std::fs::File, PathError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => symlink_refused(path),
            _ => PathError::new(path, e),
        })
}

fn symlink_refused(path: &Path) -> PathError {
    PathError::new(path, io::Error::other("a symlink stands here; tierd does not write through one"))
}

/// Creates a directory (and its parents) and checks that what stands there is one, not a
/// symlink to somewhere else.
pub fn create_dir_no_follow(path: &Path) -> Result<(), PathError> {
    std::fs::create_dir_all(path).map_err(|e| PathError::new(path, e))?;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(symlink_refused(path)),
        Ok(_) => Ok(()),
        Err(e) => Err(PathError::new(path, e)),
    }
}

/// Reads a file holding one unsigned number (`max` reads as `None`).
pub fn read_u64(path: &Path) -> Result<Option<u64>, PathError> {
    let text = read_text(path)?;
    let t = text.trim();
    if t == "max" {
        return Ok(None);
    }
    t.parse::<u64>()
        .map(Some)
        .map_err(|_| PathError::new(path, io::Error::new(io::ErrorKind::InvalidData, format!("not a number: {t:?}"))))
}
