//! The daemon's configuration: a TOML file, overridden by flags, validated as a whole
//! before anything starts.
//!
//! [`RawConfig`] is what the file says (unknown keys refused); [`Config`] is the
//! validated, fully resolved result the daemon runs on. Defaults that depend on the
//! host (the DRAM budget) are passed in by the caller, so this module stays pure.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::size::{ByteSize, human};

pub use crate::policy::PolicyKind;

/// How a file tier is presented to the kernel's swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TierBacking {
    /// A file tier behind a loop device (huge pages are swapped out whole), a device as is.
    #[default]
    Auto,
    /// The file itself is the swap area (the kernel splits huge pages on swap-out).
    File,
    /// Always a loop device over the file.
    Loop,
}

impl FromStr for TierBacking {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(TierBacking::Auto),
            "file" => Ok(TierBacking::File),
            "loop" => Ok(TierBacking::Loop),
            _ => Err(format!("unknown tier backing `{s}`: choose auto, file or loop")),
        }
    }
}

/// Whether the tier sits behind dm-crypt (a key made at each start, held by the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TierEncryption {
    /// Encrypted where the kernel has dm-crypt and the tier is a block device (a device,
    /// or a file behind a loop device); otherwise not, and health says so.
    #[default]
    Auto,
    /// Encrypted, or tierd does not start.
    On,
    Off,
}

impl FromStr for TierEncryption {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(TierEncryption::Auto),
            "on" => Ok(TierEncryption::On),
            "off" => Ok(TierEncryption::Off),
            _ => Err(format!("unknown tier encryption `{s}`: choose auto, on or off")),
        }
    }
}

/// The `[tier]` table as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTier {
    /// A block device, a partition or a file. Unset: `tier.swap` in the state directory.
    pub path: Option<PathBuf>,
    /// Size of a file tier. Unset: DRAM budget × ratio.
    pub size: Option<ByteSize>,
    pub backing: TierBacking,
    /// Take a device that holds a filesystem signature.
    pub force: bool,
    pub encrypt: TierEncryption,
    /// Drive writes per day the tier's drive is rated for (its endurance); unset: not judged.
    pub dwpd: Option<f64>,
    /// The whole drive's size, which DWPD counts in. Unset: the tier device's own size
    /// (for a tier on a partition or a file, less than the drive: the judgement errs safe).
    pub drive_size: Option<ByteSize>,
}

/// The `[tracker]` table as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTracker {
    /// Pages sampled per tenant per interval (scaled with tenant size, see the tracker).
    pub sample_pages: Option<u32>,
    /// Length of the sliding activeness window ("hot" = touched within it).
    pub window: Option<String>,
    /// CPU the trackers may use, % of one core per 8 GiB tracked; sample sizes shrink
    /// to stay within it (0: no cap).
    pub cpu_budget: Option<f64>,
    /// How activeness is measured: `sampling` (default) or `damon`.
    pub kind: Option<TrackerKind>,
}

/// How a tenant's activeness is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TrackerKind {
    /// Pages sampled out and watched coming back: any kernel with `process_madvise`.
    #[default]
    Sampling,
    /// The kernel's access monitor (DAMON vaddr with target filters, 6.6+), where it is
    /// free; sampling where it is not.
    Damon,
}

impl std::str::FromStr for TrackerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sampling" => Ok(TrackerKind::Sampling),
            "damon" => Ok(TrackerKind::Damon),
            _ => Err(format!("tracker `{s}` is not one of sampling, damon")),
        }
    }
}

/// `policy` as written: a name (`policy = "tierd"`), or a table with the name and the
/// `tierd` policy's tunables (`[policy]` `kind = "tierd"`, `[policy.tierd]` …).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RawPolicy {
    Name(PolicyKind),
    Table(PolicyTable),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyTable {
    pub kind: Option<PolicyKind>,
    pub tierd: Option<crate::policy::Knobs>,
}

/// The configuration file as written; every key is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    pub dram_budget: Option<ByteSize>,
    pub ratio: Option<f64>,
    pub policy: Option<RawPolicy>,
    pub interval: Option<String>,
    /// How long a tenant may wait at its memory limit, the kernel's reclaim making no
    /// progress (the tier full, a failing device), before the OOM killer may act on it.
    pub oom_grace: Option<String>,
    pub state_dir: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    /// Name of tierd's cgroup subtree, created under the cgroup tierd runs in.
    pub cgroup_name: Option<String>,
    /// Address of the HTTP server (metrics, dashboard); unset: off.
    pub http: Option<String>,
    /// Cgroup hierarchy paths (`/machine.slice`) below which `tierctl adopt` may take a
    /// cgroup tierd did not create as a tenant; below tierd's own cgroup it always may.
    pub adopt_roots: Option<Vec<String>>,
    pub tier: RawTier,
    pub tracker: RawTracker,
}

