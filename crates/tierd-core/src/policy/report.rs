//! What the `tierd` policy's model says, for operators: a tenant's fault curve
//! (`tierctl curve`), and the allocation on another budget or with more tenants like
//! one of them (`tierctl plan`: seed 000's sizing advice, computed).

use serde::{Deserialize, Serialize};

use crate::TenantName;
use crate::health::{self, Colour};
use crate::policy::curve::{Curve, fault_secs};
use crate::policy::{Knobs, tierd};
use crate::snapshot::Snapshot;

/// One point of a curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub dram_bytes: u64,
    /// Reads a second from the tier at full speed with that much DRAM.
    pub faults_per_sec: f64,
    /// The share of its work it would get done.
    pub useful: f64,
}

/// A tenant's fault curve as the policy sees it now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveReport {
    pub name: String,
    pub working: bool,
    pub hot_bytes: u64,
    pub warm_bytes: u64,
    /// Accesses per page per second of the hot set and of the warm part.
    pub hot_rate: f64,
    pub warm_rate: f64,
    /// Its hot set is a cliff (uniformly used) rather than skewed.
    pub steep: bool,
    pub demand_cores: f64,
    /// Seconds a read from the tier costs now.
    pub fault_secs: f64,
    pub dram_bytes: u64,
    pub points: Vec<CurvePoint>,
}

/// The curve of tenant `name`, at 17 points from none to its size and at its knees:
/// its hot set alone, and the quotas that keep its hot set and all it touches.
pub fn curve(snap: &Snapshot, name: &str, k: &Knobs) -> Option<CurveReport> {
    let t = snap.tenants.iter().find(|t| t.spec.name.as_str() == name)?;
    let fault = fault_secs(&snap.tier, k);
    let c = Curve::in_snapshot(t, snap, k);
    let size = t.size().max(c.touched());
    let mut qs: Vec<u64> = (0..=16).map(|i| size * i / 16).collect();
    qs.extend([c.hot, c.quota_for(c.hot), c.quota_for(c.touched())]);
    qs.sort_unstable();
    qs.dedup();
    let points = qs
        .into_iter()
        .map(|q| CurvePoint { dram_bytes: q, faults_per_sec: c.faults_per_sec(q), useful: c.useful(q, fault) })
        .collect();
    Some(CurveReport {
        name: name.into(),
        working: t.at_rest_secs.is_none(),
        hot_bytes: c.hot,
        warm_bytes: c.warm,
        hot_rate: c.hot_rate,
        warm_rate: c.warm_rate,
        steep: c.steep,
        demand_cores: c.cores,
        fault_secs: fault,
        dram_bytes: t.dram,
        points,
    })
}

/// One tenant in a what-if.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfTenant {
    pub name: String,
    /// Its quota (`None`: one shared limit over all).
    pub quota: Option<u64>,
    pub hot_bytes: u64,
    /// The share of its work the model predicts it gets done (working tenants).
    pub useful: Option<f64>,
}

/// The allocation on another budget, or with more tenants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    pub budget: u64,
    pub tenants: Vec<WhatIfTenant>,
    /// What the working tenants touch within the window, and the health colour of that
    /// against the budget.
    pub active_bytes: u64,
    pub health: Colour,
    /// The share of all working tenants' work that gets done (weighted by shares).
    pub work_done: f64,
    pub notes: Vec<String>,
}

