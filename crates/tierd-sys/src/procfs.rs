//! `/proc` under an injectable root, so tests can run on fixture trees.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::{PathError, read_text};

/// Access to procfs rooted at `root` (normally `/proc`).
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
}

/// Memory figures of one process from `/proc/PID/status`, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PidMemory {
    /// All resident memory (anonymous, file, shmem).
    pub rss: u64,
    pub rss_anon: u64,
    pub swap: u64,
    /// mlocked memory: cannot be tiered.
    pub locked: u64,
    /// hugetlbfs memory: cannot be paged out.
    pub hugetlb: u64,
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub inode: u64,
    pub path: String,
}

impl Mapping {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Private anonymous memory (heap, stacks, `mmap(MAP_ANONYMOUS)`): what swaps.
    pub fn is_anon_private(&self) -> bool {
        self.inode == 0
            && self.perms.as_bytes().get(3) == Some(&b'p')
            && self.perms.starts_with("rw")
            && !matches!(self.path.as_str(), "[vvar]" | "[vdso]" | "[vsyscall]" | "[vvar_vclock]" | "[uprobes]")
            && !self.is_hugetlb()
    }

    /// hugetlbfs-backed memory (`MAP_HUGETLB` shows as `/anon_hugepage`).
    pub fn is_hugetlb(&self) -> bool {
        self.path.starts_with("/anon_hugepage")
            || self.path.starts_with("/dev/hugepages")
            || self.path.contains("hugetlbfs")
    }
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn pid_file(&self, pid: u32, name: &str) -> PathBuf {
        self.root.join(pid.to_string()).join(name)
    }

    /// Host memory from `/proc/meminfo` (`MemTotal`), in bytes.
    pub fn mem_total(&self) -> Result<u64, PathError> {
        self.meminfo("MemTotal")
    }

    /// Memory the host can give without swapping (`MemAvailable`), in bytes.
    pub fn mem_available(&self) -> Result<u64, PathError> {
        self.meminfo("MemAvailable")
    }

    /// One `/proc/meminfo` figure, in bytes (0 when the kernel lacks it).
    fn meminfo(&self, key: &str) -> Result<u64, PathError> {
        let text = read_text(&self.root.join("meminfo"))?;
        Ok(kv_kib(&text).get(key).copied().unwrap_or(0))
    }

    pub fn exists(&self, pid: u32) -> bool {
        self.root.join(pid.to_string()).exists()
    }

    pub fn memory(&self, pid: u32) -> Result<PidMemory, PathError> {
        let kv = kv_kib(&read_text(&self.pid_file(pid, "status"))?);
        let get = |k: &str| kv.get(k).copied().unwrap_or(0);
        Ok(PidMemory {
            rss: get("VmRSS"),
            rss_anon: get("RssAnon"),
            swap: get("VmSwap"),
            locked: get("VmLck"),
            hugetlb: get("HugetlbPages"),
        })
    }

    /// Fields of `/proc/PID/stat` after the command name (which may hold spaces).
    fn stat_fields(&self, pid: u32) -> Result<Vec<String>, PathError> {
        let text = read_text(&self.pid_file(pid, "stat"))?;
        let after = text.rfind(')').map_or(text.as_str(), |i| &text[i + 1..]);
        Ok(after.split_whitespace().map(str::to_string).collect())
    }

    /// The process's fault and CPU counters, from one read of `/proc/PID/stat`.
    pub fn counters(&self, pid: u32) -> Result<Counters, PathError> {
        // Fields 4 (ppid), 12, 13 (majflt, cmajflt), 14, 15 (utime, stime) and 16, 17
        // (cutime, cstime) of stat: indices 1 and 9 to 14 after the `(comm)` field.
        let f = self.stat_fields(pid)?;
        let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        Ok(Counters {
            ppid: n(1) as u32,
            major_faults: Tally { own: n(9), reaped: n(10) },
            cpu_ticks: Tally { own: n(11) + n(12), reaped: n(13) + n(14) },
        })
    }

    /// Start time in clock ticks since boot: with the PID, names a process uniquely.
    pub fn start_time(&self, pid: u32) -> Result<u64, PathError> {
        Ok(self.stat_fields(pid)?.get(19).and_then(|s| s.parse().ok()).unwrap_or(0))
    }

