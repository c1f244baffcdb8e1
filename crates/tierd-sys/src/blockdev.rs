//! Block devices as tiers: loop devices over files, and the checks that keep tierd from
//! taking a device that holds data or is in use.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors of the block-device operations.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// a helper command failed
    #[error("{command}: {message}")]
    Command { command: String, message: String },
    /// an ioctl or open failed
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: io::Error },
}

fn run(cmd: &mut Command) -> Result<String, BlockError> {
    let command = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().map_err(|e| BlockError::Command { command: command.clone(), message: e.to_string() })?;
    if !out.status.success() {
        return Err(BlockError::Command { command, message: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.file_type().is_block_device()).unwrap_or(false)
}

pub fn is_char_device(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.file_type().is_char_device()).unwrap_or(false)
}

/// Puts a loop device over `file` with direct I/O (no second copy in the page cache).
pub fn loop_attach(file: &Path) -> Result<PathBuf, BlockError> {
    let dev = run(Command::new("losetup").args(["--find", "--show", "--direct-io=on"]).arg(file))?;
    Ok(PathBuf::from(dev))
}

pub fn loop_detach(dev: &Path) -> Result<(), BlockError> {
    run(Command::new("losetup").arg("-d").arg(dev)).map(|_| ())
}

/// The loop devices whose backing file is `file` (from sysfs under `sys_root`).
pub fn loops_backed_by(sys_root: &Path, file: &Path) -> Vec<PathBuf> {
    loops_where(sys_root, |backing| backing == file)
}

/// The loop devices whose backing file lies under the directory `dir`.
pub fn loops_under(sys_root: &Path, dir: &Path) -> Vec<PathBuf> {
    loops_where(sys_root, |backing| backing.starts_with(dir))
}

/// The device-mapper mappings (their names) stacked on the block device `/dev/NAME`, as
/// an encrypted tier's is on its loop device: from the kernel's holders of it.
pub fn mappings_over(sys_root: &Path, name: &str) -> Vec<String> {
    let Ok(holders) = std::fs::read_dir(sys_root.join("block").join(name).join("holders")) else { return Vec::new() };
    let mut out: Vec<String> = holders
        .flatten()
        .filter_map(|h| std::fs::read_to_string(h.path().join("dm/name")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    out.sort();
    out
}

fn loops_where(sys_root: &Path, backed: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(sys_root.join("block")) else { return Vec::new() };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(backing) = std::fs::read_to_string(e.path().join("loop/backing_file"))
            && backed(Path::new(backing.trim()))
        {
            out.push(PathBuf::from("/dev").join(&name));
        }
    }
    out.sort();
    out
}

/// The filesystem or other signature on a device, as `blkid -p` sees it.
pub fn signature(path: &Path) -> Result<Option<String>, BlockError> {
    let out = Command::new("blkid").args(["-p", "-o", "value", "-s", "TYPE"]).arg(path).output().map_err(|e| {
        let message = if e.kind() == std::io::ErrorKind::NotFound {
            "not installed: tierd needs it to check the device holds no filesystem (install util-linux), \
                 or give --force-tier if the device holds nothing you need"
                .to_string()
        } else {
            e.to_string()
        };
        BlockError::Command { command: "blkid".into(), message }
    })?;
    // blkid exits 2 when it finds nothing.
    match out.status.code() {
        Some(0) => {
            let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Ok(if t.is_empty() { Some("unknown".into()) } else { Some(t) })
        }
        Some(2) => Ok(None),
        _ => Err(BlockError::Command {
            command: "blkid".into(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

/// Opens a block device exclusively for a moment: fails with `EBUSY` when it is mounted,
/// is a swap area, or is held by another device (RAID, LVM).
pub fn check_not_in_use(path: &Path) -> Result<(), BlockError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(path)
        .map(drop)
        .map_err(|source| BlockError::Io { path: path.into(), err: source })
}

/// Size of a block device in bytes (`BLKGETSIZE64`).
pub fn device_size(path: &Path) -> Result<u64, BlockError> {
    let f = std::fs::File::open(path).map_err(|source| BlockError::Io { path: path.into(), err: source })?;
    let mut size: u64 = 0;
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: u64 = (2 << 30) | (8 << 16) | (0x12 << 8) | 114;
    // SAFETY: the ioctl writes one u64 into `size`, which lives across the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64 as _, &mut size as *mut u64) };
    if r != 0 {
        return Err(BlockError::Io { path: path.into(), err: io::Error::last_os_error() });
    }
    Ok(size)
}

/// The kernel name (`vda`, `loop3`, `dm-0`) of a block device node, for `/proc/diskstats`:
/// by its device number, as a node's own name (`/dev/mapper/tier`) need not be the kernel's.
pub fn kernel_name(sys_root: &Path, dev: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(dev).ok()?.rdev();
    let link = std::fs::read_link(sys_root.join(format!("dev/block/{}:{}", libc::major(rdev), libc::minor(rdev))));
    match link {
        Ok(l) => Some(l.file_name()?.to_string_lossy().to_string()),
        Err(_) => Some(std::fs::canonicalize(dev).ok()?.file_name()?.to_string_lossy().to_string()),
    }
}

/// The device number (`major`, `minor`) of the disk the kernel calls `name`, as the
/// kernel's messages about it print it.
pub fn device_number(sys_root: &Path, name: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(sys_root.join("class/block").join(name).join("dev")).ok()?;
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The size of the disk the kernel calls `name`, from sysfs (in 512-byte sectors there).
pub fn disk_size(sys_root: &Path, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(sys_root.join("class/block").join(name).join("size")).ok()?;
    text.trim().parse::<u64>().ok().map(|sectors| sectors * 512)
}

/// The kernel name of the block device holding `file` (its filesystem's device).
pub fn device_of_file(sys_root: &Path, file: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(file).ok()?.dev();
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let link = std::fs::read_link(sys_root.join(format!("dev/block/{maj}:{min}"))).ok()?;
    Some(link.file_name()?.to_string_lossy().to_string())
}

/// Where on a request queue the tier lies: a whole disk, or a partition's sectors on it
/// (the tracepoints name a partition's requests by its disk and absolute sector).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueExtent {
    pub dev: (u32, u32),
    pub first_sector: u64,
    /// `None`: to the end of the disk.
    pub sectors: Option<u64>,
}

/// The request queue under the disk the kernel calls `name`: through device-mapper
/// targets with one device under them (dm-crypt is bio-based: its requests are its
/// device's), to a loop device or a disk, or a partition's sectors on its disk.
/// `None` where it spans several devices.
pub fn request_queue(sys_root: &Path, name: &str) -> Option<QueueExtent> {
    let mut name = name.to_string();
    // A handful of layers at most; a loop in sysfs must not hang tierd.
    for _ in 0..8 {
        let dir = sys_root.join("class/block").join(&name);
        match holders_below(&dir).as_slice() {
            [one] => name = one.clone(),
            [_, _, ..] => return None,
            [] if dir.join("partition").exists() => {
                let number = |f: &str| std::fs::read_to_string(dir.join(f)).ok()?.trim().parse::<u64>().ok();
                let disk = std::fs::canonicalize(&dir).ok()?.parent()?.file_name()?.to_string_lossy().to_string();
                return Some(QueueExtent {
                    dev: device_number(sys_root, &disk)?,
                    first_sector: number("start")?,
                    sectors: Some(number("size")?),
                });
            }
            [] => return Some(QueueExtent { dev: device_number(sys_root, &name)?, first_sector: 0, sectors: None }),
        }
    }
    None
}

/// The devices a device-mapper target (or md) is built on: sysfs's `slaves`.
fn holders_below(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("slaves"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect())
        .unwrap_or_default()
}

/// The kernel name of the whole drive under the disk the kernel calls `name`: through a
/// device-mapper target with one device under it (dm-crypt), a loop device's backing
/// file and a partition, down to the disk itself. `None` where it spans several.
pub fn whole_drive(sys_root: &Path, name: &str) -> Option<String> {
    let mut name = name.to_string();
    // A handful of layers at most; a loop in sysfs must not hang tierd.
    for _ in 0..8 {
        let dir = sys_root.join("class/block").join(&name);
        name = match holders_below(&dir).as_slice() {
            [one] => one.clone(),
            [_, _, ..] => return None,
            [] => match std::fs::read_to_string(dir.join("loop/backing_file")) {
                Ok(file) => device_of_file(sys_root, Path::new(file.trim()))?,
                Err(_) if dir.join("partition").exists() => {
                    std::fs::canonicalize(&dir).ok()?.parent()?.file_name()?.to_string_lossy().to_string()
                }
                Err(_) => return Some(name),
            },
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_not_a_block_device() {
        assert!(!is_block_device(Path::new("/proc/self/status")));
        assert!(!is_block_device(Path::new("/does/not/exist")));
    }

    #[test]
    fn finds_loops_in_a_sysfs_fixture() {
        let t = tempfile::tempdir().unwrap();
        for (name, backing) in [("loop0", "/a/tier.swap"), ("loop1", "/b/other"), ("loop2", "/a/tier.swap")] {
            let d = t.path().join("block").join(name).join("loop");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("backing_file"), format!("{backing}\n")).unwrap();
        }
        std::fs::create_dir_all(t.path().join("block/vda")).unwrap();
        let found = loops_backed_by(t.path(), Path::new("/a/tier.swap"));
        assert_eq!(found, vec![PathBuf::from("/dev/loop0"), PathBuf::from("/dev/loop2")]);
        // By directory: whole path components, so /ab is not under /a.
        std::fs::create_dir_all(t.path().join("block/loop3/loop")).unwrap();
        std::fs::write(t.path().join("block/loop3/loop/backing_file"), "/ab/tier.swap\n").unwrap();
        assert_eq!(loops_under(t.path(), Path::new("/a")), found);
        assert_eq!(loops_under(t.path(), Path::new("/b")), vec![PathBuf::from("/dev/loop1")]);
    }

    #[test]
    fn the_mappings_over_a_loop_device_are_its_dm_holders() {
        let sys = tempfile::tempdir().unwrap();
        let holder = sys.path().join("devices/virtual/block/dm-0");
        std::fs::create_dir_all(holder.join("dm")).unwrap();
        std::fs::write(holder.join("dm/name"), "tierd-tier-loop0\n").unwrap();
        let holders = sys.path().join("block/loop0/holders");
        std::fs::create_dir_all(&holders).unwrap();
        std::os::unix::fs::symlink(&holder, holders.join("dm-0")).unwrap();
        assert_eq!(mappings_over(sys.path(), "loop0"), ["tierd-tier-loop0"]);
        assert!(mappings_over(sys.path(), "loop1").is_empty());
    }

    #[test]
    fn a_disks_size_is_its_sysfs_sectors() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("class/block/nvme0n1")).unwrap();
        std::fs::write(t.path().join("class/block/nvme0n1/size"), "1953525168\n").unwrap();
        assert_eq!(disk_size(t.path(), "nvme0n1"), Some(1_000_204_886_016));
        assert_eq!(disk_size(t.path(), "sdz"), None);
    }

    #[test]
    fn the_whole_drive_is_found_under_dm_crypt_and_a_partition() {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path();
        let class = sys.join("class/block");
        std::fs::create_dir_all(&class).unwrap();
        // As sysfs lays a partition out: inside its disk's directory, linked from class/block.
        let part = sys.join("devices/pci0000:00/nvme/nvme0/nvme0n1/nvme0n1p3");
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(part.join("partition"), "3\n").unwrap();
        std::os::unix::fs::symlink(&part, class.join("nvme0n1p3")).unwrap();
        std::fs::create_dir_all(class.join("dm-0/slaves/nvme0n1p3")).unwrap();
        std::fs::create_dir_all(class.join("md0/slaves/sda")).unwrap();
        std::fs::create_dir_all(class.join("md0/slaves/sdb")).unwrap();
        std::fs::create_dir_all(class.join("vda")).unwrap();
        assert_eq!(whole_drive(sys, "dm-0").as_deref(), Some("nvme0n1"));
        assert_eq!(whole_drive(sys, "nvme0n1p3").as_deref(), Some("nvme0n1"));
        assert_eq!(whole_drive(sys, "vda").as_deref(), Some("vda"));
        assert_eq!(whole_drive(sys, "md0"), None, "a span of two drives has no one drive's health");
        // A cycle (no real sysfs has one) ends instead of hanging.
        std::fs::create_dir_all(class.join("dm-1/slaves/dm-2")).unwrap();
        std::fs::create_dir_all(class.join("dm-2/slaves/dm-1")).unwrap();
        assert_eq!(whole_drive(sys, "dm-1"), None);
    }

    #[test]
    fn the_request_queue_is_found_under_dm_crypt_and_a_partition_is_its_disks_sectors() {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path();
        let class = sys.join("class/block");
        let disk = sys.join("devices/virtual/block/nvme0n1");
        let part = disk.join("nvme0n1p3");
        std::fs::create_dir_all(&part).unwrap();
        std::fs::create_dir_all(&class).unwrap();
        std::os::unix::fs::symlink(&disk, class.join("nvme0n1")).unwrap();
        std::os::unix::fs::symlink(&part, class.join("nvme0n1p3")).unwrap();
        for (dir, text) in [(&disk, "259:0"), (&part, "259:3")] {
            std::fs::write(dir.join("dev"), format!("{text}\n")).unwrap();
        }
        std::fs::write(part.join("partition"), "3\n").unwrap();
        std::fs::write(part.join("start"), "2048\n").unwrap();
        std::fs::write(part.join("size"), "4096\n").unwrap();
        std::fs::create_dir_all(class.join("dm-0/slaves/loop3")).unwrap();
        std::fs::create_dir_all(class.join("dm-1/slaves/nvme0n1p3")).unwrap();
        std::fs::create_dir_all(class.join("loop3")).unwrap();
        std::fs::write(class.join("loop3/dev"), "7:3\n").unwrap();
        std::fs::create_dir_all(class.join("md0/slaves/sda")).unwrap();
        std::fs::create_dir_all(class.join("md0/slaves/sdb")).unwrap();
        let whole = |dev| Some(QueueExtent { dev, first_sector: 0, sectors: None });
        assert_eq!(request_queue(sys, "dm-0"), whole((7, 3)), "dm-crypt over a loop device: the loop's queue");
        assert_eq!(request_queue(sys, "nvme0n1"), whole((259, 0)));
        let part_extent = Some(QueueExtent { dev: (259, 0), first_sector: 2048, sectors: Some(4096) });
        assert_eq!(request_queue(sys, "dm-1"), part_extent, "a partition's requests are its disk's");
        assert_eq!(request_queue(sys, "md0"), None);
    }

    #[test]
    fn device_of_root_file_is_known() {
        assert!(device_of_file(Path::new("/sys"), Path::new("/etc/hostname")).is_some());
    }
}
