//! The engine: tierd's state and its control loop.
//!
//! Each interval it reaps exited tenants, measures every tenant and the tier, asks the
//! configured policy for a plan (a pure function of the snapshot) and carries the plan
//! out: cgroup limits through the memory controller, page moves through the movers.
//! API requests run against the same state between intervals.
//!
//! Cgroup layout, all under the cgroup tierd runs in:
//! `<name>/tenants` (the group: one limit over all tenants) with `<name>/tenants/<tenant>`
//! (a tenant's quota) below it, and `<name>/detached/<tenant>` for detached processes.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use tierd_core::TenantName;
use tierd_core::admission::{Capacity, Claim, admit};
use tierd_core::config::{Config, PolicyKind};
use tierd_core::health;
use tierd_core::plan::{Plan, TenantPlan};
use tierd_core::policy;
use tierd_core::size::human;
use tierd_core::snapshot::{Range, Snapshot, TenantView, TierView};
use tierd_core::tenant::TenantSpec;
use tierd_core::waits::Step;
use tierd_sys::cgroup::{self, MemoryController};
use tierd_sys::madvise::Pidfd;
use tierd_sys::procfs::ProcFs;

use crate::api::{MoveReport, Status, TenantStatus, TierStatus};
use crate::events::{Events, now_secs};
use crate::history::{History, Point};
use crate::mover;
use crate::state::{SavedState, SavedTenant};
use crate::tenant::{Life, Tenant, exit_code};
use crate::tier::Tier;
use crate::tracker::{SamplingConfig, SamplingTracker};

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

/// Counters sampled each interval to turn totals into rates.
#[derive(Debug, Clone, Copy)]
struct IoSample {
    at: Instant,
    pswpin: u64,
    pswpout: u64,
    disk: Option<tierd_sys::procfs::DiskStats>,
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
    io_prev: Option<IoSample>,
    tier_view: TierView,
    self_cpu_percent: f64,
    /// The policy's host-wide notes of the last interval, and their kinds (logged on change).
    notes: Vec<String>,
    note_kinds: Vec<String>,
    /// Host and tenant figures every 10 s for the last hour (dashboard, `top`).
    pub history: History,
    started: Instant,
    /// Where the HTTP server listens, when it is on (shown in status).
    pub http_address: Option<String>,
    /// Said once: the tier had no free clusters for a relayout.
    tier_room_warned: bool,
    /// No batch of a relayout read back from the tier starts after this, within one
    /// pass (see [`RELAYOUT_SLICE`]).
    relayout_until: Instant,
    /// The last snapshot the policy planned from (curves and what-ifs are computed on it).
    last_snapshot: Option<Snapshot>,
    /// The tier disk's counters at the last half-second watch, and the read time they gave.
    watch_disk: Option<tierd_sys::procfs::DiskStats>,
    watch_read_us: f64,
    _lock: File,
}

impl Engine {
    fn root_rel(&self) -> String {
        self.cfg.cgroup_name.clone()
    }

    fn group_rel(&self) -> String {
        format!("{}/tenants", self.cfg.cgroup_name)
    }

    fn tenant_rel(&self, name: &TenantName) -> String {
        format!("{}/tenants/{}", self.cfg.cgroup_name, name)
    }

    fn detached_rel(&self) -> String {
        format!("{}/detached", self.cfg.cgroup_name)
    }

    /// Starts tierd: state directory, cgroup subtree, tier, and re-adoption of the
    /// tenants an earlier run left behind.
    pub fn start(cfg: Config, echo: bool) -> anyhow::Result<Engine> {
        let proc = ProcFs::new("/proc");
        let sys = PathBuf::from("/sys");
        create_private_dir(&cfg.state_dir)?;
        create_private_dir(&cfg.state_dir.join("tenants"))?;
        let lock_path = cfg.state_dir.join("lock");
        let lock = File::create(&lock_path).with_context(|| format!("{}", lock_path.display()))?;
        if lock.try_lock().is_err() {
            bail!(
                "another tierd is using the state directory {}; stop it or pick another --state-dir",
                cfg.state_dir.display()
            );
        }
        let saved = SavedState::load(&cfg.state_dir)?;
        let cg = cgroup::detect(Path::new("/"), &proc).context("finding the memory cgroup controller")?;
        let mut events = Events::default();
        events.echo = echo;

        let tier = Tier::setup(&cfg.tier, cfg.dram_budget, cfg.ratio, saved.tier.as_ref(), &proc, &sys)?;
        let (size, _) = tier.usage(&proc);
        events.info(
            None,
            format!(
                "tier {} ready: {} on {} ({:?}), swap priority {}",
                tier.record.path.display(),
                human(size),
                tier.record.swap_path.display(),
                tier.record.backing,
                tier.record.priority
            ),
        );

        let mut engine = Engine {
            cfg,
            proc,

            cg: cg.into(),
            tier: Some(tier),
            tenants: BTreeMap::new(),
            events,
            group_limit: None,
            io_prev: None,
            tier_view: TierView::default(),
            self_cpu_percent: 0.0,
            notes: Vec::new(),
            note_kinds: Vec::new(),
            history: History::default(),
            started: Instant::now(),
            http_address: None,
            tier_room_warned: false,
            relayout_until: Instant::now(),
            last_snapshot: None,
            watch_disk: None,
            watch_read_us: 80.0,
            _lock: lock,
        };
        let saved_tier = engine.tier.as_ref().map(|t| t.record.clone());
        let subtree = [engine.root_rel(), engine.group_rel(), engine.detached_rel()];
        for rel in &subtree {
            if let Err(e) = engine.cg.create(rel) {
                // Leave no tier behind if tierd cannot manage cgroups.
                if let Some(t) = engine.tier.take() {
                    let _ = t.teardown();
                }
                return Err(anyhow!(e).context(format!("creating cgroup {rel} under {}", engine.cg.base().display())));
            }
        }
        engine.readopt(saved.tenants);
        engine.save_with(saved_tier);
        engine.tick();
        Ok(engine)
    }

    /// Re-adopts the tenants of an earlier run (their cgroups survived it).
    fn readopt(&mut self, saved: Vec<SavedTenant>) {
        let mut known: Vec<String> = Vec::new();
        for s in saved {
            known.push(s.spec.name.to_string());
            let mut t = Tenant::new(s.spec, s.argv);
            t.life = s.life;
            let name = t.spec.name.clone();
            if t.is_running() {
                let rel = self.tenant_rel(&name);
                let pids = self.cg.procs(&rel).unwrap_or_default();
                t.procs = pids.iter().filter_map(|&p| Pidfd::open(p).ok()).collect();
                if t.procs.is_empty() {
                    t.life = Life::Exited { code: None };
                    let _ = self.cg.remove(&rel);
                    self.events.info(Some(name.as_str()), "exited while tierd was down (exit code unknown)");
                } else {
                    self.events.info(Some(name.as_str()), format!("re-adopted, pids {:?}", t.pids()));
                }
            }
            self.tenants.insert(name, t);
        }
        // Tenant cgroups without a saved record (state lost): adopt them as they are.
        for child in self.cg.children(&self.group_rel()).unwrap_or_default() {
            if known.contains(&child) {
                continue;
            }
            let Ok(name) = TenantName::new(&child) else { continue };
            let rel = self.tenant_rel(&name);
            let pids = self.cg.procs(&rel).unwrap_or_default();
            if pids.is_empty() {
                let _ = self.cg.remove(&rel);
                continue;
            }
            let mut t = Tenant::new(TenantSpec::new(name.clone()), Vec::new());
            t.procs = pids.iter().filter_map(|&p| Pidfd::open(p).ok()).collect();
            self.events.warn(
                Some(name.as_str()),
                format!("found a tenant cgroup without saved settings; adopted with defaults, pids {:?}", t.pids()),
            );
            self.tenants.insert(name, t);
        }
    }

    fn save_with(&mut self, tier: Option<crate::tier::TierRecord>) {
        let state = SavedState {
            tier,
            tenants: self
                .tenants
                .values()
                .map(|t| SavedTenant { spec: t.spec.clone(), argv: t.argv.clone(), life: t.life.clone() })
                .collect(),
        };
        if let Err(e) = state.save(&self.cfg.state_dir) {
            self.events.warn(None, format!("cannot save state in {}: {e}", self.cfg.state_dir.display()));
        }
    }

