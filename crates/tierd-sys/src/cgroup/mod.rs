//! Memory cgroups, v1 and v2, behind one trait chosen at start-up.
//!
//! tierd only ever works inside its own subtree: paths given to a [`MemoryController`]
//! are relative to the cgroup tierd itself runs in (its `base`), and a relative path
//! with `..` or a leading `/` is refused. All access is plain file I/O under a root
//! directory, so tests run both backends on fixture trees.

mod reach;
mod v1;
mod v2;

use std::path::{Component, Path, PathBuf};

pub use v1::V1;
pub use v2::V2;

use crate::procfs::ProcFs;
use crate::{PathError, read_text};

/// Which cgroup interface the memory controller uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    V1,
    V2,
}

/// What a task meets at a limit when the kernel's reclaim makes no progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtLimit {
    /// The kernel's OOM killer acts, as plain Linux has it.
    Kill,
    /// v1 with the OOM killer off: a fault waits until tierd wakes it (see [`V1`]);
    /// a charge made inside a system call fails with `ENOMEM` instead. v2 has no such
    /// wait (`memory.high` throttles instead) and treats this as `Kill`.
    Wait,
}

/// How far a wake raises the limit of a cgroup whose tasks wait at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A page above the limit: the least that wakes the waiters (a v1 group, whose
    /// raised limit is not written back: more would drift the budget up).
    Page,
    /// These bytes of room above what the cgroup holds (the policy's margin below a
    /// limit). A wait means reclaim fails there, and a charge the kernel makes outside
    /// the task's own fault would fail at once (v1: `ENOMEM`); the next quota write
    /// takes it back.
    Room(u64),
}

impl Wake {
    /// The new limit for a cgroup holding `held` under `limit`.
    pub fn limit(self, held: u64, limit: u64) -> u64 {
        match self {
            Wake::Page => limit.max(held) + 4096,
            Wake::Room(room) => held + room,
        }
    }
}

/// A cgroup's memory figures, in bytes (faults are counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Memory charged now (anon + page cache + swap cache).
    pub usage: u64,
    pub anon: u64,
    pub file: u64,
    /// Of `file`, clean page cache on the kernel's inactive list: read and not reused
    /// since, the first its reclaim drops, without waiting for a write (dirty and
    /// writeback pages are left out, wherever on the lists they are).
    pub inactive_file: u64,
    /// Page cache on the kernel's file lists, active and inactive (`file` also counts
    /// shmem and the swap cache, which sit on the anonymous lists).
    pub page_cache: u64,
    pub anon_huge: u64,
    /// Bytes on swap.
    pub swap: u64,
    /// Of the swap cache, the pages no process maps: written to swap and not yet freed,
    /// or read back and not touched. The kernel drops them first, without I/O. See
    /// [`unmapped_swap_cache`].
    pub swap_cached: u64,
    pub limit: Option<u64>,
    /// Processes of the cgroup (and below) the kernel's OOM killer has ended so far.
    pub oom_kills: u64,
    /// Pages the kernel's reclaim has taken from the cgroup so far, anonymous or page
    /// cache (v2 `pgsteal`; v1 does not count them: 0).
    pub reclaimed_pages: u64,
    /// Charges that met the cgroup's hard limit so far (v2 `memory.events` `max`, v1
    /// `memory.failcnt`).
    pub limit_hits: u64,
}

/// Of a cgroup's swap cache (`swapcached`), the pages no process maps: anonymous LRU
/// pages that are neither mapped nor shmem. A page a fault reads back keeps its swap
/// slot while the swap is less than half full and stays in the swap cache while in use,
/// so `swapcached` alone counts a working set read back as room. Mlocked pages sit off
/// these lists, so a tenant that mlocks is counted short, never over.
pub(crate) fn unmapped_swap_cache(swapcached: u64, anon_lru: u64, anon_mapped: u64, shmem: u64) -> u64 {
    swapcached.min(anon_lru.saturating_sub(anon_mapped + shmem))
}

