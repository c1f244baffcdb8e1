//! Every tunable of the `tierd` policy, in one place: `[policy.tierd]` in the config.

use serde::{Deserialize, Serialize};

use crate::activity::Shares;

/// The `tierd` policy's tunables, validated. Defaults are what the suite and the
/// simulator judged; change them only with a reason you can measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Knobs {
    /// A tenant is at rest below this share of its usual activity (CPU + stall)...
    pub rest_share: f64,
    /// ...and working again at this share.
    pub wake_share: f64,
    /// Below this usual activity (cores) a tenant is never taken for at rest: sampling
    /// alone says what it uses.
    pub min_busy_cores: f64,
    /// Seconds over which a quota move must pay for itself (the gain over this horizon
    /// against reading back what the move sends out), and over which a resting tenant's
    /// chance of waking is judged.
    pub horizon_secs: f64,
    /// How much the allocation must beat one shared limit (plain swap) by, as a share of
    /// the work it predicts, before tierd sets per-tenant quotas.
    pub quota_margin: f64,
    /// A tenant's measured progress this far below the model's prediction, for two
    /// windows, sends the host back to the shared limit.
    pub shortfall: f64,
    /// Accesses a second a page of the hot set gets at least (a page touched every
    /// interval), when the tenant's own faults do not say more.
    pub min_hot_rate: f64,
    /// CPU seconds a read from the tier costs the faulting thread beyond the wait.
    pub fault_cpu_secs: f64,
    /// Share of a quota above the pages it keeps, for what its cgroup is charged beyond
    /// them (the swap cache in flight, the tracker's samples, page tables): the curve
    /// counts a quota of q as keeping q / (1 + headroom) of its pages.
    pub headroom: f64,
    /// The least a resting tenant keeps (bytes).
    pub rest_floor: u64,
    /// Proactive demotion and relayout, bytes per second per tenant.
    pub demote_rate: u64,
    /// Prefetch, bytes per second per tenant.
    pub prefetch_rate: u64,
    /// Relayout only while the tier is busy with others' I/O (not tierd's own moves)
    /// less than this share of the time.
    pub relayout_below_utilization: f64,
    /// Free DRAM tierd keeps under the shared limit by demoting the coldest regions
    /// whole, so the kernel never has to reclaim page by page (share of the budget).
    pub free_target: f64,
}

impl Knobs {
    /// The defaults, as a constant for tables of tests.
    pub const DEFAULT: Knobs = Knobs {
        rest_share: 0.1,
        wake_share: 0.25,
        min_busy_cores: 0.05,
        horizon_secs: 30.0,
        quota_margin: 0.05,
        shortfall: 0.3,
        min_hot_rate: 10.0,
        fault_cpu_secs: 20e-6,
        headroom: 0.05,
        rest_floor: 8 << 20,
        demote_rate: 256 << 20,
        prefetch_rate: 1 << 30,
        relayout_below_utilization: 0.3,
        free_target: 0.02,
    };
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs::DEFAULT
    }
}

impl Knobs {
    /// The activity shares.
    pub fn shares(&self) -> Shares {
        Shares { rest: self.rest_share, wake: self.wake_share, min_busy_cores: self.min_busy_cores }
    }

    /// Every problem with these values, as `policy.tierd.KEY …` lines.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut share = |key: &str, v: f64, lo: f64, hi: f64| {
            if !(v.is_finite() && v >= lo && v <= hi) {
                out.push(format!("policy.tierd.{key} {v} must be between {lo} and {hi}"));
            }
        };
        share("rest_share", self.rest_share, 0.0, 1.0);
        share("wake_share", self.wake_share, 0.0, 1.0);
        share("min_busy_cores", self.min_busy_cores, 0.0, 64.0);
        share("horizon_secs", self.horizon_secs, 1.0, 3600.0);
        share("quota_margin", self.quota_margin, 0.0, 1.0);
        share("shortfall", self.shortfall, 0.0, 1.0);
        share("min_hot_rate", self.min_hot_rate, 0.001, 1e6);
        share("fault_cpu_secs", self.fault_cpu_secs, 0.0, 0.01);
        share("headroom", self.headroom, 0.0, 1.0);
        share("relayout_below_utilization", self.relayout_below_utilization, 0.0, 1.0);
        share("free_target", self.free_target, 0.0, 0.5);
        if self.wake_share < self.rest_share {
            out.push(format!(
                "policy.tierd.wake_share {} must be at least rest_share {} (or a tenant at rest is awake)",
                self.wake_share, self.rest_share
            ));
        }
        if self.prefetch_rate == 0 || self.demote_rate == 0 {
            out.push("policy.tierd.prefetch_rate and demote_rate must be above 0".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_bad_values_are_named() {
        assert!(Knobs::default().problems().is_empty());
        let k = Knobs { rest_share: 0.5, wake_share: 0.2, horizon_secs: 0.0, ..Knobs::default() };
        let p = k.problems().join("\n");
        assert!(p.contains("horizon_secs 0"), "{p}");
        assert!(p.contains("wake_share 0.2 must be at least rest_share 0.5"), "{p}");
    }

    #[test]
    fn a_table_sets_some_knobs_and_refuses_unknown_ones() {
        let k: Knobs = toml::from_str("horizon_secs = 60\nrest_floor = 1048576\n").unwrap();
        assert_eq!((k.horizon_secs, k.rest_floor, k.rest_share), (60.0, 1 << 20, 0.1));
        assert!(toml::from_str::<Knobs>("horizon = 60\n").unwrap_err().to_string().contains("unknown field"));
    }
}
