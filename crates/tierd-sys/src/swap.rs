//! Swap areas: `mkswap`, `swapon`, `swapoff` and the kernel's list in `/proc/swaps`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{PathError, read_text};

/// One line of `/proc/swaps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapArea {
    pub path: PathBuf,
    /// `file` or `partition`.
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i32,
}

/// Parses `/proc/swaps` under `proc_root`.
pub fn areas(proc_root: &Path) -> Result<Vec<SwapArea>, PathError> {
    Ok(parse_swaps(&read_text(&proc_root.join("swaps"))?))
}

fn parse_swaps(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 {
                return None;
            }
            Some(SwapArea {
                path: unescape_octal(f[0]),
                kind: f[1].to_string(),
                size_bytes: f[2].parse::<u64>().ok()? * 1024,
                used_bytes: f[3].parse::<u64>().ok()? * 1024,
                priority: f[4].parse().ok()?,
            })
        })
        .collect()
}

/// `/proc/swaps` writes spaces and other special bytes in paths as `\ooo`.
fn unescape_octal(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code =
            b.get(i + 1..i + 4).and_then(|d| std::str::from_utf8(d).ok()).and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(v) if b[i] == b'\\' => {
                out.push(v);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Finds `path` among the active swap areas.
pub fn find(proc_root: &Path, path: &Path) -> Result<Option<SwapArea>, PathError> {
    Ok(areas(proc_root)?.into_iter().find(|a| a.path == path))
}

/// The block devices of tiers that live under `dir`: loop devices over files there, and
/// the mappings (dm-crypt, where the kernel has it) stacked on them.
struct Stack {
    loops: Vec<PathBuf>,
    mappings: Vec<String>,
}

impl Stack {
    fn under(sys_root: &Path, dir: &Path) -> Stack {
        let loops = crate::blockdev::loops_under(sys_root, dir);
        let mappings = loops
            .iter()
            .filter_map(|l| l.file_name().map(|n| n.to_string_lossy().to_string()))
            .flat_map(|n| crate::blockdev::mappings_over(sys_root, &n))
            .collect();
        Stack { loops, mappings }
    }

    /// Whether a swap area's path is a file under `dir` or one of these devices;
    /// /proc/swaps names a mapping by the node swapon was given (`/dev/mapper/NAME` or
    /// `/dev/dm-N`).
    fn holds(&self, dir: &Path, path: &Path) -> bool {
        path.starts_with(dir)
            || self.loops.iter().any(|l| l == path)
            || self.mappings.iter().any(|m| {
                let node = crate::crypt::mapper_path(m);
                node == path || std::fs::canonicalize(&node).is_ok_and(|c| c == path)
            })
    }
}

/// The active swap areas of tiers that live under `dir`: on a file there, on a loop
/// device over one, or on a mapping over such a loop device.
pub fn areas_under(proc_root: &Path, sys_root: &Path, dir: &Path) -> Result<Vec<SwapArea>, PathError> {
    let stack = Stack::under(sys_root, dir);
    Ok(areas(proc_root)?.into_iter().filter(|a| stack.holds(dir, &a.path)).collect())
}

/// Turns off every swap area of [`areas_under`] `dir`, then removes those mappings and
/// detaches the loop devices: the teardown of tiers that lived in a test's or a
/// benchmark's directory, also when the tierd that made them was killed before it could
/// clean up. Returns what could not be released, one line each.
pub fn release_under(proc_root: &Path, sys_root: &Path, dir: &Path) -> Vec<String> {
    let stack = Stack::under(sys_root, dir);
    let mut problems = Vec::new();
    match areas(proc_root) {
        Ok(active) => {
            for a in active.iter().filter(|a| stack.holds(dir, &a.path)) {
                if let Err(e) = swapoff(&a.path) {
                    problems.push(e.to_string());
                }
            }
        }
        Err(e) => problems.push(e.to_string()),
    }
    for name in &stack.mappings {
        if let Err(e) = crate::crypt::close(name) {
            problems.push(e.to_string());
        }
    }
    for dev in &stack.loops {
        if let Err(e) = crate::blockdev::loop_detach(dev) {
            problems.push(e.to_string());
        }
    }
    problems
}

/// The priority one above every active swap area, so the tier is used first.
pub fn priority_above_all(areas: &[SwapArea]) -> i32 {
    areas.iter().map(|a| a.priority).max().map_or(10, |p| (p + 1).max(10)).min(32767)
}

/// Errors of the swap operations.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    /// mkswap could not run or failed
    #[error("mkswap {path}: {message}")]
    Mkswap { path: PathBuf, message: String },
    /// swapon failed
    #[error("swapon {path}: {err}")]
    Swapon { path: PathBuf, err: io::Error },
    /// swapoff failed
    #[error("swapoff {path}: {err}{hint}")]
    Swapoff { path: PathBuf, err: io::Error, hint: &'static str },
}

/// Writes a swap signature on `path` (a file or a block device).
pub fn mkswap(path: &Path) -> Result<(), SwapError> {
    let out = Command::new("mkswap").arg("-f").arg(path).output().map_err(|e| SwapError::Mkswap {
        path: path.into(),
        message: format!("cannot run mkswap: {e} (install util-linux)"),
    })?;
    if !out.status.success() {
        return Err(SwapError::Mkswap {
            path: path.into(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

const SWAP_FLAG_PREFER: i32 = 0x8000;
const SWAP_FLAG_PRIO_MASK: i32 = 0x7fff;

/// Enables swap on `path` at `priority`.
pub fn swapon(path: &Path, priority: i32) -> Result<(), SwapError> {
    let c = cpath(path);
    let flags = SWAP_FLAG_PREFER | (priority & SWAP_FLAG_PRIO_MASK);
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    let r = unsafe { libc::swapon(c.as_ptr(), flags) };
    if r != 0 {
        return Err(SwapError::Swapon { path: path.into(), err: io::Error::last_os_error() });
    }
    Ok(())
}

/// Disables swap on `path`, reading every page it holds back into memory.
pub fn swapoff(path: &Path) -> Result<(), SwapError> {
    let c = cpath(path);
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    let r = unsafe { libc::swapoff(c.as_ptr()) };
    if r != 0 {
        let source = io::Error::last_os_error();
        let hint = if source.raw_os_error() == Some(libc::ENOMEM) {
            " (not enough free memory to bring the tier's pages back; free memory or stop tenants first)"
        } else {
            ""
        };
        return Err(SwapError::Swapoff { path: path.into(), err: source, hint });
    }
    Ok(())
}

fn cpath(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap_or_else(|_| CString::new("/nonexistent").expect("no NUL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWAPS: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
/dev/zram0                              partition\t8388604\t\t0\t\t100\n\
/var/lib/tierd/my\\040tier.swap         file\t\t1048572\t\t2048\t\t-2\n";

    #[test]
    fn parses_proc_swaps() {
        let a = parse_swaps(SWAPS);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].path, PathBuf::from("/dev/zram0"));
        assert_eq!(a[0].priority, 100);
        assert_eq!(a[1].path, PathBuf::from("/var/lib/tierd/my tier.swap"));
        assert_eq!(a[1].size_bytes, 1048572 * 1024);
        assert_eq!(a[1].used_bytes, 2048 * 1024);
        assert_eq!(a[1].kind, "file");
    }

    #[test]
    fn the_areas_under_a_directory_include_its_loop_device_and_the_mapping_over_it() {
        let root = tempfile::tempdir().unwrap();
        let (proc, sys) = (root.path().join("proc"), root.path().join("sys"));
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(
            proc.join("swaps"),
            "Filename Type Size Used Priority\n/dev/loop0 partition 1024 0 10\n\
             /dev/mapper/tierd-tier-loop0 partition 1024 0 10\n/dev/loop1 partition 1024 0 5\n\
             /a/other.swap file 1024 0 1\n/b/x.swap file 1024 0 1\n",
        )
        .unwrap();
        for (name, backing) in [("loop0", "/a/tier.swap"), ("loop1", "/b/tier.swap")] {
            let d = sys.join("block").join(name);
            std::fs::create_dir_all(d.join("loop")).unwrap();
            std::fs::write(d.join("loop/backing_file"), format!("{backing}\n")).unwrap();
            std::fs::create_dir_all(d.join("holders")).unwrap();
        }
        let dm = sys.join("devices/virtual/block/dm-0");
        std::fs::create_dir_all(dm.join("dm")).unwrap();
        std::fs::write(dm.join("dm/name"), "tierd-tier-loop0\n").unwrap();
        std::os::unix::fs::symlink(&dm, sys.join("block/loop0/holders/dm-0")).unwrap();
        let found: Vec<PathBuf> =
            areas_under(&proc, &sys, Path::new("/a")).unwrap().into_iter().map(|a| a.path).collect();
        let want = ["/dev/loop0", "/dev/mapper/tierd-tier-loop0", "/a/other.swap"].map(PathBuf::from);
        assert_eq!(found, want);
    }

    #[test]
    fn tier_goes_above_every_other_area() {
        assert_eq!(priority_above_all(&parse_swaps(SWAPS)), 101);
        assert_eq!(priority_above_all(&[]), 10);
    }
}
