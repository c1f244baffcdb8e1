//! Activeness trackers: how much of a tenant's memory is touched, and where.
//!
//! A tracker is asked once per interval to [`Tracker::observe`] a tenant's processes and
//! then answers with an [`Activeness`] estimate and per-region heat. Two backends:
//! [`SamplingTracker`] (statistical sampling with `MADV_PAGEOUT` and `PAGEMAP_SCAN`, any
//! kernel with `process_madvise`, the default) and [`DamonTracker`] (the kernel's DAMON,
//! `--tracker damon`, where it has vaddr and target filters and no other tool's kdamond).

mod damon;
mod runs;
mod sampling;

pub use damon::{DamonHub, DamonTracker, SharedDamon};

pub use sampling::{SamplingConfig, SamplingTracker};

use serde::Serialize;
use tierd_core::size::HUGE_PAGE;
use tierd_core::snapshot::{Activeness, Range, Region};
use tierd_sys::madvise::Pidfd;

/// Heat is kept per 2 MiB region: the huge-page size, and what prefetch moves at once.
pub const REGION: u64 = HUGE_PAGE;

/// The 2 MiB blocks (process, aligned start) that `ranges` cover.
fn blocks_of(ranges: &[Range]) -> impl Iterator<Item = (u32, u64)> + '_ {
    ranges.iter().flat_map(|r| {
        let first = r.start & !(REGION - 1);
        (first..r.start + r.len).step_by(REGION as usize).map(move |at| (r.pid, at))
    })
}

/// What a tracker has cost so far.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct TrackerCost {
    /// Pages sampled in the last interval.
    pub sample_pages: u64,
    /// Syscalls made so far (`process_madvise`, `PAGEMAP_SCAN`).
    pub syscalls: u64,
    /// Failed syscalls so far.
    pub errors: u64,
    /// CPU time (user + system, on the observing thread) spent observing so far, in
    /// seconds: the scans and page-outs of sampling, not the time waiting for a CPU.
    pub seconds: f64,
}

/// How tierd read a tenant's pages back from the tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBack {
    /// `MADV_WILLNEED`: into the swap cache, the page tables untouched until the tenant
    /// touches a page itself.
    Prefetch,
    /// Read, rebuilt as huge pages where they want them (which maps them) and paged
    /// out again in runs.
    Relayout,
}

/// Measures one tenant's activeness.
pub trait Tracker: Send + std::fmt::Debug {
    /// One interval: read what happened since the last call, prepare the next.
    /// `tier_faults` is the tenant's major faults since the last call (pages read back
    /// from the tier: each one a page touched). A tenant `at_rest` touches nothing
    /// worth measuring, so a tracker whose probes cost the tenant faults makes none.
    fn observe(&mut self, procs: &[Pidfd], tier_faults: u64, now: f64, at_rest: bool);
    /// The estimate so far (`None` until one full interval has been observed).
    fn activeness(&self) -> Option<Activeness>;
    /// Region heat and placement as of the last observation.
    fn regions(&self, now: f64) -> Vec<Region>;
    /// tierd read these ranges back itself (`how`): their pages becoming resident is
    /// no sign that the tenant touched them.
    fn read_back(&mut self, ranges: &[Range], how: ReadBack);
    fn cost(&self) -> TrackerCost;
    /// How long a read from the tier takes lately: a tracker whose probes cost tier
    /// reads sizes them to it.
    fn tier_read_time(&mut self, _secs: f64) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_covers_every_block_it_touches() {
        let r = |start, len| Range { pid: 7, start, len };
        let blocks: Vec<_> = blocks_of(&[r(REGION - 4096, 8192), r(5 * REGION, REGION)]).collect();
        assert_eq!(blocks, [(7, 0), (7, REGION), (7, 5 * REGION)]);
        assert_eq!(blocks_of(&[r(REGION, 0)]).count(), 0);
    }
}