/// A configuration that failed validation; every problem is listed, not just the first.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// the file is not valid TOML or has unknown keys
    #[error("config file: {0}")]
    Parse(String),
    /// one or more settings are invalid
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

/// The resolved tier settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierConfig {
    pub path: PathBuf,
    /// Size to create a file tier with; devices use their whole size.
    pub size: u64,
    pub backing: TierBacking,
    pub force: bool,
    pub encrypt: TierEncryption,
    /// True when the path is tierd's own default file in the state directory.
    pub embedded: bool,
    /// See [`RawTier::dwpd`].
    pub dwpd: Option<f64>,
    /// See [`RawTier::drive_size`].
    pub drive_size: Option<u64>,
}

/// The resolved tracker settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrackerConfig {
    pub sample_pages: u32,
    pub window: Duration,
    /// % of one core per 8 GiB tracked; 0 for no cap.
    pub cpu_budget: f64,
    pub kind: TrackerKind,
}

/// A validated configuration the daemon can run on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub dram_budget: u64,
    pub ratio: f64,
    pub policy: PolicyKind,
    /// The `tierd` policy's tunables.
    pub knobs: crate::policy::Knobs,
    pub interval: Duration,
    /// See [`RawConfig::oom_grace`].
    pub oom_grace: Duration,
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    pub cgroup_name: String,
    /// Address of the HTTP server, as written (the daemon checks it is loopback).
    pub http: Option<String>,
    /// See [`RawConfig::adopt_roots`].
    pub adopt_roots: Vec<String>,
    pub tier: TierConfig,
    pub tracker: TrackerConfig,
}

pub const DEFAULT_STATE_DIR: &str = "/var/lib/tierd";
pub const DEFAULT_SOCKET: &str = "/run/tierd.sock";
pub const DEFAULT_CGROUP_NAME: &str = "tierd";

impl RawConfig {
    /// Parses a config file's text; unknown keys are errors.
    pub fn from_toml(text: &str) -> Result<RawConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// Checks every setting and resolves defaults. `host_memory` is the host's RAM,
    /// used for the default budget (half of it) and to refuse a budget above it.
    pub fn validate(&self, host_memory: u64) -> Result<Config, ConfigError> {
        let mut errs = Vec::new();
        let (dram_budget, ratio) = self.memory(host_memory, &mut errs);
        let interval = parse_duration("interval", self.interval.as_deref(), Duration::from_secs(10), &mut errs);
        if interval < Duration::from_millis(100) || interval > Duration::from_secs(600) {
            errs.push(format!("interval {} must be between 100ms and 10m", humantime::format_duration(interval)));
        }
        let oom_grace = parse_duration("oom_grace", self.oom_grace.as_deref(), Duration::from_secs(30), &mut errs);
        if oom_grace < Duration::from_secs(1) || oom_grace > Duration::from_secs(3600) {
            errs.push(format!("oom_grace {} must be between 1s and 1h", humantime::format_duration(oom_grace)));
        }
        let (state_dir, socket, cgroup_name) = self.places(&mut errs);
        let adopt_roots = self.adopt_roots.clone().unwrap_or_default();
        errs.extend(adopt_roots.iter().filter_map(|r| adopt_root_problem(r)));
        let tier = self.tier_config(dram_budget, ratio, &state_dir, &mut errs);
        let tracker = self.tracker_config(interval, &mut errs);
        let (policy, knobs) = match &self.policy {
            None => (PolicyKind::default(), crate::policy::Knobs::default()),
            Some(RawPolicy::Name(k)) => (*k, crate::policy::Knobs::default()),
            Some(RawPolicy::Table(t)) => (t.kind.unwrap_or_default(), t.tierd.unwrap_or_default()),
        };
        errs.extend(knobs.problems());
        if !errs.is_empty() {
            return Err(ConfigError::Invalid(errs));
        }
        Ok(Config {
            dram_budget,
            ratio,
            policy,
            knobs,
            interval,
            oom_grace,
            state_dir,
            socket,
            cgroup_name,
            http: self.http.clone(),
            adopt_roots: adopt_roots.iter().map(|r| r.trim_end_matches('/').to_string()).collect(),
            tier,
            tracker,
        })
    }

