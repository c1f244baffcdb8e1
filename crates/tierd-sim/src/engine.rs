//! tierd's control loop around the real policy: what the daemon measures, when it
//! plans, and how its plan reaches the kernel.
//!
//! Each interval (5 s in the suite) it measures every tenant, lets the tracker observe
//! (policy `tierd` only), takes a [`Snapshot`] and calls `tierd_core::policy::plan`
//! unchanged; every half second it reads each tenant's CPU time and faults into
//! `tierd_core::activity::Activity`, as the daemon does, and plans at once when a
//! tenant woke or came to rest. A quota cut is a v1 limit write: the loop waits while the
//! kernel reclaims down to it; demotion pages regions out in runs; prefetch and relayout
//! queue reads on the device.

use std::collections::VecDeque;

use tierd_core::TenantName;
use tierd_core::activity::Activity;
use tierd_core::config::PolicyKind;
use tierd_core::plan::Plan;
use tierd_core::policy::{self, Knobs};
use tierd_core::snapshot::{Snapshot, TenantView, TierView};
use tierd_core::tenant::TenantSpec;

use crate::calib::{
    MOVE_CPU_SECS_PER_GIB, PAGE, PAGEOUT_BYTES_PER_SEC, PASS_CPU_SECS_PER_TENANT, REGION, RELAYOUT_PASS_BYTES,
};
use crate::host::{Host, Queued};
use crate::tracker::{Observation, Tracker};

/// Half a second between two looks at every tenant's counters (the daemon's watch).
const WATCH_SECS: f64 = 0.5;
/// The tracker's first sample size and CPU budget (tierd's defaults).
const SAMPLE_PAGES: f64 = 1024.0;
const CPU_BUDGET_PERCENT: f64 = 0.9;

/// The daemon's settings in a run.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub policy: PolicyKind,
    pub budget: u64,
    pub ratio: f64,
    pub interval: f64,
    pub window: f64,
    pub tier_size: u64,
    pub knobs: Knobs,
}

#[derive(Debug)]
struct EngineTenant {
    spec: TenantSpec,
    quota: Option<u64>,
    tracker: Option<Tracker>,
    activity: Activity,
    /// Seconds it has waited for the tier so far: its faults × the read time.
    stall_secs: f64,
    /// The last plan's prediction of its progress, and how long it fell short of it.
    predicted: Option<f64>,
    shortfall: tierd_core::activity::Shortfall,
    short_secs: Option<f64>,
    fault_rates: VecDeque<f64>,
    rate: f64,
    tick_at: Option<(f64, f64)>,
    /// Its faults at the last watch.
    watched_faults: f64,
    untracked: f64,
    laid_out: Vec<bool>,
    /// Regions prefetched and when: asked again only an interval later.
    prefetched_at: Vec<f64>,
    reason: String,
}

impl EngineTenant {
    fn fault_rate_before(&self) -> f64 {
        let n = self.fault_rates.len();
        if n < 2 {
            return 0.0;
        }
        self.fault_rates.iter().take(n - 1).sum::<f64>() / (n - 1) as f64
    }
}

/// tierd in the model.
#[derive(Debug)]
pub struct Engine {
    pub settings: Settings,
    tenants: Vec<EngineTenant>,
    next_tick: f64,
    next_watch: f64,
    busy_until: f64,
    /// tierd's CPU seconds so far, and the tracker's part of them.
    pub cpu_secs: f64,
    pub tracker_secs: f64,
    tier: TierView,
    rng: fastrand::Rng,
    /// The last plan (for the health figure at the end).
    pub last: Option<Snapshot>,
    /// Whether the last plan set per-tenant quotas, as the daemon tells the policy.
    quotas_in_force: Option<bool>,
}

