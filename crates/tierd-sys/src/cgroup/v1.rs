//! cgroup v1 memory controller (`memory.limit_in_bytes`), as on these machines.
//!
//! A v1 limit is hard: when reclaim at the limit makes no progress for a few rounds
//! (every page recently touched, a busy tier), the kernel OOM-kills a process of the
//! cgroup, even with swap free. A quota is tierd's placement, not a cap worth a
//! process, so every cgroup tierd creates has the OOM killer off
//! (`memory.oom_control`): a task there waits instead, and tierd wakes it
//! ([`V1::release_waiters`]) to reclaim again. (Found in login-storm: tenants woken
//! under quotas of 32–230 MiB were killed; plain swap's one group limit killed a
//! tenant in each run of the slow-tier wake-up too.)
//!
//! v1 has no `memory.reclaim`, so [`V1::reclaim`] squeezes the limit for a moment: the
//! kernel reclaims down to it (swap-cache pages left by a demotion go first, as they
//! sit at the tail of the inactive list) and the old limit is put back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::reach::Reach;
use super::{
    AtLimit, CgroupError, MemoryController, MemoryStats, Settings, Version, Wake, inside, make_dir, procs_below,
    read_settings, remove_dir, task_sleeps_in,
};
use crate::{read_text, read_u64, write_text};

/// v1 reports "unlimited" as the largest page-aligned `i64`.
const UNLIMITED_FLOOR: u64 = 1 << 62;

#[derive(Debug)]
pub struct V1 {
    reach: Reach,
    /// Where `/proc` is, to tell which tasks sleep in the OOM wait.
    proc_root: PathBuf,
}

/// The files tierd writes in a tenant's cgroup, in the order they are written back.
const SETTINGS: [&str; 3] = ["memory.limit_in_bytes", "memory.swappiness", "memory.oom_control"];

/// The kernel function a v1 task sleeps in while it waits at a limit with the OOM killer off.
const OOM_WAIT: &str = "mem_cgroup_oom_synchronize";

impl V1 {
    pub fn new(base: PathBuf, own: String, proc_root: PathBuf) -> Self {
        V1 { reach: Reach::new(base, own), proc_root }
    }

    /// Whether a task of `dir` or a cgroup below it sleeps in the OOM wait. `under_oom`
    /// alone marks a whole subtree when its parent is at its limit, an idle neighbour too.
    fn task_waits(&self, dir: &Path) -> bool {
        task_sleeps_in(dir, "tasks", &self.proc_root, OOM_WAIT)
    }

    fn usage(&self, dir: &Path) -> Result<u64, CgroupError> {
        Ok(read_u64(&dir.join("memory.usage_in_bytes"))?.unwrap_or(0))
    }

    fn limit(&self, dir: &Path) -> Result<Option<u64>, CgroupError> {
        Ok(read_u64(&dir.join("memory.limit_in_bytes"))?.filter(|&l| l < UNLIMITED_FLOOR))
    }

    fn write_limit(&self, dir: &Path, limit: Option<u64>) -> Result<(), CgroupError> {
        let v = limit.map_or("-1".to_string(), |l| l.to_string());
        write_text(&dir.join("memory.limit_in_bytes"), &v)?;
        Ok(())
    }
}

/// `memory.stat` as a map; hierarchical `total_*` values win over local ones.
fn stat_map(text: &str) -> HashMap<String, u64> {
    let mut local = HashMap::new();
    let mut total = HashMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        match k.strip_prefix("total_") {
            Some(rest) => total.insert(rest.to_string(), v),
            None => local.insert(k.to_string(), v),
        };
    }
    local.extend(total);
    local
}

impl MemoryController for V1 {
    fn version(&self) -> Version {
        Version::V1
    }

    fn base(&self) -> &Path {
        &self.reach.base
    }

    fn create(&self, rel: &str, at_limit: AtLimit) -> Result<(), CgroupError> {
        make_dir(&inside(&self.reach.base, rel)?)?;
        self.take_over(rel, at_limit)
    }

    fn remove(&self, rel: &str) -> Result<(), CgroupError> {
        remove_dir(&inside(&self.reach.base, rel)?)
    }

    fn set_limit(&self, rel: &str, limit: Option<u64>) -> Result<(), CgroupError> {
        let dir = self.reach.dir(rel)?;
        self.write_limit(&dir, limit)
    }

    fn keep_off_swap(&self, rel: &str) -> Result<(), CgroupError> {
        Ok(write_text(&self.reach.dir(rel)?.join("memory.swappiness"), "0")?)
    }

