//! `none`: plain Linux swap. One limit equal to the DRAM budget over all tenants; the
//! kernel's LRU alone decides which pages go to the tier.

use crate::plan::{Plan, TenantPlan};
use crate::size::human;
use crate::snapshot::Snapshot;

pub fn plan(snap: &Snapshot) -> Plan {
    let reason =
        format!("policy none: all tenants share one {} limit; the kernel chooses what swaps", human(snap.dram_budget));
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
}
