//! What a policy decides for one interval; the enforcer and mover carry it out.

use serde::{Deserialize, Serialize};

use crate::name::TenantName;
use crate::snapshot::Range;

/// Decisions for one tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantPlan {
    pub name: TenantName,
    /// DRAM quota (`None`: no per-tenant limit; the group limit still applies).
    pub quota: Option<u64>,
    /// Why the quota is what it is, in words an operator reads.
    pub reason: String,
    /// Ranges to page out now (cold regions, before pressure).
    pub demote: Vec<Range>,
    /// Ranges to read back from the tier now (a waking tenant's hot regions).
    pub prefetch: Vec<Range>,
    /// Ranges to rebuild as huge pages once resident.
    pub collapse: Vec<Range>,
    /// Regions of a resting tenant's working set to lay out in runs on the tier (read
    /// back if scattered there, rebuilt as one huge page, written out whole), so its
    /// wake-up reads them back at sequential speed. Carried out before `demote`; a
    /// region of both that relayout paged out is not demoted again, one it did not
    /// (already in runs, or out of time) is.
    #[serde(default)]
    pub relayout: Vec<Range>,
    /// The policy saw the tenant wake up this interval (the engine remembers when).
    #[serde(default)]
    pub woke: bool,
    /// The share of its work the policy predicts it gets done under its quota (working
    /// tenants under per-tenant quotas): the engine checks it against what it measures.
    #[serde(default)]
    pub predicted_useful: Option<f64>,
}

impl TenantPlan {
    pub fn quota_only(name: TenantName, quota: Option<u64>, reason: String) -> Self {
        TenantPlan {
            name,
            quota,
            reason,
            demote: Vec::new(),
            prefetch: Vec::new(),
            collapse: Vec::new(),
            relayout: Vec::new(),
            woke: false,
            predicted_useful: None,
        }
    }
}

/// Decisions for the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Plan {
    /// Limit over all tenants together (their common parent cgroup).
    pub group_limit: Option<u64>,
    pub tenants: Vec<TenantPlan>,
    /// Host-wide decisions and warnings, such as demotion being throttled.
    pub notes: Vec<String>,
}

impl Plan {
    pub fn tenant(&self, name: &str) -> Option<&TenantPlan> {
        self.tenants.iter().find(|t| t.name.as_str() == name)
    }
}