    fn save(&mut self) {
        let tier = self.tier.as_ref().map(|t| t.record.clone());
        self.save_with(tier);
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
        self.relayout_until = Instant::now() + RELAYOUT_SLICE;
        self.reap();
        self.measure(true);
        if sample && self.cfg.policy == PolicyKind::Tierd {
            let ((), secs) = mover::timed(|| self.track());
            warn_if_slow(&mut self.events, None, secs, || "activeness tracking".into());
        }
        self.sample_io();
        let secs = now_secs();
        let by = self.cfg.knobs.shortfall;
        for t in self.tenants.values_mut() {
            t.short_secs = t.shortfall.observe(secs, t.predicted, &t.activity, by);
        }
        let snap = self.snapshot();
        let plan = policy::plan(self.cfg.policy, &snap, &self.cfg.knobs);
        for tp in &plan.tenants {
            if let Some(t) = self.tenants.get_mut(&tp.name) {
                t.predicted = tp.predicted_useful;
            }
        }
        self.enforce(&plan);
        self.last_snapshot = Some(snap);
        let now = now_secs();
        if self.history.due(now) {
            // Just measured: no need for `status()` to measure again.
            let st = self.status_as_measured();
            self.history.record(Point::from_status(&st, now));
        }
    }

    /// Updates each tenant's processes and notices exits.
    fn reap(&mut self) {
        let names: Vec<TenantName> = self.tenants.keys().cloned().collect();
        let mut changed = false;
        for name in names {
            let rel = self.tenant_rel(&name);
            let pids = self.cg.procs(&rel).unwrap_or_default();
            let t = self.tenants.get_mut(&name).expect("listed above");
            if let Some(child) = t.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                t.child = None;
                t.life = Life::Exited { code: exit_code(status) };
            }
            if matches!(t.life, Life::Exited { .. }) && pids.is_empty() && t.procs.is_empty() {
                continue;
            }
            t.procs.retain(|p| pids.contains(&p.pid()) && !p.has_exited());
            for pid in pids {
                if !t.procs.iter().any(|p| p.pid() == pid)
                    && let Ok(fd) = Pidfd::open(pid)
                {
                    t.procs.push(fd);
                }
            }
            if t.procs.is_empty() {
                if t.is_running() {
                    t.life = Life::Exited { code: None };
                }
                if let Some(mut child) = t.child.take()
                    && let Ok(status) = child.wait()
                {
                    t.life = Life::Exited { code: exit_code(status) };
                }
                t.quota = None;
                let code = match &t.life {
                    Life::Exited { code: Some(c) } => format!("exit code {c}"),
                    _ => "exit code unknown".into(),
                };
                if let Err(e) = self.cg.remove(&rel) {
                    self.events.warn(Some(name.as_str()), format!("cannot remove cgroup {rel}: {e}"));
                }
                self.events.info(Some(name.as_str()), format!("exited ({code}); its cgroup is removed"));
                changed = true;
            }
        }
        // Detached processes that ended leave empty cgroups behind.
        let detached = self.detached_rel();
        for child in self.cg.children(&detached).unwrap_or_default() {
            let rel = format!("{detached}/{child}");
            if self.cg.procs(&rel).map(|p| p.is_empty()).unwrap_or(false) {
                let _ = self.cg.remove(&rel);
            }
        }
        if changed {
            self.save();
        }
    }

    /// Measures every running tenant; `rates` also closes the interval for per-second rates.
    fn measure(&mut self, rates: bool) {
        let now = Instant::now();
        let names: Vec<TenantName> = self.tenants.keys().cloned().collect();
        for name in names {
            let rel = self.tenant_rel(&name);
            let stats = self.cg.stats(&rel);
            let t = self.tenants.get_mut(&name).expect("listed above");
            if !t.is_running() {
                continue;
            }
            let mut footprint = 0;
            let mut swapped = 0;
            let (mut locked, mut hugetlb) = (0, 0);
            for p in &t.procs {
                if let Ok(m) = self.proc.memory(p.pid()) {
                    footprint += m.rss_anon + m.swap;
                    swapped += m.swap;
                    locked += m.locked;
                    hugetlb += m.hugetlb;
                }
            }
            let mut pinned = locked + hugetlb;
            // For a tenant not known as a VM only until it has been looked at once. Also
            // on status requests: the control loop can stall for seconds on a quota
            // write, and a guest QEMU pins must be seen (and pinned) without waiting.
            if t.spec.vm || t.guest.is_some() || t.guest_said.is_none() {
                let pids: Vec<u32> = t.procs.iter().map(|p| p.pid()).collect();
                t.guest = crate::guest::inspect(&self.proc, &pids);
                say_guest(&mut self.events, &name, t);
            }
            // A guest QEMU pins stays in DRAM whole: a floor for the policy and admission.
            if let Some(g) = t.guest.as_ref().filter(|g| !g.tierable) {
                pinned = pinned.max(g.ram_bytes);
            }
            let Ok(stats) = stats else {
                t.count_error("cgroup stats");
                continue;
            };
            let prev = t.measure;
            // Say once (per episode) that some of the tenant cannot be tiered at all.
            if pinned > 0 && prev.pinned == 0 {
                self.events.warn(
                    Some(name.as_str()),
                    format!(
                        "{} cannot be tiered ({} mlocked, {} on hugetlbfs): it stays in DRAM and counts \
                         against the budget",
                        human(pinned),
                        human(locked),
                        human(hugetlb)
                    ),
                );
            }
            t.measure.footprint = footprint;
            t.measure.dram = stats.usage;
            t.measure.tier = stats.swap.max(swapped);
            t.measure.huge = stats.anon_huge;
            t.measure.pinned = pinned;
            // The tenant's own faults, not its cgroup's: those count tierd's reads too.
            let (own_faults, _) = t.read_counters(&self.proc);
            t.measure.major_faults_total = own_faults;
            // Rates are per interval: only the control loop moves their baseline.
            if rates {
                let faults = if prev.at.is_some() { own_faults.saturating_sub(prev.major_faults) } else { 0 };
                t.measure.untracked_faults += faults;
                (t.measure.major_faults_per_sec, t.measure.tier_write_bytes_per_sec) = match prev.at {
                    Some(at) if now > at => {
                        let dt = (now - at).as_secs_f64();
                        (faults as f64 / dt, t.measure.tier.saturating_sub(prev.tier_at_rate) as f64 / dt)
                    }
                    _ => (0.0, 0.0),
                };
                t.measure.tier_at_rate = t.measure.tier;
                t.measure.at = Some(now);
                t.measure.major_faults = own_faults;
                t.fault_rates.push_back(t.measure.major_faults_per_sec);
                let keep =
                    (self.cfg.tracker.window.as_secs_f64() / self.cfg.interval.as_secs_f64()).ceil() as usize + 1;
                while t.fault_rates.len() > keep.max(2) {
                    t.fault_rates.pop_front();
                }
            }
        }
    }

    /// Between intervals: wakes tasks waiting at a quota or at the group limit (cgroup v1
    /// with the OOM killer off: the kernel's reclaim there made no progress, and it
    /// would otherwise have killed them). Woken, they reclaim again; each tenant's waits
    /// are logged once an interval, and one that waits through `oom_grace` has the OOM
    /// killer let act on it (see `tierd_core::waits`).
    pub fn release_waiters(&mut self) {
        // Every tenant is looked at before anyone is woken: a task woken by the group's
        // raised limit runs for a page and would look, for that moment, as if it did not wait.
        let waits: Vec<(TenantName, bool)> = self
            .tenants
            .iter()
            .filter(|(_, t)| t.is_running())
            .map(|(n, _)| (n.clone(), self.cg.waiting_at_limit(&self.tenant_rel(n)).unwrap_or(false)))
            .collect();
        let group = self.group_rel();
        if self.cg.waiting_at_limit(&group).unwrap_or(false)
            && let Err(e) = self.cg.release_waiters(&group)
        {
            self.events.warn(None, format!("cannot wake tasks waiting at the group limit: {e}"));
        }
        let (now, grace, every) = (now_secs(), self.cfg.oom_grace.as_secs_f64(), self.cfg.interval.as_secs_f64());
        let tier_full = tierd_core::waits::tier_full(self.tier_view.size_bytes, self.tier_view.used_bytes);
        for (name, waiting) in waits {
            let rel = self.tenant_rel(&name);
            let t = self.tenants.get_mut(&name).expect("listed above");
            let step = t.waits.observe(now, waiting, tier_full, grace, every);
            let (quota, held) = (show_quota(t.quota), human(t.measure.dram + t.measure.tier));
            if waiting {
                t.count_error("waited at its quota");
            }
            let msg = match step {
                Step::Nothing => None,
                Step::Wake { log } => match self.cg.release_waiters(&rel) {
                    Ok(()) => log.then(|| {
                        format!(
                            "waited at its quota {quota}: reclaim made no progress (the kernel would have killed it); \
                             woken to try again"
                        )
                    }),
                    Err(e) => log.then(|| format!("waits at its quota and cannot be woken: {e}")),
                },
                // Its own limit pinned at what it holds, the next charge fails in its own
                // group, where the OOM killer is let act (at the group limit the kernel
                // would pick among all tenants); that wakes the waiters too.
                Step::GiveUp => Some(
                    match pin_limit(self.cg.as_ref(), &rel, &mut t.quota)
                        .and_then(|()| self.cg.set_oom_killer(&rel, true))
                    {
                        Ok(()) => format!(
                            "waited at its quota {quota} for {grace:.0} s with reclaim making no progress: it holds {held}, \
                         more than DRAM and the tier can take, or the tier fails; the kernel's OOM killer may now act \
                         on it"
                        ),
                        Err(e) => format!("waited {grace:.0} s at its quota and the OOM killer cannot be let act: {e}"),
                    },
                ),
                Step::Recovered => {
                    let _ = self.cg.set_oom_killer(&rel, false);
                    Some("no longer waits at its quota: the OOM killer is off again".to_string())
                }
            };
            if let Some(msg) = msg {
                self.events.warn(Some(name.as_str()), msg);
            }
        }
    }

    /// Between intervals: has a tenant just come to rest or started working again (its
    /// CPU and stall time against its usual, see `tierd_core::activity`)? Reads only each
    /// tenant's processes' fault counters and CPU times, so the daemon can look every
    /// half second and plan at once instead of waiting out the interval.
    pub fn fault_watch(&mut self) -> bool {
        if self.cfg.policy != PolicyKind::Tierd {
            return false;
        }
        let now = Instant::now();
        let secs = now_secs();
        let window = self.cfg.tracker.window.as_secs_f64();
        let shares = self.cfg.knobs.shares();
        let read_secs = self.watch_read_secs();
        let hz = tierd_sys::process::clock_ticks_per_sec().max(1) as f64;
        let mut changed = false;
        let names: Vec<TenantName> =
            self.tenants.iter().filter(|(_, t)| t.is_running()).map(|(n, _)| n.clone()).collect();
        for name in names {
            let t = self.tenants.get_mut(&name).expect("listed above");
            let (own_faults, ticks) = t.read_counters(&self.proc);
            if let Some((_, faults)) = t.watch {
                t.stall_secs += own_faults.saturating_sub(faults) as f64 * (read_secs + self.cfg.knobs.fault_cpu_secs);
            }
            t.watch = Some((now, own_faults));
            let busy = t.procs.iter().any(|p| self.proc.any_thread_busy(p.pid()).unwrap_or(false));
            if let Some(change) = t.activity.step(secs, ticks as f64 / hz, t.stall_secs, busy, window, &shares) {
                changed = true;
                // A rest began: what lay in runs before may have been read back and
                // written out scattered since. Kept when a rest ends: the wake-up's
                // prefetch reads the regions in runs first.
                if change == tierd_core::activity::Change::Rested {
                    t.laid_out.clear();
                }
            }
        }
        changed
    }

    /// The tier's read time since the last watch, from the disk's counters (the
    /// interval's figure is up to an interval old: a tier that turned slow would count
    /// a waking tenant's reads as quick ones for that long); the last known otherwise.
    fn watch_read_secs(&mut self) -> f64 {
        let disk = self.tier.as_ref().and_then(|t| t.disk.clone()).and_then(|d| self.proc.diskstats(&d).ok().flatten());
        if let (Some(now), Some(before)) = (disk, std::mem::replace(&mut self.watch_disk, disk))
            && let Some(us) = now.read_latency_us_since(&before)
        {
            self.watch_read_us = us;
        }
        self.watch_read_us.max(1.0) / 1e6
    }

    /// Lets each tenant's tracker observe one interval.
    fn track(&mut self) {
        let now = now_secs();
        let sampling = SamplingConfig::new(
            self.cfg.tracker.sample_pages,
            self.cfg.tracker.window.as_secs_f64(),
            self.cfg.interval.as_secs_f64(),
        )
        .with_cpu_budget(self.cfg.tracker.cpu_budget);
        // Last known: an interval with too few reads to time keeps the one before.
        let read_secs = self.tier_view.read_latency_us.map(|us| us / 1e6);
        for (i, t) in self.tenants.values_mut().filter(|t| t.is_running()).enumerate() {
            let proc = self.proc.clone();
            let tracker = t
                .tracker
                .get_or_insert_with(|| Box::new(SamplingTracker::new(sampling, proc, now.to_bits() ^ i as u64)));
            if let Some(secs) = read_secs {
                tracker.tier_read_time(secs);
            }
            let at_rest = t.activity.rest_secs(now).is_some();
            tracker.observe(&t.procs, std::mem::take(&mut t.measure.untracked_faults), now, at_rest);
        }
    }

    /// Tier traffic and latency, and tierd's own CPU, from counters since last time.
    fn sample_io(&mut self) {
        let now = Instant::now();
        let vm = self.proc.vmstat().unwrap_or_default();
        let disk = self.tier.as_ref().and_then(|t| t.disk.clone()).and_then(|d| self.proc.diskstats(&d).ok().flatten());
        let cpu = self.proc.cpu_ticks(std::process::id()).unwrap_or(0);
        let cur = IoSample {
            at: now,
            pswpin: vm.get("pswpin").copied().unwrap_or(0),
            pswpout: vm.get("pswpout").copied().unwrap_or(0),
            disk,
            self_cpu_ticks: cpu,
        };
        let (size, used) = self.tier.as_ref().map(|t| t.usage(&self.proc)).unwrap_or((0, 0));
        let mut view = TierView { size_bytes: size, used_bytes: used, ..TierView::default() };
        if let Some(prev) = self.io_prev {
            let dt = (now - prev.at).as_secs_f64().max(1e-3);
            view.read_bytes_per_sec = cur.pswpin.saturating_sub(prev.pswpin) as f64 * 4096.0 / dt;
            view.write_bytes_per_sec = cur.pswpout.saturating_sub(prev.pswpout) as f64 * 4096.0 / dt;
            if let (Some(a), Some(b)) = (prev.disk, cur.disk) {
                view.read_latency_us = b.read_latency_us_since(&a);
                view.utilization = (b.io_ms.saturating_sub(a.io_ms) as f64 / (dt * 1000.0)).min(1.0);
            }
            let hz = tierd_sys::process::clock_ticks_per_sec() as f64;
            self.self_cpu_percent = cur.self_cpu_ticks.saturating_sub(prev.self_cpu_ticks) as f64 / hz / dt * 100.0;
        }
        self.tier_view = view;
        self.io_prev = Some(cur);
    }

    /// The snapshot the policy plans from.
    pub fn snapshot(&self) -> Snapshot {
        let now = now_secs();
        let tenants = self
            .tenants
            .values()
            .filter(|t| t.is_running())
            .map(|t| TenantView {
                spec: t.spec.clone(),
                footprint: t.measure.footprint,
                dram: t.measure.dram,
                tier: t.measure.tier,
                pinned: t.measure.pinned,
                quota: t.quota,
                activeness: t.tracker.as_ref().and_then(|tr| tr.activeness()),
                tier_faults_per_sec: t.measure.major_faults_per_sec,
                tier_faults_per_sec_avg: t.fault_rate_before(),
                woke_secs_ago: t.activity.since_rest_secs(now),
                at_rest_secs: t.activity.rest_secs(now),
                since_rest_secs: t.activity.since_rest_secs(now),
                rest_began_secs: t.activity.rest_began_secs(now),
                demand_cores: t.activity.usual,
                stall_share: t.activity.stall_share,
                mean_rest_secs: t.activity.mean_rest_secs,
                short_secs: t.short_secs,
                regions: t
                    .tracker
                    .as_ref()
                    .map(|tr| tr.regions(now))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| tierd_core::snapshot::Region {
                        laid_out: t.relayout_refused() || t.laid_out.contains(&(r.range.pid, r.range.start)),
                        ..r
                    })
                    .collect(),
            })
            .collect();
        Snapshot {
            window_secs: self.cfg.tracker.window.as_secs_f64(),
            dram_budget: self.cfg.dram_budget,
            ratio: self.cfg.ratio,
            interval_secs: self.cfg.interval.as_secs_f64(),
            tier: self.tier_view,
            tenants,
        }
    }

    /// Carries out a plan: the group limit, then quotas (lowered ones first, so the
    /// group never needs more than it has), then page moves.
    fn enforce(&mut self, plan: &Plan) {
        if plan.group_limit != self.group_limit {
            match self.cg.set_limit(&self.group_rel(), plan.group_limit) {
                Ok(()) => self.group_limit = plan.group_limit,
                Err(e) => self.events.warn(None, format!("cannot set the group limit: {e}")),
            }
        }
        let kinds: Vec<String> = plan.notes.iter().map(|n| n.split(':').next().unwrap_or("").to_string()).collect();
        if kinds != self.note_kinds {
            for note in &plan.notes {
                self.events.decision(None, note.clone());
            }
            self.note_kinds = kinds;
        }
        self.notes = plan.notes.clone();
        let now = now_secs();
        let mut order: Vec<&TenantPlan> = plan.tenants.iter().collect();
        order.sort_by_key(|p| {
            p.quota.unwrap_or(u64::MAX) as i128
                - self.tenants.get(&p.name).and_then(|t| t.quota).unwrap_or(u64::MAX) as i128
        });
        let woken: Vec<&TenantPlan> = plan.tenants.iter().filter(|tp| tp.woke).collect();
        if woken.is_empty() {
            for tp in order {
                self.apply(tp, now, "", None);
            }
            return;
        }
        // A tenant waking up goes first, with as much of its prefetch as the DRAM no
        // tenant holds takes. Its quota may take the group's limits past the budget
        // meanwhile; the group limit still holds.
        let group = self.group_rel();
        let group_limit = plan.group_limit.unwrap_or(self.cfg.dram_budget);
        let held: u64 = self.tenants.values().filter(|t| t.is_running()).map(|t| t.measure.dram).sum();
        let mut free = group_limit.saturating_sub(held);
        for tp in &woken {
            let mut head = TenantPlan::quota_only(tp.name.clone(), tp.quota, tp.reason.clone());
            head.woke = true;
            head.prefetch = take_within(&tp.prefetch, &mut free);
            self.apply(&head, now, "ahead of its neighbours' cuts", None);
        }
        // Then the neighbours' cuts: their demotions now, their limits written on a
        // thread of their own while the woken tenants' prefetch goes on as the cuts free
        // DRAM under the group limit (a v1 limit write waits until the kernel has
        // reclaimed down to it; see docs/decisions/001, "Movers" and the wake-up notes).
        let cuts: Vec<&TenantPlan> =
            order.iter().copied().filter(|tp| !tp.woke && self.falling(tp).is_some_and(|f| f)).collect();
        let mut early = Vec::new();
        for tp in &cuts {
            early.push(self.moves(tp));
        }
        let jobs: Vec<(String, Option<u64>)> = cuts.iter().map(|tp| (self.tenant_rel(&tp.name), tp.quota)).collect();
        let cg = Arc::clone(&self.cg);
        let deadline = Instant::now() + self.cfg.interval;
        let limits = std::thread::scope(|s| {
            let writes = s.spawn(move || {
                jobs.iter().map(|(rel, quota)| mover::timed(|| cg.set_limit(rel, *quota))).collect::<Vec<_>>()
            });
            let mut left: Vec<(TenantName, Vec<Range>, u64)> =
                woken.iter().map(|tp| (tp.name.clone(), tp.prefetch.clone(), 0)).collect();
            while !writes.is_finished() && Instant::now() < deadline && left.iter().any(|l| !l.1.is_empty()) {
                let usage = self.cg.stats(&group).map_or(group_limit, |st| st.usage);
                let mut room = group_limit.saturating_sub(usage);
                for (name, ranges, bytes) in &mut left {
                    let now_ranges = take_within(ranges, &mut room);
                    if now_ranges.is_empty() {
                        continue;
                    }
                    ranges.retain(|r| !now_ranges.contains(r));
                    let mut piece = TenantPlan::quota_only(name.clone(), None, String::new());
                    piece.prefetch = now_ranges;
                    *bytes += self.carry_out_moves(&piece).1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            for (name, _, bytes) in left.into_iter().filter(|l| l.2 > 0) {
                let msg = format!("prefetched {} as its neighbours' cuts freed DRAM", human(bytes));
                if let Some(t) = self.tenants.get_mut(&name) {
                    t.decide(now, msg.clone());
                }
                self.events.decision(Some(name.as_str()), msg);
            }
            writes.join().unwrap_or_default()
        });
        for ((tp, early), limit) in cuts.iter().zip(early).zip(limits) {
            self.apply(tp, now, "", Some(Cut { early, limit }));
        }
        // The rest; for the woken, what is left of their prefetch.
        for tp in order {
            if cuts.iter().any(|c| c.name == tp.name) {
                continue;
            }
            let mut rest = tp.clone();
            rest.woke = false;
            self.apply(if tp.woke { &rest } else { tp }, now, "", None);
        }
    }

    /// Whether the plan lowers the tenant's quota (`None`: no such running tenant).
    fn falling(&self, tp: &TenantPlan) -> Option<bool> {
        let t = self.tenants.get(&tp.name).filter(|t| t.is_running())?;
        Some(quota_change(t.quota, tp.quota).1)
    }

    /// Carries out one tenant's plan: its quota (a falling one after its demotions, so
    /// the regions the plan chose reach the tier whole before the kernel reclaims
    /// page by page at the cut), then its page moves; logs what it did, with `note`.
    /// A `cut` carried out already (demotions, then the limit written elsewhere) is
    /// only recorded.
    fn apply(&mut self, tp: &TenantPlan, now: f64, note: &str, cut: Option<Cut>) {
        let rel = self.tenant_rel(&tp.name);
        let Some(t) = self.tenants.get_mut(&tp.name) else { return };
        if !t.is_running() {
            return;
        }
        // A falling quota's demotions go first, so the regions the plan chose
        // reach the tier whole before the kernel reclaims page by page at the cut.
        let (changed, falling) = quota_change(t.quota, tp.quota);
        let mut told = false;
        let (early, limit) = match cut {
            Some(c) => (Some(c.early), Some(c.limit)),
            None => (falling.then(|| self.moves(tp)), None),
        };
        let Some(t) = self.tenants.get_mut(&tp.name) else { return };
        if changed {
            let (set, secs) = limit.unwrap_or_else(|| mover::timed(|| self.cg.set_limit(&rel, tp.quota)));
            warn_if_slow(&mut self.events, Some(tp.name.as_str()), secs, || {
                format!("setting quota {}", show_quota(tp.quota))
            });
            match set {
                Ok(()) => {
                    // Estimates wobble: every change is applied, but only a change of
                    // 5% or more is worth a line in the decision log.
                    let notable = match (t.quota, tp.quota) {
                        (Some(a), Some(b)) => a.abs_diff(b) as f64 >= 0.05 * a.max(b) as f64,
                        _ => true,
                    };
                    let msg = format!("quota {} → {}: {}", show_quota(t.quota), show_quota(tp.quota), tp.reason);
                    t.quota = tp.quota;
                    t.reason = tp.reason.clone();
                    if notable {
                        t.decide(now, msg.clone());
                        self.events.decision(Some(tp.name.as_str()), msg);
                        told = true;
                    }
                }
                // A cut the kernel could not reclaim all the way down to (v1): it
                // freed what it could. Hold the tenant there so it does not grow
                // back; the next pass cuts again. (Logged as a warning, this came
                // at nearly every login-storm tenant's rest.)
                Err(e) if falling && e.is_busy() => {
                    let partway = self
                        .cg
                        .stats(&rel)
                        .ok()
                        .map(|s| (s.usage + QUOTA_SLACK).next_multiple_of(4096))
                        .filter(|&p| t.quota.is_none_or(|q| p + QUOTA_SLACK < q));
                    match partway.map(|p| (p, self.cg.set_limit(&rel, Some(p)))) {
                        Some((p, Ok(()))) => {
                            let msg = format!(
                                "quota {} → {} on its way to {}, as far as the kernel could reclaim for now: {}",
                                show_quota(t.quota),
                                human(p),
                                show_quota(tp.quota),
                                tp.reason
                            );
                            t.quota = Some(p);
                            t.reason = tp.reason.clone();
                            t.decide(now, msg.clone());
                            self.events.decision(Some(tp.name.as_str()), msg);
                        }
                        _ => self.events.info(
                            Some(tp.name.as_str()),
                            format!(
                                "quota cut to {} waits: the kernel could not reclaim yet ({e})",
                                show_quota(tp.quota)
                            ),
                        ),
                    }
                }
                Err(e) => {
                    t.count_error("cgroup limit");
                    self.events.warn(Some(tp.name.as_str()), format!("cannot set quota {}: {e}", show_quota(tp.quota)));
                }
            }
        } else {
            t.reason = tp.reason.clone();
        }
        let (demoted, prefetched, collapsed) = match early {
            Some(m) => m,
            None => self.moves(tp),
        };
        let t = self.tenants.get_mut(&tp.name).expect("checked above");
        let mut did = Vec::new();
        if prefetched > 0 {
            let note = if note.is_empty() { String::new() } else { format!(" {note}") };
            did.push(format!("prefetched {}{note}", human(prefetched)));
        }
        if demoted > 0 {
            did.push(format!("demoted {} in {} cold regions", human(demoted), tp.demote.len()));
        }
        if collapsed > 0 {
            did.push(format!("rebuilt {} regions as huge pages", collapsed));
        }
        // A woken tenant's reason says it woke ("woke up: tier faults …"): logged on its
        // own when neither its quota line nor its moves carried it.
        let msg = match did.is_empty() {
            false => Some(format!("{}: {}", did.join(", "), tp.reason)),
            true => (tp.woke && !told).then(|| tp.reason.clone()),
        };
        if let Some(msg) = msg {
            t.decide(now, msg.clone());
            self.events.decision(Some(tp.name.as_str()), msg);
        }
    }

    /// [`Self::carry_out_moves`], with a warning when it holds up the control loop.
    fn moves(&mut self, tp: &TenantPlan) -> (u64, u64, usize) {
        let (moved, secs) = mover::timed(|| self.carry_out_moves(tp));
        warn_if_slow(&mut self.events, Some(tp.name.as_str()), secs, || {
            format!(
                "page moves ({} demote, {} prefetch, {} collapse ranges)",
                tp.demote.len(),
                tp.prefetch.len(),
                tp.collapse.len()
            )
        });
        moved
    }

    /// Carries out a tenant plan's page moves; returns bytes demoted, bytes prefetched
    /// and regions collapsed.
    fn carry_out_moves(&mut self, tp: &TenantPlan) -> (u64, u64, usize) {
        let rel = self.tenant_rel(&tp.name);
        let Some(t) = self.tenants.get_mut(&tp.name) else { return (0, 0, 0) };
        let (mut demoted, mut prefetched, mut collapsed) = (0, 0, 0);
        let mut failed: Vec<(&str, tierd_sys::madvise::AdviseResult)> = Vec::new();
        let now = now_secs();
        // Once per interval: prefetched pages are mapped as the tenant's, so a region
        // still on the tier an interval later was evicted again and is asked for again.
        let interval = self.cfg.interval.as_secs_f64();
        t.prefetched.retain(|_, at| now - *at < interval * 0.9);
        // A prefetch may hold the loop for one interval at most; what it did not get to
        // is asked for again at the next.
        let until = Instant::now() + self.cfg.interval;
        let relayout_until = self.relayout_until;
        let fresh: Vec<Range> =
            tp.prefetch.iter().filter(|r| !t.prefetched.contains_key(&(r.pid, r.start))).copied().collect();
        for r in &fresh {
            t.prefetched.insert((r.pid, r.start), now);
        }
        let mut relaid = mover::Relaid::default();
        for p in &t.procs {
            let mine = |ranges: &[Range]| -> Vec<(u64, u64)> {
                ranges.iter().filter(|r| r.pid == p.pid()).map(|r| (r.start, r.len)).collect()
            };
            let ranges = mine(&tp.relayout);
            let mut paged = Vec::new();
            if !ranges.is_empty() && !t.relayout_refused() {
                let mut done = Vec::new();
                let r = mover::relayout(&self.proc, p, &ranges, relayout_until, &mut done, &mut paged);
                t.laid_out.extend(done.iter().map(|&(start, _)| (p.pid(), start)));
                relaid.add(&r);
                failed.push(("relayout (process_madvise)", r.advise));
            }
            // What relayout did not page out (it was in runs already, or its time ran
            // out) goes to the tier the ordinary way.
            let ranges: Vec<(u64, u64)> = mine(&tp.demote).into_iter().filter(|r| !paged.contains(r)).collect();
            if !ranges.is_empty() {
                let m = mover::demote_ranges(p, &ranges);
                demoted += m.advise.bytes;
                failed.push(("process_madvise MADV_PAGEOUT", m.advise));
            }
            let ranges = mine(&fresh);
            if !ranges.is_empty() {
                let m = mover::prefetch_ranges(&self.proc, p, &ranges, Some(until));
                prefetched += m.bytes;
                failed.push(("process_madvise MADV_WILLNEED", m.advise));
            }
            let ranges = mine(&tp.collapse);
            if !ranges.is_empty() {
                let r = p.advise(tierd_sys::madvise::Advice::Collapse, &ranges);
                collapsed += (r.bytes / mover::HUGE) as usize;
                failed.push(("process_madvise MADV_COLLAPSE", r));
            }
        }
        for (op, r) in failed {
            t.count_advise(op, &r);
        }
        if let Some(tr) = t.tracker.as_mut() {
            tr.prefetched(&fresh);
            tr.prefetched(&tp.relayout);
        }
        let was_refused = t.relayout_refused();
        t.relayout_tally.0 += relaid.relaid;
        t.relayout_tally.1 += relaid.refused;
        if t.relayout_refused() && !was_refused {
            let msg = "its working set cannot be laid out in runs on the tier: MADV_COLLAPSE refused its memory \
                       (it opted out of huge pages, or they are off), so its wake-ups read the tier at random-read \
                       speed";
            t.decide(now, msg.to_string());
            self.events.warn(Some(tp.name.as_str()), msg.to_string());
        }
        if relaid.split > 0 && !self.tier_room_warned {
            self.tier_room_warned = true;
            self.events.warn(
                Some(tp.name.as_str()),
                format!(
                    "the tier has no free 2 MiB clusters of slots left: {} huge pages were split on the way out and \
                     their pages scattered again, so relayout stops until room frees up; a larger tier (--tier-size) \
                     keeps wake-ups sequential",
                    relaid.split
                ),
            );
        }
        if relaid.relaid > 0 {
            let msg = format!(
                "laid out {} regions of its working set in runs on the tier (they lay in {} runs; {} read back to do \
                 so); {} already were",
                relaid.relaid,
                relaid.runs_before,
                human(relaid.read_bytes),
                relaid.in_runs
            );
            t.decide(now, msg.clone());
            self.events.decision(Some(tp.name.as_str()), msg);
        }
        // Demoted pages now wait in the swap cache, written and clean: the kernel drops
        // them first and without I/O whenever this tenant's DRAM is wanted. Squeezing
        // them out now (as `tierctl demote` does) would also evict the tracker's
        // sampled hot pages, turning their refaults into tier reads.
        let _ = rel;
        (demoted, prefetched, collapsed)
    }

    fn capacity(&self) -> Capacity {
        let tier_size = self.tier.as_ref().map(|t| t.usage(&self.proc).0).unwrap_or(0);
        Capacity { dram_budget: self.cfg.dram_budget, ratio: self.cfg.ratio, tier_size }
    }

    fn claims(&self) -> Vec<Claim> {
        self.tenants
            .values()
            .filter(|t| t.is_running())
            .map(|t| Claim {
                size: t.spec.size.unwrap_or(0).max(t.measure.footprint),
                reserve: t.spec.reserve,
                pinned: t.measure.pinned,
            })
            .collect()
    }

    fn check_new(&self, spec: &TenantSpec, footprint: u64, pinned: u64) -> anyhow::Result<()> {
        spec.validate()?;
        if let Some(t) = self.tenants.get(&spec.name) {
            if t.is_running() {
                bail!("a tenant named {} already runs; pick another --name", spec.name);
            }
            bail!("tenant {} has exited but is still listed; `tierctl rm {}` first", spec.name, spec.name);
        }
        let claim = Claim { size: spec.size.unwrap_or(0).max(footprint), reserve: spec.reserve, pinned };
        admit(&self.capacity(), &self.claims(), spec.name.as_str(), claim)?;
        Ok(())
    }

    /// Creates a tenant's cgroup with the quota the policy would give it.
    fn prepare_cgroup(&mut self, spec: &TenantSpec, footprint: u64) -> anyhow::Result<(String, Option<u64>)> {
        let rel = self.tenant_rel(&spec.name);
        self.cg.create(&rel).with_context(|| format!("creating cgroup {rel}"))?;
        let mut snap = self.snapshot();
        snap.tenants.push(TenantView::unmeasured(spec.clone(), footprint));
        let quota =
            policy::plan(self.cfg.policy, &snap, &self.cfg.knobs).tenant(spec.name.as_str()).and_then(|p| p.quota);
        if let Err(e) = self.cg.set_limit(&rel, quota) {
            let _ = self.cg.remove(&rel);
            return Err(anyhow!(e).context("setting the new tenant's quota"));
        }
        Ok((rel, quota))
    }

    /// Starts `argv` as a new tenant; returns its PID once it runs.
    pub fn run(&mut self, spec: TenantSpec, argv: Vec<String>, cwd: Option<PathBuf>) -> anyhow::Result<u32> {
        if argv.is_empty() {
            bail!("no command given: tierctl run [OPTIONS] -- COMMAND [ARGS...]");
        }
        self.check_new(&spec, 0, 0)?;
        let (rel, quota) = self.prepare_cgroup(&spec, 0)?;
        let logs = self.cfg.state_dir.join("tenants").join(spec.name.as_str());
        let spawned = (|| -> anyhow::Result<std::process::Child> {
            std::fs::create_dir_all(&logs)?;
            let stdout = File::create(logs.join("stdout"))?;
            let stderr = File::create(logs.join("stderr"))?;
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(stdout).stderr(stderr);
            cmd.current_dir(cwd.clone().unwrap_or_else(|| PathBuf::from("/")));
            let procs = self.cg.procs_file(&rel)?;
            tierd_sys::process::spawn_in_cgroup(&mut cmd, &procs).with_context(|| format!("cannot start `{}`", argv[0]))
        })();
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = self.cg.remove(&rel);
                return Err(e);
            }
        };
        let pid = child.id();
        let mut t = Tenant::new(spec, argv.clone());
        t.procs = Pidfd::open(pid).into_iter().collect();
        t.child = Some(child);
        t.quota = quota;
        let name = t.spec.name.clone();
        let msg = format!(
            "started `{}` as pid {pid}, quota {}; output in {}",
            argv.join(" "),
            show_quota(quota),
            logs.display()
        );
        t.decide(now_secs(), msg.clone());
        self.tenants.insert(name.clone(), t);
        self.events.info(Some(name.as_str()), msg);
        self.save();
        Ok(pid)
    }

    /// Adopts a running process that lives in tierd's cgroup or below it.
    pub fn attach(&mut self, spec: TenantSpec, pid: u32) -> anyhow::Result<()> {
        if !self.proc.exists(pid) {
            bail!("no process with PID {pid}");
        }
        if pid == std::process::id() {
            bail!("PID {pid} is tierd itself");
        }
        if let Some((name, _)) = self.tenants.iter().find(|(_, t)| t.pids().contains(&pid)) {
            bail!("PID {pid} already belongs to tenant {name}");
        }
        if !self.cg.contains_pid(&self.proc, pid)? {
            let theirs = self.proc.memory_cgroup(Some(pid)).unwrap_or_else(|_| "?".into());
            bail!(
                "PID {pid} lives in memory cgroup {theirs}, outside tierd's own cgroup {}; tierd only adopts processes in its \
                 own subtree (start the program with `tierctl run`, or from tierd's cgroup)",
                self.cg.base().display()
            );
        }
        let m = self.proc.memory(pid)?;
        self.check_new(&spec, m.rss_anon + m.swap, m.locked + m.hugetlb)?;
        let (rel, quota) = self.prepare_cgroup(&spec, m.rss_anon + m.swap)?;
        if let Err(e) = self.cg.add_proc(&rel, pid) {
            let _ = self.cg.remove(&rel);
            return Err(anyhow!(e).context(format!("moving PID {pid} into {rel}")));
        }
        let argv = self.proc.cmdline(pid).unwrap_or_default();
        let mut t = Tenant::new(spec, argv);
        t.procs = Pidfd::open(pid).into_iter().collect();
        t.quota = quota;
        let name = t.spec.name.clone();
        let msg = format!("attached pid {pid}, quota {}", show_quota(quota));
        t.decide(now_secs(), msg.clone());
        self.tenants.insert(name.clone(), t);
        self.events.info(Some(name.as_str()), msg);
        self.save();
        Ok(())
    }

    fn running(&mut self, name: &TenantName) -> anyhow::Result<&mut Tenant> {
        match self.tenants.get_mut(name) {
            Some(t) if t.is_running() => Ok(t),
            Some(_) => bail!("tenant {name} has exited"),
            None => bail!("no tenant named {name} (see `tierctl status`)"),
        }
    }

    /// Stops managing a tenant: its processes move to an unlimited cgroup and keep running.
    pub fn detach(&mut self, name: &TenantName) -> anyhow::Result<Vec<u32>> {
        let pids = self.running(name)?.pids();
        let rel = format!("{}/{}", self.detached_rel(), name);
        self.cg.create(&rel)?;
        for &pid in &pids {
            self.cg.add_proc(&rel, pid).with_context(|| format!("moving PID {pid} out of tenant {name}"))?;
        }
        let _ = self.cg.remove(&self.tenant_rel(name));
        self.tenants.remove(name);
        self.events.info(Some(name.as_str()), format!("detached; pids {pids:?} run on without limits"));
        self.save();
        Ok(pids)
    }

    /// Forgets an exited tenant.
    pub fn remove(&mut self, name: &TenantName) -> anyhow::Result<()> {
        match self.tenants.get(name) {
            None => bail!("no tenant named {name}"),
            Some(t) if t.is_running() => {
                bail!("tenant {name} is still running; `tierctl stop {name}` or `tierctl detach {name}` first")
            }
            Some(_) => {}
        }
        self.tenants.remove(name);
        let _ = std::fs::remove_dir_all(self.cfg.state_dir.join("tenants").join(name.as_str()));
        self.events.info(Some(name.as_str()), "removed");
        self.save();
        Ok(())
    }

    /// Sends `signal` to every process of a tenant.
    pub fn stop(&mut self, name: &TenantName, signal: i32) -> anyhow::Result<Vec<u32>> {
        let pids = self.running(name)?.pids();
        for &pid in &pids {
            tierd_sys::process::kill(pid, signal).with_context(|| format!("signalling PID {pid}"))?;
        }
        self.events.info(Some(name.as_str()), format!("sent signal {signal} to pids {pids:?}"));
        Ok(pids)
    }

    /// Pages a tenant's resident memory out to the tier, then frees the swap cache.
    pub fn demote(&mut self, name: &TenantName, bytes: Option<u64>) -> anyhow::Result<MoveReport> {
        let rel = self.tenant_rel(name);
        let proc = self.proc.clone();
        let t = self.running(name)?;
        let start = Instant::now();
        let mut total = mover::Moved::default();
        let mut left = bytes.unwrap_or(u64::MAX);
        for p in &t.procs {
            let m = mover::demote(&proc, p, left);
            left = left.saturating_sub(m.bytes);
            total.add(m);
        }
        t.count_advise("process_madvise MADV_PAGEOUT", &total.advise);
        if total.scan_errors > 0 {
            *t.errors.entry("PAGEMAP_SCAN".into()).or_insert(0) += total.scan_errors;
        }
        let seconds = start.elapsed().as_secs_f64();
        let reclaim_start = Instant::now();
        // Free what was paged out and whatever else of the tenant waits in the swap
        // cache (pages prefetched but never touched): both are already on the tier.
        let cached = self.cg.stats(&rel).map(|s| s.swap_cached).unwrap_or(0);
        let to_free = bytes.map_or(total.bytes + cached, |b| b.min(total.bytes + cached));
        let freed = match self.cg.reclaim(&rel, to_free) {
            Ok(f) => f,
            Err(e) => {
                self.events.warn(Some(name.as_str()), format!("demoted pages stay in the swap cache: {e}"));
                0
            }
        };
        let report = MoveReport {
            bytes: total.bytes,
            freed_bytes: freed,
            seconds,
            reclaim_seconds: reclaim_start.elapsed().as_secs_f64(),
            calls: total.advise.calls,
            errors: total.advise.errors,
        };
        self.events.info(
            Some(name.as_str()),
            format!(
                "demoted {} in {:.3}s, then freed {} of DRAM in {:.3}s",
                human(report.bytes),
                report.seconds,
                human(freed),
                report.reclaim_seconds
            ),
        );
        Ok(report)
    }

    /// Starts reading a tenant's swapped memory back (`MADV_WILLNEED`): at most
    /// `bytes`, and by default what its quota has room for (more would only be
    /// pushed out again).
    pub fn prefetch(&mut self, name: &TenantName, bytes: Option<u64>) -> anyhow::Result<MoveReport> {
        let t = self.running(name)?;
        let room = t.quota.map_or(u64::MAX, |q| q.saturating_sub(t.measure.dram));
        self.move_all(name, "prefetch", bytes.unwrap_or(room), mover::prefetch, "process_madvise MADV_WILLNEED")
    }

    /// Rebuilds a tenant's huge pages (`MADV_COLLAPSE`).
    pub fn collapse(&mut self, name: &TenantName) -> anyhow::Result<MoveReport> {
        self.move_all(name, "collapse", u64::MAX, mover::collapse, "process_madvise MADV_COLLAPSE")
    }

    fn move_all(
        &mut self,
        name: &TenantName,
        what: &str,
        limit: u64,
        f: fn(&ProcFs, &Pidfd, u64) -> mover::Moved,
        op: &str,
    ) -> anyhow::Result<MoveReport> {
        let proc = self.proc.clone();
        let t = self.running(name)?;
        let start = Instant::now();
        let mut total = mover::Moved::default();
        for p in &t.procs {
            total.add(f(&proc, p, limit.saturating_sub(total.bytes)));
        }
        t.count_advise(op, &total.advise);
        let report = MoveReport {
            bytes: total.bytes,
            freed_bytes: 0,
            reclaim_seconds: 0.0,
            seconds: start.elapsed().as_secs_f64(),
            calls: total.advise.calls,
            errors: total.advise.errors,
        };
        self.events.info(Some(name.as_str()), format!("{what}: {} in {:.3}s", human(report.bytes), report.seconds));
        Ok(report)
    }

    /// Recent decisions about a tenant.
    pub fn explain(&self, name: &TenantName) -> anyhow::Result<Vec<crate::tenant::Decision>> {
        let t = self.tenants.get(name).ok_or_else(|| anyhow!("no tenant named {name}"))?;
        Ok(t.decisions.iter().cloned().collect())
    }

    /// The tracker's regions of a tenant, coldest last seen first: its heat map.
    /// A tenant's fault curve as the policy saw it at its last pass.
    pub fn curve(&self, name: &TenantName) -> anyhow::Result<tierd_core::policy::report::CurveReport> {
        let snap = self.last_snapshot.as_ref().ok_or_else(|| anyhow::anyhow!("no pass has run yet; try again"))?;
        tierd_core::policy::report::curve(snap, name.as_str(), &self.cfg.knobs)
            .ok_or_else(|| anyhow::anyhow!("no running tenant named {name}"))
    }

    /// The allocation on another budget, or with more tenants like some of them.
    pub fn what_if(
        &self,
        budget: Option<u64>,
        add: &[(u32, TenantName)],
    ) -> anyhow::Result<tierd_core::policy::report::WhatIf> {
        let snap = self.last_snapshot.as_ref().ok_or_else(|| anyhow::anyhow!("no pass has run yet; try again"))?;
        let budget = budget.unwrap_or(self.cfg.dram_budget);
        tierd_core::policy::report::what_if(snap, &self.cfg.knobs, budget, add).map_err(|e| anyhow::anyhow!(e))
    }

    pub fn regions(&self, name: &TenantName) -> anyhow::Result<Vec<tierd_core::snapshot::Region>> {
        let t = self.tenants.get(name).ok_or_else(|| anyhow!("no tenant named {name}"))?;
        Ok(t.tracker.as_ref().map(|tr| tr.regions(now_secs())).unwrap_or_default())
    }

    /// The status the API serves.
    pub fn status(&mut self) -> Status {
        self.reap();
        self.measure(false);
        self.status_as_measured()
    }

    /// The status from the last measurement.
    fn status_as_measured(&self) -> Status {
        let group = self.cg.stats(&self.group_rel()).unwrap_or_default();
        let snap = self.snapshot();
        let cap = self.capacity();
        let active: u64 = snap.tenants.iter().filter_map(|t| t.activeness.map(|a| a.touched_bytes())).sum();
        let tier = self.tier.as_ref().map(|t| TierStatus {
            path: t.record.path.clone(),
            swap_path: t.record.swap_path.clone(),
            backing: format!("{:?}", t.record.backing).to_lowercase(),
            size_bytes: self.tier_view.size_bytes,
            used_bytes: self.tier_view.used_bytes,
            read_bytes_per_sec: self.tier_view.read_bytes_per_sec,
            write_bytes_per_sec: self.tier_view.write_bytes_per_sec,
            read_latency_us: self.tier_view.read_latency_us,
            read_latency_health: self.tier_view.read_latency_us.map(|us| health::tier_read_latency(us).to_string()),
            utilization: self.tier_view.utilization,
        });
        // The policy's view of each tenant at its last pass.
        let curve = |t: &Tenant| {
            let snap = self.last_snapshot.as_ref()?;
            let v = snap.tenants.iter().find(|v| v.spec.name == t.spec.name)?;
            let window = snap.window_secs.max(snap.interval_secs);
            (self.cfg.policy == PolicyKind::Tierd && t.is_running())
                .then(|| tierd_core::policy::curve::Curve::of(v, window, snap.interval_secs, &self.cfg.knobs))
        };
        let tenants: Vec<TenantStatus> = self
            .tenants
            .values()
            .map(|t| TenantStatus {
                name: t.spec.name.to_string(),
                state: if t.is_running() { "running".into() } else { "exited".into() },
                exit_code: match t.life {
                    Life::Exited { code } => code,
                    Life::Running => None,
                },
                pids: t.pids(),
                command: t.argv.clone(),
                size_bytes: t.measure.footprint,
                declared_size_bytes: t.spec.size,
                dram_bytes: if t.is_running() { t.measure.dram } else { 0 },
                tier_bytes: if t.is_running() { t.measure.tier } else { 0 },
                huge_bytes: t.measure.huge,
                pinned_bytes: t.measure.pinned,
                quota_bytes: t.quota,
                reserve_bytes: t.spec.reserve,
                limit_bytes: t.spec.limit,
                shares: t.spec.shares,
                active_bytes: t.tracker.as_ref().and_then(|tr| tr.activeness()).map(|a| a.active_bytes),
                active_ci_bytes: t.tracker.as_ref().and_then(|tr| tr.activeness()).map(|a| a.ci_bytes),
                touched_in_window_bytes: t
                    .tracker
                    .as_ref()
                    .and_then(|tr| tr.activeness())
                    .and_then(|a| a.touched_in_window_bytes),
                tracker_sample_pages: t.tracker.as_ref().map_or(0, |tr| tr.cost().sample_pages),
                tracker_seconds: t.tracker.as_ref().map_or(0.0, |tr| tr.cost().seconds),
                major_faults: t.measure.major_faults_total,
                major_faults_per_sec: if t.is_running() { t.measure.major_faults_per_sec } else { 0.0 },
                tier_read_bytes_per_sec: if t.is_running() { t.measure.major_faults_per_sec * 4096.0 } else { 0.0 },
                tier_write_bytes_per_sec: if t.is_running() { t.measure.tier_write_bytes_per_sec } else { 0.0 },
                cpu_cores: if t.is_running() { t.activity.cpu } else { 0.0 },
                at_rest_secs: if t.is_running() { t.activity.rest_secs(now_secs()) } else { None },
                stall_share: if t.is_running() { t.activity.stall_share } else { 0.0 },
                waiting_at_limit_secs: if t.is_running() { t.waits.waiting_secs(now_secs()) } else { None },
                hot_bytes: curve(t).map(|c| c.hot),
                warm_bytes: curve(t).map(|c| c.warm),
                steep: curve(t).map(|c| c.steep),
                predicted_useful: t.predicted,
                reason: t.reason.clone(),
                errors: t.errors.clone(),
                vm: t.spec.vm || t.guest.is_some(),
                guest: t.guest.clone(),
            })
            .collect();
        Status {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            policy: self.cfg.policy.to_string(),
            cgroup_version: format!("{:?}", self.cg.version()).to_lowercase(),
            cgroup_path: self.cg.base().join(self.root_rel()),
            dram_budget_bytes: self.cfg.dram_budget,
            dram_used_bytes: group.usage,
            dram_free_bytes: self.cfg.dram_budget.saturating_sub(group.usage),
            ratio: self.cfg.ratio,
            capacity_bytes: cap.total(),
            committed_bytes: snap.committed_bytes(),
            overcommit: snap.overcommit(),
            active_bytes: active,
            active_health: health::active_memory(active, self.cfg.dram_budget).to_string(),
            tier: tier.unwrap_or_default(),
            tierd_cpu_percent: self.self_cpu_percent,
            tierd_rss_bytes: self.proc.memory(std::process::id()).map(|m| m.rss).unwrap_or(0),
            promotions_per_sec: self.tier_view.read_bytes_per_sec / 4096.0,
            demotions_per_sec: self.tier_view.write_bytes_per_sec / 4096.0,
            health: health::checks(&health::HostFigures {
                dram_budget: self.cfg.dram_budget,
                active,
                tier_size: self.tier_view.size_bytes,
                tier_used: self.tier_view.used_bytes,
                tier_read_latency_us: self.tier_view.read_latency_us,
                tenant_errors: tenant_errors(&tenants),
                throttled: self.notes.iter().find(|n| n.starts_with("demotion throttled")).cloned(),
                waiting: self
                    .tenants
                    .iter()
                    .filter(|(_, t)| t.is_running())
                    .filter_map(|(n, t)| Some((n.to_string(), t.waits.waiting_secs(now_secs())?)))
                    .collect(),
                oom_grace_secs: self.cfg.oom_grace.as_secs_f64(),
            }),
            http_address: self.http_address.clone(),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            tenants,
        }
    }

    /// Clean shutdown: lift every limit (so no tenant can be squeezed while its pages
    /// come back), turn the tier off and remove it, and remove empty cgroups. Running
    /// tenants keep running, with all their memory, and are re-adopted by the next tierd.
    pub fn shutdown(&mut self) {
        // Tenants that exited since the last interval count as exited: taken for running,
        // their empty cgroups (and tierd's whole subtree) were left behind for good.
        self.reap();
        let running: Vec<TenantName> =
            self.tenants.iter().filter(|(_, t)| t.is_running()).map(|(n, _)| n.clone()).collect();
        for name in &running {
            let rel = self.tenant_rel(name);
            if let Err(e) = self.cg.set_limit(&rel, None) {
                self.events.warn(Some(name.as_str()), format!("cannot lift quota: {e}"));
            }
            if let Some(t) = self.tenants.get_mut(name) {
                t.quota = None;
            }
        }
        let _ = self.cg.set_limit(&self.group_rel(), None);
        self.group_limit = None;
        if let Some(tier) = self.tier.take() {
            let (_, used) = tier.usage(&self.proc);
            match tier.teardown() {
                Ok(()) => self.events.info(
                    None,
                    format!("tier {} removed ({} read back into DRAM)", tier.record.path.display(), human(used)),
                ),
                Err(e) => {
                    self.events.warn(None, format!("tier left active: {e}"));
                    self.tier = Some(tier);
                }
            }
        }
        for (name, t) in &self.tenants {
            if !t.is_running() {
                let _ = self.cg.remove(&self.tenant_rel(name));
            }
        }
        let detached = self.detached_rel();
        for child in self.cg.children(&detached).unwrap_or_default() {
            let _ = self.cg.remove(&format!("{detached}/{child}"));
        }
        if running.is_empty() && self.tier.is_none() {
            for rel in [self.detached_rel(), self.group_rel(), self.root_rel()] {
                if let Err(e) = self.cg.remove(&rel) {
                    self.events.warn(None, format!("cannot remove cgroup {rel}: {e}"));
                }
            }
        }
        self.save();
    }
}