    /// The DRAM budget (default: half the host's memory) and the tier's ratio to it.
    fn memory(&self, host_memory: u64, errs: &mut Vec<String>) -> (u64, f64) {
        let dram_budget = self.dram_budget.map_or(host_memory / 2, |b| b.0);
        if dram_budget < 64 << 20 {
            errs.push(format!("dram_budget {} is below the 64 MiB minimum", human(dram_budget)));
        }
        if host_memory > 0 && dram_budget > host_memory {
            errs.push(format!(
                "dram_budget {} is more than this host's memory ({})",
                human(dram_budget),
                human(host_memory)
            ));
        }
        let ratio = self.ratio.unwrap_or(1.0);
        if !(ratio.is_finite() && ratio > 0.0 && ratio <= 16.0) {
            errs.push(format!("ratio {ratio} must be above 0 and at most 16 (NVMe bytes per DRAM byte)"));
        }
        (dram_budget, ratio)
    }

    /// Where tierd keeps its state, its socket and its cgroup.
    fn places(&self, errs: &mut Vec<String>) -> (PathBuf, PathBuf, String) {
        let state_dir = self.state_dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        if !state_dir.is_absolute() {
            errs.push(format!("state_dir {} must be an absolute path", state_dir.display()));
        }
        let socket = self.socket.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
        if !socket.is_absolute() {
            errs.push(format!("socket {} must be an absolute path", socket.display()));
        }
        let cgroup_name = self.cgroup_name.clone().unwrap_or_else(|| DEFAULT_CGROUP_NAME.to_string());
        if let Err(e) = crate::TenantName::new(&cgroup_name) {
            errs.push(format!("cgroup_name: {e}"));
        }
        (state_dir, socket, cgroup_name)
    }

    /// The tier: a file in the state directory unless given, sized budget x ratio.
    fn tier_config(&self, dram_budget: u64, ratio: f64, state_dir: &Path, errs: &mut Vec<String>) -> TierConfig {
        let embedded = self.tier.path.is_none();
        let path = self.tier.path.clone().unwrap_or_else(|| state_dir.join("tier.swap"));
        if !path.is_absolute() {
            errs.push(format!("tier.path {} must be an absolute path", path.display()));
        }
        let size = match self.tier.size {
            Some(s) => s.0,
            // One extra MiB holds the swap header, so the usable size is budget x ratio.
            None => (dram_budget as f64 * ratio) as u64 + (1 << 20),
        };
        if size < 40 << 10 {
            errs.push(format!("tier.size {} is too small for a swap area", human(size)));
        }
        if let Some(d) = self.tier.dwpd.filter(|d| !(*d > 0.0 && *d <= 100.0)) {
            errs.push(format!("tier.dwpd {d} must be above 0 and at most 100 drive writes per day"));
        }
        TierConfig {
            path,
            size,
            backing: self.tier.backing,
            force: self.tier.force,
            encrypt: self.tier.encrypt,
            embedded,
            dwpd: self.tier.dwpd,
            drive_size: self.tier.drive_size.map(|s| s.0),
        }
    }

    /// The tracker's sample, CPU budget and window (at least one interval).
    fn tracker_config(&self, interval: Duration, errs: &mut Vec<String>) -> TrackerConfig {
        let sample_pages = self.tracker.sample_pages.unwrap_or(1024);
        if !(16..=65536).contains(&sample_pages) {
            errs.push(format!("tracker.sample_pages {sample_pages} must be between 16 and 65536"));
        }
        let cpu_budget = self.tracker.cpu_budget.unwrap_or(0.9);
        if !(0.0..=100.0).contains(&cpu_budget) {
            errs.push(format!("tracker.cpu_budget {cpu_budget} must be a percentage of one core, 0 to 100"));
        }
        let window = parse_duration("tracker.window", self.tracker.window.as_deref(), Duration::from_secs(60), errs);
        if window < interval {
            errs.push(format!(
                "tracker.window {} must be at least one interval ({})",
                humantime::format_duration(window),
                humantime::format_duration(interval)
            ));
        }
        TrackerConfig { sample_pages, window, cpu_budget, kind: self.tracker.kind.unwrap_or_default() }
    }
}

/// Why `root` cannot be an adoptable root, if it cannot.
fn adopt_root_problem(root: &str) -> Option<String> {
    let parts: Vec<&str> = root.trim_end_matches('/').split('/').skip(1).collect();
    if !root.starts_with('/') || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Some(format!("adopt_roots {root:?} must be a cgroup path such as /machine.slice"));
    }
    if parts.is_empty() {
        return Some(
            "adopt_roots \"/\" would let tierd write the memory limits of every cgroup on the host, system \
             services included; name the slices that hold your workloads"
                .into(),
        );
    }
    None
}

