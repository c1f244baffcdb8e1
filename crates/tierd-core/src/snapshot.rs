//! What the daemon knows about the host at one instant: the input of a policy.
//!
//! The daemon's tracker and telemetry fill it in; policies only read it. History that a
//! policy needs (peak activeness, the quota applied now) travels in here, so policies
//! stay pure functions.

use serde::{Deserialize, Serialize};

use crate::tenant::TenantSpec;

/// A virtual address range of one process of a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Range {
    pub pid: u32,
    pub start: u64,
    pub len: u64,
}

/// A measure of how much of a tenant's memory was touched within the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Activeness {
    /// Estimated bytes touched within the window.
    pub active_bytes: u64,
    /// Half-width of the 95% confidence interval around `active_bytes`.
    pub ci_bytes: u64,
    /// Highest windowed estimate seen recently (what the tenant needs when it wakes).
    pub peak_bytes: u64,
    /// The estimate over the last interval only (reacts fast to a waking tenant).
    pub last_interval_bytes: u64,
    /// The larger of the last two intervals' estimates, once there are two: what the
    /// tenant touches now, when its phase changed within the window (the window's
    /// average still holds the old phase for a window).
    #[serde(default)]
    pub recent_bytes: Option<u64>,
    /// Memory touched at any time within the window, from samples followed through a
    /// whole window (`None` until one has been). `active_bytes` is the memory touched
    /// per interval, averaged over the window: the two agree for memory reused every
    /// interval, and this one is larger for memory reused less often (the policy still
    /// sizes quotas by `active_bytes`).
    #[serde(default)]
    pub touched_in_window_bytes: Option<u64>,
    /// Half-width of the 95% confidence interval around `touched_in_window_bytes`
    /// (`None` for a tracker that does not sample).
    #[serde(default)]
    pub touched_in_window_ci_bytes: Option<u64>,
    /// Memory touched within the latter half of the window, measured alike.
    #[serde(default)]
    pub touched_in_half_window_bytes: Option<u64>,
    /// Share of the last interval's samples that came back (were touched) by its end:
    /// with the tenant's faults, what tells how much of its hot set a slowed tenant
    /// lacks (see `policy::curve`).
    #[serde(default)]
    pub returned_share: Option<f64>,
}

impl Activeness {
    /// Memory touched within the window, the seeds' "hot = touched in the past
    /// minute": the larger of the two estimates. Host health counts this one: a
    /// Redis host whose tenants lost half their throughput to tier reads showed green
    /// on the per-interval average, which counts memory reused every 20 s a quarter.
    pub fn touched_bytes(&self) -> u64 {
        self.active_bytes.max(self.touched_in_window_bytes.unwrap_or(0))
    }
}

/// A tracked region's heat, for proactive demotion and wake-up prefetch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Region {
    pub range: Range,
    /// Seconds since the region was last seen touched (sample came back or a tier-1
    /// fault), or `None` if never within the tracker's memory.
    pub idle_secs: Option<f64>,
    /// Seconds since the region was last seen *reused*: a sample came back, or pages
    /// came back from the tier at the tenant's own faults. A first touch (the fill of
    /// fresh memory) and tierd's own prefetch are no reuse. This is what tells a
    /// tenant's working set: counting any touch, the memory it filled and the regions
    /// tierd had just prefetched made a woken tenant claim all it had.
    #[serde(default)]
    pub reused_secs: Option<f64>,
    /// Its pages on the tier lie in runs of slots: checked, or laid out so by tierd,
    /// since the tenant's last rest began (see `TenantPlan::relayout`).
    #[serde(default)]
    pub laid_out: bool,
    /// Samples from the region that did not come back since it was last touched: the
    /// evidence behind calling it cold.
    #[serde(default)]
    pub cold_samples: u32,
    /// Bytes of the region resident in DRAM.
    pub dram_bytes: u64,
    /// Bytes of the region on the tier.
    pub tier_bytes: u64,
    /// The region belongs on huge pages: it was on them, or it lies whole in a mapping
    /// the kernel backs with huge pages (THP is on for it), so when it is hot and
    /// resident on small pages it is worth rebuilding.
    pub wants_huge: bool,
    /// Bytes of the region on huge pages now.
    pub huge_bytes: u64,
}

/// The tier device's state and recent traffic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct TierView {
    pub size_bytes: u64,
    pub used_bytes: u64,
    /// Average read latency over the last interval of the reads tierd did not make
    /// itself (its prefetch and relayout are set apart), when there were enough to time.
    pub read_latency_us: Option<f64>,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    /// Fraction of the interval the device was busy (0..=1).
    pub utilization: f64,
    /// Of it, busy with I/O other than tierd's own page moves: what a relayout would
    /// compete with. (Judged on the whole, each relayout kept the next pass from one.)
    #[serde(default)]
    pub others_utilization: f64,
    /// The tier was drained (`tierctl tier drain`) and is off: nothing can be tiered.
    #[serde(default)]
    pub drained: bool,
    /// Swap I/O errors on the tier: once there is one, nothing more goes onto it.
    #[serde(default)]
    pub faults: crate::tier_faults::TierFaults,
}