    /// Seconds since the process started (`/proc/uptime` less its start time).
    pub fn age_secs(&self, pid: u32) -> Result<f64, PathError> {
        let uptime = read_text(&self.root.join("uptime"))?;
        let up: f64 = uptime.split_whitespace().next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
        let started = self.start_time(pid)? as f64 / crate::process::clock_ticks_per_sec() as f64;
        Ok((up - started).max(0.0))
    }

    /// The process state letter (`R`, `S`, `Z`, …).
    pub fn state(&self, pid: u32) -> Result<char, PathError> {
        Ok(self.stat_fields(pid)?.first().and_then(|s| s.chars().next()).unwrap_or('?'))
    }

    /// Whether a thread of the process is not asleep: running or waiting for a CPU
    /// (state `R`), or waiting in the kernel uninterruptibly (`D`: on a page from the
    /// tier, on reclaim at its memory limit, on a write to finish), as opposed to
    /// sleeping until it has work (`S`).
    pub fn any_thread_busy(&self, pid: u32) -> Result<bool, PathError> {
        let dir = self.pid_file(pid, "task");
        let tasks = std::fs::read_dir(&dir).map_err(|e| PathError::new(&dir, e))?;
        for task in tasks.flatten() {
            let stat = task.path().join("stat");
            // A thread that exits meanwhile is no longer waiting.
            let Ok(text) = std::fs::read_to_string(&stat) else { continue };
            let after = text.rfind(')').map_or(text.as_str(), |i| &text[i + 1..]);
            if matches!(after.split_whitespace().next(), Some("R" | "D")) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub fn cmdline(&self, pid: u32) -> Result<Vec<String>, PathError> {
        let raw = std::fs::read(self.pid_file(pid, "cmdline"))
            .map_err(|e| PathError::new(&self.pid_file(pid, "cmdline"), e))?;
        Ok(raw.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).to_string()).collect())
    }

    /// The memory cgroup of a process, as the path inside its hierarchy.
    pub fn memory_cgroup(&self, pid: Option<u32>) -> Result<String, PathError> {
        self.cgroup(pid, "memory")
    }

    /// The cgroup of a process (`None`: this one) for `controller`, as the path inside
    /// its hierarchy: the v1 line naming the controller, or the v2 `0::` line when
    /// there is none.
    pub fn cgroup(&self, pid: Option<u32>, controller: &str) -> Result<String, PathError> {
        let file = match pid {
            Some(p) => self.pid_file(p, "cgroup"),
            None => self.root.join("self/cgroup"),
        };
        let text = read_text(&file)?;
        let mut v2 = None;
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
            if ctrls.split(',').any(|c| c == controller) {
                return Ok(path.to_string());
            }
            if id == "0" && ctrls.is_empty() {
                v2 = Some(path.to_string());
            }
        }
        v2.ok_or_else(|| PathError::new(&file, std::io::Error::other(format!("no {controller} cgroup line"))))
    }

    pub fn maps(&self, pid: u32) -> Result<Vec<Mapping>, PathError> {
        Ok(parse_maps(&read_text(&self.pid_file(pid, "maps"))?))
    }

    /// Resident and swapped bytes of each mapping, from `/proc/PID/smaps`, by start
    /// address: where one mapping (a VM's guest RAM) lives.
    pub fn smaps_usage(&self, pid: u32) -> Result<HashMap<u64, MappingUsage>, PathError> {
        Ok(parse_smaps_usage(&read_text(&self.pid_file(pid, "smaps"))?))
    }

    /// `/proc/vmstat` counters.
    pub fn vmstat(&self) -> Result<HashMap<String, u64>, PathError> {
        let text = read_text(&self.root.join("vmstat"))?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.next()?.to_string(), it.next()?.parse().ok()?))
            })
            .collect())
    }

    /// `/proc/diskstats` for one device.
    pub fn diskstats(&self, device: &str) -> Result<Option<DiskStats>, PathError> {
        let text = read_text(&self.root.join("diskstats"))?;
        Ok(text.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 14 || f[2] != device {
                return None;
            }
            let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
            Some(DiskStats {
                reads: n(3),
                sectors_read: n(5),
                read_ms: n(6),
                writes: n(7),
                sectors_written: n(9),
                write_ms: n(10),
                io_ms: n(12),
            })
        }))
    }

    /// CPU time (user + system) of a process, in clock ticks.
    pub fn cpu_ticks(&self, pid: u32) -> Result<u64, PathError> {
        Ok(self.counters(pid)?.cpu_ticks.own)
    }
}

