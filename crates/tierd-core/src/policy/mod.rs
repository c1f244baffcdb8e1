//! Placement policies: pure functions from a [`Snapshot`] to a [`Plan`].
//!
//! - `none`: plain Linux swap, one limit over all tenants (the baseline).
//! - `static`: fixed quotas in proportion to tenant size ([`divide`]).
//! - `tierd`: DRAM where it buys the most work, from each tenant's fault curve, per-tenant
//!   quotas only where they beat one shared limit; prefetch, demotion and relayout of
//!   regions (see `tierd.rs`). Its tunables are [`Knobs`].

pub mod allocate;
pub mod curve;
mod divide;
mod fixed;
mod knobs;
pub mod moves;
mod none;
pub mod report;
mod tierd;

pub use divide::{Claim, divide};
pub use knobs::Knobs;
pub use tierd::ceiling;

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::snapshot::Snapshot;

/// Which placement policy decides the tenants' DRAM quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// Plain Linux swap: one limit equal to the DRAM budget over all tenants; the
    /// kernel alone decides what swaps. The seeds' swap-to-SSD baseline.
    None,
    /// Fixed per-tenant quotas in proportion to tenant size.
    Static,
    /// Quotas and placement from measured activeness.
    #[default]
    Tierd,
}

impl FromStr for PolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(PolicyKind::None),
            "static" => Ok(PolicyKind::Static),
            "tierd" => Ok(PolicyKind::Tierd),
            _ => Err(format!("unknown policy `{s}`: choose none, static or tierd")),
        }
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PolicyKind::None => "none",
            PolicyKind::Static => "static",
            PolicyKind::Tierd => "tierd",
        })
    }
}

/// Smallest quota tierd gives a working tenant, so a tenant is never starved outright.
pub const MIN_QUOTA: u64 = 32 << 20;

/// Which generation of the `tierd` policy this is, recorded with every benchmark run: a
/// real result of another generation says nothing about this one's model or code.
/// Runs from before the field existed are the rule-based policy (docs/decisions/001).
pub const GENERATION: &str = "v2 (one objective)";

/// Plans one interval with the given policy.
pub fn plan(kind: PolicyKind, snap: &Snapshot, knobs: &Knobs) -> Plan {
    let mut plan = match kind {
        // With the tier drained or failing nothing can be paged out: a quota would only
        // make its tenant wait at it. One limit, the budget, whatever the policy.
        _ if snap.tier.drained || snap.tier.faults.failing() => none::without_tier(snap),
        PolicyKind::None => none::plan(snap),
        PolicyKind::Static => fixed::plan(snap),
        PolicyKind::Tierd => tierd::plan(snap, knobs),
    };
    bound_outside_group(&mut plan, snap);
    // Whatever the policy: a tenant kept off the tier is never paged out to it.
    for tp in &mut plan.tenants {
        if snap.tenants.iter().any(|t| t.spec.name == tp.name && t.spec.no_tier) {
            tp.demote.clear();
            tp.relayout.clear();
        }
    }
    plan
}

/// A tenant outside tierd's group cgroup (adopted in place) has no group limit over it:
/// where a plan leaves it unlimited, its quota is the budget less what the others hold
/// (when all fits, that is above what it holds), never below what it is guaranteed.
fn bound_outside_group(plan: &mut Plan, snap: &Snapshot) {
    for tp in plan.tenants.iter_mut().filter(|tp| tp.quota.is_none()) {
        let Some(t) = snap.tenants.iter().find(|t| t.spec.name == tp.name && t.outside_group) else { continue };
        let others: u64 = snap.tenants.iter().filter(|o| o.spec.name != tp.name).map(|o| o.dram).sum();
        tp.quota = Some(snap.dram_budget.saturating_sub(others).max(MIN_QUOTA).max(t.spec.guaranteed()));
    }
}

/// What a tenant is sure of, for a decision's reason: `, reserve 1 GiB`,
/// `, kept off the tier: all 1 GiB in DRAM`, or nothing.
fn guarantee_note(spec: &crate::tenant::TenantSpec) -> String {
    match (spec.no_tier, spec.guaranteed()) {
        (true, g) => format!(", kept off the tier: all {} in DRAM", crate::size::human(g)),
        (false, 0) => String::new(),
        (false, r) => format!(", reserve {}", crate::size::human(r)),
    }
}
#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn a_tenant_outside_the_group_is_never_left_unbounded() {
        let mut adopted = tenant("vm1", 256 * MIB);
        adopted.outside_group = true;
        let mut other = tenant("db", 384 * MIB);
        other.dram = 384 * MIB;
        let snap = snap(GIB, vec![adopted, other]);
        for kind in [PolicyKind::None, PolicyKind::Static, PolicyKind::Tierd] {
            let p = plan(kind, &snap, &Knobs::default());
            let q = p.tenant("vm1").and_then(|t| t.quota);
            assert!(q.is_some_and(|q| q <= GIB - 384 * MIB), "{kind:?}: {q:?}");
            assert!(q.is_some_and(|q| q >= 256 * MIB), "{kind:?}: all fits, so it holds all it has: {q:?}");
        }
        let p = plan(PolicyKind::None, &snap, &Knobs::default());
        assert_eq!(p.tenant("db").and_then(|t| t.quota), None, "tenants inside the group keep the plan's quota");
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use crate::name::TenantName;
    use crate::snapshot::{Snapshot, TenantView, TierView};
    use crate::tenant::TenantSpec;

    pub use crate::size::{GIB, MIB};

    pub fn tenant(name: &str, size: u64) -> TenantView {
        let mut spec = TenantSpec::new(TenantName::new(name).unwrap());
        spec.size = Some(size);
        TenantView::unmeasured(spec, size)
    }

    /// What the tracker reports of a uniform hot set of `hot` bytes touched every
    /// interval: every sample back.
    pub fn uniform(hot: u64) -> crate::snapshot::Activeness {
        crate::snapshot::Activeness {
            active_bytes: hot,
            recent_bytes: Some(hot),
            touched_in_window_bytes: Some(hot),
            returned_share: Some(1.0),
            ..Default::default()
        }
    }

    pub fn snap(budget: u64, tenants: Vec<TenantView>) -> Snapshot {
        Snapshot {
            dram_budget: budget,
            ratio: 1.0,
            interval_secs: 10.0,
            window_secs: 60.0,
            tier: TierView { size_bytes: budget, ..TierView::default() },
            tenants,
            quotas_in_force: None,
        }
    }
}
