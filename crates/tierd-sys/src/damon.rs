//! DAMON's sysfs interface (`/sys/kernel/mm/damon/admin`): one kdamond that tierd
//! creates and owns, monitoring the virtual address spaces of tenant processes.
//!
//! One context with every process as a target, and one `stat` scheme per target whose
//! `target` filter (kernel 6.6+) passes only that target's regions, so each process's
//! regions are read apart from `tried_regions`. Writing `nr_kdamonds` rebuilds every
//! kdamond's directory, so a [`Kdamond`] is only created where there is none (or the
//! one left by a tierd that was killed, which the caller vouches for).

use std::io;
use std::path::{Path, PathBuf};

use crate::PathError;

/// The admin directory under `/sys`.
pub const ADMIN: &str = "kernel/mm/damon/admin";

/// DAMON's monitoring intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Intervals {
    /// How often one page per region is checked for access.
    pub sample_us: u64,
    /// How long accesses are counted before `nr_accesses` and `age` move on.
    pub aggr_us: u64,
    /// How often the monitored address ranges are read again from the processes.
    pub update_us: u64,
}

/// One monitored region of a process as of the last aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DamonRegion {
    pub start: u64,
    pub end: u64,
    /// Samples that found the region accessed in the last aggregation interval.
    pub nr_accesses: u32,
    /// Aggregation intervals its access count has held (for 0: how long it is idle).
    pub age: u32,
}