impl Engine {
    pub fn new(settings: Settings, host: &Host, seed: u64) -> Engine {
        let tenants = host
            .tenants
            .iter()
            .map(|t| {
                let mut spec = TenantSpec::new(TenantName::new(&t.model.name).expect("scenario names are valid"));
                spec.size = Some(t.model.size);
                spec.reserve = t.model.reserve;
                spec.shares = t.model.shares;
                let regions = t.mem.regions;
                EngineTenant {
                    spec,
                    quota: None,
                    tracker: (settings.policy == PolicyKind::Tierd).then(|| {
                        Tracker::new(regions, settings.window, settings.interval, SAMPLE_PAGES, CPU_BUDGET_PERCENT)
                    }),
                    activity: Activity::default(),
                    stall_secs: 0.0,
                    predicted: None,
                    shortfall: Default::default(),
                    short_secs: None,
                    fault_rates: VecDeque::new(),
                    rate: 0.0,
                    tick_at: None,
                    watched_faults: 0.0,
                    untracked: 0.0,
                    laid_out: vec![false; regions],
                    prefetched_at: vec![f64::NEG_INFINITY; regions],
                    reason: String::new(),
                }
            })
            .collect();
        Engine {
            settings,
            tenants,
            next_tick: 0.0,
            next_watch: WATCH_SECS,
            busy_until: 0.0,
            cpu_secs: 0.0,
            tracker_secs: 0.0,
            tier: TierView { size_bytes: settings.tier_size, ..TierView::default() },
            rng: fastrand::Rng::with_seed(seed ^ 0x7e1d),
            last: None,
            quotas_in_force: None,
        }
    }

    /// Runs whatever the daemon would do at the host's time now.
    pub fn act(&mut self, host: &mut Host) {
        let now = host.now;
        if now < self.busy_until {
            return;
        }
        let mut early = false;
        if now >= self.next_watch {
            self.next_watch = now + WATCH_SECS;
            early = self.watch(host);
        }
        if now >= self.next_tick {
            self.tick(host, true);
            self.next_tick += self.settings.interval;
            if self.next_tick < now {
                self.next_tick = now + self.settings.interval;
            }
        } else if early {
            self.tick(host, false);
        }
    }

    /// The half-second watch: a tenant coming to or out of rest.
    fn watch(&mut self, host: &Host) -> bool {
        if self.settings.policy != PolicyKind::Tierd {
            return false;
        }
        let now = host.now;
        // The tier's read time now, as the daemon reads it from the disk's counters.
        let read = host.device.read_latency();
        let shares = self.settings.knobs.shares();
        let mut changed = false;
        for (et, t) in self.tenants.iter_mut().zip(&host.tenants) {
            et.stall_secs += (t.major_faults - et.watched_faults) * (read + self.settings.knobs.fault_cpu_secs);
            et.watched_faults = t.major_faults;
            // CPU time is read in clock ticks (10 ms), as the daemon reads it.
            let cpu = (t.cpu_secs * 100.0).floor() / 100.0;
            if let Some(change) = et.activity.step(now, cpu, et.stall_secs, t.busy(now), self.settings.window, &shares)
            {
                changed = true;
                if change == tierd_core::activity::Change::Rested {
                    et.laid_out.iter_mut().for_each(|l| *l = false);
                }
            }
        }
        self.cpu_secs += 1e-4 * self.tenants.len() as f64;
        changed
    }

