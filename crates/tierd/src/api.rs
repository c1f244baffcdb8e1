//! The local API: one JSON request per line on a Unix socket, one JSON response line
//! back. `tierctl` is a thin client of it; anything else can speak it too.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tierd_core::TenantName;
use tierd_core::tenant::TenantSpec;

/// Environment variable naming the socket, for `tierctl`.
pub const SOCKET_ENV: &str = "TIERD_SOCKET";

/// A request to the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Status,
    /// Start a program as a tenant.
    Run {
        spec: TenantSpec,
        argv: Vec<String>,
        cwd: Option<PathBuf>,
    },
    /// Adopt a running process (it must live in tierd's cgroup or below).
    Attach {
        spec: TenantSpec,
        pid: u32,
    },
    /// Take an existing cgroup (a hierarchy path) as a tenant.
    Adopt {
        spec: TenantSpec,
        cgroup: String,
    },
    /// Let an adopted tenant go, its cgroup's settings put back.
    Release {
        name: TenantName,
    },
    /// Stop managing a tenant; its processes keep running without limits.
    Detach {
        name: TenantName,
    },
    /// Forget an exited tenant.
    Remove {
        name: TenantName,
    },
    /// Signal a tenant's processes.
    Stop {
        name: TenantName,
        signal: i32,
    },
    /// Page a tenant's memory out to the tier now.
    Demote {
        name: TenantName,
        bytes: Option<u64>,
    },
    /// Read a tenant's memory back from the tier now (at most `bytes`; by default as
    /// much as the room under its quota).
    Prefetch {
        name: TenantName,
        bytes: Option<u64>,
    },
    /// Rebuild a tenant's huge pages now.
    Collapse {
        name: TenantName,
    },
    /// The recent decisions about a tenant.
    Explain {
        name: TenantName,
    },
    /// The tracker's heat per 2 MiB region of a tenant: what the policy demotes and
    /// prefetches by.
    Regions {
        name: TenantName,
    },
    /// A tenant's fault curve: the work it gets done for each amount of DRAM.
    Curve {
        name: TenantName,
    },
    /// The policy's allocation on another budget (`None`: this one), with `add` more
    /// tenants like named ones.
    WhatIf {
        budget: Option<u64>,
        add: Vec<(u32, TenantName)>,
    },
    /// Read everything on the tier back into DRAM and turn the tier off (to replace
    /// its device); refused when it does not fit.
    DrainTier,
    /// The recent event log.
    Events,
    /// The in-memory history (one point per 10 s, the last hour), points after `since`
    /// (seconds since the Unix epoch) if given.
    History {
        #[serde(default)]
        since: Option<f64>,
    },
}

impl Request {
    /// The request's name on the wire (`"demote"`), for messages.
    pub fn op(&self) -> String {
        let wire = serde_json::to_value(self).unwrap_or_default();
        wire["op"].as_str().unwrap_or("unknown").to_string()
    }

    /// Whether the request changes tenants, limits or pages: a pass's moves yield to
    /// it (decision 012). Questions wait for the pass instead, so a script that asks
    /// every second does not cut every pass's moves short.
    pub fn changes(&self) -> bool {
        !matches!(
            self,
            Request::Status
                | Request::Events
                | Request::History { .. }
                | Request::Explain { .. }
                | Request::Regions { .. }
                | Request::Curve { .. }
                | Request::WhatIf { .. }
        )
    }
}

/// The daemon's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Response {
    pub fn ok(data: impl Serialize) -> Response {
        Response { ok: true, error: None, data: serde_json::to_value(data).unwrap_or(serde_json::Value::Null) }
    }

    pub fn err(msg: impl Into<String>) -> Response {
        Response { ok: false, error: Some(msg.into()), data: serde_json::Value::Null }
    }
}

/// Host-wide status (`tierctl status --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub pid: u32,
    pub policy: String,
    /// How activeness is measured: `sampling` or `damon`.
    #[serde(default)]
    pub tracker: String,
    pub cgroup_version: String,
    pub cgroup_path: PathBuf,
    pub dram_budget_bytes: u64,
    pub dram_used_bytes: u64,
    pub dram_free_bytes: u64,
    pub ratio: f64,
    /// DRAM + ratio × DRAM, limited by the tier's size.
    pub capacity_bytes: u64,
    pub committed_bytes: u64,
    /// Σ tenant size / DRAM budget.
    pub overcommit: f64,
    pub active_bytes: u64,
    pub active_health: String,
    pub tier: TierStatus,
    pub tierd_cpu_percent: f64,
    /// CPU seconds tierd spent moving pages since it started (demotion, prefetch,
    /// relayout, huge-page rebuilds): the kernel's paging work done in its threads,
    /// which plain swap does in the tenants' own faults.
    #[serde(default)]
    pub moving_cpu_seconds: f64,
    pub tierd_rss_bytes: u64,
    /// Pages read back from the tier per second, host-wide (tier-1 faults and prefetch).
    #[serde(default)]
    pub promotions_per_sec: f64,
    /// Pages written to the tier per second, host-wide.
    #[serde(default)]
    pub demotions_per_sec: f64,
    /// Green/yellow/red checks with what to do about them (`tierctl health`).
    #[serde(default)]
    pub health: Vec<tierd_core::health::Check>,
    /// Where the HTTP server (metrics, dashboard) listens, when it is on.
    #[serde(default)]
    pub http_address: Option<String>,
    #[serde(default)]
    pub uptime_secs: f64,
    /// Set when tierd was busy and answered with the status it last posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<Busy>,
    pub tenants: Vec<TenantStatus>,
}