/// Warns when a control-loop step took [`SLOW_STEP_SECS`] or more.
/// A quota cut carried out ahead of its bookkeeping: the bytes its demotions moved
/// (demoted, prefetched, collapsed) and how writing its limit went, in seconds.
struct Cut {
    early: (u64, u64, usize),
    limit: (Result<(), tierd_sys::cgroup::CgroupError>, f64),
}

/// Whether a quota moving from `now` to `planned` is a change worth writing, and
/// whether it falls.
fn quota_change(now: Option<u64>, planned: Option<u64>) -> (bool, bool) {
    let changed = match (now, planned) {
        (Some(a), Some(b)) => a.abs_diff(b) > QUOTA_SLACK,
        (a, b) => a != b,
    };
    (changed, changed && planned.is_some_and(|b| now.is_none_or(|a| b < a)))
}

/// The leading `ranges` that fit in `room` bytes, taken off it.
fn take_within(ranges: &[Range], room: &mut u64) -> Vec<Range> {
    let mut out = Vec::new();
    for r in ranges {
        if r.len > *room {
            break;
        }
        *room -= r.len;
        out.push(*r);
    }
    out
}

fn warn_if_slow(events: &mut Events, tenant: Option<&str>, secs: f64, what: impl FnOnce() -> String) {
    if secs >= SLOW_STEP_SECS {
        events.warn(tenant, format!("control loop: {} took {secs:.1} s", what()));
    }
}

