//! What the running kernel offers tierd, each interface probed the way tierd would use
//! it. The file probes read under a root that tests point at fixture trees; the three
//! syscall probes ([`SyscallProbes`]) only mean something on the real kernel.

use std::path::Path;

use serde::Serialize;

use crate::cgroup::{self, Version};
use crate::madvise::{Advice, Pidfd};
use crate::memory::{AnonMemory, PageKind};
use crate::procfs::ProcFs;
use crate::read_text;

/// The memory cgroup tierd would work in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupFacts {
    pub version: Version,
    /// tierd's own cgroup directory.
    pub dir: String,
    /// v2: the cgroup hands the memory controller to its children (v1 always does).
    pub memory_delegated: bool,
    /// Swap is charged per cgroup, so a tenant's tier use can be read and capped.
    pub swap_accounting: bool,
}

/// The answers of the probes that must call the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SyscallProbes {
    pub process_madvise: bool,
    pub pagemap_scan: bool,
    pub madv_collapse: bool,
}

impl SyscallProbes {
    /// Asks this kernel, on memory of this process only.
    pub fn run() -> SyscallProbes {
        SyscallProbes {
            process_madvise: process_madvise_works(),
            pagemap_scan: crate::pagemap::has_scan_ioctl(),
            madv_collapse: madv_collapse_works(),
        }
    }
}

/// Everything `tierctl doctor` reports about the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelFeatures {
    /// `uname -r`.
    pub release: String,
    pub cgroup: Option<CgroupFacts>,
    /// Why no usable memory cgroup was found, when none was.
    pub cgroup_error: Option<String>,
    #[serde(flatten)]
    pub calls: SyscallProbes,
    /// The transparent huge page mode (`always`, `madvise`, `never`); `None` without THP.
    pub thp: Option<String>,
    /// DAMON's sysfs interface (`/sys/kernel/mm/damon/admin`).
    pub damon_sysfs: bool,
    /// Multi-gen LRU: `None` when the kernel lacks it, else whether it is on.
    pub mglru: Option<bool>,
    /// Memory pressure stall information (`/proc/pressure/memory` readable).
    pub psi_memory: bool,
    /// zswap: `None` when the kernel lacks it, else whether it is on.
    pub zswap: Option<bool>,
    /// device-mapper (`/sys/class/misc/device-mapper`), which an encrypted tier needs.
    #[serde(default)]
    pub device_mapper: bool,
    /// The kernel log (`/dev/kmsg`) readable: the only report of a failed swap I/O.
    #[serde(default)]
    pub kernel_log: bool,
    /// Why the block tracepoints cannot time the tier's reads one by one, or `None` when
    /// they can (`blocktrace::probe`; not asked of fixtures).
    #[serde(default)]
    pub block_trace_error: Option<String>,
}

impl KernelFeatures {
    /// This host's kernel.
    pub fn probe() -> KernelFeatures {
        let mut k = KernelFeatures::read(Path::new("/"), &ProcFs::new("/proc"), SyscallProbes::run());
        k.block_trace_error = crate::blocktrace::probe().err().map(|e| e.to_string());
        k
    }

    /// Reads the file probes under `root` (sysfs at `root/sys`), procfs from `proc`.
    pub fn read(root: &Path, proc: &ProcFs, calls: SyscallProbes) -> KernelFeatures {
        let sys = root.join("sys");
        let (cgroup, cgroup_error) = match cgroup_facts(root, proc) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e.to_string())),
        };
        KernelFeatures {
            release: text(&proc.root().join("sys/kernel/osrelease")).unwrap_or_default(),
            cgroup,
            cgroup_error,
            calls,
            thp: text(&sys.join("kernel/mm/transparent_hugepage/enabled")).and_then(|t| bracketed(&t)),
            damon_sysfs: sys.join("kernel/mm/damon/admin/kdamonds").is_dir(),
            mglru: text(&sys.join("kernel/mm/lru_gen/enabled"))
                .map(|t| u32::from_str_radix(t.trim_start_matches("0x"), 16).is_ok_and(|v| v & 1 != 0)),
            psi_memory: text(&proc.root().join("pressure/memory")).is_some(),
            zswap: text(&sys.join("module/zswap/parameters/enabled")).map(|t| t == "Y" || t == "1"),
            device_mapper: crate::crypt::has_device_mapper(&sys),
            kernel_log: std::fs::File::open(root.join("dev/kmsg")).is_ok(),
            block_trace_error: None,
        }
    }
}

fn text(path: &Path) -> Option<String> {
    read_text(path).ok().map(|t| t.trim().to_string())
}

/// `always [madvise] never` -> `madvise`.
fn bracketed(setting: &str) -> Option<String> {
    let start = setting.find('[')? + 1;
    let end = start + setting[start..].find(']')?;
    Some(setting[start..end].to_string())
}

fn cgroup_facts(root: &Path, proc: &ProcFs) -> Result<CgroupFacts, cgroup::CgroupError> {
    let ctl = cgroup::detect(root, proc)?;
    let dir = ctl.base();
    let (memory_delegated, swap_accounting) = match ctl.version() {
        Version::V1 => (true, dir.join("memory.memsw.limit_in_bytes").exists()),
        Version::V2 => {
            let has_memory =
                |file: &str| text(&dir.join(file)).is_some_and(|t| t.split_whitespace().any(|c| c == "memory"));
            let delegated = has_memory("cgroup.subtree_control") || has_memory("cgroup.controllers");
            // The root cgroup has no memory.* files: there only the boot options tell.
            let swap = if dir.join("memory.current").exists() {
                dir.join("memory.swap.max").exists()
            } else {
                let cmdline = text(&proc.root().join("cmdline")).unwrap_or_default();
                !cmdline.split_whitespace().any(|o| o == "cgroup.memory=noswap" || o == "swapaccount=0")
            };
            (delegated, swap)
        }
    };
    Ok(CgroupFacts { version: ctl.version(), dir: dir.display().to_string(), memory_delegated, swap_accounting })
}