/// A cgroup's memory pressure stall totals (PSI, `memory.pressure`), in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    /// Time some of its tasks waited on memory (reclaim, swap-in, throttling).
    pub some_us: u64,
    /// Time all of its tasks waited on memory at once.
    pub full_us: u64,
}

impl Pressure {
    /// Reads `memory.pressure` (`some avg10=.. avg60=.. avg300=.. total=N` and `full ...`).
    pub fn parse(text: &str) -> Option<Pressure> {
        let total = |kind: &str| {
            text.lines()
                .find(|l| l.starts_with(kind))?
                .split_whitespace()
                .find_map(|f| f.strip_prefix("total="))?
                .parse()
                .ok()
        };
        Some(Pressure { some_us: total("some ")?, full_us: total("full ")? })
    }
}

/// Errors of cgroup operations.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// file access failed
    #[error(transparent)]
    Io(#[from] PathError),
    /// a path escapes tierd's subtree
    #[error("cgroup path {0:?} leaves tierd's subtree")]
    Escape(String),
    /// no usable memory controller
    #[error("no memory cgroup controller found: {0}")]
    NoController(String),
    /// an absolute cgroup path outside the roots tierd may adopt below
    #[error(
        "cgroup {0} is outside the cgroups tierd may adopt (below {roots}); add its parent to adopt_roots \
         in tierd's config to let tierd write its memory limits",
        roots = .1.join(", ")
    )]
    NotAdoptable(String, Vec<String>),
    /// the v2 parent does not delegate the memory controller
    #[error(
        "the cgroup tierd runs in ({0}) does not enable the memory controller for its children; \
         run tierd in a delegated cgroup (systemd: Delegate=yes) or enable +memory in its parent's cgroup.subtree_control"
    )]
    NotDelegated(String),
}

impl CgroupError {
    /// The kernel could not reclaim down to a lowered v1 limit (`EBUSY`): it freed what
    /// it could and left the limit as it was.
    pub fn is_busy(&self) -> bool {
        matches!(self, CgroupError::Io(p) if p.errno() == Some(libc::EBUSY))
    }
}