/// Says once what is known of a tenant's guest: found (with its RAM), not tierable
/// (with why), or — for a tenant started with `--vm` — no QEMU seen.
fn say_guest(events: &mut Events, name: &TenantName, t: &mut Tenant) {
    let now = match &t.guest {
        Some(g) => (g.ram_found, g.tierable),
        None => (false, true),
    };
    if t.guest_said == Some(now) {
        return;
    }
    match &t.guest {
        Some(g) if !g.tierable => events.warn(
            Some(name.as_str()),
            format!(
                "VM guest RAM {} cannot be tiered: {}; it stays in DRAM and counts against the budget",
                human(g.ram_bytes),
                g.untierable.join("; ")
            ),
        ),
        Some(g) if g.ram_found => events.info(
            Some(name.as_str()),
            format!(
                "VM (QEMU pid {}, {}): guest RAM {} found in {} mapping(s), tiered",
                g.pid,
                g.accel,
                human(g.ram_bytes),
                g.ram_mappings
            ),
        ),
        Some(_) => {}
        None if t.spec.vm && t.is_running() && !t.procs.is_empty() => events.warn(
            Some(name.as_str()),
            "started as a VM (--vm), but none of its processes is QEMU (qemu-system-*): tiered as a plain process",
        ),
        None => {}
    }
    t.guest_said = Some(now);
}

/// Running tenants with failed operations, and how many.
fn tenant_errors(tenants: &[TenantStatus]) -> Vec<(String, u64)> {
    tenants
        .iter()
        .filter(|t| t.state == "running")
        .map(|t| (t.name.clone(), t.errors.values().sum::<u64>()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Sets a cgroup's limit to what it holds now and records it as its quota (so the next
/// plan's write, whatever it is, counts as a change and is applied).
fn pin_limit(cg: &dyn MemoryController, rel: &str, quota: &mut Option<u64>) -> Result<(), cgroup::CgroupError> {
    let held = cg.stats(rel)?.usage;
    cg.set_limit(rel, Some(held))?;
    *quota = Some(held);
    Ok(())
}

fn show_quota(q: Option<u64>) -> String {
    q.map_or("unlimited".to_string(), human)
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}