    fn stats(&self, rel: &str) -> Result<MemoryStats, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let s = stat_map(&read_text(&dir.join("memory.stat"))?);
        let get = |k: &str| s.get(k).copied().unwrap_or(0);
        Ok(MemoryStats {
            usage: self.usage(&dir)?,
            anon: get("rss"),
            file: get("cache"),
            inactive_file: get("inactive_file").saturating_sub(get("dirty") + get("writeback")),
            page_cache: get("active_file") + get("inactive_file"),
            anon_huge: get("rss_huge"),
            swap: get("swap"),
            swap_cached: super::unmapped_swap_cache(
                get("swapcached"),
                get("inactive_anon") + get("active_anon"),
                get("rss"),
                get("shmem"),
            ),
            limit: self.limit(&dir)?,
            // `oom_kill` counts victims in this group and below (kernel 4.13 on).
            oom_kills: read_text(&dir.join("memory.oom_control"))
                .ok()
                .and_then(|t| stat_map(&t).get("oom_kill").copied())
                .unwrap_or(0),
            reclaimed_pages: 0,
            limit_hits: read_u64(&dir.join("memory.failcnt")).ok().flatten().unwrap_or(0),
        })
    }

    fn reclaim(&self, rel: &str, bytes: u64) -> Result<u64, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let before = self.usage(&dir)?;
        let old = self.limit(&dir)?;
        let target = before.saturating_sub(bytes).max(4 << 20);
        if target >= before {
            return Ok(0);
        }
        // EBUSY means the kernel could not get all the way down: it freed what it could.
        let squeezed = self.write_limit(&dir, Some(target));
        self.write_limit(&dir, old)?;
        if let Err(e) = squeezed
            && !e.is_busy()
        {
            return Err(e);
        }
        Ok(before.saturating_sub(self.usage(&dir)?))
    }

    fn waiting_at_limit(&self, rel: &str) -> Result<bool, CgroupError> {
        let dir = self.reach.dir(rel)?;
        let text = read_text(&dir.join("memory.oom_control"))?;
        Ok(stat_map(&text).get("under_oom").is_some_and(|&v| v > 0) && self.task_waits(&dir))
    }

    fn release_waiters(&self, rel: &str, wake: Wake) -> Result<Option<u64>, CgroupError> {
        // Only a raised limit (or memory uncharged) wakes the waiters.
        let dir = self.reach.dir(rel)?;
        let Some(limit) = self.limit(&dir)? else { return Ok(None) };
        let raised = wake.limit(self.usage(&dir)?, limit);
        self.write_limit(&dir, Some(raised)).map(|()| Some(raised))
    }

    fn set_oom_killer(&self, rel: &str, on: bool) -> Result<(), CgroupError> {
        // Turning it on wakes the waiters: their charge fails again and the kernel kills.
        write_text(&self.reach.dir(rel)?.join("memory.oom_control"), if on { "0" } else { "1" })?;
        Ok(())
    }

    fn procs(&self, rel: &str) -> Result<Vec<u32>, CgroupError> {
        procs_below(&self.reach.dir(rel)?)
    }

    fn allow_adoption(&mut self, roots: &[String]) {
        self.reach.allow(roots);
    }

    fn take_over(&self, rel: &str, at_limit: AtLimit) -> Result<(), CgroupError> {
        let oom = self.reach.dir(rel)?.join("memory.oom_control");
        if oom.exists() {
            write_text(&oom, if at_limit == AtLimit::Wait { "1" } else { "0" })?;
        }
        Ok(())
    }

    fn settings(&self, rel: &str) -> Result<Settings, CgroupError> {
        read_settings(&self.reach.dir(rel)?, &SETTINGS, |file, value| match file {
            "memory.limit_in_bytes" if value.parse::<u64>().is_ok_and(|l| l >= UNLIMITED_FLOOR) => "-1".into(),
            "memory.oom_control" => stat_map(value).get("oom_kill_disable").copied().unwrap_or(0).to_string(),
            _ => value.to_string(),
        })
    }

    fn dir(&self, rel: &str) -> Result<PathBuf, CgroupError> {
        self.reach.dir(rel)
    }

    fn add_proc(&self, rel: &str, pid: u32) -> Result<(), CgroupError> {
        let dir = inside(&self.reach.base, rel)?;
        // Bring the process's existing memory charges along (v1 only; best effort).
        let _ = write_text(&dir.join("memory.move_charge_at_immigrate"), "3");
        write_text(&dir.join("cgroup.procs"), &pid.to_string())?;
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
    use crate::procfs::ProcFs;

    const STAT: &str = "cache 4096\ninactive_file 4096\nrss 1048576\nrss_huge 0\nswap 8192\nswapcached 0\npgmajfault 1\n\
total_cache 8192\ntotal_inactive_file 12288\ntotal_active_file 20480\ntotal_dirty 4096\ntotal_rss 2097152\ntotal_rss_huge 2097152\ntotal_swap 16384\ntotal_swapcached 12288\n\
total_inactive_anon 1048576\ntotal_active_anon 1060864\ntotal_shmem 8192\ntotal_pgmajfault 7\n";

    fn tree() -> (tempfile::TempDir, V1) {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("memory/me");
        populate(&base, &[("cgroup.procs", "")]);
        let files = [
            ("memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory.usage_in_bytes", "3000000\n"),
            ("memory.stat", STAT),
            ("cgroup.procs", "10\n11\n"),
            ("memory.move_charge_at_immigrate", "0\n"),
        ];
        populate(&base.join("tierd/db"), &files);
        populate(&base.join("tierd"), &files);
        let proc_root = t.path().join("proc");
        populate(&proc_root.join("10"), &[("wchan", "do_epoll_wait")]);
        populate(&proc_root.join("11"), &[("wchan", "mem_cgroup_oom_synchronize")]);
        (t, V1::new(base, "/me".into(), proc_root))
    }

    #[test]
    fn an_adopted_cgroup_gets_back_the_settings_it_had() {
        let (t, mut c) = tree();
        let foreign = t.path().join("memory/machine/vm1");
        populate(
            &foreign,
            &[
                ("memory.limit_in_bytes", "9223372036854771712\n"),
                ("memory.swappiness", "37\n"),
                ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
                ("cgroup.procs", "20\n"),
            ],
        );
        populate(&foreign.join("vcpu0"), &[("cgroup.procs", "21\n")]);
        assert!(c.settings("/machine/vm1").is_err(), "outside the adoptable roots until allowed");
        c.allow_adoption(&["/machine".into()]);
        let saved = c.settings("/machine/vm1").unwrap();
        assert_eq!(c.procs("/machine/vm1").unwrap(), vec![20, 21], "its children's processes count");
        c.take_over("/machine/vm1", AtLimit::Wait).unwrap();
        c.set_limit("/machine/vm1", Some(64 << 20)).unwrap();
        c.keep_off_swap("/machine/vm1").unwrap();
        c.restore("/machine/vm1", &saved).unwrap();
        let read = |f: &str| std::fs::read_to_string(foreign.join(f)).unwrap();
        assert_eq!((read("memory.limit_in_bytes"), read("memory.swappiness")), ("-1".into(), "37".into()));
        assert_eq!(read("memory.oom_control"), "0");
        assert!(c.create("/machine/vm2", AtLimit::Kill).is_err(), "tierd creates nothing outside its subtree");
        assert!(c.add_proc("/machine/vm1", 99).is_err(), "nor moves processes there");
    }

    #[test]
    fn limits_read_and_write() {
        let (_t, c) = tree();
        assert_eq!(c.stats("tierd/db").unwrap().limit, None);
        c.set_limit("tierd/db", Some(512 << 20)).unwrap();
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/db/memory.limit_in_bytes")).unwrap(), "536870912");
        assert_eq!(c.stats("tierd/db").unwrap().limit, Some(512 << 20));
        c.set_limit("tierd/db", None).unwrap();
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/db/memory.limit_in_bytes")).unwrap(), "-1");
    }

    #[test]
    fn stats_prefer_hierarchical_totals() {
        let (_t, c) = tree();
        let s = c.stats("tierd/db").unwrap();
        assert_eq!(s.usage, 3000000);
        assert_eq!(s.anon, 2 << 20);
        assert_eq!(s.anon_huge, 2 << 20);
        assert_eq!(s.swap, 16384);
        assert_eq!(s.swap_cached, 4096, "of 12 KiB of swap cache, 4 KiB is neither mapped (rss) nor shmem");
        assert_eq!((s.file, s.inactive_file), (8192, 8192), "inactive and clean: 12 KiB less 4 KiB dirty");
        assert_eq!(s.page_cache, 32768, "both file lists, dirty or not");
        assert_eq!(s.oom_kills, 0, "no memory.oom_control: none counted");
        std::fs::write(c.base().join("tierd/db/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
            .unwrap();
        assert_eq!(c.stats("tierd/db").unwrap().oom_kills, 2);
        assert_eq!(s.limit_hits, 0, "no memory.failcnt: none counted");
        std::fs::write(c.base().join("tierd/db/memory.failcnt"), "17\n").unwrap();
        assert_eq!(c.stats("tierd/db").unwrap().limit_hits, 17, "charges that failed at the limit");
    }

    #[test]
    fn procs_children_and_attach() {
        let (_t, c) = tree();
        assert_eq!(c.procs("tierd/db").unwrap(), vec![10, 11]);
        assert_eq!(c.children("tierd").unwrap(), vec!["db".to_string()]);
        c.add_proc("tierd/db", 99).unwrap();
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/db/cgroup.procs")).unwrap(), "99");
        assert_eq!(std::fs::read_to_string(c.base().join("tierd/db/memory.move_charge_at_immigrate")).unwrap(), "3");
    }

    #[test]
    fn tasks_at_the_limit_wait_instead_of_being_killed_and_are_woken() {
        let (_t, c) = tree();
        let oom = c.base().join("tierd/db/memory.oom_control");
        std::fs::write(&oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n").unwrap();
        c.create("tierd/db", AtLimit::Wait).unwrap();
        assert_eq!(std::fs::read_to_string(&oom).unwrap(), "1", "the OOM killer is turned off");
        c.create("tierd/db", AtLimit::Kill).unwrap();
        assert_eq!(std::fs::read_to_string(&oom).unwrap(), "0", "plain Linux's OOM killer, also on an existing group");
        std::fs::write(&oom, "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n").unwrap();
        assert!(!c.waiting_at_limit("tierd/db").unwrap());
        std::fs::write(&oom, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
        let tasks = c.base().join("tierd/db/tasks");
        std::fs::write(&tasks, "10\n").unwrap();
        assert!(!c.waiting_at_limit("tierd/db").unwrap(), "under_oom set by a parent's limit, nobody waits here");
        std::fs::write(&tasks, "10\n11\n").unwrap();
        assert!(c.waiting_at_limit("tierd/db").unwrap(), "task 11 sleeps in the OOM wait");
        std::fs::write(c.base().join("tierd/memory.oom_control"), "oom_kill_disable 1\nunder_oom 1\n").unwrap();
        assert!(c.waiting_at_limit("tierd").unwrap(), "a group waits when a task below it does");
        c.set_limit("tierd/db", Some(256 << 20)).unwrap();
        c.release_waiters("tierd/db", Wake::Page).unwrap();
        assert_eq!(c.stats("tierd/db").unwrap().limit, Some((256 << 20) + 4096), "raised by a page");
        // The room asked for above what it holds (the fixture's 3 MB).
        assert_eq!(c.release_waiters("tierd/db", Wake::Room(16 << 20)).unwrap(), Some(3_000_000 + (16 << 20)));
        assert_eq!(c.stats("tierd/db").unwrap().limit, Some(3_000_000 + (16 << 20)));
        c.set_oom_killer("tierd/db", true).unwrap();
        assert_eq!(std::fs::read_to_string(&oom).unwrap(), "0", "after the grace, the OOM killer may act");
        c.set_oom_killer("tierd/db", false).unwrap();
        assert_eq!(std::fs::read_to_string(&oom).unwrap(), "1");
    }

    #[test]
    fn create_and_remove_are_idempotent_and_confined() {
        let (_t, c) = tree();
        c.create("tierd/web", AtLimit::Wait).unwrap();
        c.create("tierd/web", AtLimit::Wait).unwrap();
        assert!(c.base().join("tierd/web").is_dir());
        c.remove("tierd/web").unwrap();
        c.remove("tierd/web").unwrap();
        assert!(!c.base().join("tierd/web").exists());
        assert!(matches!(c.create("../escape", AtLimit::Wait), Err(CgroupError::Escape(_))));
    }

    #[test]
    fn membership_is_checked_against_own_cgroup() {
        let (t, c) = tree();
        let proc = t.path().join("proc");
        populate(&proc.join("5"), &[("cgroup", "4:memory:/me/tierd/db\n")]);
        populate(&proc.join("6"), &[("cgroup", "4:memory:/other\n")]);
        populate(&proc.join("7"), &[("cgroup", "4:memory:/meat\n")]);
        let p = ProcFs::new(&proc);
        assert!(c.contains_pid(&p, 5).unwrap());
        assert!(!c.contains_pid(&p, 6).unwrap());
        assert!(!c.contains_pid(&p, 7).unwrap());
    }

    #[test]
    fn reclaim_restores_the_old_limit() {
        let (_t, c) = tree();
        c.set_limit("tierd/db", Some(1 << 30)).unwrap();
        // A fixture cannot reclaim; what matters is that the limit comes back.
        let freed = c.reclaim("tierd/db", 1 << 20).unwrap();
        assert_eq!(freed, 0);
        assert_eq!(c.stats("tierd/db").unwrap().limit, Some(1 << 30));
    }
}
