//! Tenant names, validated so they are safe as a cgroup directory and a file name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

/// A tenant's name: 1–64 characters of `[A-Za-z0-9_.-]`, starting with a letter or digit.
///
/// The name becomes a cgroup directory and a folder in the state directory, so the
/// rules shut out path tricks (`..`, `/`), hidden files and control characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct TenantName(String);

/// Why a tenant name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// empty name
    #[error("tenant name is empty")]
    Empty,
    /// too long
    #[error("tenant name `{0}` is longer than 64 characters")]
    TooLong(String),
    /// bad first character
    #[error("tenant name `{0}` must start with a letter or a digit")]
    BadStart(String),
    /// bad character
    #[error("tenant name `{0}` may only hold letters, digits, `_`, `.` and `-`")]
    BadChar(String),
}

impl TenantName {
    pub fn new(s: &str) -> Result<Self, NameError> {
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        if s.len() > 64 {
            return Err(NameError::TooLong(s.chars().take(64).collect()));
        }
        let printable: String = s.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
        if !s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
            return Err(NameError::BadStart(printable));
        }
        if !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(NameError::BadChar(printable));
        }
        Ok(TenantName(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TenantName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TenantName::new(s)
    }
}

impl fmt::Display for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TenantName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TenantName::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for ok in ["db", "web-1", "vm_07", "a.b", "9lives"] {
            assert!(TenantName::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_path_tricks_and_junk() {
        let cases = [
            ("", NameError::Empty),
            ("..", NameError::BadStart("..".into())),
            (".hidden", NameError::BadStart(".hidden".into())),
            ("a/b", NameError::BadChar("a/b".into())),
            ("../../etc", NameError::BadStart("../../etc".into())),
            ("a b", NameError::BadChar("a b".into())),
            ("a\nb", NameError::BadChar("a?b".into())),
            ("-rf", NameError::BadStart("-rf".into())),
        ];
        for (name, want) in cases {
            assert_eq!(TenantName::new(name), Err(want), "{name:?}");
        }
        assert!(matches!(TenantName::new(&"x".repeat(65)), Err(NameError::TooLong(_))));
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<TenantName>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<TenantName>("\"../x\"").is_err());
    }
}
