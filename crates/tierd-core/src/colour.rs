//! The health colour, apart from the checks: the figures judged (tier wear, say) colour
//! themselves without depending on the checks that gather them.

use serde::{Deserialize, Serialize};

/// A health colour, ordered from good to bad (the worse of two is their `max`).
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