/// The memory controller for tierd's subtree.
pub trait MemoryController: Send + Sync + std::fmt::Debug {
    fn version(&self) -> Version;
    /// tierd's own cgroup directory (everything tierd creates lives below it).
    fn base(&self) -> &Path;
    /// Creates a cgroup (its parents must exist); an existing one is fine and gets
    /// `at_limit` too (a restart under another policy changes it).
    fn create(&self, rel: &str, at_limit: AtLimit) -> Result<(), CgroupError>;
    /// Removes an empty cgroup; an absent one is fine.
    fn remove(&self, rel: &str) -> Result<(), CgroupError>;
    /// Sets the DRAM limit (`None`: unlimited).
    fn set_limit(&self, rel: &str, limit: Option<u64>) -> Result<(), CgroupError>;
    /// Keeps the cgroup's anonymous memory out of swap: v2 `memory.swap.max` 0, v1
    /// `memory.swappiness` 0 (demotion by `process_madvise` ignores both: tierd skips it).
    fn keep_off_swap(&self, rel: &str) -> Result<(), CgroupError>;
    fn stats(&self, rel: &str) -> Result<MemoryStats, CgroupError>;
    /// The cgroup's memory stall totals, where the kernel keeps them per cgroup (v2
    /// with PSI); `None` elsewhere.
    fn pressure(&self, _rel: &str) -> Option<Pressure> {
        None
    }
    /// Reclaims about `bytes` from the cgroup now (frees the swap cache after a
    /// demotion); returns the bytes freed.
    fn reclaim(&self, rel: &str, bytes: u64) -> Result<u64, CgroupError>;
    /// Is a task of the cgroup waiting at its limit, the kernel's reclaim having made no
    /// progress? (v1 with the OOM killer off, see [`V1`]; v2's `memory.high` throttles
    /// and never gets there.)
    fn waiting_at_limit(&self, _rel: &str) -> Result<bool, CgroupError> {
        Ok(false)
    }
    /// Wakes the tasks waiting at the limit to try reclaim again by raising it as
    /// `wake` says (v1 `memory.limit_in_bytes`, v2 `memory.high` within `memory.max`).
    /// Returns the limit now in force when it was raised.
    fn release_waiters(&self, _rel: &str, _wake: Wake) -> Result<Option<u64>, CgroupError> {
        Ok(None)
    }
    /// Lets the kernel's OOM killer act in the cgroup (`true`) or keeps it off, so a
    /// task at the limit waits instead (v1, see [`V1`]). On v2 `true` pins `memory.max`
    /// at what the cgroup holds (its next charge fails there), and `false` does nothing:
    /// the caller puts the ceiling back ([`MemoryController::set_ceiling`]).
    fn set_oom_killer(&self, _rel: &str, _on: bool) -> Result<(), CgroupError> {
        Ok(())
    }
    /// The hard ceiling above the quota, where the kernel reclaims synchronously and
    /// then kills within the cgroup (v2 `memory.max`); v1's one limit is already hard.
    fn set_ceiling(&self, _rel: &str, _ceiling: Option<u64>) -> Result<(), CgroupError> {
        Ok(())
    }
    /// Memory the kernel's reclaim leaves to the cgroup while others have more than
    /// theirs (v2 `memory.low`); v1 has no such protection.
    fn set_protection(&self, _rel: &str, _bytes: u64) -> Result<(), CgroupError> {
        Ok(())
    }
    /// The processes of a cgroup and of the cgroups below it.
    fn procs(&self, rel: &str) -> Result<Vec<u32>, CgroupError>;
    /// Lets absolute hierarchy paths below `roots` (as well as below tierd's own cgroup)
    /// be used as `rel` in the calls that read and write a cgroup's memory-control
    /// files; creating, removing and moving processes stay within tierd's subtree.
    fn allow_adoption(&mut self, roots: &[String]);
    /// Readies an existing cgroup tierd did not create for its quota: v1 sets what a
    /// task meets at the limit, as [`MemoryController::create`] does; v2 needs nothing.
    fn take_over(&self, _rel: &str, _at_limit: AtLimit) -> Result<(), CgroupError> {
        Ok(())
    }
    /// The memory-control files tierd writes in a cgroup, with their values now, in the
    /// form they are written back in by [`MemoryController::restore`].
    fn settings(&self, rel: &str) -> Result<Settings, CgroupError>;
    /// Writes saved settings back, each file even when an earlier one fails; the first
    /// failure is returned.
    fn restore(&self, rel: &str, settings: &Settings) -> Result<(), CgroupError> {
        let dir = self.dir(rel)?;
        let mut first = None;
        for (file, value) in settings {
            if let Err(e) = crate::write_text(&dir.join(file), value) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), |e| Err(e.into()))
    }
    /// The directory `rel` stands for, where tierd may write (see [`MemoryController::allow_adoption`]).
    fn dir(&self, rel: &str) -> Result<PathBuf, CgroupError>;
    fn add_proc(&self, rel: &str, pid: u32) -> Result<(), CgroupError>;
    /// tierd's own cgroup as `/proc/PID/cgroup` names it (the path `base` stands for).
    fn own(&self) -> &str;
    /// The `cgroup.procs` file of a cgroup, for a child to join before `exec`.
    fn procs_file(&self, rel: &str) -> Result<PathBuf, CgroupError> {
        Ok(inside(self.base(), rel)?.join("cgroup.procs"))
    }
    /// Child cgroups of a cgroup (names).
    fn children(&self, rel: &str) -> Result<Vec<String>, CgroupError> {
        list_children(&inside(self.base(), rel)?)
    }
    /// True when `pid`'s memory cgroup is `base` or below it.
    fn contains_pid(&self, proc: &ProcFs, pid: u32) -> Result<bool, CgroupError> {
        Ok(path_is_below(&proc.memory_cgroup(Some(pid))?, self.own()))
    }
}

/// A cgroup's memory-control files as tierd found them: (file name, value to write back),
/// in the order they are written back in.
pub type Settings = Vec<(String, String)>;

