//! Admission: does a new tenant fit in DRAM + tier?
//!
//! Capacity is the DRAM budget plus what the tier holds, at most ratio × DRAM. A tenant
//! counts its declared size or its measured footprint, whichever is larger; reserves
//! and pinned memory must fit in DRAM alone. DRAM kept by tenants off the tier
//! (`--no-tier`) backs no tier: the ratio applies to the DRAM left.

use serde::Serialize;

use crate::size::human;

/// What the host can hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Capacity {
    pub dram_budget: u64,
    pub ratio: f64,
    pub tier_size: u64,
    /// DRAM set aside for tenants kept off the tier.
    pub dram_kept: u64,
}

impl Capacity {
    /// Bytes of tier that count: the tier's size, at most ratio × the DRAM not kept
    /// off the tier.
    pub fn tier_bytes(&self) -> u64 {
        let tiered_dram = self.dram_budget.saturating_sub(self.dram_kept);
        self.tier_size.min((tiered_dram as f64 * self.ratio) as u64)
    }

    /// DRAM + ratio × DRAM (limited by the tier's real size).
    pub fn total(&self) -> u64 {
        self.dram_budget + self.tier_bytes()
    }
}

/// One tenant's claim on capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Claim {
    pub size: u64,
    pub reserve: u64,
    pub pinned: u64,
    /// Kept wholly in DRAM: its size comes out of what the ratio applies to.
    pub off_tier: bool,
}

/// Why a tenant was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// does not fit in DRAM + tier
    #[error(
        "tenant {name} ({}) does not fit: {} of {} already committed (DRAM budget {} + tier {}); \
         raise the DRAM budget or the ratio, give a bigger tier, or remove a tenant",
        human(*size), human(*committed), human(*capacity), human(*budget), human(*tier)
    )]
    Capacity { name: String, size: u64, committed: u64, capacity: u64, budget: u64, tier: u64 },
    /// reserves exceed DRAM
    #[error(
        "tenant {name}: reserve {} does not fit: {} of the {} DRAM budget is already reserved or pinned; \
         lower --reserve or raise the budget",
        human(*reserve), human(*reserved), human(*budget)
    )]
    Reserve { name: String, reserve: u64, reserved: u64, budget: u64 },
}

/// Checks whether `new` fits beside `existing`.
pub fn admit(cap: &Capacity, existing: &[Claim], name: &str, new: Claim) -> Result<(), AdmissionError> {
    let cap = &Capacity { dram_kept: cap.dram_kept + if new.off_tier { new.size } else { 0 }, ..*cap };
    let committed: u64 = existing.iter().map(|c| c.size.max(c.pinned)).sum();
    let size = new.size.max(new.pinned);
    if committed + size > cap.total() {
        return Err(AdmissionError::Capacity {
            name: name.to_string(),
            size,
            committed,
            capacity: cap.total(),
            budget: cap.dram_budget,
            tier: cap.tier_bytes(),
        });
    }
    let reserved: u64 = existing.iter().map(|c| c.reserve.max(c.pinned)).sum();
    let want = new.reserve.max(new.pinned);
    if reserved + want > cap.dram_budget {
        return Err(AdmissionError::Reserve {
            name: name.to_string(),
            reserve: want,
            reserved,
            budget: cap.dram_budget,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::GIB;

    const CAP: Capacity = Capacity { dram_budget: 4 * GIB, ratio: 1.0, tier_size: 4 * GIB, dram_kept: 0 };

    fn sized(size: u64) -> Claim {
        Claim { size, ..Claim::default() }
    }

    #[test]
    fn fits_up_to_dram_plus_ratio() {
        assert_eq!(CAP.total(), 8 * GIB);
        assert!(admit(&CAP, &[sized(4 * GIB), sized(2 * GIB)], "c", sized(2 * GIB)).is_ok());
        let e = admit(&CAP, &[sized(4 * GIB), sized(2 * GIB)], "c", sized(3 * GIB)).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("tenant c (3 GiB) does not fit: 6 GiB of 8 GiB"), "{msg}");
    }

    #[test]
    fn a_small_tier_limits_capacity() {
        let cap = Capacity { tier_size: GIB, ..CAP };
        assert_eq!(cap.total(), 5 * GIB);
        let cap = Capacity { ratio: 0.5, ..CAP };
        assert_eq!(cap.total(), 6 * GIB);
    }

    #[test]
    fn reserves_and_pinned_memory_must_fit_in_dram() {
        let existing = [Claim { size: GIB, reserve: 3 * GIB, ..Claim::default() }];
        let e = admit(&CAP, &existing, "db", Claim { size: GIB, reserve: 2 * GIB, ..Claim::default() }).unwrap_err();
        assert!(matches!(e, AdmissionError::Reserve { .. }), "{e}");
        let e = admit(&CAP, &existing, "vm", Claim { size: GIB, pinned: 2 * GIB, ..Claim::default() }).unwrap_err();
        assert!(matches!(e, AdmissionError::Reserve { .. }), "{e}");
        assert!(admit(&CAP, &existing, "ok", Claim { size: GIB, reserve: GIB, ..Claim::default() }).is_ok());
    }

    #[test]
    fn dram_kept_off_the_tier_backs_no_tier() {
        // 4 GiB at ratio 1 holds 8 GiB; 2 GiB kept off the tier leaves 2 GiB of DRAM
        // backing 2 GiB of tier: 6 GiB in all.
        let kept = Claim { size: 2 * GIB, reserve: 2 * GIB, pinned: 0, off_tier: true };
        assert!(admit(&CAP, &[sized(3 * GIB)], "keep", kept).is_ok());
        let e = admit(&CAP, &[sized(5 * GIB)], "keep", kept).unwrap_err();
        assert!(e.to_string().contains("does not fit: 5 GiB of 6 GiB already committed"), "{e}");
        let cap = Capacity { dram_kept: 2 * GIB, ..CAP };
        assert_eq!(cap.total(), 6 * GIB);
        assert!(admit(&cap, &[kept, sized(3 * GIB)], "w", sized(GIB)).is_ok());
        assert!(admit(&cap, &[kept, sized(3 * GIB)], "w", sized(GIB + 1)).is_err());
    }
}