/// Why DAMON cannot be used here.
#[derive(Debug, thiserror::Error)]
pub enum DamonError {
    #[error("the kernel has no DAMON sysfs interface ({0} missing)")]
    Missing(PathBuf),
    #[error("{0} kdamond(s) exist that tierd did not create; it leaves them alone")]
    Foreign(u64),
    #[error("DAMON lacks {0}")]
    Lacks(&'static str),
    #[error(transparent)]
    Io(#[from] PathError),
}

/// The kdamond tierd created. Dropping it stops it and removes it.
#[derive(Debug)]
pub struct Kdamond {
    admin: PathBuf,
    targets: Vec<u32>,
}

impl Kdamond {
    /// Creates the kdamond under `sys` (normally `/sys`). `ours_left` says the one
    /// kdamond there is the leftover of a tierd that did not stop cleanly.
    pub fn create(sys: &Path, intervals: Intervals, ours_left: bool) -> Result<Kdamond, DamonError> {
        let admin = sys.join(ADMIN);
        let count = admin.join("kdamonds/nr_kdamonds");
        let existing = read(&count).map_err(|_| DamonError::Missing(count.clone()))?;
        let existing: u64 = existing.trim().parse().unwrap_or(u64::MAX);
        match existing {
            0 => {}
            1 if ours_left => {
                // Left running by the tierd before this one: stopped before it is rebuilt.
                let _ = write(&admin.join("kdamonds/0/state"), "off");
            }
            n => return Err(DamonError::Foreign(n)),
        }
        let mut k = Kdamond { admin, targets: Vec::new() };
        k.configure(intervals).inspect_err(|_| k.remove())?;
        Ok(k)
    }

    fn context(&self) -> PathBuf {
        self.admin.join("kdamonds/0/contexts/0")
    }

    fn state(&self) -> PathBuf {
        self.admin.join("kdamonds/0/state")
    }

    fn configure(&mut self, iv: Intervals) -> Result<(), DamonError> {
        write(&self.admin.join("kdamonds/nr_kdamonds"), "1")?;
        write(&self.admin.join("kdamonds/0/contexts/nr_contexts"), "1")?;
        let ctx = self.context();
        if !read(&ctx.join("avail_operations")).is_ok_and(|ops| ops.split_whitespace().any(|o| o == "vaddr")) {
            return Err(DamonError::Lacks("virtual address monitoring (vaddr)"));
        }
        write(&ctx.join("operations"), "vaddr")?;
        let attrs = ctx.join("monitoring_attrs");
        write(&attrs.join("intervals/sample_us"), &iv.sample_us.to_string())?;
        write(&attrs.join("intervals/aggr_us"), &iv.aggr_us.to_string())?;
        write(&attrs.join("intervals/update_us"), &iv.update_us.to_string())?;
        // Bounds for all targets together: DAMON splits and merges regions within them.
        write(&attrs.join("nr_regions/min"), "10")?;
        write(&attrs.join("nr_regions/max"), "1000")?;
        // A scheme with a target filter, to learn whether the kernel has them (6.6+).
        write(&ctx.join("schemes/nr_schemes"), "1")?;
        let filters = ctx.join("schemes/0/filters");
        if !filters.is_dir()
            || write(&filters.join("nr_filters"), "1").is_err()
            || !filters.join("0/damon_target_idx").exists()
        {
            return Err(DamonError::Lacks("target filters for its schemes (kernel 6.6+)"));
        }
        Ok(())
    }

    /// Monitors `pids` (live processes) from now on. The kdamond runs while it has any.
    pub fn set_targets(&mut self, pids: &[u32]) -> Result<(), PathError> {
        if pids == self.targets && (pids.is_empty() || self.running()) {
            return Ok(());
        }
        let ctx = self.context();
        // Whatever fails below, the next call writes every target again.
        self.targets.clear();
        write(&ctx.join("targets/nr_targets"), &pids.len().to_string())?;
        for (i, pid) in pids.iter().enumerate() {
            write(&ctx.join(format!("targets/{i}/pid_target")), &pid.to_string())?;
        }
        write(&ctx.join("schemes/nr_schemes"), &pids.len().to_string())?;
        for i in 0..pids.len() {
            self.stat_scheme(&ctx.join(format!("schemes/{i}")), i)?;
        }
        let running = self.running();
        match (pids.is_empty(), running) {
            (true, true) => write(&self.state(), "off")?,
            (true, false) => {}
            (false, true) => write(&self.state(), "commit")?,
            (false, false) => write(&self.state(), "on")?,
        }
        self.targets = pids.to_vec();
        Ok(())
    }

    /// A scheme that does nothing but report every region of target `idx`.
    fn stat_scheme(&self, scheme: &Path, idx: usize) -> Result<(), PathError> {
        write(&scheme.join("action"), "stat")?;
        // Every size, access count and age: the defaults match nothing.
        write(&scheme.join("access_pattern/sz/max"), &u64::MAX.to_string())?;
        write(&scheme.join("access_pattern/nr_accesses/max"), &u32::MAX.to_string())?;
        write(&scheme.join("access_pattern/age/max"), &u32::MAX.to_string())?;
        let filter = scheme.join("filters/0");
        write(&scheme.join("filters/nr_filters"), "1")?;
        write(&filter.join("type"), "target")?;
        // A filter drops what it matches: matching `N` drops every other target.
        write(&filter.join("matching"), "N")?;
        write(&filter.join("damon_target_idx"), &idx.to_string())
    }

    /// Whether the kdamond runs (it stops by itself when all its targets have exited).
    pub fn running(&self) -> bool {
        read(&self.state()).is_ok_and(|s| s.trim() == "on")
    }

    /// The kdamond's thread, while it runs.
    pub fn pid(&self) -> Option<u32> {
        read(&self.admin.join("kdamonds/0/pid")).ok()?.trim().parse().ok()
    }

    /// Each target's regions as of the last aggregation, in target order. Waits for
    /// the kdamond to collect them (one aggregation interval at most).
    pub fn regions(&mut self) -> Result<Vec<(u32, Vec<DamonRegion>)>, PathError> {
        if self.targets.is_empty() || !self.running() {
            return Ok(Vec::new());
        }
        write(&self.state(), "update_schemes_tried_regions")?;
        let ctx = self.context();
        let mut out = Vec::with_capacity(self.targets.len());
        for (i, &pid) in self.targets.iter().enumerate() {
            out.push((pid, tried_regions(&ctx.join(format!("schemes/{i}/tried_regions")))?));
        }
        Ok(out)
    }

    /// Stops the kdamond and removes it (what `Drop` does).
    fn remove(&mut self) {
        if self.running() {
            let _ = write(&self.state(), "off");
        }
        let _ = write(&self.admin.join("kdamonds/nr_kdamonds"), "0");
        self.targets.clear();
    }
}

impl Drop for Kdamond {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The regions listed under a scheme's `tried_regions`, by address.
fn tried_regions(dir: &Path) -> Result<Vec<DamonRegion>, PathError> {
    let entries = std::fs::read_dir(dir).map_err(|source| PathError { path: dir.to_path_buf(), err: source })?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let d = e.path();
        let num = |f: &str| -> Result<u64, PathError> {
            let p = d.join(f);
            let text = read(&p)?;
            text.trim().parse().map_err(|_| PathError { path: p, err: io::ErrorKind::InvalidData.into() })
        };
        let clamp = |v: u64| v.min(u32::MAX as u64) as u32;
        out.push(DamonRegion {
            start: num("start")?,
            end: num("end")?,
            nr_accesses: clamp(num("nr_accesses")?),
            age: clamp(num("age")?),
        });
    }
    out.sort_by_key(|r| r.start);
    Ok(out)
}

fn read(path: &Path) -> Result<String, PathError> {
    std::fs::read_to_string(path).map_err(|source| PathError { path: path.to_path_buf(), err: source })
}

fn write(path: &Path, value: &str) -> Result<(), PathError> {
    std::fs::write(path, value).map_err(|source| PathError { path: path.to_path_buf(), err: source })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IV: Intervals = Intervals { sample_us: 5000, aggr_us: 100_000, update_us: 1_000_000 };

    fn admin_with(nr_kdamonds: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join(ADMIN).join("kdamonds");
        std::fs::create_dir_all(&k).unwrap();
        std::fs::write(k.join("nr_kdamonds"), nr_kdamonds).unwrap();
        dir
    }

    #[test]
    fn a_kdamond_tierd_did_not_create_is_left_alone() {
        let sys = admin_with("1\n");
        let err = Kdamond::create(sys.path(), IV, false).unwrap_err();
        assert!(matches!(err, DamonError::Foreign(1)), "{err}");
        let count = sys.path().join(ADMIN).join("kdamonds/nr_kdamonds");
        assert_eq!(std::fs::read_to_string(count).unwrap(), "1\n", "nothing written");
        // Two, even with a leftover of tierd's own: only ever one was tierd's.
        assert!(matches!(Kdamond::create(admin_with("2\n").path(), IV, true), Err(DamonError::Foreign(2))));
    }

    #[test]
    fn without_damon_sysfs_the_error_says_what_is_missing() {
        let sys = tempfile::tempdir().unwrap();
        let err = Kdamond::create(sys.path(), IV, false).unwrap_err();
        assert!(err.to_string().contains("kdamonds/nr_kdamonds"), "{err}");
    }

    #[test]
    fn a_kernel_without_vaddr_is_refused_and_nothing_is_left_behind() {
        // The fixture has no `avail_operations`, as a kernel built without vaddr.
        let sys = admin_with("0\n");
        std::fs::create_dir_all(sys.path().join(ADMIN).join("kdamonds/0/contexts/0")).unwrap();
        let err = Kdamond::create(sys.path(), IV, false).unwrap_err();
        assert!(matches!(err, DamonError::Lacks(_)), "{err}");
        let count = sys.path().join(ADMIN).join("kdamonds/nr_kdamonds");
        assert_eq!(std::fs::read_to_string(count).unwrap(), "0", "the kdamond it made is removed");
    }

    #[test]
    fn tried_regions_are_read_in_address_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("total_bytes"), "12288\n").unwrap();
        for (n, (start, end, acc, age)) in [(7, (8192, 12288, 0, 40)), (6, (0, 8192, 12, 0))] {
            let r = dir.path().join(n.to_string());
            std::fs::create_dir(&r).unwrap();
            for (f, v) in [("start", start), ("end", end), ("nr_accesses", acc), ("age", age)] {
                std::fs::write(r.join(f), format!("{v}\n")).unwrap();
            }
        }
        let regions = tried_regions(dir.path()).unwrap();
        let want = [
            DamonRegion { start: 0, end: 8192, nr_accesses: 12, age: 0 },
            DamonRegion { start: 8192, end: 12288, nr_accesses: 0, age: 40 },
        ];
        assert_eq!(regions, want);
    }
}