/// One tenant as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantView {
    pub spec: TenantSpec,
    /// Anonymous memory: resident plus swapped.
    pub footprint: u64,
    pub dram: u64,
    /// Of `dram`, pages already on the tier that no process maps (swap cache not in use):
    /// the kernel drops them first, without I/O, whenever DRAM is wanted.
    #[serde(default)]
    pub swap_cached: u64,
    /// Of `dram`, clean page cache on the kernel's inactive list: read and not reused
    /// since, so no part of a working set (tierd's tracker sees no page cache of its own).
    #[serde(default)]
    pub inactive_file: u64,
    /// Of `dram`, page cache, reused or not (the kernel's file lists).
    #[serde(default)]
    pub page_cache: u64,
    pub tier: u64,
    /// Memory that cannot be tiered (mlocked, hugetlbfs).
    pub pinned: u64,
    /// The quota applied now (`None`: no per-tenant limit).
    pub quota: Option<u64>,
    /// Its cgroup is outside tierd's group (adopted in place), so the group's limit does
    /// not hold it: only its own quota does.
    #[serde(default)]
    pub outside_group: bool,
    pub activeness: Option<Activeness>,
    /// Tier-1 reads (major faults) per second over the last interval.
    pub tier_faults_per_sec: f64,
    /// The same rate averaged over the window before the last interval.
    pub tier_faults_per_sec_avg: f64,
    /// Seconds since the tenant was last seen waking up (fault-rate jump).
    pub woke_secs_ago: Option<f64>,
    /// Seconds it has been at rest (its processes stopped using the CPU and it does
    /// not read from the tier), if it is: a phase change seen within a second or two.
    #[serde(default)]
    pub at_rest_secs: Option<f64>,
    /// Seconds since its last rest ended, if it has rested: reading from the tier
    /// just after is a wake-up.
    #[serde(default)]
    pub since_rest_secs: Option<f64>,
    /// Seconds since its last rest began, if it has rested: what it reused in the
    /// window before that is what it was working on, and what it needs back on waking.
    #[serde(default)]
    pub rest_began_secs: Option<f64>,
    /// Its usual activity when working, cores (CPU and stall time, see
    /// [`crate::activity`]): how much work it wants done a second.
    #[serde(default)]
    pub demand_cores: f64,
    /// Share of its activity lately that was waiting for memory.
    #[serde(default)]
    pub stall_share: f64,
    /// Mean length of its rests so far, if it has rested.
    #[serde(default)]
    pub mean_rest_secs: Option<f64>,
    /// Seconds its measured progress has stayed below the policy's prediction by more
    /// than the knobs allow, if it has (see [`crate::activity::Shortfall`]).
    #[serde(default)]
    pub short_secs: Option<f64>,
    pub regions: Vec<Region>,
}

impl TenantView {
    /// A tenant not measured yet, all of its `footprint` in DRAM: how a tenant about to
    /// start is planned for (and the policy tests' starting point).
    pub fn unmeasured(spec: TenantSpec, footprint: u64) -> TenantView {
        TenantView {
            spec,
            footprint,
            dram: footprint,
            swap_cached: 0,
            inactive_file: 0,
            page_cache: 0,
            tier: 0,
            pinned: 0,
            quota: None,
            outside_group: false,
            activeness: None,
            tier_faults_per_sec: 0.0,
            tier_faults_per_sec_avg: 0.0,
            woke_secs_ago: None,
            at_rest_secs: None,
            since_rest_secs: None,
            rest_began_secs: None,
            demand_cores: 0.0,
            stall_share: 0.0,
            mean_rest_secs: None,
            short_secs: None,
            regions: Vec::new(),
        }
    }

    /// The size admission and proportional quotas count: the declared size, or the
    /// measured footprint when that is larger.
    pub fn size(&self) -> u64 {
        self.spec.size.unwrap_or(0).max(self.footprint)
    }
}

/// The host at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub dram_budget: u64,
    pub ratio: f64,
    /// Seconds between two control-loop passes.
    pub interval_secs: f64,
    /// The activeness window: "hot" means touched within it.
    #[serde(default = "default_window")]
    pub window_secs: f64,
    pub tier: TierView,
    pub tenants: Vec<TenantView>,
    /// Whether the last pass divided DRAM by per-tenant quotas (`None`: no pass yet; the
    /// tenants' quotas say). Under one shared limit some tenants have quotas too: those
    /// outside tierd's group, and those holding page cache they do not reuse.
    #[serde(default)]
    pub quotas_in_force: Option<bool>,
}

fn default_window() -> f64 {
    60.0
}

impl Snapshot {
    pub fn committed_bytes(&self) -> u64 {
        self.tenants.iter().map(TenantView::size).sum()
    }

    /// Σ tenant size / DRAM budget: the seeds' overcommit figure.
    pub fn overcommit(&self) -> f64 {
        if self.dram_budget == 0 { 0.0 } else { self.committed_bytes() as f64 / self.dram_budget as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_bytes_is_the_larger_estimate() {
        let a = Activeness { active_bytes: 18 << 20, touched_in_window_bytes: Some(57 << 20), ..Default::default() };
        assert_eq!(a.touched_bytes(), 57 << 20, "memory reused now and then counts in full");
        let b = Activeness { active_bytes: 100 << 20, touched_in_window_bytes: Some(90 << 20), ..Default::default() };
        assert_eq!(b.touched_bytes(), 100 << 20);
        let c = Activeness { active_bytes: 100 << 20, touched_in_window_bytes: None, ..Default::default() };
        assert_eq!(c.touched_bytes(), 100 << 20, "no sample is a window old yet");
    }
}
