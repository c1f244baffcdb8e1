//! Green / yellow / red health, with the thresholds of the tiering guidance in the seeds.

use serde::{Deserialize, Serialize};

/// A health colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Colour {
    Green,
    Yellow,
    Red,
}

impl std::fmt::Display for Colour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Colour::Green => "green",
            Colour::Yellow => "yellow",
            Colour::Red => "red",
        })
    }
}

/// Active memory as a share of the DRAM budget: below 50% green, 50–75% yellow, above
/// 75% red. Above half, tier-1 traffic starts to cost tenants noticeably.
pub fn active_memory(active_bytes: u64, dram_budget: u64) -> Colour {
    if dram_budget == 0 {
        return Colour::Red;
    }
    let pct = active_bytes as f64 * 100.0 / dram_budget as f64;
    if pct < 50.0 {
        Colour::Green
    } else if pct <= 75.0 {
        Colour::Yellow
    } else {
        Colour::Red
    }
}

/// Tier read latency: below 200 µs green, 200–400 µs yellow, above 400 µs red.
pub fn tier_read_latency(micros: f64) -> Colour {
    if micros < 200.0 {
        Colour::Green
    } else if micros <= 400.0 {
        Colour::Yellow
    } else {
        Colour::Red
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_memory_edges() {
        let b = 1000;
        let cases = [
            (0, Colour::Green),
            (499, Colour::Green),
            (500, Colour::Yellow),
            (750, Colour::Yellow),
            (751, Colour::Red),
            (2000, Colour::Red),
        ];
        for (active, want) in cases {
            assert_eq!(active_memory(active, b), want, "{active}");
        }
        assert_eq!(active_memory(1, 0), Colour::Red);
    }

    #[test]
    fn latency_edges() {
        let cases = [
            (0.0, Colour::Green),
            (199.9, Colour::Green),
            (200.0, Colour::Yellow),
            (400.0, Colour::Yellow),
            (400.1, Colour::Red),
        ];
        for (us, want) in cases {
            assert_eq!(tier_read_latency(us), want, "{us}");
        }
    }
}