/// `process_madvise` with `MADV_COLD` (a hint, no I/O) on a page of our own: only
/// `ENOSYS` (before 5.10) or `EINVAL` (the advice unsupported) mean tierd cannot use it.
fn process_madvise_works() -> bool {
    let (Ok(pidfd), Ok(mem)) = (Pidfd::open(std::process::id()), AnonMemory::new(4096, PageKind::Small)) else {
        return false;
    };
    let r = pidfd.advise(Advice::Cold, &[(mem.start(), 4096)]);
    !matches!(r.last_errno, Some(libc::ENOSYS) | Some(libc::EINVAL))
}

/// `MADV_COLLAPSE` (6.1+) on touched memory of our own: `EINVAL` means the kernel
/// lacks it; a collapse that fails for want of memory still counts. Two huge pages'
/// worth, touched throughout, so an aligned block lies inside whatever the mapping's
/// alignment (6.1 does not align anonymous mappings to 2 MiB; it failed there).
fn madv_collapse_works() -> bool {
    let Ok(mut mem) = AnonMemory::new(4 << 20, PageKind::Thp) else { return false };
    mem.as_mut_slice().iter_mut().step_by(512).for_each(|w| *w = 1);
    !matches!(mem.collapse(), Err(e) if e.raw_os_error() == Some(libc::EINVAL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::fixture::proc_with;

    /// Writes `files` (path under `root`, content), creating their directories.
    fn populate(root: &Path, files: &[(&str, &str)]) {
        for (name, content) in files {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    const CALLS: SyscallProbes = SyscallProbes { process_madvise: true, pagemap_scan: false, madv_collapse: true };

    fn v2_host(root: &Path, cmdline: &str) {
        let mountinfo = "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        proc_with(root, mountinfo, "0::/\n");
        populate(
            root,
            &[
                ("proc/sys/kernel/osrelease", "6.12.0-test\n"),
                ("proc/cmdline", cmdline),
                ("proc/pressure/memory", "some avg10=0.00\n"),
                ("sys/fs/cgroup/cgroup.controllers", "cpu memory\n"),
                ("sys/fs/cgroup/cgroup.subtree_control", "memory\n"),
                ("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n"),
                ("sys/kernel/mm/lru_gen/enabled", "0x0007\n"),
                ("sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds", "0\n"),
                ("sys/module/zswap/parameters/enabled", "N\n"),
            ],
        );
    }

    #[test]
    fn a_v2_host_with_everything_reads_as_such() {
        let dir = tempfile::tempdir().unwrap();
        v2_host(dir.path(), "console=ttyS0\n");
        let k = KernelFeatures::read(dir.path(), &ProcFs::new(dir.path().join("proc")), CALLS);
        assert_eq!(k.release, "6.12.0-test");
        let c = k.cgroup.expect("a v2 memory controller");
        assert_eq!((c.version, c.memory_delegated, c.swap_accounting), (Version::V2, true, true));
        assert_eq!(k.thp.as_deref(), Some("madvise"));
        assert!(k.damon_sysfs && k.psi_memory);
        assert_eq!((k.mglru, k.zswap), (Some(true), Some(false)));
        assert!(!k.calls.pagemap_scan, "the syscall answers are passed through");
    }

    #[test]
    fn what_a_kernel_lacks_or_turned_off_reads_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        v2_host(dir.path(), "quiet cgroup.memory=noswap\n");
        for gone in ["proc/pressure", "sys/kernel/mm/damon", "sys/module/zswap", "sys/kernel/mm/transparent_hugepage"] {
            std::fs::remove_dir_all(dir.path().join(gone)).unwrap();
        }
        // tierd in a service cgroup whose parent gives it no memory controller.
        proc_with(dir.path(), "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "0::/svc\n");
        populate(
            dir.path(),
            &[
                ("sys/kernel/mm/lru_gen/enabled", "0x0000\n"),
                ("sys/fs/cgroup/svc/cgroup.controllers", "cpu\n"),
                ("sys/fs/cgroup/svc/cgroup.subtree_control", "\n"),
            ],
        );
        let k = KernelFeatures::read(dir.path(), &ProcFs::new(dir.path().join("proc")), CALLS);
        let c = k.cgroup.unwrap();
        assert!(!c.memory_delegated && !c.swap_accounting, "{c:?}");
        assert_eq!((k.thp, k.mglru, k.zswap), (None, Some(false), None));
        assert!(!k.damon_sysfs && !k.psi_memory);
    }

    #[test]
    fn no_memory_cgroup_is_named_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        proc_with(dir.path(), "22 1 0:5 / /proc rw - proc proc rw\n", "0::/\n");
        let k = KernelFeatures::read(dir.path(), &ProcFs::new(dir.path().join("proc")), CALLS);
        assert!(k.cgroup.is_none());
        assert!(k.cgroup_error.unwrap().contains("neither a v1 memory hierarchy nor cgroup2"));
    }

    #[test]
    fn this_kernel_answers_the_syscall_probes_as_its_version_says() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
        let version = (v.next().unwrap(), v.next().unwrap());
        let p = SyscallProbes::run();
        // process_madvise came in 5.10, MADV_COLLAPSE in 6.1, PAGEMAP_SCAN in 6.7.
        let expected = SyscallProbes {
            process_madvise: version >= (5, 10),
            pagemap_scan: version >= (6, 7),
            madv_collapse: version >= (6, 1),
        };
        assert_eq!(p, expected, "kernel {release}");
    }
}
