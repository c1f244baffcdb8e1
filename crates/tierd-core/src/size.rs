//! Byte sizes as operators write them: `512M`, `4G`, `1.5GiB`, `4096`.
//!
//! Units are binary (K = 1024), as `free`, `swapon` and the cgroup files use. A plain
//! number is bytes. Sizes print in the largest binary unit that keeps them readable.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
pub const TIB: u64 = 1 << 40;
/// A base page on x86-64 and arm64 (4 KiB kernels), the unit of swap and of sampling.
pub const PAGE: u64 = 4 * KIB;
/// A transparent huge page (PMD-sized): the unit regions are tracked in.
pub const HUGE_PAGE: u64 = 2 * MIB;

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// Why a size string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// empty size
    #[error("empty size: give a number with an optional unit such as 512M or 4G")]
    Empty,
    /// not a number
    #[error("`{0}` is not a size: give a number with an optional unit such as 512M or 4G")]
    NotANumber(String),
    /// unknown unit
    #[error("`{0}` has an unknown unit: use K, M, G or T (binary: 1K = 1024 bytes)")]
    UnknownUnit(String),
    /// too large
    #[error("`{0}` is too large")]
    TooLarge(String),
}

impl ByteSize {
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = SizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_size(s).map(ByteSize)
    }
}

/// Parses `512M`, `4G`, `1.5GiB`, `4096` into bytes.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(SizeError::Empty);
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(SizeError::NotANumber(s.to_string()));
    }
    let value: f64 = num.parse().map_err(|_| SizeError::NotANumber(s.to_string()))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => TIB,
        _ => return Err(SizeError::UnknownUnit(s.to_string())),
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(SizeError::TooLarge(s.to_string()));
    }
    if mult == 1 && num.contains('.') {
        return Err(SizeError::NotANumber(s.to_string()));
    }
    Ok(bytes.round() as u64)
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&human(self.0))
    }
}

/// `1.5 GiB`, `512 MiB`, `0 B`: one decimal where it matters.
pub fn human(bytes: u64) -> String {
    let units = [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")];
    for (size, name) in units {
        if bytes >= size {
            let v = bytes as f64 / size as f64;
            return if (v - v.round()).abs() < 0.05 {
                format!("{:.0} {name}", v.round())
            } else {
                format!("{v:.1} {name}")
            };
        }
    }
    format!("{bytes} B")
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Str(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_as_binary() {
        let cases = [
            ("4096", 4096),
            ("4K", 4 * KIB),
            ("512M", 512 * MIB),
            ("512MiB", 512 * MIB),
            ("4G", 4 * GIB),
            ("4 GiB", 4 * GIB),
            ("1.5G", 3 * GIB / 2),
            ("2t", 2 * TIB),
            ("0", 0),
        ];
        for (s, want) in cases {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
    }

    #[test]
    fn refuses_garbage_with_a_reason() {
        assert_eq!(parse_size(""), Err(SizeError::Empty));
        assert!(matches!(parse_size("G"), Err(SizeError::NotANumber(_))));
        assert!(matches!(parse_size("12Q"), Err(SizeError::UnknownUnit(_))));
        assert!(matches!(parse_size("1.5"), Err(SizeError::NotANumber(_))));
        assert!(matches!(parse_size("1.2.3G"), Err(SizeError::NotANumber(_))));
        assert!(matches!(parse_size("99999999999T"), Err(SizeError::TooLarge(_))));
    }

    #[test]
    fn prints_readably() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(512 * MIB), "512 MiB");
        assert_eq!(human(3 * GIB / 2), "1.5 GiB");
        assert_eq!(human(1023), "1023 B");
    }

    #[test]
    fn deserializes_from_number_or_string() {
        #[derive(Deserialize)]
        struct T {
            a: ByteSize,
            b: ByteSize,
        }
        let t: T = toml::from_str("a = 1024\nb = \"1G\"").unwrap();
        assert_eq!(t.a, ByteSize(1024));
        assert_eq!(t.b, ByteSize(GIB));
    }
}
