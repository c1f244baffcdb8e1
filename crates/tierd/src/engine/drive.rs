//! The tier drive's health log, read on a thread of its own: an admin command to a
//! drive that hangs waits out the driver's admin timeout (a minute by default), which
//! the control loop must never do.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use tierd_core::wear::DriveHealth;

/// How often the drive is asked: its log changes slowly, and each read is a command to it.
pub const EVERY: Duration = Duration::from_secs(60);

/// One read of the log: the health, or why it could not be read.
type Answer = Result<DriveHealth, String>;

/// The reader thread's answers, and what the engine makes of them.
pub struct DriveWatch {
    device: PathBuf,
    answers: Receiver<Answer>,
    /// The newest answer; `None` before the first, or once the drive stopped answering.
    last: Option<Answer>,
    /// When the thread last answered (or was started).
    heard_at: Instant,
    /// The drive has not answered for this long: it hangs.
    stale_after: Duration,
}

/// What a look at the watch has to say, once each time it turns.
#[derive(Debug, PartialEq, Eq)]
pub enum Said {
    Failed(String),
    Hangs(Duration),
}

impl DriveWatch {
    /// Reads `device`'s NVMe health log now and every [`EVERY`].
    pub fn start(device: &Path) -> std::io::Result<Self> {
        let dev = device.to_path_buf();
        let read = move || {
            tierd_sys::nvme::smart_log(&dev).map(|log| DriveHealth::from_smart_log(&log)).map_err(|e| e.to_string())
        };
        Self::start_with(device, read, EVERY)
    }

    /// `read` called on a thread now and every `every`; the thread ends at the first
    /// answer after the watch is dropped.
    fn start_with(device: &Path, read: impl Fn() -> Answer + Send + 'static, every: Duration) -> std::io::Result<Self> {
        let (tx, answers) = mpsc::channel();
        std::thread::Builder::new().name("drive-health".into()).spawn(move || {
            while tx.send(read()).is_ok() {
                std::thread::sleep(every);
            }
        })?;
        let (last, heard_at, stale_after) = (None, Instant::now(), every * 3);
        Ok(Self { device: device.to_path_buf(), answers, last, heard_at, stale_after })
    }

    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Takes the answers that came in; says a read that failed (once, until one works)
    /// and a drive that stopped answering (once, dropping its last answer).
    pub fn look(&mut self) -> Option<Said> {
        let mut said = None;
        // Empty, or (were the thread to panic) disconnected: the drive is then no longer heard.
        while let Ok(answer) = self.answers.try_recv() {
            let failed_before = matches!(self.last, Some(Err(_)));
            if let (Err(e), false) = (&answer, failed_before) {
                said = Some(Said::Failed(e.clone()));
            }
            self.last = Some(answer);
            self.heard_at = Instant::now();
        }
        let silent = self.heard_at.elapsed();
        if silent >= self.stale_after && self.last.take().is_some() {
            said = Some(Said::Hangs(silent));
        }
        said
    }

    /// The drive's health as it last answered.
    pub fn health(&self) -> Option<DriveHealth> {
        self.last.as_ref().and_then(|a| a.as_ref().ok().copied())
    }
}

impl Said {
    /// The event's words, for the drive at `device`.
    pub fn words(&self, device: &Path) -> String {
        match self {
            Said::Failed(e) => format!("cannot read the tier drive's health log from {}: {e}", device.display()),
            Said::Hangs(d) => format!(
                "the tier drive {} has not answered a health-log read for {:.0} s: it may hang; its health is unknown",
                device.display(),
                d.as_secs_f64()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Answer {
        let mut log = [0u8; tierd_sys::nvme::SMART_LOG_BYTES];
        log[5] = 7; // percent of its rated life used
        Ok(DriveHealth::from_smart_log(&log))
    }

    /// Waits up to 10 s for `want` to come out of a look.
    fn until(w: &mut DriveWatch, want: impl Fn(&Option<Said>, &DriveWatch) -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let said = w.look();
            if want(&said, w) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn a_drive_that_answers_is_heard_and_a_failed_read_is_said_once() {
        let n = std::sync::atomic::AtomicU32::new(0);
        let read = move || match n.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
            0 => healthy(),
            _ => Err("Input/output error".to_string()),
        };
        let mut w = DriveWatch::start_with(Path::new("/dev/nvme9n1"), read, Duration::from_millis(200)).unwrap();
        assert!(until(&mut w, |_, w| w.health().is_some_and(|h| h.percentage_used == 7)));
        let failed =
            |s: &Option<Said>, _: &DriveWatch| matches!(s, Some(Said::Failed(e)) if e.contains("Input/output"));
        assert!(until(&mut w, failed), "the first failure is said");
        assert!(w.health().is_none(), "its last good answer is not passed off as news");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(w.look(), None, "said once, not at the next failed read");
    }

    #[test]
    fn a_drive_that_stops_answering_is_said_to_hang_and_the_loop_never_waits_for_it() {
        let (release, blocked) = mpsc::channel::<()>();
        let first = std::sync::atomic::AtomicBool::new(true);
        let read = move || {
            if !first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                let _ = blocked.recv(); // hangs as a drive past its admin timeout
            }
            healthy()
        };
        let mut w = DriveWatch::start_with(Path::new("/dev/nvme9n1"), read, Duration::from_millis(20)).unwrap();
        assert!(until(&mut w, |_, w| w.health().is_some()));
        let look = Instant::now();
        let hangs = |s: &Option<Said>, w: &DriveWatch| matches!(s, Some(Said::Hangs(_))) && w.health().is_none();
        assert!(until(&mut w, hangs), "said to hang, its health unknown");
        assert!(look.elapsed() < Duration::from_secs(10));
        let words = Said::Hangs(Duration::from_secs(180)).words(w.device());
        assert!(words.contains("/dev/nvme9n1 has not answered a health-log read for 180 s"), "{words}");
        drop(release);
    }
}
