//! cgroup v2 memory controller: `memory.high` as the DRAM quota (throttles and reclaims
//! instead of killing), `memory.max` a ceiling well above it (where the kernel kills, in
//! the tenant's own cgroup), `memory.low` for what a tenant is guaranteed,
//! `memory.reclaim` to free the swap cache after a demotion, and `memory.swap.max` left
//! at `max` so cold pages may go to the tier.
//!
//! `memory.high` never fails a charge, but a tenant whose reclaim makes no progress (a
//! full or stalled tier) is throttled again and again: it sleeps in
//! [`THROTTLE_WAIT`] while over its quota. tierd counts that as waiting at its limit,
//! as on v1, and gives it room at once ([`V2::release_waiters`]).
//!
//! A v2 cgroup with processes of its own cannot hand controllers to children, so
//! tierd started in a delegated service cgroup (systemd's `Delegate=yes`) first moves
//! itself into the leaf [`SUPERVISOR`] (the name systemd's `DelegateSubgroup=` uses).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::reach::Reach;
use super::{
    AtLimit, CgroupError, MemoryController, MemoryStats, Settings, Version, Wake, inside, make_dir, procs_below,
    read_settings, remove_dir, task_sleeps_in,
};
use crate::{read_text, read_u64, write_text};

/// The leaf tierd itself runs in below the cgroup it manages.
pub const SUPERVISOR: &str = "supervisor";

/// The kernel function a v2 task sleeps in while `memory.high` throttles it.
const THROTTLE_WAIT: &str = "mem_cgroup_handle_over_high";

/// The files tierd writes in a tenant's cgroup, in the order they are written back (the
/// ceiling first, so the quota never lands above it).
const SETTINGS: [&str; 4] = ["memory.max", "memory.high", "memory.low", "memory.swap.max"];

/// Headroom a ceiling keeps above what a tenant holds when it is set.
const ROOM: u64 = 16 << 20;

#[derive(Debug)]
pub struct V2 {
    reach: Reach,
    /// Where `/proc` is, to tell which tasks are throttled.
    proc_root: PathBuf,
}

impl V2 {
    pub fn new(base: PathBuf, own: String, proc_root: PathBuf) -> Self {
        V2 { reach: Reach::new(base, own), proc_root }
    }

    fn write_bytes(&self, rel: &str, file: &str, bytes: Option<u64>) -> Result<(), CgroupError> {
        let v = bytes.map_or("max".to_string(), |b| b.to_string());
        Ok(write_text(&self.reach.dir(rel)?.join(file), &v)?)
    }

    fn current(&self, dir: &Path) -> Result<u64, CgroupError> {
        Ok(read_u64(&dir.join("memory.current"))?.unwrap_or(0))
    }

    /// Makes sure `parent` hands the memory controller to its children.
    fn delegate_memory(&self, parent: &Path) -> Result<(), CgroupError> {
        let enabled = read_text(&parent.join("cgroup.subtree_control"))?;
        if enabled.split_whitespace().any(|c| c == "memory") {
            return Ok(());
        }
        if parent == self.reach.base {
            let offered = read_text(&parent.join("cgroup.controllers"))?;
            if !offered.split_whitespace().any(|c| c == "memory") {
                return Err(CgroupError::NotDelegated(self.reach.own.clone()));
            }
            self.leave_for_supervisor()?;
        }
        write_text(&parent.join("cgroup.subtree_control"), "+memory")?;
        Ok(())
    }

    /// Moves this process out of `base` into its leaf, so `base` may delegate.
    fn leave_for_supervisor(&self) -> Result<(), CgroupError> {
        let leaf = self.reach.base.join(SUPERVISOR);
        make_dir(&leaf)?;
        write_text(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
        Ok(())
    }
}

impl MemoryController for V2 {
    fn version(&self) -> Version {
        Version::V2
    }

    fn base(&self) -> &Path {
        &self.reach.base
    }

    fn create(&self, rel: &str, _at_limit: AtLimit) -> Result<(), CgroupError> {
        let dir = inside(&self.reach.base, rel)?;
        let parent = dir.parent().unwrap_or(&self.reach.base).to_path_buf();
        self.delegate_memory(&parent)?;
        make_dir(&dir)
    }

    fn remove(&self, rel: &str) -> Result<(), CgroupError> {
        remove_dir(&inside(&self.reach.base, rel)?)
    }

    fn set_limit(&self, rel: &str, limit: Option<u64>) -> Result<(), CgroupError> {
        self.write_bytes(rel, "memory.high", limit)
    }

