//! Dividing DRAM among tenants: floors first, then demand up to each one's fair share,
//! then what each touches and the hot set it holds, then the rest of demand, then the
//! rest of what each holds, then spare by weight.

/// One tenant's claim on the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Guaranteed bytes (a reserve), given before anything else.
    pub floor: u64,
    /// What the tenant needs now, headroom for bursts included; filled by weight when
    /// the budget is short.
    pub demand: u64,
    /// The part of `demand` it is measured to touch (no headroom): met for every
    /// tenant, with `hot`, before anyone's demand beyond its fair share.
    pub active: u64,
    /// The recent hot set it holds (a tenant resting between sessions): kept before a
    /// busy tenant's headroom beyond its fair share. In login-storm a resting tenant's
    /// 192 MiB hot set was cut to 42 MiB for busy neighbours' burst room, and read back
    /// at its next login (1.3 s of each 20 s session lost; plain swap's one LRU kept it).
    pub hot: u64,
    /// What it holds now, kept (by weight) once every demand is met: DRAM nobody needs
    /// stays where it is rather than being taken only to be read back (0: nothing).
    pub keep: u64,
    /// More of what it holds, kept (by weight) once every `keep` is met: quotas stay
    /// put while nobody needs the DRAM, instead of swinging with the estimates behind
    /// the spare's weights (0: nothing).
    pub hold: u64,
    /// Never more than this (a limit, or the tenant's size).
    pub cap: u64,
    /// Weight when the budget is short (shares, or size for proportional quotas).
    pub weight: u64,
    /// Weight for the spare left once every demand is met.
    pub spare_weight: u64,
}

/// Divides `total` bytes among the claims and returns each one's part, in order.
///
/// 1. Every claim gets its floor (scaled down if the floors alone exceed `total`).
/// 2. What is left goes toward each claim's demand up to its fair share of `total`
///    (by weight), then toward its [`Claim::active`], then its [`Claim::hot`], then
///    the rest of its demand: each by weight (water-filling: a claim that is
///    satisfied hands its unused part to the others). So memory someone touches, or
///    a resting tenant's hot set, beats a busy tenant's headroom, but a tenant within
///    its fair share gets its headroom first (a sweeping noisy neighbour's whole
///    sweep counts as active).
/// 3. Then toward what each holds ([`Claim::keep`], then [`Claim::hold`]), by weight.
/// 4. What is still left goes toward each cap, by spare weight, so no DRAM idles.
///
/// No claim ever gets more than its cap, and the parts never sum to more than `total`.
pub fn divide(total: u64, claims: &[Claim]) -> Vec<u64> {
    let caps: Vec<u64> = claims.iter().map(|c| c.cap).collect();
    let floors: Vec<u64> = claims.iter().map(|c| c.floor.min(c.cap)).collect();
    let floor_sum: u64 = floors.iter().sum();
    let mut parts: Vec<u64> = if floor_sum > total {
        floors.iter().map(|&f| (f as u128 * total as u128 / floor_sum as u128) as u64).collect()
    } else {
        floors
    };
    let mut left = total - parts.iter().sum::<u64>();
    let demands: Vec<u64> = claims.iter().zip(&caps).map(|(c, &cap)| c.demand.min(cap)).collect();
    let weights: Vec<u64> = claims.iter().map(|c| c.weight.max(1)).collect();
    let spare_weights: Vec<u64> = claims.iter().map(|c| c.spare_weight.max(1)).collect();
    let weight_sum: u128 = weights.iter().map(|&w| w as u128).sum();
    let fair: Vec<u64> =
        demands.iter().zip(&weights).map(|(&d, &w)| d.min((total as u128 * w as u128 / weight_sum) as u64)).collect();
    left = fill(&mut parts, &fair, &weights, left);
    let actives: Vec<u64> = claims.iter().zip(&demands).map(|(c, &d)| c.active.min(d)).collect();
    left = fill(&mut parts, &actives, &weights, left);
    let hots: Vec<u64> = claims.iter().zip(&caps).map(|(c, &cap)| c.hot.min(cap)).collect();
    left = fill(&mut parts, &hots, &weights, left);
    left = fill(&mut parts, &demands, &weights, left);
    let keeps: Vec<u64> = claims.iter().zip(&caps).map(|(c, &cap)| c.keep.min(cap)).collect();
    left = fill(&mut parts, &keeps, &weights, left);
    let holds: Vec<u64> = claims.iter().zip(&caps).map(|(c, &cap)| c.hold.min(cap)).collect();
    left = fill(&mut parts, &holds, &weights, left);
    fill(&mut parts, &caps, &spare_weights, left);
    parts
}