/// Reads the `files` of `dir` that exist, each value made writable by `writable`.
pub(crate) fn read_settings(
    dir: &Path,
    files: &[&str],
    writable: impl Fn(&str, &str) -> String,
) -> Result<Settings, CgroupError> {
    let mut out = Vec::new();
    for file in files {
        let path = dir.join(file);
        if path.exists() {
            out.push((file.to_string(), writable(file, read_text(&path)?.trim())));
        }
    }
    Ok(out)
}

/// Removes a cgroup directory and every cgroup below it, deepest first, retrying for
/// up to `wait` while some are still busy: a process killed just before is still
/// leaving its cgroup (a QEMU with locked memory took long enough that a test left
/// its cgroup behind). For teardown after tests and benchmarks: only empty cgroups
/// go. Returns whether `dir` is gone.
pub fn remove_tree(dir: &Path, wait: std::time::Duration) -> bool {
    let end = std::time::Instant::now() + wait;
    loop {
        remove_tree_once(dir);
        if !dir.exists() {
            return true;
        }
        if std::time::Instant::now() >= end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn remove_tree_once(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_tree_once(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Joins `rel` to `base`, refusing anything that could leave the subtree.
pub(crate) fn inside(base: &Path, rel: &str) -> Result<PathBuf, CgroupError> {
    let p = Path::new(rel);
    if rel.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(CgroupError::Escape(rel.to_string()));
    }
    Ok(base.join(p))
}

pub(crate) fn list_children(dir: &Path) -> Result<Vec<String>, CgroupError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| PathError::new(dir, e))?.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.push(e.file_name().to_string_lossy().to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Whether a task of `dir` or of a cgroup below it sleeps in the kernel function
/// `function` (its `/proc/TID/wchan`); `tasks` names the file listing a cgroup's threads.
pub(crate) fn task_sleeps_in(dir: &Path, tasks: &str, proc_root: &Path, function: &str) -> bool {
    let wchan = |tid: u32| read_text(&proc_root.join(format!("{tid}/wchan"))).unwrap_or_default();
    read_procs(&dir.join(tasks)).unwrap_or_default().into_iter().any(|tid| wchan(tid).trim() == function)
        || list_children(dir)
            .unwrap_or_default()
            .iter()
            .any(|c| task_sleeps_in(&dir.join(c), tasks, proc_root, function))
}

pub(crate) fn read_procs(file: &Path) -> Result<Vec<u32>, CgroupError> {
    Ok(read_text(file)?.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// The processes of `dir` and of the cgroups below it (an adopted container's cgroup
/// often holds its processes in children).
pub(crate) fn procs_below(dir: &Path) -> Result<Vec<u32>, CgroupError> {
    let mut out = read_procs(&dir.join("cgroup.procs"))?;
    for child in list_children(dir).unwrap_or_default() {
        out.extend(procs_below(&dir.join(child)).unwrap_or_default());
    }
    Ok(out)
}

pub(crate) fn remove_dir(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(PathError::new(dir, e).into()),
    }
}

pub(crate) fn make_dir(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(PathError::new(dir, e).into()),
    }
}

/// `true` when `pid` sits in `base_cgroup` (a hierarchy path such as `/a/b`) or below.
pub fn path_is_below(pid_cgroup: &str, base_cgroup: &str) -> bool {
    let base = base_cgroup.trim_end_matches('/');
    pid_cgroup == base_cgroup
        || base.is_empty()
        || pid_cgroup.strip_prefix(base).is_some_and(|rest| rest.starts_with('/'))
}

/// Finds the memory controller and tierd's own cgroup in it: cgroup v1's `memory`
/// hierarchy when mounted, otherwise v2 if it offers `memory`. `fs_root` prefixes the
/// mount points (fixtures); `proc` gives `/proc/self/mountinfo` and `/proc/self/cgroup`.
pub fn detect(fs_root: &Path, proc: &ProcFs) -> Result<Box<dyn MemoryController>, CgroupError> {
    let mountinfo = read_text(&proc.root().join("self/mountinfo"))?;
    let own = proc.memory_cgroup(None)?;
    let mut v2_mount = None;
    for line in mountinfo.lines() {
        // ... mount_point ... - fstype source super_options
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let mount = left.split_whitespace().nth(4).unwrap_or("");
        let mut r = right.split_whitespace();
        let fstype = r.next().unwrap_or("");
        let opts = r.nth(1).unwrap_or("");
        if fstype == "cgroup" && opts.split(',').any(|o| o == "memory") {
            let mount_dir = fs_root.join(mount.trim_start_matches('/'));
            let base = mount_dir.join(own.trim_start_matches('/'));
            return Ok(Box::new(V1::new(base, own, proc.root().to_path_buf())));
        }
        if fstype == "cgroup2" && v2_mount.is_none() {
            v2_mount = Some(fs_root.join(mount.trim_start_matches('/')));
        }
    }
    let Some(mount_dir) = v2_mount else {
        return Err(CgroupError::NoController("neither a v1 memory hierarchy nor cgroup2 is mounted".into()));
    };
    let controllers = read_text(&mount_dir.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "memory") {
        return Err(CgroupError::NoController(format!(
            "cgroup2 at {} does not offer the memory controller",
            mount_dir.display()
        )));
    }
    // In its service's leaf (systemd's DelegateSubgroup=supervisor, or where tierd
    // moved itself, see `V2`), the service's cgroup is the one it manages.
    let own = match own.strip_suffix(&format!("/{}", v2::SUPERVISOR)) {
        Some(service) if !service.is_empty() => service.to_string(),
        _ => own,
    };
    let base = mount_dir.join(own.trim_start_matches('/'));
    Ok(Box::new(V2::new(base, own, proc.root().to_path_buf())))
}

/// This process's own memory cgroup directory on this host (what [`detect`] finds as
/// the base): for the harnesses that create and sweep cgroups beside a tierd.
pub fn own_memory_dir() -> Result<PathBuf, CgroupError> {
    Ok(detect(Path::new("/"), &ProcFs::new("/proc"))?.base().to_path_buf())
}

#[cfg(test)]
pub(crate) mod fixture {
    use std::path::Path;

    /// Writes `files` (name, content) into `dir`, creating it.
    pub fn populate(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }

    pub fn proc_with(root: &Path, mountinfo: &str, cgroup: &str) {
        populate(&root.join("proc/self"), &[("mountinfo", mountinfo), ("cgroup", cgroup)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ebusy_is_a_cut_the_kernel_could_not_reclaim_yet() {
        let err = |errno| {
            CgroupError::Io(PathError::new(
                Path::new("memory.limit_in_bytes"),
                std::io::Error::from_raw_os_error(errno),
            ))
        };
        assert!(err(libc::EBUSY).is_busy());
        assert!(!err(libc::EINVAL).is_busy());
        assert!(!CgroupError::Escape("../x".into()).is_busy());
    }

    #[test]
    fn swap_cache_in_use_is_not_counted_as_droppable() {
        const MIB: u64 = 1 << 20;
        // Just paged out: 64 MiB written, unmapped, still cached, beside 32 MiB mapped.
        assert_eq!(unmapped_swap_cache(64 * MIB, 96 * MIB, 32 * MIB, 0), 64 * MIB);
        // A working set read back by faults: cached and mapped, none of it droppable.
        assert_eq!(unmapped_swap_cache(64 * MIB, 96 * MIB, 96 * MIB, 0), 0);
        // shmem sits on the anonymous lists unmapped by `anon`: not swap cache.
        assert_eq!(unmapped_swap_cache(8 * MIB, 96 * MIB, 64 * MIB, 32 * MIB), 0);
        // Pages off the lists (mlocked, or isolated for a moment) count short, never over.
        assert_eq!(unmapped_swap_cache(8 * MIB, 16 * MIB, 64 * MIB, 0), 0);
    }

    #[test]
    fn remove_tree_takes_empty_trees_and_waits_out_busy_ones() {
        let t = tempfile::tempdir().unwrap();
        let empty = t.path().join("tierd/tenants/a");
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::create_dir_all(t.path().join("tierd/tenants/b")).unwrap();
        assert!(remove_tree(&t.path().join("tierd"), std::time::Duration::ZERO));
        assert!(!t.path().join("tierd").exists());
        // A directory that cannot go (here: it holds a file; in cgroupfs, a process)
        // is retried until the wait is over, then reported.
        let busy = t.path().join("busy/tenants/a");
        std::fs::create_dir_all(&busy).unwrap();
        std::fs::write(busy.join("task"), "1").unwrap();
        let start = std::time::Instant::now();
        assert!(!remove_tree(&t.path().join("busy"), std::time::Duration::from_millis(300)));
        assert!(start.elapsed() >= std::time::Duration::from_millis(300));
        assert!(busy.exists());
        // Once it empties within the wait, it goes.
        let path = busy.join("task");
        let remover = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            std::fs::remove_file(path).unwrap();
        });
        assert!(remove_tree(&t.path().join("busy"), std::time::Duration::from_secs(10)));
        remover.join().unwrap();
    }

    #[test]
    fn relative_paths_stay_inside() {
        let base = Path::new("/sys/fs/cgroup/memory/me");
        assert_eq!(inside(base, "tierd/db").unwrap(), base.join("tierd/db"));
        for bad in ["", "..", "tierd/../../x", "/etc", "./x"] {
            assert!(inside(base, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn below_is_by_path_component() {
        assert!(path_is_below("/a/b", "/a/b"));
        assert!(path_is_below("/a/b/c", "/a/b"));
        assert!(!path_is_below("/a/bc", "/a/b"));
        assert!(!path_is_below("/a", "/a/b"));
        assert!(path_is_below("/anything", "/"));
    }

    #[test]
    fn detects_v1_when_the_memory_hierarchy_is_mounted() {
        let t = tempfile::tempdir().unwrap();
        fixture::proc_with(
            t.path(),
            "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
35 25 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
            "4:memory:/process_api/abc\n0::/\n",
        );
        let c = detect(t.path(), &ProcFs::new(t.path().join("proc"))).unwrap();
        assert_eq!(c.version(), Version::V1);
        assert_eq!(c.base(), t.path().join("sys/fs/cgroup/memory/process_api/abc"));
    }

    #[test]
    fn detects_v2_with_memory() {
        let t = tempfile::tempdir().unwrap();
        fixture::proc_with(
            t.path(),
            "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            "0::/system.slice/tierd.service\n",
        );
        fixture::populate(&t.path().join("sys/fs/cgroup"), &[("cgroup.controllers", "cpu io memory pids\n")]);
        let c = detect(t.path(), &ProcFs::new(t.path().join("proc"))).unwrap();
        assert_eq!(c.version(), Version::V2);
        assert_eq!(c.base(), t.path().join("sys/fs/cgroup/system.slice/tierd.service"));
    }

    #[test]
    fn memory_pressure_totals_are_read_from_both_lines() {
        let text =
            "some avg10=1.50 avg60=0.20 avg300=0.05 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";
        assert_eq!(Pressure::parse(text), Some(Pressure { some_us: 123456, full_us: 789 }));
        assert_eq!(Pressure::parse("some avg10=0.00\n"), None, "a line without its total is no reading");
    }

    #[test]
    fn in_its_supervisor_leaf_tierd_manages_the_service_cgroup() {
        let t = tempfile::tempdir().unwrap();
        fixture::proc_with(
            t.path(),
            "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            "0::/system.slice/tierd.service/supervisor\n",
        );
        fixture::populate(&t.path().join("sys/fs/cgroup"), &[("cgroup.controllers", "cpu io memory pids\n")]);
        let c = detect(t.path(), &ProcFs::new(t.path().join("proc"))).unwrap();
        assert_eq!(c.base(), t.path().join("sys/fs/cgroup/system.slice/tierd.service"));
        assert_eq!(c.own(), "/system.slice/tierd.service");
    }

    #[test]
    fn no_memory_controller_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        fixture::proc_with(t.path(), "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "0::/\n");
        fixture::populate(&t.path().join("sys/fs/cgroup"), &[("cgroup.controllers", "cpu pids\n")]);
        let e = detect(t.path(), &ProcFs::new(t.path().join("proc"))).unwrap_err();
        assert!(e.to_string().contains("does not offer the memory controller"), "{e}");
    }
}