/// What kept tierd's engine when a status was asked for: the answer is then the status
/// the last pass (or request) posted, so a reader never waits on a long pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Busy {
    /// What holds the engine: "a control-loop pass", "a `demote` request", ...
    pub doing: String,
    /// How long it has held it.
    pub for_secs: f64,
    /// How old the figures in this status are.
    pub figures_age_secs: f64,
}

impl Status {
    /// CPU seconds all running tenants' trackers have spent so far (tierd policy only).
    pub fn tracker_seconds(&self) -> f64 {
        self.tenants.iter().map(|t| t.tracker_seconds).sum()
    }
}

/// The tier device.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct TierStatus {
    pub path: PathBuf,
    /// What the kernel swaps to (a loop device, the file, or the device).
    pub swap_path: PathBuf,
    pub backing: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub read_bytes_per_sec: f64,
    pub write_bytes_per_sec: f64,
    /// The average over the last interval, from the device's counters.
    pub read_latency_us: Option<f64>,
    /// The p99 of sampled reads over the last 10 s (one page in 8, submission to completion).
    #[serde(default)]
    pub read_latency_p99_us: Option<f64>,
    /// The colour of the p99 where known, else of the average.
    pub read_latency_health: Option<String>,
    /// Every sampled read's latency since start.
    #[serde(default)]
    pub read_latency_histogram: Option<tierd_core::read_tail::Histogram>,
    /// Why reads are not sampled, where they are not.
    #[serde(default)]
    pub read_latency_p99_off: Option<String>,
    /// Fraction of the last interval the device was busy (0..=1), when it is a block device.
    #[serde(default)]
    pub utilization: f64,
    /// Drained by `tierctl tier drain`: off, nothing tiered until tierd restarts.
    #[serde(default)]
    pub drained: bool,
    /// The dm-crypt cipher when the tier is encrypted (a key made at each start).
    #[serde(default)]
    pub cipher: Option<String>,
    /// Why it is not, when it is not.
    #[serde(default)]
    pub not_encrypted_because: Option<String>,
    /// Swap reads and writes the tier device failed (the kernel's log; lower bounds).
    #[serde(default)]
    pub read_errors: u64,
    #[serde(default)]
    pub write_errors: u64,
    /// Bytes written to the tier device and its rate against the drive's rating.
    #[serde(default)]
    pub wear: Option<tierd_core::wear::Wear>,
}

/// What `tierctl tier drain` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrainReport {
    /// The tier that was turned off.
    pub path: PathBuf,
    /// What was on it and is now back in DRAM.
    pub read_back_bytes: u64,
    pub seconds: f64,
    /// Per tenant, bytes the device failed to read back (lost: `SIGBUS` on touch).
    #[serde(default)]
    pub unreadable: Vec<(String, u64)>,
}

