//! Swap I/O errors on the tier device, as the kernel logs them, and what tierd does then.
//!
//! A swap write that fails leaves its page dirty in DRAM (nothing is lost, nothing freed);
//! a read that fails leaves the page unreadable, and the process that touches it gets
//! `SIGBUS`. So at the first error tierd stops putting pages on the tier: no demotion, no
//! quotas, every tenant kept off it. Health stays red until the tier is replaced.

use serde::{Deserialize, Serialize};

/// A failed swap I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoFault {
    Read,
    Write,
}

/// Which swap I/O error `message` reports on the device numbered `dev`, if it does. The
/// kernel's words (mm/page_io.c, 5.x to 6.18): `Write-error on swap-device (M:m:SECTOR)`
/// and `Read-error on swap-device (M:m:SECTOR)`, rate-limited to 10 per 5 s.
pub fn swap_io_error(message: &str, dev: (u32, u32)) -> Option<IoFault> {
    let (kind, rest) = message.split_once("-error on swap-device (")?;
    let fault = match kind.trim() {
        "Write" => IoFault::Write,
        "Read" => IoFault::Read,
        _ => return None,
    };
    let mut parts = rest.trim_end_matches(')').split(':');
    let major = parts.next()?.parse::<u32>().ok()?;
    let minor = parts.next()?.parse::<u32>().ok()?;
    ((major, minor) == dev).then_some(fault)
}

/// The swap I/O errors seen on the tier since tierd set it up. The kernel rate-limits
/// its messages, so these are lower bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierFaults {
    pub read_errors: u64,
    pub write_errors: u64,
}

impl TierFaults {
    /// The tier has failed an I/O: nothing more goes onto it.
    pub fn failing(&self) -> bool {
        self.read_errors + self.write_errors > 0
    }

    /// Counts the errors on `dev` among `messages`; returns those counted now.
    pub fn count(&mut self, messages: &[String], dev: (u32, u32)) -> TierFaults {
        let mut new = TierFaults::default();
        for fault in messages.iter().filter_map(|m| swap_io_error(m, dev)) {
            match fault {
                IoFault::Read => new.read_errors += 1,
                IoFault::Write => new.write_errors += 1,
            }
        }
        self.read_errors += new.read_errors;
        self.write_errors += new.write_errors;
        new
    }

    /// `at least 3 failed writes and 1 failed read`.
    pub fn describe(&self) -> String {
        let n = |count: u64, what: &str| format!("{count} failed {what}{}", if count == 1 { "" } else { "s" });
        match (self.write_errors, self.read_errors) {
            (0, r) => format!("at least {}", n(r, "read")),
            (w, 0) => format!("at least {}", n(w, "write")),
            (w, r) => format!("at least {} and {}", n(w, "write"), n(r, "read")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_swap_errors_are_counted_on_the_tier_device_only() {
        let log: Vec<String> = [
            "Write-error on swap-device (254:0:20480)",
            "Write-error on swap-device (254:0:20488)",
            "Read-error on swap-device (254:0:8)",
            "Write-error on swap-device (7:3:16)", // another swap area
            "I/O error, dev dm-0, sector 20480 op 0x1:(WRITE) flags 0x800",
            "Read-error on swap-device (dm-0:8)", // not a device number
        ]
        .map(String::from)
        .to_vec();
        let mut faults = TierFaults::default();
        assert!(!faults.failing());
        let new = faults.count(&log, (254, 0));
        assert_eq!(new, TierFaults { read_errors: 1, write_errors: 2 });
        assert!(faults.failing());
        faults.count(&log[2..3], (254, 0));
        assert_eq!(faults, TierFaults { read_errors: 2, write_errors: 2 }, "counts add up across passes");
        assert_eq!(faults.describe(), "at least 2 failed writes and 2 failed reads");
        assert_eq!(TierFaults { read_errors: 1, write_errors: 0 }.describe(), "at least 1 failed read");
    }
}