/// Plans the live tenants on `budget`, with `add` more tenants like the named ones
/// (`(3, "web")`: three more like `web`, named `web.1`…).
pub fn what_if(snap: &Snapshot, k: &Knobs, budget: u64, add: &[(u32, TenantName)]) -> Result<WhatIf, String> {
    let mut s = snap.clone();
    s.dram_budget = budget;
    for (n, name) in add {
        let like = snap
            .tenants
            .iter()
            .find(|t| &t.spec.name == name)
            .ok_or_else(|| format!("no tenant named `{name}` to copy"))?;
        for i in 1..=*n {
            let mut t = like.clone();
            t.spec.name = TenantName::new(&format!("{}.{i}", name.as_str())).map_err(|e| e.to_string())?;
            t.quota = None;
            s.tenants.push(t);
        }
    }
    let plan = tierd::plan(&s, k);
    let fault = fault_secs(&s.tier, k);
    let share = |q: Option<u64>, c: &Curve, parts: u64| c.useful(q.unwrap_or(parts), fault);
    // Under one shared limit: working tenants' hot sets each get their share of what is
    // left after the resting ones' floors, by what they touch.
    let working: Vec<Curve> = s.tenants.iter().map(|t| Curve::in_snapshot(t, &s, k)).collect();
    let touched: u64 =
        s.tenants.iter().zip(&working).filter(|(t, _)| t.at_rest_secs.is_none()).map(|(_, c)| c.touched()).sum();
    let mut tenants = Vec::new();
    let (mut done, mut weight) = (0.0, 0.0);
    for ((t, c), tp) in s.tenants.iter().zip(&working).zip(&plan.tenants) {
        let on_shared = (c.touched() as u128 * budget as u128 / touched.max(1) as u128) as u64;
        let useful = t.at_rest_secs.is_none().then(|| share(tp.quota, c, on_shared.min(budget)));
        if let Some(u) = useful {
            let w = t.spec.shares as f64 * c.cores;
            done += w * u;
            weight += w;
        }
        tenants.push(WhatIfTenant { name: t.spec.name.to_string(), quota: tp.quota, hot_bytes: c.hot, useful });
    }
    Ok(WhatIf {
        budget,
        tenants,
        active_bytes: touched,
        health: health::active_memory(touched, budget),
        work_done: if weight > 0.0 { done / weight } else { 1.0 },
        notes: plan.notes.iter().map(|n| n.to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;

    fn working(name: &str, hot: u64) -> crate::snapshot::TenantView {
        let mut t = tenant(name, 512 * MIB);
        t.activeness = Some(uniform(hot));
        // Its hot set and what rides on its pages.
        t.dram = hot + hot / 16;
        t.demand_cores = 0.5;
        t
    }

    #[test]
    fn a_curve_falls_from_none_of_the_work_to_all_of_it_past_the_hot_set() {
        let s = snap(GIB, vec![working("web", 192 * MIB)]);
        let c = curve(&s, "web", &Knobs::default()).unwrap();
        assert_eq!(c.hot_bytes, 192 * MIB);
        assert!(c.steep && c.working);
        assert!(c.points[0].useful < 0.02);
        let at = |q: u64| c.points.iter().find(|p| p.dram_bytes >= q).unwrap().useful;
        assert!(at(192 * MIB) < 0.5, "a quota of the hot set alone holds none of what rides on it");
        let knee = 192 * MIB + (192.0 * MIB as f64 * Knobs::default().headroom) as u64;
        let p = c.points.iter().find(|p| p.dram_bytes == knee).expect("the quota that keeps the hot set is shown");
        assert_eq!(p.useful, 1.0);
        assert!(curve(&s, "nobody", &Knobs::default()).is_none());
    }

    #[test]
    fn what_if_says_how_many_more_fit_and_what_it_costs() {
        let s = snap(GIB, vec![working("web", 192 * MIB), working("db", 256 * MIB)]);
        let k = Knobs::default();
        // Two more like web: 832 MiB of hot sets on 1 GiB, all of it done.
        let two = what_if(&s, &k, GIB, &[(2, TenantName::new("web").unwrap())]).unwrap();
        assert_eq!(two.tenants.len(), 4);
        assert_eq!(two.tenants[2].name, "web.1");
        assert!(two.work_done > 0.99, "{two:?}");
        assert_eq!(two.health, Colour::Red, "832 MiB active on 1 GiB");
        // Four more: 1216 MiB of hot sets, some tenant's work is lost.
        let mut s4 = s.clone();
        for t in &mut s4.tenants {
            t.stall_share = 0.8;
        }
        let four = what_if(&s4, &k, GIB, &[(4, TenantName::new("web").unwrap())]).unwrap();
        assert!(four.work_done < 0.95, "{four:?}");
        assert!(what_if(&s, &k, GIB, &[(1, TenantName::new("cache").unwrap())]).unwrap_err().contains("no tenant"));
    }
}
