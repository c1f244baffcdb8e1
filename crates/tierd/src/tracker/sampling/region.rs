//! What a region's pages did between two observations.

use super::RegionState;

impl RegionState {
    pub(super) fn touch(&mut self, now: f64) {
        self.last_touched = Some(now);
        self.misses = 0;
        self.cold_since = None;
    }

    /// What became resident since the last observation, now `present` and `swapped`
    /// bytes (`sampled_back` of it were samples coming back, counted already): a
    /// touch, and reuse if it came back from the tier. A fill's new pages are a first
    /// touch only, and what tierd itself `prefetched` there is neither. Returns the
    /// bytes the tenant brought in.
    pub(super) fn settle(
        &mut self,
        known: bool,
        present: u64,
        swapped: u64,
        sampled_back: u64,
        prefetched: bool,
        now: f64,
    ) -> u64 {
        if prefetched {
            return 0;
        }
        let before = if known { self.present } else { 0 };
        let came = present.saturating_sub(before).saturating_sub(sampled_back);
        if came > 0 {
            self.touch(now);
            if known && self.swapped > swapped {
                self.reused = Some(now);
            }
        }
        came
    }

    /// Seconds since the region was last seen touched; for a region never seen
    /// touched, since its first sample missed.
    pub(super) fn idle_secs(&self, now: f64) -> Option<f64> {
        self.last_touched.or(self.cold_since).map(|t| now - t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pages_back_from_the_tier_are_reuse_and_tierds_own_prefetch_is_not_a_touch() {
        let mib = 1u64 << 20;
        let known = |present, swapped| RegionState { present, swapped, ..RegionState::default() };
        // Filled: new pages, nothing came from the tier.
        let mut fill = known(0, 0);
        assert_eq!(fill.settle(true, 2 * mib, 0, 0, false, 10.0), 2 * mib);
        assert_eq!((fill.last_touched, fill.reused), (Some(10.0), None), "a first touch, not reuse");
        // Faulted back from the tier by the tenant: reuse.
        let mut back = known(mib, mib);
        assert_eq!(back.settle(true, 2 * mib, 0, 0, false, 10.0), mib);
        assert_eq!(back.reused, Some(10.0));
        // The same pages read back by tierd's prefetch: nothing the tenant did.
        let mut fetched = known(mib, mib);
        assert_eq!(fetched.settle(true, 2 * mib, 0, 0, true, 10.0), 0);
        assert_eq!((fetched.last_touched, fetched.reused), (None, None));
        // Samples that came back are counted where they are found, not twice.
        let mut sampled = known(mib, 0);
        assert_eq!(sampled.settle(true, mib + 16384, 0, 16384, false, 10.0), 0);
        assert_eq!(sampled.last_touched, None);
        // A region seen for the first time has no past to come back from.
        let mut new = RegionState::default();
        assert_eq!(new.settle(false, mib, mib, 0, false, 10.0), mib);
        assert_eq!(new.reused, None);
    }
}
