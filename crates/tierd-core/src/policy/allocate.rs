//! One allocation: DRAM to the tenants whose work it buys the most of.
//!
//! Each tenant's claim is a value curve — the work it gets done with q bytes, weighted
//! by its shares — from its floor (reserve, pinned memory) to its cap (limit, size).
//! The budget goes to the steepest pieces of the curves' concave envelopes first
//! (Talus, HPCA'15): a uniformly used hot set is one piece, given whole or not at all,
//! while a Zipf tail is many small pieces that each take what pays. A piece that does not
//! fit is passed over, with the rest of its curve, for smaller ones further down. Then
//! each claim passed over is tried with all that fits beside the others' floors: near
//! the top of a hot set a part is worth nearly the whole (a hot set a few MiB short of
//! its estimate, which the estimate may overstate), and the division that buys the most
//! work wins.

/// A tenant's claim on the budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub floor: u64,
    pub cap: u64,
    /// (bytes, value) at increasing bytes, value not decreasing; the value at the floor
    /// is the first point's at or below it.
    pub points: Vec<(u64, f64)>,
}

impl Claim {
    /// The value of `q` bytes: linear between points, flat past the last.
    pub fn value(&self, q: u64) -> f64 {
        let p = &self.points;
        match p.iter().position(|&(x, _)| x >= q) {
            None => p.last().map_or(0.0, |x| x.1),
            Some(0) => p[0].1,
            Some(i) => {
                let ((x0, v0), (x1, v1)) = (p[i - 1], p[i]);
                v0 + (v1 - v0) * (q - x0) as f64 / (x1 - x0).max(1) as f64
            }
        }
    }

    /// The upper concave envelope of the curve from the floor to the cap.
    fn hull(&self) -> Vec<(u64, f64)> {
        let mut pts: Vec<(u64, f64)> = vec![(self.floor, self.value(self.floor))];
        pts.extend(self.points.iter().copied().filter(|&(x, _)| x > self.floor && x < self.cap));
        if self.cap > self.floor {
            pts.push((self.cap, self.value(self.cap)));
        }
        let mut hull: Vec<(u64, f64)> = Vec::new();
        for p in pts {
            while hull.len() >= 2 {
                let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                // Drop b when it lies on or under the chord from a to p.
                let cross = (b.0 - a.0) as f64 * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0) as f64;
                if cross >= 0.0 {
                    hull.pop();
                } else {
                    break;
                }
            }
            hull.push(p);
        }
        hull
    }
}

/// Divides `budget` among `claims`: floors first (in proportion if they alone exceed
/// it), then the envelopes' pieces by value per byte, then the best of trying each claim
/// that was passed over with all that fits. Returns each claim's part and what is left.
pub fn allocate(budget: u64, claims: &[Claim]) -> (Vec<u64>, u64) {
    let floors: Vec<u64> = claims.iter().map(|c| c.floor.min(c.cap)).collect();
    let floor_sum: u64 = floors.iter().sum();
    if floor_sum >= budget {
        let parts = floors.iter().map(|&f| (f as u128 * budget as u128 / floor_sum.max(1) as u128) as u64).collect();
        return (parts, 0);
    }
    let (mut best, mut left, blocked) = greedy(budget, claims, &floors);
    let mut best_value = total(claims, &best);
    for i in (0..claims.len()).filter(|&i| blocked[i]) {
        let mut start = floors.clone();
        start[i] = claims[i].cap.min(budget - (floor_sum - floors[i]));
        if start[i] <= best[i] {
            continue;
        }
        let (parts, l, _) = greedy(budget, claims, &start);
        let v = total(claims, &parts);
        if v > best_value {
            (best, left, best_value) = (parts, l, v);
        }
    }
    (best, left)
}

fn total(claims: &[Claim], parts: &[u64]) -> f64 {
    claims.iter().zip(parts).map(|(c, &q)| c.value(q)).sum()
}