    /// One pass of the control loop; `sample` on the interval's cadence.
    fn tick(&mut self, host: &mut Host, sample: bool) {
        let now = host.now;
        let mut spent = PASS_CPU_SECS_PER_TENANT * self.tenants.len() as f64;
        for (et, t) in self.tenants.iter_mut().zip(&host.tenants) {
            let faults = match et.tick_at {
                Some((_, before)) => t.major_faults - before,
                None => 0.0,
            };
            et.rate = match et.tick_at {
                Some((at, _)) if now > at => faults / (now - at),
                _ => 0.0,
            };
            et.tick_at = Some((now, t.major_faults));
            et.untracked += faults;
            et.fault_rates.push_back(et.rate);
            let keep = ((self.settings.window / self.settings.interval).ceil() as usize + 1).max(2);
            while et.fault_rates.len() > keep {
                et.fault_rates.pop_front();
            }
        }
        // The tier as measured over the interval just ended, before sampling: the daemon's
        // pass measures first, so the tracker sizes its sample by this interval's reads.
        let traffic = host.device.take_interval();
        let used: f64 = host.tenants.iter().map(|t| t.mem.swapped_pages()).sum();
        self.tier = TierView {
            size_bytes: self.settings.tier_size,
            used_bytes: (used * PAGE) as u64,
            read_latency_us: traffic.read_latency_us.or(self.tier.read_latency_us),
            read_bytes_per_sec: traffic.read_bytes_per_sec,
            write_bytes_per_sec: traffic.write_bytes_per_sec,
            utilization: traffic.utilization,
            others_utilization: traffic.others_utilization,
            ..TierView::default()
        };
        let read_secs = self.tier.read_latency_us.map(|us| us / 1e6);
        if sample {
            for (et, t) in self.tenants.iter_mut().zip(host.tenants.iter_mut()) {
                let Some(tr) = et.tracker.as_mut() else { continue };
                let (came_in, from_tier) = t.mem.take_came_in();
                let own_faults = std::mem::take(&mut et.untracked);
                let o = Observation {
                    now,
                    mem: &mut t.mem,
                    exposure: &t.exposure,
                    came_in: &came_in,
                    from_tier: &from_tier,
                    own_faults,
                    read_secs,
                    at_rest: et.activity.rest_secs(now).is_some(),
                };
                let s = tr.observe(o, &mut self.rng);
                self.tracker_secs += s;
                spent += s;
            }
        }
        for et in &mut self.tenants {
            et.short_secs = et.shortfall.observe(now, et.predicted, &et.activity, self.settings.knobs.shortfall);
        }
        let snap = self.snapshot(host);
        let plan = policy::plan(self.settings.policy, &snap, &self.settings.knobs);
        self.quotas_in_force = Some(plan.sets_quotas());
        let wait = self.enforce(host, &plan, &mut spent);
        self.last = Some(snap);
        self.cpu_secs += spent;
        host.tierd_debt += spent;
        self.busy_until = now + wait + spent;
    }

    fn snapshot(&self, host: &Host) -> Snapshot {
        let now = host.now;
        let tenants = self
            .tenants
            .iter()
            .zip(&host.tenants)
            .enumerate()
            .map(|(i, (et, t))| TenantView {
                spec: et.spec.clone(),
                footprint: (t.mem.allocated_pages() * PAGE) as u64,
                dram: (t.dram_pages() * PAGE) as u64,
                swap_cached: (t.mem.swap_cached_pages() * PAGE) as u64,
                // The model keeps page cache as anonymous memory: none of it is inactive cache.
                inactive_file: 0,
                page_cache: 0,
                tier: (t.mem.swapped_pages() * PAGE) as u64,
                pinned: 0,
                quota: et.quota,
                outside_group: false,
                activeness: et.tracker.as_ref().and_then(Tracker::activeness),
                tier_faults_per_sec: et.rate,
                tier_faults_per_sec_avg: et.fault_rate_before(),
                woke_secs_ago: et.activity.since_rest_secs(now),
                at_rest_secs: et.activity.rest_secs(now),
                since_rest_secs: et.activity.since_rest_secs(now),
                rest_began_secs: et.activity.rest_began_secs(now),
                demand_cores: et.activity.usual,
                stall_share: et.activity.stall_share,
                mean_rest_secs: et.activity.mean_rest_secs,
                short_secs: et.short_secs,
                regions: et
                    .tracker
                    .as_ref()
                    .map(|tr| tr.regions(&t.mem, 1000 + i as u32, now, &et.laid_out))
                    .unwrap_or_default(),
            })
            .collect();
        Snapshot {
            dram_budget: self.settings.budget,
            ratio: self.settings.ratio,
            interval_secs: self.settings.interval,
            window_secs: self.settings.window,
            tier: self.tier,
            tenants,
            quotas_in_force: self.quotas_in_force,
        }
    }

