//! An NVMe drive's own word on its wear: the SMART / health information log page
//! (log identifier 02h, 512 bytes), read with the admin pass-through ioctl on the
//! namespace's block device, as `nvme smart-log` reads it. Parsing is
//! `tierd_core::wear::DriveHealth::from_smart_log`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The log page's size.
pub const SMART_LOG_BYTES: usize = 512;

/// `struct nvme_passthru_cmd` (`nvme_admin_cmd`) from `<linux/nvme_ioctl.h>`.
#[repr(C)]
#[derive(Debug, Default)]
struct AdminCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(std::mem::size_of::<AdminCmd>() == 72);
/// `_IOWR('N', 0x41, struct nvme_admin_cmd)`.
const NVME_IOCTL_ADMIN_CMD: u64 =
    (3 << 30) | ((std::mem::size_of::<AdminCmd>() as u64) << 16) | ((b'N' as u64) << 8) | 0x41;
const _: () = assert!(NVME_IOCTL_ADMIN_CMD == 0xC048_4E41);

/// Get Log Page, for the controller as a whole (every namespace: NSID FFFFFFFFh).
const GET_LOG_PAGE: u8 = 0x02;
const SMART_LOG_ID: u32 = 0x02;
const ALL_NAMESPACES: u32 = 0xFFFF_FFFF;

/// The drive's SMART / health log, through `device` (an NVMe namespace's block device,
/// such as `/dev/nvme0n1`). Needs `CAP_SYS_ADMIN`; a device that is not NVMe answers
/// `ENOTTY`.
pub fn smart_log(device: &Path) -> io::Result<[u8; SMART_LOG_BYTES]> {
    let file = File::open(device)?;
    let mut log = [0u8; SMART_LOG_BYTES];
    let dwords = (SMART_LOG_BYTES / 4) as u32;
    let mut cmd = AdminCmd {
        opcode: GET_LOG_PAGE,
        nsid: ALL_NAMESPACES,
        addr: log.as_mut_ptr() as u64,
        data_len: SMART_LOG_BYTES as u32,
        // Bits 31:16 the number of dwords less one, bits 7:0 the log page.
        cdw10: ((dwords - 1) << 16) | SMART_LOG_ID,
        ..AdminCmd::default()
    };
    // SAFETY: `cmd` is a valid `nvme_admin_cmd` whose buffer `log` outlives the call
    // and is `data_len` bytes long; the kernel writes at most that many into it.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut AdminCmd) };
    match rc {
        0 => Ok(log),
        rc if rc < 0 => Err(io::Error::last_os_error()),
        // A positive answer is the command's NVMe status: the drive refused it.
        status => Err(io::Error::other(format!("the drive answered NVMe status {status:#x}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_that_is_not_nvme_is_refused_not_misread() {
        // /dev/null is a character device: the ioctl is not its to answer.
        let err = smart_log(Path::new("/dev/null")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY), "{err}");
        assert!(smart_log(Path::new("/nonexistent/nvme0n1")).is_err());
    }
}
