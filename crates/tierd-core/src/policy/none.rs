//! `none`: plain Linux swap. One limit equal to the DRAM budget over all tenants; the
//! kernel's LRU alone decides which pages go to the tier.

use crate::plan::{Plan, TenantPlan};
use crate::size::human;
use crate::snapshot::Snapshot;

pub fn plan(snap: &Snapshot) -> Plan {
    one_limit(
        snap,
        format!("policy none: all tenants share one {} limit; the kernel chooses what swaps", human(snap.dram_budget)),
    )
}

/// The plan while the tier is drained (see [`crate::drain`]) or failing (see
/// [`crate::tier_faults`]), whatever the policy.
pub fn without_tier(snap: &Snapshot) -> Plan {
    let why = if snap.tier.drained {
        "the tier is drained".to_string()
    } else {
        format!("the tier device is failing ({})", snap.tier.faults.describe())
    };
    one_limit(
        snap,
        format!("{why}: nothing more can be tiered, all tenants share one {} limit", human(snap.dram_budget)),
    )
}

fn one_limit(snap: &Snapshot, reason: String) -> Plan {
    Plan {
        group_limit: Some(snap.dram_budget),
        tenants: snap
            .tenants
            .iter()
            .map(|t| TenantPlan::quota_only(t.spec.name.clone(), None, reason.clone()))
            .collect(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;

    #[test]
    fn one_limit_no_quotas() {
        let p = plan(&snap(GIB, vec![tenant("a", GIB), tenant("b", GIB)]));
        assert_eq!(p.group_limit, Some(GIB));
        assert!(p.tenants.iter().all(|t| t.quota.is_none() && t.demote.is_empty()));
        assert_eq!(p.tenants.len(), 2);
    }

    #[test]
    fn a_drained_or_failing_tier_lifts_every_quota_whatever_the_policy() {
        use crate::policy::PolicyKind;
        use crate::policy::knobs::Knobs;
        use crate::snapshot::TenantView;
        use crate::tier_faults::TierFaults;
        // Two hot sets short of DRAM: the tierd policy would give them quotas.
        let hot = |name| TenantView { activeness: Some(uniform(GIB)), ..tenant(name, GIB) };
        let mut drained = snap(GIB, vec![hot("a"), hot("b")]);
        drained.tier.drained = true;
        let mut failing = snap(GIB, vec![hot("a"), hot("b")]);
        failing.tier.faults = TierFaults { read_errors: 0, write_errors: 3 };
        for (s, why) in [(drained, "drained"), (failing, "failing (at least 3 failed writes)")] {
            for kind in [PolicyKind::None, PolicyKind::Static, PolicyKind::Tierd] {
                let p = crate::policy::plan(kind, &s, &Knobs::DEFAULT);
                assert_eq!(p.group_limit, Some(GIB), "{kind:?}");
                assert!(p.tenants.iter().all(|t| t.quota.is_none() && t.demote.is_empty() && t.prefetch.is_empty()));
                assert!(p.tenants[0].reason.contains(why), "{}", p.tenants[0].reason);
            }
        }
    }
}
