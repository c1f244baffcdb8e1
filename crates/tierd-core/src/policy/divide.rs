//! Dividing DRAM in proportion: floors first, then demand by weight up to each claim's
//! cap, then the spare by weight (the `static` policy's quotas).

/// One tenant's claim on the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Guaranteed bytes (a reserve), given before anything else.
    pub floor: u64,
    /// What it asks for; filled by weight when the budget is short.
    pub demand: u64,
    /// Never more than this (a limit, or the tenant's size).
    pub cap: u64,
    /// Weight when the budget is short, and for the spare.
    pub weight: u64,
}

/// Divides `total` bytes among the claims and returns each one's part, in order:
/// floors (scaled down if they alone exceed `total`), then demand by weight
/// (water-filling: a claim that is satisfied hands its unused part to the others), then
/// what is left up to each cap, by weight. No part is above its cap and the parts never
/// sum to more than `total`.
pub fn divide(total: u64, claims: &[Claim]) -> Vec<u64> {
    let caps: Vec<u64> = claims.iter().map(|c| c.cap).collect();
    let floors: Vec<u64> = claims.iter().map(|c| c.floor.min(c.cap)).collect();
    let floor_sum: u64 = floors.iter().sum();
    let mut parts: Vec<u64> = if floor_sum > total {
        floors.iter().map(|&f| (f as u128 * total as u128 / floor_sum as u128) as u64).collect()
    } else {
        floors
    };
    let left = total - parts.iter().sum::<u64>();
    let demands: Vec<u64> = claims.iter().zip(&caps).map(|(c, &cap)| c.demand.min(cap)).collect();
    let weights: Vec<u64> = claims.iter().map(|c| c.weight.max(1)).collect();
    let left = fill(&mut parts, &demands, &weights, left);
    fill(&mut parts, &caps, &weights, left);
    parts
}

/// Raises `parts` toward `targets` by weight until `left` runs out; returns what is left.
fn fill(parts: &mut [u64], targets: &[u64], weights: &[u64], mut left: u64) -> u64 {
    loop {
        let hungry: Vec<usize> = (0..parts.len()).filter(|&i| parts[i] < targets[i]).collect();
        if hungry.is_empty() || left == 0 {
            return left;
        }
        let weight_sum: u128 = hungry.iter().map(|&i| weights[i] as u128).sum::<u128>().max(1);
        let round = left;
        let mut given = 0;
        for &i in &hungry {
            let fair = (round as u128 * weights[i] as u128 / weight_sum) as u64;
            let give = fair.max(1).min(targets[i] - parts[i]).min(left);
            parts[i] += give;
            left -= give;
            given += give;
        }
        if given == 0 {
            return left;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(floor: u64, demand: u64, cap: u64, weight: u64) -> Claim {
        Claim { floor, demand, cap, weight }
    }

    #[test]
    fn floors_then_demand_by_weight_then_the_spare_and_never_past_a_cap() {
        // Short: demand by weight (2:1), after the floor.
        assert_eq!(divide(90, &[claim(30, 100, 100, 1), claim(0, 100, 100, 2)]), vec![50, 40]);
        // A satisfied claim hands the rest to the others; the spare goes up to the caps.
        assert_eq!(divide(100, &[claim(0, 10, 20, 1), claim(0, 30, 100, 1)]), vec![20, 80]);
        // Floors beyond the budget are scaled down.
        assert_eq!(divide(60, &[claim(60, 60, 60, 1), claim(60, 60, 60, 1)]), vec![30, 30]);
    }

    #[test]
    fn random_divisions_respect_floors_caps_and_the_total() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m
        };
        for _ in 0..500 {
            let n = 1 + next(6) as usize;
            let claims: Vec<Claim> = (0..n)
                .map(|_| {
                    let cap = 1 + next(1000);
                    claim(next(cap + 1) / 2, next(1200), cap, 1 + next(300))
                })
                .collect();
            let total = next(3000);
            let parts = divide(total, &claims);
            assert!(parts.iter().sum::<u64>() <= total);
            for (p, c) in parts.iter().zip(&claims) {
                assert!(*p <= c.cap, "{p} over cap {c:?}");
            }
            if claims.iter().map(|c| c.floor).sum::<u64>() <= total {
                assert!(parts.iter().zip(&claims).all(|(p, c)| *p >= c.floor.min(c.cap)));
            }
        }
    }
}
