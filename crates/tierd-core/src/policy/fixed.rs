//! `static`: each tenant's quota is fixed in proportion to its size, within the DRAM
//! budget, after reserves; limits cap it. Without a declared size the measured
//! footprint counts, so such a quota follows the tenant's growth.

use crate::plan::{Plan, TenantPlan};
use crate::policy::{Claim, MIN_QUOTA, divide};
use crate::size::human;
use crate::snapshot::Snapshot;

pub fn plan(snap: &Snapshot) -> Plan {
    let budget = snap.dram_budget;
    let claims: Vec<Claim> = snap
        .tenants
        .iter()
        .map(|t| {
            let cap = t.spec.limit.unwrap_or(budget).max(t.spec.guaranteed());
            // A tenant that has not grown yet still weighs MIN_QUOTA, so it can grow.
            Claim { floor: t.spec.guaranteed(), demand: t.size().max(MIN_QUOTA), cap, weight: t.size().max(MIN_QUOTA) }
        })
        .collect();
    let parts = divide(budget, &claims);
    let total = snap.committed_bytes().max(1);
    let tenants = snap
        .tenants
        .iter()
        .zip(parts)
        .map(|(t, quota)| {
            let mut reason = format!(
                "policy static: {} of the {} budget, in proportion to size {} of {} committed",
                human(quota),
                human(budget),
                human(t.size()),
                human(total)
            );
            reason += &super::guarantee_note(&t.spec);
            if let Some(limit) = t.spec.limit {
                reason += &format!(", limit {}", human(limit));
            }
            TenantPlan::quota_only(t.spec.name.clone(), Some(quota), reason)
        })
        .collect();
    Plan { group_limit: Some(budget), tenants, notes: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;

    fn quotas(p: &Plan) -> Vec<u64> {
        p.tenants.iter().map(|t| t.quota.unwrap()).collect()
    }

    #[test]
    fn overcommitted_tenants_split_by_size() {
        let p = plan(&snap(GIB, vec![tenant("a", GIB), tenant("b", GIB)]));
        assert_eq!(quotas(&p), vec![GIB / 2, GIB / 2]);
        let p = plan(&snap(3 * GIB, vec![tenant("a", 4 * GIB), tenant("b", 2 * GIB)]));
        let q = quotas(&p);
        assert_eq!(q.iter().sum::<u64>(), 3 * GIB);
        assert!((q[0] as f64 / q[1] as f64 - 2.0).abs() < 1e-6, "{q:?}");
        assert_eq!(p.group_limit, Some(3 * GIB));
    }

    #[test]
    fn reserve_and_limit_are_honoured() {
        let mut a = tenant("a", GIB);
        a.spec.reserve = 768 * MIB;
        let mut b = tenant("b", GIB);
        b.spec.limit = Some(100 * MIB);
        let c = tenant("c", GIB);
        let p = plan(&snap(GIB, vec![a, b, c]));
        let q = quotas(&p);
        assert!(q[0] >= 768 * MIB, "{q:?}");
        assert!(q[1] <= 100 * MIB, "{q:?}");
        assert!(q.iter().sum::<u64>() <= GIB);
        assert!(p.tenants[0].reason.contains("reserve 768 MiB"));
    }

    #[test]
    fn a_tenant_that_has_not_grown_yet_can_grow() {
        let mut new = tenant("new", 0);
        new.spec.size = None;
        let p = plan(&snap(GIB, vec![tenant("a", 4 * GIB), new]));
        assert!(quotas(&p)[1] >= 4 * MIB, "{:?}", quotas(&p));
    }

    #[test]
    fn tenants_that_fit_are_not_squeezed() {
        let p = plan(&snap(4 * GIB, vec![tenant("a", GIB), tenant("b", GIB)]));
        assert!(quotas(&p).iter().all(|&q| q >= GIB));
    }
}
