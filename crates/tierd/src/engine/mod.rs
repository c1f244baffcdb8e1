//! The engine: tierd's state and its control loop.
//!
//! Each interval it reaps exited tenants, measures every tenant and the tier, asks the
//! configured policy for a plan (a pure function of the snapshot) and carries the plan
//! out: cgroup limits through the memory controller, page moves through the movers.
//! API requests run against the same state between intervals.
//!
//! One pass ([`Engine::tick`]) is the pipeline `measure` → `policy::plan` → `enforce`;
//! `watch` runs between passes, `tenants` serves the API's operations, `status` reports,
//! and `lifecycle` starts, saves and stops.
//!
//! Cgroup layout, all under the cgroup tierd runs in:
//! `<name>/tenants` (the group: one limit over all tenants) with `<name>/tenants/<tenant>`
//! (a tenant's quota) below it, and `<name>/detached/<tenant>` for detached processes.
//! Adopted tenants keep the cgroups they were found in (see `adopt`).

mod adopt;
mod drive;
mod enforce;
#[cfg(test)]
pub(crate) mod fixture;
mod lifecycle;
mod measure;
mod read_trace;
mod status;
mod tenants;
mod watch;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use read_trace::ReadTrace;
use tierd_core::TenantName;
use tierd_core::admission::{Capacity, Claim, admit};
use tierd_core::config::{Config, PolicyKind, TrackerKind};
use tierd_core::health;
use tierd_core::plan::{Plan, TenantPlan};
use tierd_core::policy;
use tierd_core::size::human;
use tierd_core::snapshot::{Range, Snapshot, TenantView, TierView};
use tierd_core::tenant::TenantSpec;
use tierd_core::tier_faults::TierFaults;
use tierd_core::waits::Step;
use tierd_sys::cgroup::{self, AtLimit, MemoryController};
use tierd_sys::madvise::Pidfd;
use tierd_sys::procfs::ProcFs;

use crate::api::{DrainReport, MoveReport, Status, TenantStatus, TierStatus};
use crate::events::{Events, now_secs};
use crate::history::{History, Point};
use crate::mover;
use crate::state::{SavedState, SavedTenant};
use crate::tenant::{Life, Tenant, exit_code};
use crate::tier::Tier;
use crate::tracker::{DamonHub, ReadBack, SamplingConfig, SamplingTracker, Tracker};

/// Quota changes smaller than this are not written (they would only churn the cgroup).
const QUOTA_SLACK: u64 = 1 << 20;
/// A control-loop step slower than this is reported: the loop holds the engine lock, so
/// while it stalls, quotas, status and the API all wait.
const SLOW_STEP_SECS: f64 = 1.0;
/// The most one pass spends reading resting tenants' working sets back to lay them
/// out: the loop holds the engine lock meanwhile, and wake-ups are seen only between
/// passes. Allowed a whole interval each, two neighbours' relayouts kept a woken
/// login-storm tenant unseen for 2.2 s while its throughput was nil. What is left is
/// laid out at the next passes (0.3 s a pass left a 320 MiB working set scattered
/// after 8 s of rest).
const RELAYOUT_SLICE: Duration = Duration::from_secs(1);
/// A pass's page moves run at least this long before they yield to a waiting API
/// request (decision 012): requests in a row still leave each pass some moves.
const MOVES_BEFORE_YIELD: Duration = Duration::from_millis(250);

/// Counters sampled each interval to turn totals into rates.
#[derive(Debug, Clone, Copy)]
struct IoSample {
    at: Instant,
    pswpin: u64,
    pswpout: u64,
    disk: Option<tierd_sys::procfs::DiskStats>,
    /// The same less tierd's own moves ([`Engine::others_of`]).
    others: Option<tierd_sys::procfs::DiskStats>,
    self_cpu_ticks: u64,
}

/// tierd's running state.
pub struct Engine {
    pub cfg: Config,
    proc: ProcFs,

