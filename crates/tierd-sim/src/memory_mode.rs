//! `memory-mode`: DRAM as a direct-mapped cache of the tier, with no quotas (seed 002's
//! Intel Optane Memory Mode, here over the host's tier device).
//!
//! Every page of every tenant lives on the tier and maps to one DRAM frame (physical
//! address modulo the DRAM size: at random, as far as tenants can tell). A frame holds
//! the page of its set touched last, so a page of rate λ among others of total rate S
//! is in DRAM with probability λ / (λ + S), and an access to it misses with probability
//! S / (λ + S). Over random placement, S is a sum over a Poisson number (pages per
//! frame) of pages drawn from all tenants' memory: a noisy neighbour's sweep raises
//! every tenant's S, and two hot pages in one frame evict each other however small the
//! hot sets are (the conflict seed 002 measured).

use crate::calib::PAGE;

/// Sets drawn to estimate each class's miss probability.
const DRAWS: usize = 256;
/// Seconds between two updates of the miss probabilities (rates change with phases).
pub const UPDATE_SECS: f64 = 0.2;

/// The direct-mapped DRAM cache of a run.
#[derive(Debug, Clone)]
pub struct DirectMapped {
    frames: f64,
    /// Per tenant, per class: the probability an access misses DRAM.
    pub miss: Vec<Vec<f64>>,
    pub next_update: f64,
    /// Per set drawn: how many other pages share it, and a uniform draw per page.
    draws: Vec<Vec<f64>>,
}

impl DirectMapped {
    pub fn new(budget: u64, pages: f64, tenants: &[usize], rng: &mut fastrand::Rng) -> DirectMapped {
        let frames = (budget as f64 / PAGE).max(1.0);
        let mean = pages / frames;
        let draws = (0..DRAWS)
            .map(|_| {
                let n = poisson(mean, rng);
                (0..n).map(|_| rng.f64()).collect()
            })
            .collect();
        DirectMapped { frames, miss: tenants.iter().map(|&k| vec![0.0; k]).collect(), next_update: 0.0, draws }
    }

    /// Recomputes every class's miss probability from the rates now: `classes` holds,
    /// per tenant, (pages, per-page access rate) of each class.
    pub fn update(&mut self, classes: &[Vec<(f64, f64)>]) {
        // The pages of all tenants as a distribution: cumulative page counts by class.
        let all: Vec<(f64, f64)> = classes.iter().flatten().copied().collect();
        let total: f64 = all.iter().map(|c| c.0).sum();
        let mut cum = Vec::with_capacity(all.len());
        let mut acc = 0.0;
        for &(pages, _) in &all {
            acc += pages / total.max(1.0);
            cum.push(acc);
        }
        let rate_of = |u: f64| all[cum.partition_point(|&c| c < u).min(all.len() - 1)].1;
        let others: Vec<f64> = self.draws.iter().map(|set| set.iter().map(|&u| rate_of(u)).sum()).collect();
        for (t, cls) in classes.iter().enumerate() {
            for (c, &(_, lambda)) in cls.iter().enumerate() {
                self.miss[t][c] = if lambda <= 0.0 {
                    1.0
                } else {
                    others.iter().map(|s| s / (lambda + s)).sum::<f64>() / others.len() as f64
                };
            }
        }
        let _ = self.frames;
    }
}

fn poisson(mean: f64, rng: &mut fastrand::Rng) -> usize {
    // Knuth's method; the mean is a few pages per frame.
    let l = (-mean).exp();
    let (mut k, mut p) = (0, 1.0);
    loop {
        p *= rng.f64();
        if p <= l {
            return k;
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hot_set_alone_in_a_cache_twice_its_size_still_conflicts_with_cold_pages_only_a_little() {
        let mut rng = fastrand::Rng::with_seed(1);
        // 1 GiB of DRAM, 2 GiB of pages: a 256 MiB hot set touched often, the rest never.
        let hot = 65536.0;
        let cold = 524288.0 - hot;
        let mut dm = DirectMapped::new(1 << 30, hot + cold, &[2], &mut rng);
        dm.update(&[vec![(hot, 100.0), (cold, 0.0)]]);
        // Cold pages have rate 0: sharing a frame with them costs nothing...
        assert!(dm.miss[0][0] < 0.2, "{}", dm.miss[0][0]);
        // ...but hot pages that share a frame with other hot pages miss half the time.
        let mut busy = DirectMapped::new(1 << 30, 4.0 * hot + cold, &[2], &mut rng);
        busy.update(&[vec![(4.0 * hot, 100.0), (cold, 0.0)]]);
        assert!(busy.miss[0][0] > 0.2, "a hot set the size of DRAM conflicts: {}", busy.miss[0][0]);
    }
}
