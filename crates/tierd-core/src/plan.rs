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
    pub notes: Vec<Note>,
}

impl Plan {
    /// Whether it divides DRAM by per-tenant quotas (what the next snapshot's
    /// `quotas_in_force` tells the policy).
    pub fn sets_quotas(&self) -> bool {
        self.notes.iter().any(|n| matches!(n, Note::Quotas { .. }))
    }
}

/// A host-wide decision or warning of one pass, as data; text only where it is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Note {
    /// DRAM is short of the working tenants' hot sets and per-tenant quotas are in force:
    /// the work a second (in cores) they buy against one shared limit.
    Quotas { needs: u64, budget: u64, model_work: f64, shared_work: f64 },
    /// DRAM is short, but one shared limit stays: why, and the work a second (in cores)
    /// quotas would buy against it.
    SharedWhileShort { needs: u64, budget: u64, why: SharedWhy, model_work: f64, shared_work: f64 },
    /// Demotion waits: the tier reads slower than health's red line (µs).
    SlowTier { read_us: f64 },
    /// Demotion waits: the tier device is busy this share of the time.
    BusyTier { utilization: f64 },
    /// Back to one shared limit: a tenant's measured progress stayed below the model's
    /// prediction for two windows.
    FellShort,
}

/// Why one shared limit stays while DRAM is short.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum SharedWhy {
    /// Quotas would not buy this multiple of the shared limit's work: above 1 to take
    /// quotas up, below 1 to keep them (the mode in force stays within the margin).
    Margin(f64),
    /// No working tenant measurably thrashes under the shared limit: the estimates alone
    /// are no evidence that quotas would do better.
    NoneThrashing,
}

impl Note {
    /// Notes are logged when the set of kinds changes, not each time a figure moves.
    pub fn kind(&self) -> &'static str {
        match self {
            Note::Quotas { .. } => "quotas",
            Note::SharedWhileShort { .. } => "shared while short",
            Note::SlowTier { .. } | Note::BusyTier { .. } => "demotion throttled",
            Note::FellShort => "fell short",
        }
    }

    pub fn throttles_demotion(&self) -> bool {
        matches!(self, Note::SlowTier { .. } | Note::BusyTier { .. })
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::size::human;
        match self {
            Note::Quotas { needs, budget, model_work, shared_work } => write!(
                f,
                "DRAM short: working tenants' hot sets come to {} against the {} budget; per-tenant quotas buy \
                 {model_work:.2} cores of work a second against {shared_work:.2} under one shared limit",
                human(*needs),
                human(*budget)
            ),
            Note::SharedWhileShort { needs, budget, why, model_work, shared_work } => {
                write!(f, "DRAM short (hot sets of {} on {}), but ", human(*needs), human(*budget))?;
                match why {
                    SharedWhy::Margin(m) => write!(
                        f,
                        "per-tenant quotas would buy {model_work:.2} cores of work a second against {shared_work:.2} \
                         under one shared limit, short of the {m:.2}× they must"
                    )?,
                    SharedWhy::NoneThrashing => write!(f, "no working tenant thrashes under one shared limit")?,
                }
                write!(f, ": the kernel's LRU decides")
            }
            Note::SlowTier { read_us } => {
                write!(f, "demotion throttled: tier read latency {read_us:.0} µs is above 400 µs")
            }
            Note::BusyTier { utilization } => {
                write!(f, "demotion throttled: tier device busy {:.0}% of the time", utilization * 100.0)
            }
            Note::FellShort => write!(
                f,
                "back to one shared limit: a tenant's measured progress stayed below the model's prediction for two \
                 windows"
            ),
        }
    }
}

impl Plan {
    pub fn tenant(&self, name: &str) -> Option<&TenantPlan> {
        self.tenants.iter().find(|t| t.name.as_str() == name)
    }
}