/// A process's counters from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub ppid: u32,
    /// Major faults (pages read from swap or files). A page another process reads in
    /// through `/proc/PID/mem` counts as that reader's fault, not this process's.
    pub major_faults: Tally,
    /// CPU time (user + system), in clock ticks.
    pub cpu_ticks: Tally,
}

/// A counter of a process so far: its own threads', and that of the children it has
/// reaped (the kernel adds a child's whole count to its parent's when it is waited for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub own: u64,
    pub reaped: u64,
}

/// Counters of one block device from `/proc/diskstats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    pub reads: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    pub io_ms: u64,
}

/// Reads (or milliseconds of reading) needed before their mean time says anything: the
/// kernel reports the total read time in whole milliseconds, so over N reads the mean is
/// off by up to 1 ms / N. Two reads in an interval read as 500 µs each, and that "red"
/// latency throttled demotion on an idle tier. A few reads that took 32 ms or more in
/// all are timed well enough: a device gone slow does no more than a few per interval.
pub const MIN_TIMED_READS: u64 = 32;

impl DiskStats {
    /// What happened between `earlier` and these counters.
    pub fn since(&self, earlier: &DiskStats) -> DiskStats {
        self.zip(earlier, u64::saturating_sub)
    }

    /// Two spans' counters together.
    pub fn plus(&self, other: &DiskStats) -> DiskStats {
        self.zip(other, u64::saturating_add)
    }

    fn zip(&self, o: &DiskStats, f: fn(u64, u64) -> u64) -> DiskStats {
        DiskStats {
            reads: f(self.reads, o.reads),
            sectors_read: f(self.sectors_read, o.sectors_read),
            read_ms: f(self.read_ms, o.read_ms),
            writes: f(self.writes, o.writes),
            sectors_written: f(self.sectors_written, o.sectors_written),
            write_ms: f(self.write_ms, o.write_ms),
            io_ms: f(self.io_ms, o.io_ms),
        }
    }

    /// Mean read latency in µs between `earlier` and these counters; `None` when too
    /// few reads to time (see [`MIN_TIMED_READS`]).
    pub fn read_latency_us_since(&self, earlier: &DiskStats) -> Option<f64> {
        self.since(earlier).read_latency_us()
    }

    /// Mean read latency in µs of a span's counters (see [`Self::since`]).
    pub fn read_latency_us(&self) -> Option<f64> {
        let (reads, ms) = (self.reads, self.read_ms);
        (reads > 0 && (reads >= MIN_TIMED_READS || ms >= MIN_TIMED_READS)).then(|| ms as f64 * 1000.0 / reads as f64)
    }
}

/// `Key:   123 kB` lines into bytes.
fn kv_kib(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let mut it = v.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            let mult = if it.next() == Some("kB") { 1024 } else { 1 };
            Some((k.trim().to_string(), n * mult))
        })
        .collect()
}

/// One mapping's share of a process's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MappingUsage {
    pub rss: u64,
    pub swap: u64,
}

