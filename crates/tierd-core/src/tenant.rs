//! What an operator asks for a tenant: its size, guaranteed DRAM, cap and weight.

use serde::{Deserialize, Serialize};

use crate::name::TenantName;
use crate::size::human;

/// Default weight of a tenant when DRAM is short.
pub const DEFAULT_SHARES: u32 = 100;

/// A tenant's settings as given to `tierctl run` / `attach`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantSpec {
    pub name: TenantName,
    /// Declared memory size; admission counts it. Unset: the measured footprint counts.
    pub size: Option<u64>,
    /// DRAM guaranteed to the tenant (`--reserve`).
    #[serde(default)]
    pub reserve: u64,
    /// Most DRAM the tenant may hold (`--limit`).
    pub limit: Option<u64>,
    /// Weight when DRAM is short (`--shares`).
    #[serde(default = "default_shares")]
    pub shares: u32,
    /// A virtual machine: report guest memory (the QEMU process's guest RAM mapping).
    #[serde(default)]
    pub vm: bool,
    /// Kept wholly in DRAM (`--no-tier`): never demoted, its swap off in its cgroup, its
    /// whole size guaranteed.
    #[serde(default)]
    pub no_tier: bool,
}

fn default_shares() -> u32 {
    DEFAULT_SHARES
}

/// Why a tenant's settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// reserve above limit
    #[error("tenant {name}: --reserve {reserve} is above --limit {limit}")]
    ReserveAboveLimit { name: String, reserve: String, limit: String },
    /// reserve above size
    #[error("tenant {name}: --reserve {reserve} is above --size {size}")]
    ReserveAboveSize { name: String, reserve: String, size: String },
    /// shares out of range
    #[error("tenant {name}: --shares {shares} must be between 1 and 10000")]
    Shares { name: String, shares: u32 },
    /// limit too small
    #[error("tenant {name}: --limit {limit} is below the 4 MiB minimum")]
    TinyLimit { name: String, limit: String },
    /// no-tier without a size
    #[error("tenant {name}: --no-tier needs --size: that much DRAM is set aside for it")]
    NoTierWithoutSize { name: String },
    /// no-tier above its limit
    #[error("tenant {name}: --no-tier keeps all of --size {size} in DRAM, above --limit {limit}")]
    NoTierAboveLimit { name: String, size: String, limit: String },
}

impl TenantSpec {
    pub fn new(name: TenantName) -> Self {
        TenantSpec { name, size: None, reserve: 0, limit: None, shares: DEFAULT_SHARES, vm: false, no_tier: false }
    }

    /// DRAM the tenant is sure of: its reserve, or its whole size when it is kept off
    /// the tier.
    pub fn guaranteed(&self) -> u64 {
        if self.no_tier { self.size.unwrap_or(0).max(self.reserve) } else { self.reserve }
    }

    pub fn validate(&self) -> Result<(), SpecError> {
        let name = self.name.to_string();
        if !(1..=10_000).contains(&self.shares) {
            return Err(SpecError::Shares { name, shares: self.shares });
        }
        if let Some(limit) = self.limit {
            if limit < 4 << 20 {
                return Err(SpecError::TinyLimit { name, limit: human(limit) });
            }
            if self.reserve > limit {
                return Err(SpecError::ReserveAboveLimit { name, reserve: human(self.reserve), limit: human(limit) });
            }
        }
        if let Some(size) = self.size
            && self.reserve > size
        {
            return Err(SpecError::ReserveAboveSize { name, reserve: human(self.reserve), size: human(size) });
        }
        if self.no_tier {
            let Some(size) = self.size else { return Err(SpecError::NoTierWithoutSize { name }) };
            if let Some(limit) = self.limit.filter(|&l| l < size) {
                return Err(SpecError::NoTierAboveLimit { name, size: human(size), limit: human(limit) });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TenantSpec {
        TenantSpec::new(TenantName::new("db").unwrap())
    }

    #[test]
    fn sane_specs_pass() {
        let mut s = spec();
        s.size = Some(1 << 30);
        s.reserve = 256 << 20;
        s.limit = Some(512 << 20);
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn contradictions_are_refused() {
        let mut s = spec();
        s.reserve = 1 << 30;
        s.limit = Some(512 << 20);
        assert!(matches!(s.validate(), Err(SpecError::ReserveAboveLimit { .. })));
        let mut s = spec();
        s.reserve = 1 << 30;
        s.size = Some(512 << 20);
        assert!(matches!(s.validate(), Err(SpecError::ReserveAboveSize { .. })));
        let mut s = spec();
        s.shares = 0;
        assert!(matches!(s.validate(), Err(SpecError::Shares { .. })));
        let mut s = spec();
        s.limit = Some(4096);
        assert!(matches!(s.validate(), Err(SpecError::TinyLimit { .. })));
    }

    #[test]
    fn a_tenant_kept_off_the_tier_is_guaranteed_its_whole_size() {
        let mut s = spec();
        s.no_tier = true;
        assert!(matches!(s.validate(), Err(SpecError::NoTierWithoutSize { .. })));
        s.size = Some(1 << 30);
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.guaranteed(), 1 << 30);
        s.limit = Some(512 << 20);
        assert!(matches!(s.validate(), Err(SpecError::NoTierAboveLimit { .. })));
        s.no_tier = false;
        s.limit = None;
        s.reserve = 256 << 20;
        assert_eq!(s.guaranteed(), 256 << 20);
    }
}