/// One tenant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TenantStatus {
    pub name: String,
    /// `running` or `exited`.
    pub state: String,
    pub exit_code: Option<i32>,
    pub pids: Vec<u32>,
    pub command: Vec<String>,
    /// Anonymous footprint: resident + swapped.
    pub size_bytes: u64,
    pub declared_size_bytes: Option<u64>,
    pub dram_bytes: u64,
    /// Of `dram_bytes`, anonymous memory still charged to the cgroup the tenant's
    /// processes had before `attach` (the kernel moves no charges).
    #[serde(default)]
    pub charged_elsewhere_bytes: u64,
    /// The cgroup it was adopted in (`tierctl adopt`); unset for tierd's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_cgroup: Option<String>,
    pub tier_bytes: u64,
    pub huge_bytes: u64,
    pub pinned_bytes: u64,
    pub quota_bytes: Option<u64>,
    /// DRAM the tenant is sure of: its reserve, or all its size when kept off the tier.
    pub reserve_bytes: u64,
    /// Kept wholly in DRAM (`--no-tier`).
    #[serde(default)]
    pub no_tier: bool,
    pub limit_bytes: Option<u64>,
    pub shares: u32,
    pub active_bytes: Option<u64>,
    pub active_ci_bytes: Option<u64>,
    /// Memory touched at any time within the window (see `Activeness`).
    #[serde(default)]
    pub touched_in_window_bytes: Option<u64>,
    /// 95% confidence half-width of `touched_in_window_bytes` (sampling tracker only):
    /// wide when a tight CPU or tier-read budget shrank the sample.
    #[serde(default)]
    pub touched_in_window_ci_bytes: Option<u64>,
    /// Pages the tracker sampled in the last interval.
    #[serde(default)]
    pub tracker_sample_pages: u64,
    /// CPU time the tracker has spent on the tenant so far, seconds.
    #[serde(default)]
    pub tracker_seconds: f64,
    /// Major faults its own threads took (pages read in by tierd's prefetch and
    /// relayout are not counted: see `tenant::OwnFaults`).
    pub major_faults: u64,
    pub major_faults_per_sec: f64,
    /// Its processes the kernel's OOM killer has ended (counted by its cgroup).
    #[serde(default)]
    pub oom_kills: u64,
    /// Pages the tenant waited for from the tier, bytes per second (major faults x 4 KiB;
    /// swap readahead may read more around them).
    #[serde(default)]
    pub tier_read_bytes_per_sec: f64,
    /// Growth of its tier footprint per second: a lower bound of its tier writes.
    #[serde(default)]
    pub tier_write_bytes_per_sec: f64,
    /// Share of the last interval in which some of its tasks stalled on memory, from the
    /// kernel's per-cgroup PSI (cgroup v2; absent on v1).
    #[serde(default)]
    pub memory_pressure_some: Option<f64>,
    /// The same, all of its tasks at once.
    #[serde(default)]
    pub memory_pressure_full: Option<f64>,
    /// Cores its processes used at the last look between intervals (`tierd` policy).
    #[serde(default)]
    pub cpu_cores: f64,
    /// Seconds it has been at rest (its CPU stopped, nothing read from the tier), if
    /// it is: the policy counts it as gone quiet without waiting for an interval.
    #[serde(default)]
    pub at_rest_secs: Option<f64>,
    /// Share of its activity lately that was waiting for memory.
    #[serde(default)]
    pub stall_share: f64,
    /// Seconds a task of it has waited at its memory limit, reclaim making no progress
    /// (cgroup v1; see `oom_grace`), if it waits now.
    #[serde(default)]
    pub waiting_at_limit_secs: Option<f64>,
    /// Its fault curve as the policy saw it at its last pass (`tierd` policy): the hot
    /// set (touched every interval), the warm part (reused within the window), whether
    /// the hot set is a cliff, and the share of its work predicted under its quota.
    #[serde(default)]
    pub hot_bytes: Option<u64>,
    #[serde(default)]
    pub warm_bytes: Option<u64>,
    #[serde(default)]
    pub steep: Option<bool>,
    #[serde(default)]
    pub predicted_useful: Option<f64>,
    pub reason: String,
    /// Failed syscalls and cgroup writes, by operation.
    pub errors: BTreeMap<String, u64>,
    pub vm: bool,
    /// The guest, when the tenant is a QEMU virtual machine.
    #[serde(default)]
    pub guest: Option<GuestStatus>,
}

/// A VM tenant's guest, as its QEMU process shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GuestStatus {
    /// The QEMU process.
    pub pid: u32,
    /// Guest RAM (`-m`).
    pub ram_bytes: u64,
    /// Whether the mapping(s) holding guest RAM were found (not yet while QEMU starts).
    pub ram_found: bool,
    pub ram_mappings: usize,
    /// Guest RAM in DRAM and on the tier.
    pub ram_dram_bytes: u64,
    pub ram_tier_bytes: u64,
    /// `kvm` or `tcg` (software emulation), as QEMU was asked.
    pub accel: String,
    pub tierable: bool,
    /// Why not, when not.
    pub untierable: Vec<String>,
}

/// What a mover operation did.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct MoveReport {
    pub bytes: u64,
    /// DRAM freed afterwards (the swap cache dropped), for demotion.
    pub freed_bytes: u64,
    /// Time of the moving itself (`process_madvise`).
    pub seconds: f64,
    /// Time spent freeing the swap cache afterwards (demotion on cgroup v1).
    #[serde(default)]
    pub reclaim_seconds: f64,
    pub calls: u64,
    pub errors: u64,
}

/// A recorded decision or warning.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// `info`, `decision`, `warning` or `error`.
    pub level: String,
    pub tenant: Option<String>,
    pub message: String,
}