    fn set_ceiling(&self, rel: &str, ceiling: Option<u64>) -> Result<(), CgroupError> {
        // Never below what it holds: the kernel would reclaim, then kill, right away.
        let held = self.current(&self.reach.dir(rel)?)?;
        self.write_bytes(rel, "memory.max", ceiling.map(|c| c.max(held + ROOM)))
    }

    fn set_protection(&self, rel: &str, bytes: u64) -> Result<(), CgroupError> {
        self.write_bytes(rel, "memory.low", Some(bytes))
    }

    /// Throttled and still over its quota: reclaim made no progress.
    fn waiting_at_limit(&self, rel: &str) -> Result<bool, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let over = read_u64(&dir.join("memory.high"))?.is_some_and(|high| self.current(&dir).is_ok_and(|c| c > high));
        Ok(over && task_sleeps_in(&dir, "cgroup.threads", &self.proc_root, THROTTLE_WAIT))
    }

    /// Raised within its ceiling; the next quota write takes it back.
    fn release_waiters(&self, rel: &str, wake: Wake) -> Result<Option<u64>, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let held = self.current(&dir)?;
        let ceiling = read_u64(&dir.join("memory.max"))?.unwrap_or(u64::MAX);
        let high = wake.limit(held, read_u64(&dir.join("memory.high"))?.unwrap_or(held)).min(ceiling);
        self.set_limit(rel, Some(high))?;
        Ok(Some(high))
    }

    fn set_oom_killer(&self, rel: &str, on: bool) -> Result<(), CgroupError> {
        if on {
            let held = self.current(&self.reach.dir(rel)?)?;
            self.write_bytes(rel, "memory.max", Some(held))?;
        }
        Ok(())
    }

    fn pressure(&self, rel: &str) -> Option<super::Pressure> {
        super::Pressure::parse(&read_text(&self.reach.dir(rel).ok()?.join("memory.pressure")).ok()?)
    }

    fn keep_off_swap(&self, rel: &str) -> Result<(), CgroupError> {
        Ok(write_text(&self.reach.dir(rel)?.join("memory.swap.max"), "0")?)
    }

    fn stats(&self, rel: &str) -> Result<MemoryStats, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let s: HashMap<String, u64> = read_text(&dir.join("memory.stat"))?
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.next()?.to_string(), it.next()?.parse().ok()?))
            })
            .collect();
        let get = |k: &str| s.get(k).copied().unwrap_or(0);
        let events = read_text(&dir.join("memory.events")).unwrap_or_default();
        let event = |k: &str| events.lines().find_map(|l| l.strip_prefix(k)?.trim().parse().ok()).unwrap_or(0);
        Ok(MemoryStats {
            usage: self.current(&dir)?,
            anon: get("anon"),
            file: get("file"),
            inactive_file: get("inactive_file").saturating_sub(get("file_dirty") + get("file_writeback")),
            page_cache: get("active_file") + get("inactive_file"),
            anon_huge: get("anon_thp"),
            swap: read_u64(&dir.join("memory.swap.current")).ok().flatten().unwrap_or(0),
            swap_cached: super::unmapped_swap_cache(
                get("swapcached"),
                get("inactive_anon") + get("active_anon"),
                get("anon"),
                get("shmem"),
            ),
            limit: read_u64(&dir.join("memory.high"))?,
            // Hierarchical, like v1's: victims in this cgroup and below.
            oom_kills: event("oom_kill "),
            reclaimed_pages: get("pgsteal"),
            limit_hits: event("max "),
        })
    }

    fn reclaim(&self, rel: &str, bytes: u64) -> Result<u64, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let before = self.current(&dir)?;
        // EAGAIN: the kernel reclaimed less than asked; what it freed still counts.
        if let Err(e) = write_text(&dir.join("memory.reclaim"), &bytes.to_string())
            && e.errno() != Some(libc::EAGAIN)
        {
            return Err(e.into());
        }
        Ok(before.saturating_sub(self.current(&dir)?))
    }

    fn procs(&self, rel: &str) -> Result<Vec<u32>, CgroupError> {
        procs_below(&self.reach.dir(rel)?)
    }

    fn allow_adoption(&mut self, roots: &[String]) {
        self.reach.allow(roots);
    }

    fn settings(&self, rel: &str) -> Result<Settings, CgroupError> {
        read_settings(&self.reach.dir(rel)?, &SETTINGS, |_, value| value.to_string())
    }

    fn dir(&self, rel: &str) -> Result<PathBuf, CgroupError> {
        self.reach.dir(rel)
    }

    fn add_proc(&self, rel: &str, pid: u32) -> Result<(), CgroupError> {
        write_text(&inside(&self.reach.base, rel)?.join("cgroup.procs"), &pid.to_string())?;
        Ok(())
    }

    fn own(&self) -> &str {
        &self.reach.own
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::fixture::populate;

    const STAT: &str = "anon 2097152\nfile 8192\ninactive_file 8192\nactive_file 4096\nfile_dirty 2048\nfile_writeback 2048\nanon_thp 2097152\nswapcached 12288\ninactive_anon 1048576\nactive_anon 1060864\nshmem 8192\npgmajfault 7\npgsteal 12\n";

    fn leaf() -> [(&'static str, &'static str); 10] {
        [
            ("memory.high", "max\n"),
            ("memory.max", "max\n"),
            ("memory.low", "0\n"),
            ("cgroup.threads", "10\n11\n"),
            ("memory.current", "3000000\n"),
            ("memory.stat", STAT),
            ("memory.swap.current", "16384\n"),
            ("memory.reclaim", ""),
            ("cgroup.procs", "10\n"),
            ("memory.events", "low 0\nhigh 5\nmax 1\noom 1\noom_kill 3\noom_group_kill 0\n"),
        ]
    }

    fn tree(delegated: bool) -> (tempfile::TempDir, V2) {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("cg/svc");
        populate(&base, &[("cgroup.subtree_control", if delegated { "cpu memory\n" } else { "cpu\n" })]);
        populate(&base, &[("cgroup.controllers", if delegated { "cpu memory\n" } else { "cpu\n" })]);
        populate(&base.join("tierd"), &[("cgroup.subtree_control", "")]);
        populate(&base.join("tierd/db"), &leaf());
        let proc_root = t.path().join("proc");
        (t, V2::new(base, "/svc".into(), proc_root))
    }

    #[test]
    fn an_adopted_cgroup_gets_back_the_settings_it_had() {
        let (t, mut c) = tree(true);
        let foreign = t.path().join("cg/machine.slice/vm1.scope");
        populate(&foreign, &leaf());
        std::fs::write(foreign.join("memory.max"), "8589934592\n").unwrap();
        c.allow_adoption(&["/machine.slice".into()]);
        let saved = c.settings("/machine.slice/vm1.scope").unwrap();
        c.set_ceiling("/machine.slice/vm1.scope", Some(1 << 30)).unwrap();
        c.set_limit("/machine.slice/vm1.scope", Some(256 << 20)).unwrap();
        c.set_protection("/machine.slice/vm1.scope", 64 << 20).unwrap();
        c.restore("/machine.slice/vm1.scope", &saved).unwrap();
        let read = |f: &str| std::fs::read_to_string(foreign.join(f)).unwrap();
        assert_eq!(
            [read("memory.max"), read("memory.high"), read("memory.low")],
            ["8589934592".to_string(), "max".into(), "0".into()]
        );
        assert!(c.set_limit("/user.slice/x", Some(1)).is_err(), "nothing outside the roots is written");
    }

    #[test]
    fn quota_is_memory_high() {
        let (_t, c) = tree(true);
        c.set_limit("tierd/db", Some(256 << 20)).unwrap();
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/db/memory.high")).unwrap(), "268435456");
        assert_eq!(c.stats("tierd/db").unwrap().limit, Some(256 << 20));
        c.set_limit("tierd/db", None).unwrap();
        assert_eq!(c.stats("tierd/db").unwrap().limit, None);
    }

    fn read(c: &V2, file: &str) -> String {
        std::fs::read_to_string(c.base().join("tierd/db").join(file)).unwrap()
    }

    #[test]
    fn the_ceiling_is_memory_max_and_never_below_what_the_tenant_holds() {
        let (_t, c) = tree(true);
        c.set_ceiling("tierd/db", Some(1 << 30)).unwrap();
        assert_eq!(read(&c, "memory.max"), "1073741824");
        // 3,000,000 bytes held: a ceiling under that would have the kernel kill now.
        c.set_ceiling("tierd/db", Some(1 << 20)).unwrap();
        assert_eq!(read(&c, "memory.max"), (3_000_000 + ROOM).to_string());
        c.set_protection("tierd/db", 32 << 20).unwrap();
        assert_eq!(read(&c, "memory.low"), "33554432");
    }

    #[test]
    fn a_tenant_throttled_over_its_quota_waits_and_is_given_room_within_its_ceiling() {
        let (t, c) = tree(true);
        let wchan = |tid: &str, f: &str| populate(&t.path().join("proc").join(tid), &[("wchan", f)]);
        wchan("10", "do_nanosleep");
        wchan("11", "mem_cgroup_handle_over_high");
        assert!(!c.waiting_at_limit("tierd/db").unwrap(), "no quota: nothing to wait at");
        c.set_limit("tierd/db", Some(2_000_000)).unwrap();
        assert!(c.waiting_at_limit("tierd/db").unwrap(), "a thread throttled, 3 MB held over 2 MB");
        c.set_limit("tierd/db", Some(4_000_000)).unwrap();
        assert!(!c.waiting_at_limit("tierd/db").unwrap(), "under its quota: a throttle that made progress");
        wchan("11", "futex_wait_queue");
        c.set_limit("tierd/db", Some(2_000_000)).unwrap();
        assert!(!c.waiting_at_limit("tierd/db").unwrap(), "over, but nobody throttled");

        assert_eq!(c.release_waiters("tierd/db", Wake::Room(ROOM)).unwrap(), Some(3_000_000 + ROOM));
        assert_eq!(read(&c, "memory.high"), (3_000_000 + ROOM).to_string());
        std::fs::write(c.base().join("tierd/db/memory.max"), "4000000\n").unwrap();
        assert_eq!(
            c.release_waiters("tierd/db", Wake::Room(ROOM)).unwrap(),
            Some(4_000_000),
            "room ends at the ceiling"
        );
        c.set_oom_killer("tierd/db", true).unwrap();
        assert_eq!(read(&c, "memory.max"), "3000000", "pinned where it is: its next charge fails in its own cgroup");
    }

    #[test]
    fn stats_read_v2_names() {
        let (_t, c) = tree(true);
        let s = c.stats("tierd/db").unwrap();
        assert_eq!(
            (s.usage, s.anon, s.anon_huge, s.swap, s.swap_cached, s.file, s.inactive_file),
            (3000000, 2 << 20, 2 << 20, 16384, 4096, 8192, 4096)
        );
        assert_eq!(s.page_cache, 12288, "both file lists, dirty or not");
        assert_eq!(s.oom_kills, 3, "oom_kill, not oom or oom_group_kill");
        assert_eq!(s.limit_hits, 1, "memory.events max: charges that met memory.max");
        assert_eq!(s.reclaimed_pages, 12, "pgsteal: anonymous and page cache alike");
    }

    #[test]
    fn reclaim_writes_memory_reclaim() {
        let (_t, c) = tree(true);
        c.reclaim("tierd/db", 1 << 20).unwrap();
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/db/memory.reclaim")).unwrap(), "1048576");
    }

    #[test]
    fn create_enables_memory_for_own_children_only() {
        let (_t, c) = tree(true);
        c.create("tierd/web", AtLimit::Wait).unwrap();
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/cgroup.subtree_control")).unwrap(), "+memory");
        assert!(c.base().join("tierd/web").is_dir());
        let (_t2, c2) = tree(false);
        let e = c2.create("tierd2", AtLimit::Wait).unwrap_err();
        assert!(matches!(e, CgroupError::NotDelegated(_)), "{e}");
        assert!(e.to_string().contains("Delegate=yes"));
    }

    #[test]
    fn a_service_cgroup_offered_memory_is_delegated_once_tierd_moves_to_its_leaf() {
        // As systemd's Delegate=yes leaves it: memory offered, not yet enabled below.
        let (_t, c) = tree(true);
        populate(c.base(), &[("cgroup.subtree_control", "")]);
        populate(&c.base().join(SUPERVISOR), &[("cgroup.procs", "")]);
        c.create("tierd3", AtLimit::Wait).unwrap();
        let moved = std::fs::read_to_string(c.base().join("supervisor/cgroup.procs")).unwrap();
        assert_eq!(moved, std::process::id().to_string(), "tierd left the cgroup it manages");
        assert_eq!(std::fs::read_to_string(c.base().join("cgroup.subtree_control")).unwrap(), "+memory");
    }

    #[test]
    fn procs_and_children() {
        let (_t, c) = tree(true);
        assert_eq!(c.procs("tierd/db").unwrap(), vec![10]);
        assert_eq!(c.children("tierd").unwrap(), vec!["db".to_string()]);
        c.add_proc("tierd/db", 12).unwrap();
        assert_eq!(std::fs::read_to_string(c.procs_file("tierd/db").unwrap()).unwrap(), "12");
    }
}