fn parse_smaps_usage(text: &str) -> HashMap<u64, MappingUsage> {
    let mut out = HashMap::new();
    let mut current: Option<u64> = None;
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((s, _)) = first.split_once('-')
            && let Ok(start) = u64::from_str_radix(s, 16)
            && !first.ends_with(':')
        {
            current = Some(start);
            out.insert(start, MappingUsage::default());
            continue;
        }
        let Some(start) = current else { continue };
        let kib = || line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024;
        let u = out.get_mut(&start).expect("inserted at its header");
        match first {
            "Rss:" => u.rss = kib(),
            "Swap:" => u.swap = kib(),
            _ => {}
        }
    }
    out
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (range, perms, _off, _dev, inode) = (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
            let path = it.collect::<Vec<_>>().join(" ");
            let (s, e) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                perms: perms.to_string(),
                inode: inode.parse().ok()?,
                path,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("42");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("status"),
            "Name:\tdb\nVmLck:\t   8 kB\nRssAnon:\t  102400 kB\nVmSwap:\t    2048 kB\nHugetlbPages:\t       0 kB\n",
        )
        .unwrap();
        std::fs::write(
            p.join("stat"),
            "42 (my prog) S 1 42 42 0 -1 4194560 1000 0 77 3 150 30 12 8 20 0 1 0 12345 0 0\n",
        )
        .unwrap();
        std::fs::write(
            p.join("maps"),
            "55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]\n\
7f0000000000-7f0040000000 rw-p 00000000 00:00 0 \n\
7f1000000000-7f1000200000 rw-s 00000000 00:01 1234                       /dev/shm/x\n\
7f2000000000-7f2000400000 rw-p 00000000 00:0f 5678                       /anon_hugepage (deleted)\n\
7ffd00000000-7ffd00002000 r--p 00000000 00:00 0                          [vvar]\n",
        )
        .unwrap();
        std::fs::write(p.join("cgroup"), "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n").unwrap();
        std::fs::write(t.path().join("meminfo"), "MemTotal:       24576000 kB\nMemFree:        100 kB\n").unwrap();
        std::fs::write(t.path().join("uptime"), "200.50 390.12\n").unwrap();
        std::fs::write(
            t.path().join("diskstats"),
            "   7       3 loop3 120 0 960 240 30 0 240 60 0 300 300 0 0 0 0\n 254 0 vda 1 2 3 4 5 6 7 8 9 10 11\n",
        )
        .unwrap();
        t
    }

    #[test]
    fn reads_each_mappings_resident_and_swapped_bytes() {
        let t = fixture();
        std::fs::write(
            t.path().join("42/smaps"),
            "7f0000000000-7f0040000000 rw-p 00000000 00:00 0 \n\
Size:            1048576 kB\nRss:              300000 kB\nPss:              300000 kB\nSwap:             700000 kB\n\
VmFlags: rd wr mr mw me ac sd hg\n\
7f1000000000-7f1000200000 rw-s 00000000 00:01 1234                       /dev/shm/x\n\
Size:               2048 kB\nRss:                  4 kB\nSwap:                 0 kB\n",
        )
        .unwrap();
        let u = ProcFs::new(t.path()).smaps_usage(42).unwrap();
        assert_eq!(u[&0x7f00_0000_0000], MappingUsage { rss: 300_000 * 1024, swap: 700_000 * 1024 });
        assert_eq!(u[&0x7f10_0000_0000], MappingUsage { rss: 4096, swap: 0 });
        assert_eq!(u.len(), 2);
    }

    #[test]
    fn reads_process_memory_and_faults() {
        let t = fixture();
        let p = ProcFs::new(t.path());
        let m = p.memory(42).unwrap();
        assert_eq!(m, PidMemory { rss: 0, rss_anon: 100 << 20, swap: 2 << 20, locked: 8 << 10, hugetlb: 0 });
        let c = p.counters(42).unwrap();
        assert_eq!(c.major_faults, Tally { own: 77, reaped: 3 });
        assert_eq!(c.cpu_ticks, Tally { own: 180, reaped: 20 }, "user + system, its own and its reaped children's");
        assert_eq!(c.ppid, 1);
        assert_eq!(p.start_time(42).unwrap(), 12345);
        let hz = crate::process::clock_ticks_per_sec() as f64;
        assert!((p.age_secs(42).unwrap() - (200.5 - 12345.0 / hz).max(0.0)).abs() < 1e-9, "uptime less its start");
        assert_eq!(p.cpu_ticks(42).unwrap(), 180);
        assert_eq!(p.state(42).unwrap(), 'S');
        assert_eq!(p.mem_total().unwrap(), 24576000 * 1024);
    }

    #[test]
    fn tells_a_busy_process_from_one_sleeping() {
        let t = fixture();
        let task = |tid: u32, state: &str| {
            let d = t.path().join(format!("42/task/{tid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stat"), format!("{tid} (a (b) c) {state} 1 42 42 0 -1 0 0 0 0 0 0 0\n")).unwrap();
        };
        task(42, "S");
        task(43, "S");
        let p = ProcFs::new(t.path());
        assert!(!p.any_thread_busy(42).unwrap(), "all threads asleep");
        task(44, "D");
        assert!(p.any_thread_busy(42).unwrap(), "one thread waits on the kernel");
        task(44, "R");
        assert!(p.any_thread_busy(42).unwrap(), "one thread runs or waits for a CPU");
        task(44, "I");
        assert!(!p.any_thread_busy(42).unwrap(), "idle");
        assert!(p.any_thread_busy(7).is_err(), "no such process");
    }

    #[test]
    fn classifies_mappings() {
        let t = fixture();
        let maps = ProcFs::new(t.path()).maps(42).unwrap();
        let anon: Vec<bool> = maps.iter().map(Mapping::is_anon_private).collect();
        assert_eq!(anon, vec![true, true, false, false, false]);
        assert!(maps[3].is_hugetlb());
        assert_eq!(maps[1].len(), 1 << 30);
    }

    #[test]
    fn finds_the_memory_cgroup() {
        let t = fixture();
        assert_eq!(ProcFs::new(t.path()).memory_cgroup(Some(42)).unwrap(), "/process_api/abc");
        assert_eq!(ProcFs::new(t.path()).cgroup(Some(42), "name=systemd").unwrap(), "/");
        assert_eq!(ProcFs::new(t.path()).cgroup(Some(42), "blkio").unwrap(), "/", "no v1 line: the v2 one");
        std::fs::write(t.path().join("42/cgroup"), "0::/system.slice/tierd.service\n").unwrap();
        assert_eq!(ProcFs::new(t.path()).memory_cgroup(Some(42)).unwrap(), "/system.slice/tierd.service");
    }

    #[test]
    fn reads_diskstats() {
        let t = fixture();
        let d = ProcFs::new(t.path()).diskstats("loop3").unwrap().unwrap();
        assert_eq!((d.reads, d.sectors_read, d.read_ms, d.writes, d.io_ms), (120, 960, 240, 30, 300));
        assert!(ProcFs::new(t.path()).diskstats("nvme0n1").unwrap().is_none());
    }

    #[test]
    fn real_proc_self_parses() {
        let p = ProcFs::new("/proc");
        let me = std::process::id();
        assert!(p.memory(me).unwrap().rss_anon > 0);
        assert!(!p.maps(me).unwrap().is_empty());
        assert!(p.mem_total().unwrap() > 0);
    }

    #[test]
    fn read_latency_needs_enough_reads_to_be_timed() {
        let at = |reads, read_ms| DiskStats { reads, read_ms, ..DiskStats::default() };
        // Two reads and one millisecond tick: not 500 µs, just too few to tell.
        assert_eq!(at(102, 51).read_latency_us_since(&at(100, 50)), None);
        assert_eq!(at(100, 50).read_latency_us_since(&at(100, 50)), None, "no reads at all");
        assert_eq!(at(1100, 130).read_latency_us_since(&at(100, 50)), Some(80.0));
        assert_eq!(at(132, 50).read_latency_us_since(&at(100, 50)), Some(0.0), "fast reads under one tick");
        assert_eq!(at(103, 1250).read_latency_us_since(&at(100, 50)), Some(400_000.0), "a device gone slow");
    }

    #[test]
    fn spans_of_counters_subtract_and_add() {
        let at = |reads, read_ms, io_ms| DiskStats { reads, read_ms, io_ms, ..DiskStats::default() };
        let span = at(1100, 130, 90).since(&at(100, 50, 40));
        assert_eq!(span, at(1000, 80, 50));
        assert_eq!(span.plus(&at(1, 2, 3)), at(1001, 82, 53));
        assert_eq!(at(1, 1, 1).since(&at(5, 5, 5)), DiskStats::default(), "a counter reset is no negative span");
    }
}