    cg: Arc<dyn MemoryController>,
    tier: Option<Tier>,
    tenants: BTreeMap<TenantName, Tenant>,
    pub events: Events,
    group_limit: Option<u64>,
    /// Whether the last write of the group's limit failed (said once until one is taken).
    group_limit_failing: bool,
    /// Whether the group's reclaim at its v2 `memory.high` moves anything.
    group_reclaim: tierd_core::waits::ReclaimProgress,
    /// The DRAM written as protected over all tenants (v2 `memory.low` of the group).
    group_protected: Option<u64>,
    io_prev: Option<IoSample>,
    tier_view: TierView,
    self_cpu_percent: f64,
    /// CPU seconds spent carrying out page moves since start.
    moving_cpu_secs: f64,
    /// The tier disk's counters over tierd's own moves since start: set apart from the
    /// tenants' reads, which alone say how quick the tier is for them.
    own_disk: tierd_sys::procfs::DiskStats,
    /// The policy's host-wide notes of the last interval, and their kinds (logged on change).
    notes: Vec<tierd_core::plan::Note>,
    note_kinds: Vec<&'static str>,
    /// Whether the last plan set per-tenant quotas (`None` before the first).
    quotas_in_force: Option<bool>,
    /// Host and tenant figures every 10 s for the last hour (dashboard, `top`).
    pub history: History,
    started: Instant,
    /// Where the HTTP server listens, when it is on (shown in status).
    pub http_address: Option<String>,
    /// Said once: the tier had no free clusters for a relayout.
    tier_room_warned: bool,
    /// When the current (or last) pass began: its moves' deadlines count from it.
    pass_started: Instant,
    /// When its page moves began, and whether they stopped early for a waiting request.
    moves_started: Instant,
    moves_yielded: Arc<AtomicBool>,
    /// The last snapshot the policy planned from (curves and what-ifs are computed on it).
    last_snapshot: Option<Snapshot>,
    /// The tier disk's counters at the last half-second watch, and the read time they gave.
    watch_disk: Option<tierd_sys::procfs::DiskStats>,
    watch_read_us: f64,
    /// tierd's kdamond, when activeness is measured with DAMON (`--tracker damon`).
    damon: Option<crate::tracker::SharedDamon>,
    /// The kernel's log, read each pass for failed swap I/O on the tier (`None`: unreadable).
    kernel_log: Option<tierd_sys::kmsg::KernelLog>,
    /// Failed swap I/O on the tier since this tierd set it up.
    tier_faults: TierFaults,
    /// Bytes written to the tier device, for its wear.
    tier_writes: tierd_core::wear::WriteLog,
    /// The tier's NVMe drive's health log, read on a thread of its own.
    drive: Option<drive::DriveWatch>,
    /// The tier's reads, sampled request by request, and why not where they cannot be.
    read_trace: ReadTrace,
    /// What the API answers from while a pass holds the engine.
    board: Arc<crate::board::Board>,
    _lock: File,
}

impl Engine {
    /// An engine over its parts, with no tenant and nothing measured yet.
    fn assemble(
        cfg: Config,
        proc: ProcFs,
        cg: Arc<dyn MemoryController>,
        tier: Option<Tier>,
        events: Events,
        kernel_log: Option<tierd_sys::kmsg::KernelLog>,
        lock: File,
    ) -> Engine {
        let history = History::default();
        let board = Arc::new(crate::board::Board::new(cfg.interval, events.clone(), history.clone()));
        Engine {
            board,
            cfg,
            proc,
            cg,
            tier,
            tenants: BTreeMap::new(),
            events,
            group_limit: None,
            group_limit_failing: false,
            io_prev: None,
            group_protected: None,
            tier_view: TierView::default(),
            self_cpu_percent: 0.0,
            moving_cpu_secs: 0.0,
            own_disk: Default::default(),
            notes: Vec::new(),
            note_kinds: Vec::new(),
            quotas_in_force: None,
            history,
            started: Instant::now(),
            http_address: None,
            tier_room_warned: false,
            pass_started: Instant::now(),
            moves_started: Instant::now(),
            moves_yielded: Arc::default(),
            last_snapshot: None,
            watch_disk: None,
            watch_read_us: 80.0,
            kernel_log,
            tier_faults: TierFaults::default(),
            tier_writes: Default::default(),
            drive: None,
            read_trace: ReadTrace::default(),
            damon: None,
            group_reclaim: Default::default(),
            _lock: lock,
        }
    }

    fn root_rel(&self) -> String {
        self.cfg.cgroup_name.clone()
    }

    fn group_rel(&self) -> String {
        format!("{}/tenants", self.cfg.cgroup_name)
    }

    /// A tenant's cgroup: in tierd's subtree, or the one it was adopted in.
    fn tenant_rel(&self, name: &TenantName) -> String {
        self.cgroup_of(name, self.tenants.get(name).and_then(|t| t.adopted.as_ref()))
    }

