//! What tierd writes to its state directory so a restarted tierd (even after `kill -9`)
//! finds its tier and re-adopts its tenants.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tierd_core::tenant::TenantSpec;

use crate::tenant::{Adoption, Life};
use crate::tier::TierRecord;

/// One tenant as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedTenant {
    pub spec: TenantSpec,
    pub argv: Vec<String>,
    pub life: Life,
    /// The cgroup it was adopted in and the settings to put back there (`tierctl adopt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted: Option<Adoption>,
}

/// The saved state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SavedState {
    pub tier: Option<TierRecord>,
    pub tenants: Vec<SavedTenant>,
}

pub fn state_file(dir: &Path) -> PathBuf {
    dir.join("state.json")
}

/// Where a save is written before its rename.
fn pending_file(dir: &Path) -> PathBuf {
    state_file(dir).with_extension("json.tmp")
}

impl SavedState {
    /// Loads the state; a missing file is an empty state. A whole pending save is a
    /// save a crash cut short before its rename: newer than the state file, so it wins
    /// (a half-written one does not parse and is ignored).
    pub fn load(dir: &Path) -> anyhow::Result<SavedState> {
        if let Ok(text) = std::fs::read_to_string(pending_file(dir))
            && let Ok(pending) = serde_json::from_str(&text)
        {
            return Ok(pending);
        }
        let path = state_file(dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}; move it aside to start afresh", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SavedState::default()),
            Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
        }
    }

    /// Saves atomically: a crash leaves the old file, or the new one whole (renamed or
    /// still pending, see [`SavedState::load`]), never half of one.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let tmp = pending_file(dir);
        let mut f = tierd_sys::create_no_follow(&tmp).map_err(|e| std::io::Error::other(e.to_string()))?;
        f.write_all(&serde_json::to_vec_pretty(self)?)?;
        f.sync_all()?;
        crate::crash_point!("save");
        std::fs::rename(tmp, state_file(dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierd_core::TenantName;

    #[test]
    fn a_whole_pending_save_wins_and_a_half_written_one_is_ignored() {
        let t = tempfile::tempdir().unwrap();
        let with = |names: &[&str]| SavedState {
            tier: None,
            tenants: names
                .iter()
                .map(|n| SavedTenant {
                    spec: tierd_core::tenant::TenantSpec::new(TenantName::new(n).unwrap()),
                    argv: vec![],
                    life: Life::Running,
                    adopted: None,
                })
                .collect(),
        };
        with(&["old"]).save(t.path()).unwrap();
        // Cut short between writing and renaming: the new state is whole but pending.
        std::fs::write(pending_file(t.path()), serde_json::to_vec(&with(&["old", "new"])).unwrap()).unwrap();
        assert_eq!(SavedState::load(t.path()).unwrap().tenants.len(), 2);
        // Cut short while writing: the last renamed state stands.
        std::fs::write(pending_file(t.path()), b"{\"tier\": null, \"tenan").unwrap();
        assert_eq!(SavedState::load(t.path()).unwrap().tenants[0].spec.name.as_str(), "old");
        with(&["a", "b", "c"]).save(t.path()).unwrap();
        assert!(!pending_file(t.path()).exists(), "a finished save leaves nothing pending");
        assert_eq!(SavedState::load(t.path()).unwrap().tenants.len(), 3);
    }

    #[test]
    fn round_trips_and_missing_is_empty() {
        let t = tempfile::tempdir().unwrap();
        assert!(SavedState::load(t.path()).unwrap().tenants.is_empty());
        let s = SavedState {
            tier: None,
            tenants: vec![SavedTenant {
                spec: TenantSpec::new(TenantName::new("db").unwrap()),
                argv: vec!["x".into()],
                life: Life::Exited { code: Some(3) },
                adopted: Some(Adoption {
                    cgroup: "/machine.slice/vm1.scope".into(),
                    settings: vec![("memory.high".into(), "max".into())],
                }),
            }],
        };
        s.save(t.path()).unwrap();
        let back = SavedState::load(t.path()).unwrap();
        assert_eq!(back.tenants[0].life, Life::Exited { code: Some(3) });
        assert_eq!(back.tenants[0].adopted, s.tenants[0].adopted, "what to put back outlives tierd");
        assert_eq!(back.tenants[0].spec.name.as_str(), "db");
    }

    #[test]
    fn a_corrupt_file_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(state_file(t.path()), "{not json").unwrap();
        let e = SavedState::load(t.path()).unwrap_err();
        assert!(e.to_string().contains("move it aside"), "{e}");
    }

    proptest::proptest! {
        /// A corrupt state file is a clear error that says what to do, never a crash or
        /// an adoption of something half-read.
        #[test]
        fn a_corrupt_state_file_is_refused_with_advice(cut in 0usize..400, junk in "\\PC{0,20}") {
            let t = tempfile::tempdir().unwrap();
            let good = SavedState {
                tier: None,
                tenants: vec![SavedTenant {
                    spec: tierd_core::tenant::TenantSpec::new(TenantName::new("db").unwrap()),
                    argv: vec!["sleep".into(), "9".into()],
                    life: Life::Running,
                    adopted: None,
                }],
            };
            let text = serde_json::to_string_pretty(&good).unwrap();
            let cut = cut.min(text.len());
            let broken = format!("{}{junk}", text.get(..cut).unwrap_or(""));
            std::fs::write(state_file(t.path()), &broken).unwrap();
            match SavedState::load(t.path()) {
                // Only the whole file (junk that is whitespace) reads, and then as written.
                Ok(s) => proptest::prop_assert!(s.tenants.len() == 1 && s.tenants[0].spec.name.as_str() == "db"),
                Err(e) => proptest::prop_assert!(e.to_string().contains("move it aside"), "{e}"),
            }
        }
    }
}
