//! The kernel's log (`/dev/kmsg`), read from where tierd opened it: the only place the
//! kernel says that a swap write or read failed ("Write-error on swap-device (M:m:sector)").
//!
//! Written by hand: crates for it (`rmesg`) stream with a blocking or async reader, and
//! tierd wants what arrived since its last pass, without waiting, in a few lines.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::PathError;

/// A reader of the kernel log that sees only records logged after it was opened.
#[derive(Debug)]
pub struct KernelLog {
    file: File,
}

impl KernelLog {
    /// Opens `/dev/kmsg` (or a fixture) non-blocking, at its end. Needs root on most hosts.
    pub fn open(path: &Path) -> Result<KernelLog, PathError> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| PathError::new(path, e))?;
        // SEEK_END on /dev/kmsg moves past every record logged so far; a fixture file
        // is read from its start.
        if crate::blockdev::is_char_device(path) {
            file.seek(SeekFrom::End(0)).map_err(|e| PathError::new(path, e))?;
        }
        Ok(KernelLog { file })
    }

    /// The messages logged since the last call, oldest first (text only, without the
    /// record's priority, sequence and time).
    pub fn read_new(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        // One read returns one record of at most 8 KiB (a fixture file returns many).
        let mut buf = vec![0u8; 8192];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend(String::from_utf8_lossy(&buf[..n]).lines().filter_map(message).map(str::to_string)),
                // The ring wrapped between passes: records were lost, and reading goes on.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break, // EAGAIN: nothing more yet
            }
        }
        out
    }
}

/// The message of one `/dev/kmsg` line, `PRI,SEQ,USEC,FLAGS;MESSAGE`; continuation lines
/// (` KEY=VALUE`, the device a message is about) are not messages.
fn message(line: &str) -> Option<&str> {
    if line.starts_with(' ') {
        return None;
    }
    line.split_once(';').map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_give_their_message_and_continuations_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        std::fs::write(
            &path,
            "1,812,9912345,-;Write-error on swap-device (254:0:20480)\n SUBSYSTEM=block\n DEVICE=b254:0\n\
             6,813,9912400,-;virtio_blk virtio1: [vda] 1048576 512-byte logical blocks\n",
        )
        .unwrap();
        let mut log = KernelLog::open(&path).unwrap();
        assert_eq!(
            log.read_new(),
            vec![
                "Write-error on swap-device (254:0:20480)",
                "virtio_blk virtio1: [vda] 1048576 512-byte logical blocks"
            ]
        );
        assert!(log.read_new().is_empty(), "each record is read once");
    }

    #[test]
    fn the_real_log_opens_at_its_end_when_readable() {
        // Root on the test machines; elsewhere the open is refused, which says so.
        let Ok(mut log) = KernelLog::open(Path::new("/dev/kmsg")) else { return };
        let first = log.read_new();
        assert!(first.len() < 64, "opened at the end, not at the start of the ring: {} records", first.len());
    }
}