    /// The cgroup of tenant `name`, adopted in `adopted` or else made in tierd's subtree.
    fn cgroup_of(&self, name: &TenantName, adopted: Option<&crate::tenant::Adoption>) -> String {
        match adopted {
            Some(a) => a.cgroup.clone(),
            None => format!("{}/tenants/{}", self.cfg.cgroup_name, name),
        }
    }

    fn detached_rel(&self) -> String {
        format!("{}/detached", self.cfg.cgroup_name)
    }

    /// What a tenant's task meets at a limit reclaim cannot get under. Policy `none` is
    /// plain Linux, OOM killer included, so the baseline stays honest; the others keep
    /// it off so a quota (tierd's placement, not a cap worth a process) makes a fault wait.
    fn at_limit(&self) -> AtLimit {
        if self.cfg.policy == PolicyKind::None { AtLimit::Kill } else { AtLimit::Wait }
    }

    /// One pass of the control loop, each interval: measures, samples activeness,
    /// plans and carries the plan out.
    pub fn tick(&mut self) {
        self.step(true);
    }

    /// A pass between intervals, when [`Engine::fault_watch`] saw a tenant wake or come
    /// to rest: plans from fresh measurements without sampling. Sampling at every
    /// phase change cost ten times the tracking budget in login-storm (8 tenants, one
    /// change every 2.5 s), and its shortened intervals read as less activity.
    pub fn tick_early(&mut self) {
        self.step(false);
    }

    fn step(&mut self, sample: bool) {
        self.pass_started = Instant::now();
        self.moves_yielded.store(false, Ordering::Relaxed);
        crate::crash_point!("pass");
        self.reap();
        self.measure(true);
        if sample && self.cfg.policy == PolicyKind::Tierd && self.tier.is_some() {
            let ((), secs) = mover::timed(|| self.track());
            warn_if_slow(&mut self.events, None, secs, || "activeness tracking".into());
        }
        self.sample_io();
        let secs = now_secs();
        let by = self.cfg.knobs.shortfall;
        for t in self.tenants.values_mut() {
            t.progress.judge_shortfall(secs, by);
        }
        let snap = self.snapshot();
        let plan = policy::plan(self.cfg.policy, &snap, &self.cfg.knobs);
        for tp in &plan.tenants {
            if let Some(t) = self.tenants.get_mut(&tp.name) {
                t.progress.predicted = tp.predicted_useful;
            }
        }
        self.enforce(&plan);
        self.last_snapshot = Some(snap);
        // Just measured and snapshot: the status is built from the pass's snapshot (its
        // curves read it there too), not measured again.
        let st = self.status_of(self.last_snapshot.as_ref().expect("set above"));
        let now = now_secs();
        if self.history.due(now) {
            self.history.record(Point::from_status(&st, now));
        }
        self.board.post(st);
    }

    /// No batch of any page move starts after this: one interval from the pass's start
    /// for all its tenants together, so a pass ends within about an interval and a
    /// wake-up's prefetch is not queued behind whole intervals of its neighbours'
    /// demotions (decision 011); nor once an API request waits (decision 012).
    fn moves_until(&self) -> mover::Until {
        self.yielding(mover::Until::at(self.pass_started + self.cfg.interval))
    }

    /// No batch of a relayout read back from the tier starts after this, within one
    /// pass (see [`RELAYOUT_SLICE`]), nor once an API request waits.
    fn relayout_until(&self) -> mover::Until {
        self.yielding(mover::Until::at(self.pass_started + RELAYOUT_SLICE))
    }

    /// `until`, or sooner: once the moves have run [`MOVES_BEFORE_YIELD`] and an API
    /// request waits for the engine. Noted, so the control loop runs the next pass
    /// as soon as the request is served.
    fn yielding(&self, until: mover::Until) -> mover::Until {
        let (board, yielded) = (self.board(), Arc::clone(&self.moves_yielded));
        let from = self.moves_started + MOVES_BEFORE_YIELD;
        until.or_yield(move || {
            let now = Instant::now() >= from && board.request_waiting();
            if now {
                yielded.store(true, Ordering::Relaxed);
            }
            now
        })
    }

    /// Whether the last pass's moves stopped early for a request: what they did not get
    /// to is planned again by the next pass, which should follow at once.
    pub fn moves_yielded(&self) -> bool {
        self.moves_yielded.load(Ordering::Relaxed)
    }

    /// Where the engine posts its status for readers that cannot wait for it.
    pub fn board(&self) -> Arc<crate::board::Board> {
        Arc::clone(&self.board)
    }