    /// Carries a plan out; returns the seconds the loop waits on it.
    fn enforce(&mut self, host: &mut Host, plan: &Plan, spent: &mut f64) -> f64 {
        host.group_limit = plan.group_limit.map(|g| g as f64 / PAGE);
        let mut order: Vec<usize> = (0..plan.tenants.len()).collect();
        // Lowered quotas first, so the group never needs more than it has.
        order.sort_by_key(|&k| {
            let i = self.index(&plan.tenants[k].name);
            plan.tenants[k].quota.unwrap_or(u64::MAX) as i128 - self.tenants[i].quota.unwrap_or(u64::MAX) as i128
        });
        let mut wait = 0.0;
        for k in order {
            let tp = &plan.tenants[k];
            let i = self.index(&tp.name);
            let falling = matches!((self.tenants[i].quota, tp.quota), (Some(a), Some(b)) if b < a)
                || (self.tenants[i].quota.is_none() && tp.quota.is_some());
            if falling {
                wait += self.moves(host, i, tp, spent);
            }
            if tp.quota != self.tenants[i].quota {
                wait += host.set_quota(i, tp.quota.map(|q| q as f64 / PAGE));
                self.tenants[i].quota = tp.quota;
            }
            self.tenants[i].reason = tp.reason.clone();
            self.tenants[i].predicted = tp.predicted_useful;
            if !falling {
                wait += self.moves(host, i, tp, spent);
            }
        }
        wait
    }

    /// Why tenant `i`'s quota is what it is, as the last plan said.
    pub fn reason(&self, i: usize) -> String {
        self.tenants[i].reason.clone()
    }

    fn index(&self, name: &TenantName) -> usize {
        self.tenants.iter().position(|t| &t.spec.name == name).expect("planned tenants are known")
    }

    /// A tenant's page moves: relayout (queued reads, then a page-out in one run),
    /// demotion (page-outs in runs, at once), prefetch (queued reads).
    fn moves(&mut self, host: &mut Host, i: usize, tp: &tierd_core::plan::TenantPlan, spent: &mut f64) -> f64 {
        let now = host.now;
        let interval = self.settings.interval;
        let et = &mut self.tenants[i];
        let region = |r: &tierd_core::snapshot::Range| (r.start / REGION) as usize;
        let mut paged = 0.0;
        let mut relaid = Vec::new();
        // What a pass's relayout slice reads back; the rest waits for the next pass.
        let mut slice = RELAYOUT_PASS_BYTES;
        for r in tp.relayout.iter().map(region) {
            let (runs, scattered) = host.tenants[i].mem.region_tier(r);
            if scattered > 0.5 {
                if slice <= 0.0 {
                    continue;
                }
                slice -= (runs + scattered) * PAGE;
                host.prefetch.push_back(Queued { tenant: i, region: r, relayout: true, until: f64::INFINITY });
            } else if runs > 0.5 || host.tenants[i].mem.region(r).0 > 0.5 {
                paged += host.tenants[i].mem.page_out(r);
            }
            et.laid_out[r] = true;
            relaid.push(r);
        }
        for r in tp.demote.iter().map(region).filter(|r| !relaid.contains(r)) {
            paged += host.tenants[i].mem.page_out(r);
            if host.tenants[i].mem.region_in_runs(r) > 0.9 {
                et.laid_out[r] = true;
            }
        }
        let mut fetched = 0.0;
        for r in tp.prefetch.iter().map(region) {
            if now - et.prefetched_at[r] < interval * 0.9 {
                continue;
            }
            et.prefetched_at[r] = now;
            if let Some(tr) = et.tracker.as_mut() {
                tr.prefetched[r] = true;
            }
            let (a, b) = host.tenants[i].mem.region_tier(r);
            fetched += a + b;
            host.prefetch.push_back(Queued { tenant: i, region: r, relayout: false, until: now + interval });
        }
        host.add_written(paged);
        let gib = (1u64 << 30) as f64;
        *spent += (paged + fetched) * PAGE / gib * MOVE_CPU_SECS_PER_GIB;
        paged * PAGE / PAGEOUT_BYTES_PER_SEC
    }
}
