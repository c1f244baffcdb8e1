//! Draining the tier (`tierctl tier drain`): every page on it read back into DRAM, so
//! the device can be replaced. It is done only where all of it fits, judged here.
//!
//! The kernel reads the pages back as `swapoff` runs, each charged to its owner's
//! cgroup. If DRAM runs out half-way, `swapoff` fails after reading back what it could
//! and the tenants are left squeezed under the budget, so a drain that would not fit is
//! refused up front, with the numbers.

use crate::size::{MIB, human};

/// DRAM kept free beyond what the tier holds: tenants allocate while the pages come
/// back. 64 MiB, or an eighth of a budget smaller than 512 MiB (the margin alone would
/// refuse every drain under a 64 MiB budget).
pub fn margin(dram_budget: u64) -> u64 {
    (64 * MIB).min(dram_budget / 8)
}

/// What a drain would have to fit, measured just before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrainFigures {
    /// Bytes on the tier now.
    pub tier_used: u64,
    pub dram_budget: u64,
    /// What tierd's tenants hold in DRAM now (the group's usage: what its limit counts).
    pub dram_used: u64,
    /// The host's available memory (`MemAvailable`): the budget may promise more than
    /// the host has free.
    pub host_available: u64,
}

impl DrainFigures {
    /// DRAM the pages can come back into: the budget's room, at most what the host has.
    pub fn room(&self) -> u64 {
        self.dram_budget.saturating_sub(self.dram_used).min(self.host_available)
    }

    pub fn margin(&self) -> u64 {
        margin(self.dram_budget)
    }
}

/// Why a drain is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DrainRefused {
    #[error(
        "cannot drain the tier: it holds {}, and DRAM has room for {} ({} of the {} budget in use, {} available \
         on the host, {} kept free); stop or shrink tenants, or restart tierd with a larger --dram-budget, then \
         drain",
        human(f.tier_used), human(f.room().saturating_sub(f.margin())), human(f.dram_used), human(f.dram_budget),
        human(f.host_available), human(f.margin())
    )]
    DoesNotFit { f: DrainFigures },
}

/// Whether the tier's pages fit back into DRAM with [`margin`] to spare.
pub fn judge(f: DrainFigures) -> Result<(), DrainRefused> {
    if f.tier_used.saturating_add(f.margin()) > f.room() {
        return Err(DrainRefused::DoesNotFit { f });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::GIB;

    fn figures(tier_used: u64, dram_used: u64, host_available: u64) -> DrainFigures {
        DrainFigures { tier_used, dram_budget: 2 * GIB, dram_used, host_available }
    }

    #[test]
    fn drains_what_fits_under_the_budget_with_margin() {
        assert_eq!(judge(figures(GIB, 512 * MIB, 8 * GIB)), Ok(()));
        assert!(judge(figures(0, 2 * GIB, 8 * GIB)).is_err(), "no margin left at all");
        assert_eq!(judge(figures(0, 2 * GIB - 64 * MIB, 8 * GIB)), Ok(()), "an empty tier needs only the margin");
    }

    #[test]
    fn a_small_budget_keeps_an_eighth_free_not_64_mib() {
        let f =
            |tier_used, dram_used| DrainFigures { tier_used, dram_budget: 64 * MIB, dram_used, host_available: GIB };
        assert_eq!(judge(f(40 * MIB, 16 * MIB)), Ok(()), "40 MiB + 8 MiB kept free fit in 48 MiB of room");
        let refused = judge(f(44 * MIB, 16 * MIB)).unwrap_err().to_string();
        assert!(refused.contains("8 MiB kept free"), "{refused}");
    }

    #[test]
    fn refuses_with_the_numbers_when_the_budget_or_the_host_is_short() {
        let short_budget = judge(figures(GIB, 1536 * MIB, 8 * GIB)).unwrap_err().to_string();
        assert!(short_budget.contains("holds 1 GiB"), "{short_budget}");
        assert!(short_budget.contains("room for 448 MiB"), "{short_budget}");
        assert!(short_budget.contains("1.5 GiB of the 2 GiB budget in use"), "{short_budget}");
        // The budget has room, the host does not.
        let short_host = judge(figures(GIB, 0, 700 * MIB)).unwrap_err().to_string();
        assert!(short_host.contains("700 MiB available on the host"), "{short_host}");
    }
}