    /// Measures and posts the status after a request changed tenants or their pages, so
    /// a reader answered from the board during the next pass sees what it did.
    pub fn post_status(&mut self) {
        self.status();
    }
}

/// Warns when a control-loop step took [`SLOW_STEP_SECS`] or more.
fn warn_if_slow(events: &mut Events, tenant: Option<&str>, secs: f64, what: impl FnOnce() -> String) {
    if secs >= SLOW_STEP_SECS {
        events.warn(tenant, format!("control loop: {} took {secs:.1} s", what()));
    }
}

fn show_quota(q: Option<u64>) -> String {
    q.map_or("unlimited".to_string(), human)
}

/// When the pass after one due at `due` that started at `started` is due: an interval
/// on, or an interval after its start when it started that late. A pass that overran
/// (its moves cut at the pass's deadline, ranges left) is so followed by the next at
/// once, as in the simulator, not an interval later.
pub fn next_pass(due: Instant, started: Instant, interval: Duration) -> Instant {
    let next = due + interval;
    if next < started { started + interval } else { next }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Duration = Duration::from_secs(5);

    #[test]
    fn a_passs_moves_yield_to_a_waiting_request_once_they_have_run_a_moment() {
        use std::sync::mpsc;
        // Demotions of this process's own memory: with no swap the kernel keeps the
        // pages, and with swap they come back on the next touch.
        let buf = vec![3u8; 12 << 20];
        let start = (buf.as_ptr() as u64).div_ceil(tierd_core::size::HUGE_PAGE) * tierd_core::size::HUGE_PAGE;
        let mut tp = TenantPlan::quota_only(TenantName::new("w").unwrap(), None, String::new());
        tp.demote = vec![Range { pid: std::process::id(), start, len: 8 << 20 }];
        let dir = tempfile::tempdir().unwrap();
        let cg = Arc::new(fixture::FakeCgroups { base: dir.path().to_path_buf(), ..Default::default() });
        let shared = crate::board::Shared::new(fixture::engine(dir.path(), cg, ""));
        let board = shared.work("a test", |e| e.board());
        let (held, holding) = mpsc::channel();
        let (waits, waited) = mpsc::channel::<()>();
        let pass = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                shared.work("a control-loop pass", |e| {
                    fixture::add_tenant(e, "w", None, 0).procs.push(fixture::this_process());
                    held.send(()).unwrap();
                    waited.recv().unwrap();
                    e.pass_started = Instant::now();
                    e.moves_started = e.pass_started;
                    e.moves_yielded.store(false, Ordering::Relaxed);
                    let at_first = e.carry_out_moves(&tp).demoted;
                    let in_time = e.moves_started.elapsed() < MOVES_BEFORE_YIELD;
                    std::thread::sleep(MOVES_BEFORE_YIELD);
                    (at_first, in_time, e.carry_out_moves(&tp).demoted, e.moves_yielded())
                })
            })
        };
        holding.recv().unwrap();
        let request = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.request("a `run` request", |e| e.moves_until().passed()))
        };
        let end = Instant::now() + Duration::from_secs(10);
        while !board.request_waiting() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(board.request_waiting(), "a request blocked on the engine counts as waiting");
        waits.send(()).unwrap();
        let (at_first, in_time, later, yielded) = pass.join().unwrap();
        // A test thread descheduled for a quarter of a second would yield at its 2nd batch.
        if in_time {
            assert_eq!(at_first, 8 << 20, "the moves run a moment first, a request waiting or not");
        }
        assert_eq!((later, yielded), (0, true), "then no batch starts, and the pass says it yielded");
        // Served: nothing waits, and moves run to their deadline (an interval away).
        assert!(!request.join().unwrap(), "a request's own moves do not yield to itself");
        assert!(!board.request_waiting());
        assert!(buf.iter().all(|&b| b == 3));
    }

    #[test]
    fn passes_on_time_keep_their_cadence() {
        let t = Instant::now();
        // Started late within the interval: the cadence holds, no drift.
        assert_eq!(next_pass(t, t + Duration::from_millis(40), I), t + I);
    }

    #[test]
    fn a_pass_that_overran_is_followed_at_once() {
        let t = Instant::now();
        let p1 = next_pass(t, t, I);
        // The first pass ran 15 s: the next is already due when it ends.
        let ended = t + Duration::from_secs(15);
        assert!(p1 <= ended);
        // That one started 10 s late, so the one after counts from its start.
        assert_eq!(next_pass(p1, ended, I), ended + I);
    }
}