fn parse_duration(key: &str, text: Option<&str>, default: Duration, errs: &mut Vec<String>) -> Duration {
    match text {
        None => default,
        Some(t) => humantime::parse_duration(t).unwrap_or_else(|e| {
            errs.push(format!("{key} `{t}`: {e} (write e.g. 10s, 500ms, 2m)"));
            default
        }),
    }
}

/// The commented sample configuration shipped with tierd (also `tierd --print-config`).
pub const SAMPLE_CONFIG: &str = include_str!("../../../tierd.sample.toml");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::{GIB, MIB};

    const HOST: u64 = 24 * GIB;

    #[test]
    fn defaults_resolve() {
        let c = RawConfig::default().validate(HOST).unwrap();
        assert_eq!(c.dram_budget, 12 * GIB);
        assert_eq!(c.ratio, 1.0);
        assert_eq!(c.policy, PolicyKind::Tierd);
        assert_eq!(c.interval, Duration::from_secs(10));
        assert_eq!(c.tier.path, PathBuf::from("/var/lib/tierd/tier.swap"));
        assert_eq!(c.tier.size, 12 * GIB + MIB);
        assert!(c.tier.embedded);
        assert_eq!(c.tracker.window, Duration::from_secs(60));
        assert_eq!(c.tracker.cpu_budget, 0.9, "the trackers stay under 1% of a core per 8 GiB");
    }

    #[test]
    fn sample_config_parses_and_validates() {
        let raw = RawConfig::from_toml(SAMPLE_CONFIG).unwrap();
        raw.validate(HOST).unwrap();
    }

    #[test]
    fn the_tracker_is_sampling_unless_damon_is_asked_for() {
        assert_eq!(RawConfig::default().validate(HOST).unwrap().tracker.kind, TrackerKind::Sampling);
        let c = RawConfig::from_toml("[tracker]\nkind = \"damon\"\n").unwrap().validate(HOST).unwrap();
        assert_eq!(c.tracker.kind, TrackerKind::Damon);
        let e = RawConfig::from_toml("[tracker]\nkind = \"ebpf\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown variant `ebpf`"), "{e}");
        assert_eq!("damon".parse::<TrackerKind>(), Ok(TrackerKind::Damon));
        assert!("DAMON".parse::<TrackerKind>().unwrap_err().contains("sampling, damon"));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = RawConfig::from_toml("dram_budget = \"1G\"\nbudget = 3\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `budget`"), "{e}");
        let e = RawConfig::from_toml("[tier]\nsise = \"1G\"\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `sise`"), "{e}");
    }

    #[test]
    fn adopt_roots_are_cgroup_paths_and_never_the_whole_host() {
        let roots = |toml: &str| RawConfig::from_toml(toml).unwrap().validate(HOST);
        let c = roots("adopt_roots = [\"/machine.slice/\", \"/kubepods.slice\"]\n").unwrap();
        assert_eq!(c.adopt_roots, ["/machine.slice", "/kubepods.slice"]);
        assert!(roots("").unwrap().adopt_roots.is_empty(), "by default only tierd's own cgroup");
        for bad in ["/", "machine.slice", "/a/../b", "/a//b"] {
            let e = roots(&format!("adopt_roots = [{bad:?}]\n")).unwrap_err();
            assert!(e.to_string().contains("adopt_roots"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_problem_is_reported() {
        let raw = RawConfig::from_toml(
            "dram_budget = \"32G\"\nratio = 0\ninterval = \"soon\"\nstate_dir = \"rel\"\ncgroup_name = \"../x\"\n\
             [tracker]\ncpu_budget = -1\n",
        )
        .unwrap();
        let ConfigError::Invalid(errs) = raw.validate(HOST).unwrap_err() else { panic!() };
        let all = errs.join("\n");
        for want in
            ["dram_budget 32 GiB", "ratio 0", "interval `soon`", "state_dir rel", "cgroup_name", "cpu_budget -1"]
        {
            assert!(all.contains(want), "missing {want:?} in {all}");
        }
    }

    #[test]
    fn tier_size_follows_budget_and_ratio() {
        let raw = RawConfig::from_toml("dram_budget = \"1G\"\nratio = 1.5\n").unwrap();
        assert_eq!(raw.validate(HOST).unwrap().tier.size, 1537 * MIB);
    }

    #[test]
    fn the_drives_endurance_is_optional_and_checked() {
        let c = RawConfig::from_toml("[tier]\ndwpd = 0.3\ndrive_size = \"1T\"\n").unwrap().validate(HOST).unwrap();
        assert_eq!((c.tier.dwpd, c.tier.drive_size), (Some(0.3), Some(1 << 40)));
        let c = RawConfig::from_toml("").unwrap().validate(HOST).unwrap();
        assert_eq!((c.tier.dwpd, c.tier.drive_size), (None, None), "not judged unless told");
        for bad in ["0", "-1", "101", "nan"] {
            let raw = RawConfig::from_toml(&format!("[tier]\ndwpd = {bad}\n")).unwrap();
            let ConfigError::Invalid(errs) = raw.validate(HOST).unwrap_err() else { panic!() };
            assert!(errs.join("\n").contains("tier.dwpd"), "{bad}: {errs:?}");
        }
    }

    #[test]
    fn the_policy_is_a_name_or_a_table_with_the_tierd_knobs() {
        let c = RawConfig::from_toml("policy = \"none\"\n").unwrap().validate(HOST).unwrap();
        assert_eq!(c.policy, PolicyKind::None);
        let c = RawConfig::from_toml("[policy]\nkind = \"tierd\"\n[policy.tierd]\nhorizon_secs = 60\n")
            .unwrap()
            .validate(HOST)
            .unwrap();
        assert_eq!((c.policy, c.knobs.horizon_secs), (PolicyKind::Tierd, 60.0));
        let raw = RawConfig::from_toml("[policy.tierd]\nrest_share = 2\n").unwrap();
        let ConfigError::Invalid(errs) = raw.validate(HOST).unwrap_err() else { panic!() };
        assert!(errs.join("\n").contains("policy.tierd.rest_share 2"), "{errs:?}");
        assert!(RawConfig::from_toml("[policy.tierd]\nhorizon = 1\n").is_err(), "unknown knobs are refused");
    }

    #[test]
    fn policy_names_parse() {
        assert_eq!("none".parse::<PolicyKind>(), Ok(PolicyKind::None));
        assert_eq!("static".parse::<PolicyKind>(), Ok(PolicyKind::Static));
        assert!("lru".parse::<PolicyKind>().unwrap_err().contains("none, static or tierd"));
        assert_eq!("loop".parse::<TierBacking>(), Ok(TierBacking::Loop));
        assert!("zram".parse::<TierBacking>().unwrap_err().contains("auto, file or loop"));
        assert_eq!("on".parse::<TierEncryption>(), Ok(TierEncryption::On));
        assert!("yes".parse::<TierEncryption>().unwrap_err().contains("auto, on or off"));
    }

    /// Every accepted configuration keeps the bounds the daemon relies on.
    fn assert_in_bounds(c: &Config) {
        assert!(c.dram_budget >= 64 * MIB && c.dram_budget <= HOST);
        assert!(c.ratio > 0.0 && c.ratio <= 16.0);
        assert!(c.interval >= Duration::from_millis(100) && c.interval <= Duration::from_secs(600));
        assert!(c.oom_grace >= Duration::from_secs(1) && c.oom_grace <= Duration::from_secs(3600));
        assert!(c.tracker.window >= c.interval);
        assert!(c.state_dir.is_absolute() && c.socket.is_absolute() && c.tier.path.is_absolute());
        assert!(crate::TenantName::new(&c.cgroup_name).is_ok(), "the cgroup name stays one path component");
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_configuration_in_bounds_or_a_clear_error(text in "\\PC{0,300}") {
            match RawConfig::from_toml(&text).and_then(|r| r.validate(HOST)) {
                Ok(c) => assert_in_bounds(&c),
                Err(e) => proptest::prop_assert!(!e.to_string().is_empty()),
            }
        }

        #[test]
        fn the_sample_with_a_line_replaced_is_in_bounds_or_a_clear_error(
            at in 0usize..200,
            line in "[a-z_.]{1,12} = (\"[ -~]{0,12}\"|-?[0-9]{1,22}(\\.[0-9]{1,3})?|true|\\[[ -~]{0,8}\\])"
        ) {
            let mut lines: Vec<&str> = SAMPLE_CONFIG.lines().collect();
            let i = at % lines.len();
            lines[i] = &line;
            match RawConfig::from_toml(&lines.join("\n")).and_then(|r| r.validate(HOST)) {
                Ok(c) => assert_in_bounds(&c),
                Err(e) => proptest::prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