/// The envelopes' pieces by value per byte from `start` (each part at least its floor);
/// returns the parts, what is left, and which claims had a piece passed over.
fn greedy(budget: u64, claims: &[Claim], start: &[u64]) -> (Vec<u64>, u64, Vec<bool>) {
    let mut parts = start.to_vec();
    let mut left = budget - parts.iter().sum::<u64>();
    // Every piece of every envelope above the start: (claim, from, to, value per byte).
    let mut pieces: Vec<(usize, u64, u64, f64)> = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let from = Claim { floor: start[i], ..c.clone() };
        for w in from.hull().windows(2) {
            let ((x0, v0), (x1, v1)) = (w[0], w[1]);
            if x1 > x0 && v1 > v0 {
                pieces.push((i, x0, x1, (v1 - v0) / (x1 - x0) as f64));
            }
        }
    }
    // Steepest first; at equal value per byte the smaller piece first.
    pieces.sort_by(|a, b| b.3.total_cmp(&a.3).then((a.2 - a.1).cmp(&(b.2 - b.1))));
    let mut blocked = vec![false; claims.len()];
    for (i, from, to, _) in pieces {
        if blocked[i] || parts[i] != from {
            continue;
        }
        let size = to - from;
        if size <= left {
            parts[i] = to;
            left -= size;
        } else {
            blocked[i] = true;
        }
    }
    (parts, left, blocked)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::size::MIB;

    /// A uniform hot set of `hot` MiB worth `value`: nearly nothing below it.
    fn cliff(hot: u64, value: f64) -> Claim {
        Claim {
            floor: 0,
            cap: hot * MIB * 2,
            points: vec![(0, 0.0), (hot * MIB * 7 / 8, value * 0.03), (hot * MIB, value), (hot * MIB * 2, value)],
        }
    }

    #[test]
    fn hot_sets_are_given_whole_or_not_at_all_and_the_best_value_per_byte_first() {
        // Five 192 MiB hot sets on 1 GiB: five fit, not six; nobody gets a useless part.
        let claims: Vec<Claim> = (0..6).map(|_| cliff(192, 1.0)).collect();
        let (parts, left) = allocate(1024 * MIB, &claims);
        assert_eq!(parts.iter().filter(|&&p| p == 192 * MIB).count(), 5, "{parts:?}");
        assert_eq!(parts.iter().filter(|&&p| p == 0).count(), 1);
        assert_eq!(left, 64 * MIB);
        // Twice the shares: the 568 MiB hot set goes before the other one.
        let (parts, _) = allocate(574 * MIB, &[cliff(568, 1.0), cliff(568, 2.0)]);
        assert_eq!(parts, vec![0, 568 * MIB]);
    }

    #[test]
    fn floors_come_first_and_a_concave_tail_takes_what_is_left() {
        let tail = Claim {
            floor: 0,
            cap: 400 * MIB,
            points: (0..=8).map(|i| (i * 50 * MIB, 1.0 - 0.5f64.powi(i as i32))).collect(),
        };
        let mut reserved = cliff(400, 1.0);
        reserved.floor = 450 * MIB;
        let (parts, left) = allocate(600 * MIB, &[reserved, tail]);
        assert_eq!(parts[0], 450 * MIB, "the reserve is kept");
        assert_eq!(parts[1], 150 * MIB, "the tail takes the rest in its steepest pieces: {parts:?}");
        assert_eq!(left, 0);
        // Floors beyond the budget are scaled down.
        let big = Claim { floor: 800 * MIB, cap: 800 * MIB, points: vec![(0, 0.0)] };
        assert_eq!(allocate(1000 * MIB, &[big.clone(), big]).0, vec![500 * MIB, 500 * MIB]);
    }

    #[test]
    fn a_hot_set_a_little_bigger_than_what_is_left_gets_all_that_is_left() {
        // 574 MiB beside a 450 MiB reserve; the estimate says 579. Nearly all of the work
        // at 574, none at half: the greedy passes the piece over, the retry takes it.
        let reserved = Claim { floor: 450 * MIB, cap: 600 * MIB, points: vec![(0, 0.0), (450 * MIB, 1.0)] };
        let near = |value: f64| Claim {
            floor: 0,
            cap: 700 * MIB,
            points: vec![(0, 0.0), (560 * MIB, value * 0.05), (574 * MIB, value * 0.4), (579 * MIB, value)],
        };
        let (parts, _) = allocate(1024 * MIB, &[reserved, near(2.0), near(1.0)]);
        assert_eq!(parts[1], 574 * MIB, "{parts:?}");
        assert_eq!(parts[0] + parts[1] + parts[2], 1024 * MIB);
    }

    #[test]
    fn the_envelope_lies_over_the_curve() {
        let c = cliff(100, 1.0);
        let h = c.hull();
        assert_eq!(h.first().unwrap().0, 0);
        assert_eq!(h[1], (100 * MIB, 1.0), "the convex stretch under the hot set is bridged: {h:?}");
        for q in (0..200).map(|m| m * MIB) {
            let on_hull = Claim { floor: 0, cap: 200 * MIB, points: h.clone() }.value(q);
            assert!(on_hull + 1e-12 >= c.value(q), "{q}");
        }
    }
}