/// Errors talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// the socket could not be reached
    #[error("cannot reach tierd at {path}: {err} (is tierd running? set --socket or {SOCKET_ENV})")]
    Connect { path: PathBuf, err: std::io::Error },
    /// the conversation failed
    #[error("talking to tierd at {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    /// the daemon sent something unreadable
    #[error("tierd sent a malformed answer: {0}")]
    Malformed(String),
    /// the daemon refused
    #[error("{0}")]
    Refused(String),
}

/// Sends one request and waits for the answer.
pub fn call(socket: &Path, req: &Request, timeout: Duration) -> Result<serde_json::Value, ClientError> {
    let io = |err| ClientError::Io { path: socket.to_path_buf(), err };
    let s = UnixStream::connect(socket).map_err(|err| ClientError::Connect { path: socket.to_path_buf(), err })?;
    s.set_read_timeout(Some(timeout)).map_err(io)?;
    let mut line = serde_json::to_string(req).map_err(|e| ClientError::Malformed(e.to_string()))?;
    line.push('\n');
    let answer = exchange(&s, &line).map_err(io)?;
    let resp: Response =
        serde_json::from_str(&answer).map_err(|e| ClientError::Malformed(format!("{e}: {answer:?}")))?;
    if resp.ok {
        Ok(resp.data)
    } else {
        Err(ClientError::Refused(resp.error.unwrap_or_else(|| "unknown error".into())))
    }
}

/// Writes `line` and reads the answer. tierd refuses a caller that is not root before
/// reading its request and closes: its answer is read even when the write met the close.
fn exchange(mut s: &UnixStream, line: &str) -> std::io::Result<String> {
    let written = s.write_all(line.as_bytes());
    let mut answer = String::new();
    let read = BufReader::new(s).read_line(&mut answer);
    if answer.is_empty() {
        written?;
        read?;
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_changes_things_is_told_from_what_asks() {
        let name = TenantName::new("db").unwrap();
        let changes = [
            Request::Stop { name: name.clone(), signal: 15 },
            Request::Demote { name: name.clone(), bytes: None },
            Request::Remove { name: name.clone() },
            Request::DrainTier,
        ];
        assert!(changes.iter().all(Request::changes), "{changes:?}");
        let asks = [
            Request::Status,
            Request::Explain { name: name.clone() },
            Request::Curve { name },
            Request::WhatIf { budget: None, add: Vec::new() },
        ];
        assert!(!asks.iter().any(Request::changes), "{asks:?}");
    }

    #[test]
    fn an_answer_sent_before_the_request_was_read_is_read_even_if_the_write_fails() {
        let (client, server) = UnixStream::pair().unwrap();
        let refusal = "{\"ok\":false,\"error\":\"refused\"}\n";
        let tierd = std::thread::spawn(move || {
            (&server).write_all(refusal.as_bytes()).unwrap();
            drop(server);
        });
        tierd.join().unwrap();
        // Larger than the socket's buffer: the write fails once the other end is gone.
        let request = "x".repeat(8 << 20);
        assert_eq!(exchange(&client, &request).unwrap(), refusal);
        let (client, server) = UnixStream::pair().unwrap();
        drop(server);
        assert!(exchange(&client, &request).is_err(), "no answer at all is an error");
    }

    #[test]
    fn requests_round_trip_as_tagged_json() {
        let r = Request::Demote { name: TenantName::new("db").unwrap(), bytes: Some(5) };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(s, r#"{"op":"demote","name":"db","bytes":5}"#);
        let back: Request = serde_json::from_str(&s).unwrap();
        assert!(matches!(back, Request::Demote { bytes: Some(5), .. }));
    }

    #[test]
    fn hostile_names_do_not_parse() {
        let e = serde_json::from_str::<Request>(r#"{"op":"detach","name":"../../etc"}"#).unwrap_err();
        assert!(e.to_string().contains("must start with a letter"), "{e}");
    }

    proptest::proptest! {
        /// Whatever arrives on the socket decodes to a request or is refused; a name
        /// that could leave tierd's cgroup or state directory never gets through.
        #[test]
        fn hostile_names_never_decode(name in "\\PC{0,80}", op in "(detach|remove|demote|prefetch|collapse)") {
            let line = serde_json::json!({ "op": op, "name": name }).to_string();
            let decoded = serde_json::from_str::<Request>(&line);
            proptest::prop_assert_eq!(decoded.is_ok(), TenantName::new(&name).is_ok(), "{}", line);
        }

        #[test]
        fn any_line_is_a_request_or_an_error(line in "\\PC{0,200}") {
            if let Ok(Request::Run { spec, .. } | Request::Attach { spec, .. }) = serde_json::from_str::<Request>(&line) {
                proptest::prop_assert!(TenantName::new(spec.name.as_str()).is_ok());
            }
        }
    }
}
