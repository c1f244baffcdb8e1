//! An encrypted tier: a dm-crypt mapping (AES-XTS) over the tier's block device, with a
//! key made at each start that lives only in tierd's memory for a moment and then in the
//! kernel's. Swapped-out memory is unreadable once the mapping is gone (a reboot, a
//! stolen disk), as the seeds' host-wide per-boot encryption of tiered memory asks.
//!
//! Set up with `dmsetup`, which reads the table from its standard input, so the key never
//! appears on a command line (`/proc/PID/cmdline` is world-readable).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::blockdev::BlockError;

/// The cipher: what dm-crypt and cryptsetup's plain mode use for disks and swap.
pub const CIPHER: &str = "aes-xts-plain64";
/// AES-256 in XTS mode takes two 256-bit keys.
const KEY_BYTES: usize = 64;

/// Whether the kernel has device-mapper (sysfs at `sys`), which every mapping needs.
pub fn has_device_mapper(sys: &Path) -> bool {
    sys.join("class/misc/device-mapper").exists()
}

/// The mapping's node, `/dev/mapper/NAME`.
pub fn mapper_path(name: &str) -> PathBuf {
    Path::new("/dev/mapper").join(name)
}

/// Maps `name` over `device` (`sectors` of 512 bytes) with a fresh random key.
pub fn open(name: &str, device: &Path, sectors: u64) -> Result<PathBuf, BlockError> {
    let mut key = [0u8; KEY_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|source| BlockError::Io { path: "/dev/urandom".into(), err: source })?;
    let mut table = format!("0 {sectors} crypt {CIPHER} ").into_bytes();
    for b in key {
        table.extend_from_slice(format!("{b:02x}").as_bytes());
    }
    table.extend_from_slice(format!(" 0 {} 0\n", device.display()).as_bytes());
    let result = dmsetup(&["create", name], Some(&table));
    // The key is the kernel's alone from here.
    key.fill(0);
    table.fill(0);
    result?;
    Ok(mapper_path(name))
}

/// Removes the mapping (after `swapoff`: the kernel refuses while it is open).
pub fn close(name: &str) -> Result<(), BlockError> {
    dmsetup(&["remove", name], None)
}

/// Whether a mapping of this name exists.
pub fn is_open(name: &str) -> bool {
    crate::blockdev::is_block_device(&mapper_path(name))
}

fn dmsetup(args: &[&str], stdin: Option<&[u8]>) -> Result<(), BlockError> {
    let command = format!("dmsetup {}", args.join(" "));
    let failed = |message: String| BlockError::Command { command: command.clone(), message };
    let mut child = Command::new("dmsetup")
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("{e} (dmsetup is in the dmsetup package)")))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input).map_err(|e| failed(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; ")));
    }
    Ok(())
}