/// How far a new division may move a quota before the move is made: a tenth of
/// the new quota, and at least 16 MiB.
fn band(part: u64) -> u64 {
    (part / 10).max(16 << 20)
}

/// Keeps each quota where it is (`now`) while the new division (`parts`) moves it by
/// no more than a band and it still covers its claim's demand and floor. Re-divided
/// each pass, the spare (split by need) swung Redis tenants' quotas ±30–40 MiB an
/// interval with DRAM far from short, and each cut demoted a Zipf tail the tenant read
/// back a second later. Moves past the band are made whole, so the division's
/// proportions hold to within a band (a quota that merely stayed where it was once
/// kept a first-come tenant at 2.3x its share).
///
/// Cuts held back are paid for by rises held back; when those do not cover them, every
/// held-back cut is made in part, in proportion. What rises held back free beyond that
/// goes back to them, by weight, so the parts still sum to what `parts` did.
pub fn damp(parts: &[u64], now: &[Option<u64>], claims: &[Claim]) -> Vec<u64> {
    let mut out = parts.to_vec();
    let (mut freed, mut cost) = (0u64, 0u64);
    let mut cuts = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let Some(q) = now.get(i).copied().flatten() else { continue };
        let least = c.demand.max(c.floor).min(c.cap);
        if q > c.cap || q < least || q.abs_diff(parts[i]) > band(parts[i]) {
            continue;
        }
        if q < parts[i] {
            freed += parts[i] - q;
        } else {
            cost += q - parts[i];
            cuts.push(i);
        }
        out[i] = q;
    }
    if cost > freed {
        for &i in &cuts {
            out[i] = parts[i] + ((out[i] - parts[i]) as u128 * freed as u128 / cost as u128) as u64;
        }
        cost = cuts.iter().map(|&i| out[i] - parts[i]).sum();
    }
    let weights: Vec<u64> = claims.iter().map(|c| c.weight.max(1)).collect();
    fill(&mut out, parts, &weights, freed - cost);
    out
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
        Claim { floor, demand, active: demand, hot: 0, keep: 0, hold: 0, cap, weight, spare_weight: weight }
    }

    #[test]
    fn what_is_held_is_kept_before_the_spare_is_shared() {
        // a needs 10 and holds 60; b needs 30. Nobody is short: a keeps its 60.
        let mut a = claim(0, 10, 100, 1);
        a.keep = 60;
        let b = claim(0, 30, 100, 1);
        let parts = divide(100, &[a, b]);
        assert_eq!(parts, vec![65, 35], "a keeps 60, the last 10 split evenly");
        // Short of what they hold: demands first, then the keeps share what is left.
        let parts = divide(50, &[a, b]);
        assert_eq!(parts, vec![20, 30], "b's need before a's holding");
        // Holdings beyond the budget are water-filled by weight.
        let mut c = claim(0, 10, 100, 1);
        c.keep = 30;
        let parts = divide(70, &[a, c]);
        assert_eq!(parts, vec![40, 30]);
    }

    #[test]
    fn a_recent_hot_set_is_kept_before_the_rest_of_what_is_held() {
        // Both need 10; a holds 50 of recent hot set, b 50 of other memory. 80 leaves 60
        // after the demands: a's hot set first, then b's holding, then nothing spare.
        let mut a = claim(0, 10, 100, 1);
        a.keep = 50;
        let mut b = claim(0, 10, 100, 1);
        b.hold = 50;
        assert_eq!(divide(80, &[a, b]), vec![50, 30]);
        // With room for both, each keeps what it holds and the spare is shared.
        assert_eq!(divide(120, &[a, b]), vec![60, 60]);
    }

    #[test]
    fn a_resting_hot_set_goes_before_headroom_beyond_a_fair_share_not_before_what_is_touched() {
        // Busy a and b touch 40 and need 50 with headroom; resting c needs 5 and holds a
        // hot set of 30. On 120 (fair share 40): a and b get 40 + what is left past c's 30.
        let busy = Claim { active: 40, ..claim(0, 50, 100, 1) };
        let resting = Claim { active: 5, hot: 30, ..claim(0, 5, 100, 1) };
        assert_eq!(divide(120, &[busy, busy, resting]), vec![45, 45, 30]);
        // On 90, what a and b touch comes first: c keeps only the 10 left.
        assert_eq!(divide(90, &[busy, busy, resting]), vec![40, 40, 10]);
        // A tenant within its fair share gets its headroom before anyone's hot set: a
        // needs 30 (touches 20) of a fair 50, b's sweep touches all it can get.
        let small = Claim { active: 20, ..claim(0, 30, 100, 1) };
        let sweep = Claim { active: 100, ..claim(0, 100, 100, 1) };
        assert_eq!(divide(100, &[small, sweep]), vec![30, 70]);
    }

    #[test]
    fn spare_follows_its_own_weights() {
        let mut a = claim(0, 10, 100, 1);
        let mut b = claim(0, 30, 100, 1);
        a.spare_weight = 10;
        b.spare_weight = 30;
        let parts = divide(80, &[a, b]);
        assert_eq!(parts, vec![20, 60], "spare split 1:3 like the demands");
    }

    #[test]
    fn everyone_fits_then_spare_is_shared() {
        let parts = divide(100, &[claim(0, 20, 100, 1), claim(0, 30, 100, 1)]);
        assert_eq!(parts.iter().sum::<u64>(), 100);
        assert!(parts[0] >= 20 && parts[1] >= 30, "{parts:?}");
        assert_eq!(parts[0] - 20, parts[1] - 30, "spare split evenly: {parts:?}");
    }

    #[test]
    fn short_budget_goes_by_weight() {
        let parts = divide(90, &[claim(0, 100, 100, 2), claim(0, 100, 100, 1)]);
        assert_eq!(parts, vec![60, 30]);
    }

    #[test]
    fn satisfied_claims_hand_back_their_part() {
        let parts = divide(90, &[claim(0, 10, 10, 1), claim(0, 100, 100, 1), claim(0, 100, 100, 1)]);
        assert_eq!(parts, vec![10, 40, 40]);
    }

    #[test]
    fn floors_come_first_and_caps_hold() {
        let parts = divide(100, &[claim(70, 100, 100, 1), claim(0, 100, 100, 100)]);
        assert!((70..=71).contains(&parts[0]), "weight 1 of 101 adds at most a byte: {parts:?}");
        assert_eq!(parts.iter().sum::<u64>(), 100);
        let parts = divide(100, &[claim(0, 100, 25, 1), claim(0, 100, 100, 1)]);
        assert_eq!(parts, vec![25, 75]);
    }

    #[test]
    fn floors_above_total_are_scaled() {
        let parts = divide(100, &[claim(100, 100, 100, 1), claim(100, 100, 100, 1)]);
        assert_eq!(parts, vec![50, 50]);
    }

    const MIB: u64 = 1 << 20;

    /// Reproducible pseudo-random numbers below `m` (a linear congruential generator).
    fn numbers(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut rng = seed;
        move |m| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) % m
        }
    }

    #[test]
    fn quotas_stay_put_while_a_new_division_moves_them_within_the_band() {
        // Four tenants of 500 MiB; the spare's split moved ±30 MiB. Nobody needs more.
        let claims = [claim(0, 100 * MIB, 1000 * MIB, 1); 4];
        let now = [Some(500 * MIB); 4];
        let parts = [530 * MIB, 470 * MIB, 530 * MIB, 470 * MIB];
        assert_eq!(damp(&parts, &now, &claims), vec![500 * MIB; 4]);
    }

    #[test]
    fn a_move_past_the_band_is_made_whole_and_paid_for_by_held_cuts_in_part() {
        let claims = [claim(0, 100 * MIB, 1000 * MIB, 1); 3];
        let now = [Some(500 * MIB), Some(500 * MIB), Some(200 * MIB)];
        // c rises by 100 MiB (past its 30 MiB band), a and b are cut by 50 MiB each
        // (past their 45 MiB band): every move is made.
        let parts = [450 * MIB, 450 * MIB, 300 * MIB];
        assert_eq!(damp(&parts, &now, &claims), parts.to_vec());
        // Cuts of 40 MiB are within a and b's band, but nothing held back pays for
        // them: c's rise of 80 MiB is past its band, so a and b are cut after all.
        let parts = [460 * MIB, 460 * MIB, 280 * MIB];
        assert_eq!(damp(&parts, &now, &claims), parts.to_vec());
        // A held-back rise of 20 MiB pays for half of two 20 MiB cuts.
        let claims = [claim(0, 100 * MIB, 1000 * MIB, 1); 3];
        let now = [Some(500 * MIB), Some(500 * MIB), Some(480 * MIB)];
        let parts = [480 * MIB, 480 * MIB, 500 * MIB];
        assert_eq!(damp(&parts, &now, &claims), vec![490 * MIB, 490 * MIB, 480 * MIB]);
    }

    #[test]
    fn a_quota_below_its_demand_or_floor_is_not_held() {
        // a's need grew to 520 MiB: it gets its new part, and b's cut is made.
        let claims = [claim(0, 520 * MIB, 1000 * MIB, 1), claim(0, 100 * MIB, 1000 * MIB, 1)];
        let now = [Some(500 * MIB), Some(500 * MIB)];
        let parts = [530 * MIB, 470 * MIB];
        assert_eq!(damp(&parts, &now, &claims), parts.to_vec());
        // A new tenant (no quota yet) takes its part; the others' cuts are made.
        let claims = [claim(0, 10 * MIB, 1000 * MIB, 1); 2];
        assert_eq!(damp(&parts, &[Some(500 * MIB), None], &claims), parts.to_vec());
    }

    #[test]
    fn damping_never_exceeds_the_division_or_caps() {
        let mut next = numbers(777);
        for _ in 0..2000 {
            let n = 1 + next(6) as usize;
            let claims: Vec<Claim> =
                (0..n).map(|_| claim(0, next(400) * MIB, (1 + next(1000)) * MIB, 1 + next(4))).collect();
            let parts = divide(next(3000) * MIB, &claims);
            let now: Vec<Option<u64>> =
                parts.iter().map(|&p| (next(4) > 0).then(|| (p + next(80) * MIB).saturating_sub(40 * MIB))).collect();
            let out = damp(&parts, &now, &claims);
            assert_eq!(out.iter().sum::<u64>(), parts.iter().sum::<u64>(), "{claims:?} {now:?} {parts:?} {out:?}");
            for ((o, c), p) in out.iter().zip(&claims).zip(&parts) {
                assert!(*o <= c.cap && *o >= c.demand.min(*p), "{claims:?} {now:?} {parts:?} {out:?}");
            }
        }
    }

    #[test]
    fn never_exceeds_total_or_caps() {
        let mut next = numbers(12345);
        for _ in 0..500 {
            let n = 1 + next(6) as usize;
            let claims: Vec<Claim> = (0..n)
                .map(|_| {
                    let cap = next(1000);
                    claim(next(300), next(1000), cap, 1 + next(50))
                })
                .collect();
            let total = next(3000);
            let parts = divide(total, &claims);
            assert!(parts.iter().sum::<u64>() <= total, "{claims:?} {total} {parts:?}");
            for (p, c) in parts.iter().zip(&claims) {
                assert!(*p <= c.cap, "{claims:?} {total} {parts:?}");
            }
            let cap_sum: u64 = claims.iter().map(|c| c.cap).sum();
            assert_eq!(parts.iter().sum::<u64>(), total.min(cap_sum), "no DRAM idles: {claims:?} {total} {parts:?}");
        }
    }
}
