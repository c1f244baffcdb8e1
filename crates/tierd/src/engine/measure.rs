//! Measuring: exits, each tenant's memory and activity, the tracker's samples, the tier's
//! I/O, and the snapshot the policy plans from.

use super::*;
use crate::tenant::Measure;
use tierd_sys::cgroup::Pressure;
use tierd_sys::procfs::DiskStats;

impl Engine {
    /// Updates each tenant's processes and notices exits.
    pub(super) fn reap(&mut self) {
        // First: a tenant ended by a page the tier could not read back is then named so.
        self.watch_tier_faults();
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
            t.sync_procs(&pids);
            if t.procs.is_empty() {
                if t.is_running() {
                    t.life = Life::Exited { code: None };
                }
                if let Some(mut child) = t.child.take()
                    && let Ok(status) = child.wait()
                {
                    t.life = Life::Exited { code: exit_code(status) };
                }
                self.record_exit(&name, &rel);
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

    /// Records that a tenant's last process ended: its exit and its cause where known (a
    /// page the failing tier could not read back, the OOM killer), then its cgroup
    /// removed, or an adopted one's settings put back.
    fn record_exit(&mut self, name: &TenantName, rel: &str) {
        let Some(t) = self.tenants.get_mut(name) else { return };
        t.quota = None;
        let code = match &t.life {
            Life::Exited { code: Some(c) } => format!("exit code {c}"),
            _ => "exit code unknown".into(),
        };
        if t.life == (Life::Exited { code: Some(tierd_sys::process::EXIT_BY_SIGBUS) })
            && self.tier_faults.read_errors > 0
        {
            self.events.warn(
                Some(name.as_str()),
                format!(
                    "ended by SIGBUS while the tier device fails reads: a page it had on the tier ({} \
                     there at the last pass) could not be read back",
                    human(t.measure.tier)
                ),
            );
        }
        // Its last process may have been the OOM killer's victim: counted before the cgroup goes.
        if let Some(said) = self.cg.stats(rel).ok().and_then(|s| t.count_oom_kills(s.oom_kills)) {
            self.events.warn(Some(name.as_str()), said);
        }
        if t.adopted.is_some() {
            self.give_back(name);
            self.events.info(Some(name.as_str()), format!("exited ({code}); cgroup {rel} has its own settings back"));
        } else {
            if let Err(e) = self.cg.remove(rel) {
                self.events.warn(Some(name.as_str()), format!("cannot remove cgroup {rel}: {e}"));
            }
            self.events.info(Some(name.as_str()), format!("exited ({code}); its cgroup is removed"));
        }
    }

    /// Measures every running tenant; `rates` also closes the interval for per-second rates.
    pub(super) fn measure(&mut self, rates: bool) {
        let now = Instant::now();
        let names: Vec<TenantName> = self.tenants.keys().cloned().collect();
        for name in names {
            let rel = self.tenant_rel(&name);
            let stats = self.cg.stats(&rel);
            // Read only where an interval closes: status requests measure too.
            let pressure = if rates { self.cg.pressure(&rel) } else { None };
            let t = self.tenants.get_mut(&name).expect("listed above");
            if !t.is_running() {
                continue;
            }
            let mut footprint = 0;
            let mut resident_anon = 0;
            let mut swapped = 0;
            let (mut locked, mut hugetlb) = (0, 0);
            for p in &t.procs {
                if let Ok(m) = self.proc.memory(p.pid()) {
                    footprint += m.rss_anon + m.swap;
                    resident_anon += m.rss_anon;
                    swapped += m.swap;
                    locked += m.locked;
                    hugetlb += m.hugetlb;
                }
            }
            let mut pinned = locked + hugetlb;
            // For a tenant not known as a VM only until it has been looked at once. Also
            // on status requests: the control loop can stall for seconds on a quota
            // write, and a guest QEMU pins must be seen (and pinned) without waiting.
            if t.spec.vm || t.vm.guest.is_some() || t.vm.said.is_none() {
                let pids: Vec<u32> = t.procs.iter().map(|p| p.pid()).collect();
                t.vm.guest = crate::guest::inspect(&self.proc, &pids);
                say_guest(&mut self.events, &name, t);
            }
            // A guest QEMU pins stays in DRAM whole: a floor for the policy and admission.
            if let Some(g) = t.vm.guest.as_ref().filter(|g| !g.tierable) {
                pinned = pinned.max(g.ram_bytes);
            }
            let Ok(stats) = stats else {
                t.count_error("cgroup stats");
                continue;
            };
            if let Some(said) = t.count_oom_kills(stats.oom_kills) {
                self.events.warn(Some(name.as_str()), said);
            }
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
            t.measure.charged_elsewhere = crate::tenant::charged_elsewhere(resident_anon, stats.anon);
            t.measure.dram = stats.usage + t.measure.charged_elsewhere;
            t.measure.swap_cached = stats.swap_cached;
            t.measure.inactive_file = stats.inactive_file;
            t.measure.page_cache = stats.page_cache;
            // Nothing is on a drained tier, whatever a process's VmSwap says: before 6.2
            // each thread's counts reach it only every 64 events, and an idle one's never.
            t.measure.tier = if self.tier.is_some() { stats.swap.max(swapped) } else { 0 };
            t.measure.huge = stats.anon_huge;
            t.measure.pinned = pinned;
            // The tenant's own faults, not its cgroup's: those count tierd's reads too.
            let (own_faults, _) = t.read_counters(&self.proc);
            t.measure.major_faults_total = own_faults;
            // Rates are per interval: only the control loop moves their baseline.
            if rates {
                let keep =
                    (self.cfg.tracker.window.as_secs_f64() / self.cfg.interval.as_secs_f64()).ceil() as usize + 1;
                close_interval(t, &prev, now, pressure, own_faults, keep.max(2));
            }
        }
    }

    /// Lets each tenant's tracker observe one interval.
    pub(super) fn track(&mut self) {
        let now = now_secs();
        let sampling = SamplingConfig::new(
            self.cfg.tracker.sample_pages,
            self.cfg.tracker.window.as_secs_f64(),
            self.cfg.interval.as_secs_f64(),
        )
        .with_cpu_budget(self.cfg.tracker.cpu_budget);
        // Last known: an interval with too few reads to time keeps the one before.
        let read_secs = self.tier_view.read_latency_us.map(|us| us / 1e6);
        // Sampling pages a few pages out: not for a tenant kept off the tier.
        for (i, t) in self.tenants.values_mut().filter(|t| t.is_running() && !t.spec.no_tier).enumerate() {
            let proc = self.proc.clone();
            let tracker = t.tracker.get_or_insert_with(|| -> Box<dyn Tracker> {
                match &self.damon {
                    Some(hub) => Box::new(DamonHub::tracker(hub, proc, sampling.window_secs, sampling.interval_secs)),
                    None => Box::new(SamplingTracker::new(sampling, proc, now.to_bits() ^ i as u64)),
                }
            });
            if let Some(secs) = read_secs {
                tracker.tier_read_time(secs);
            }
            let at_rest = t.progress.activity.rest_secs(now).is_some();
            tracker.observe(&t.procs, std::mem::take(&mut t.measure.untracked_faults), now, at_rest);
        }
    }

    /// The tier disk's counters now (all I/O on it, tierd's own too).
    pub(super) fn tier_disk(&self) -> Option<DiskStats> {
        self.tier.as_ref().and_then(|t| t.disk.clone()).and_then(|d| self.proc.diskstats(&d).ok().flatten())
    }

    /// Runs `f`, tierd's own reads and writes on the tier, and sets the disk's counters
    /// over it apart: timed in tierd's deep queue, its reads would read as a slow tier.
    /// Each move waits for the reads it starts, so they end within the span.
    pub(super) fn own_tier_io<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let before = self.tier_disk();
        let out = f(self);
        self.own_tier_io_since(before);
        out
    }

    /// Sets the disk's counters since `before` (read at the start of tierd's own moves) apart.
    pub(super) fn own_tier_io_since(&mut self, before: Option<DiskStats>) {
        if let (Some(a), Some(b)) = (before, self.tier_disk()) {
            self.own_disk = self.own_disk.plus(&b.since(&a));
        }
    }

    /// The tier disk's counters `disk` less tierd's own moves: the tenants' (and the
    /// host's) I/O.
    pub(super) fn others_of(&self, disk: DiskStats) -> DiskStats {
        disk.since(&self.own_disk)
    }

    /// Tier traffic and latency, and tierd's own CPU, from counters since last time.
    pub(super) fn sample_io(&mut self) {
        let now = Instant::now();
        let vm = self.proc.vmstat().unwrap_or_default();
        let disk = self.tier_disk();
        let cpu = self.proc.cpu_ticks(std::process::id()).unwrap_or(0);
        let cur = IoSample {
            at: now,
            pswpin: vm.get("pswpin").copied().unwrap_or(0),
            pswpout: vm.get("pswpout").copied().unwrap_or(0),
            disk,
            others: disk.map(|d| self.others_of(d)),
            self_cpu_ticks: cpu,
        };
        let (size, used) = self.tier.as_ref().map(|t| t.usage(&self.proc)).unwrap_or((0, 0));
        let mut view = TierView { size_bytes: size, used_bytes: used, faults: self.tier_faults, ..TierView::default() };
        if let Some(prev) = self.io_prev {
            let dt = (now - prev.at).as_secs_f64().max(1e-3);
            view.read_bytes_per_sec = cur.pswpin.saturating_sub(prev.pswpin) as f64 * 4096.0 / dt;
            view.write_bytes_per_sec = cur.pswpout.saturating_sub(prev.pswpout) as f64 * 4096.0 / dt;
            if let (Some(a), Some(b), Some(oa), Some(ob)) = (prev.disk, cur.disk, prev.others, cur.others) {
                // Every write the device took, sampling's and relayout's too: all wear it.
                let all = b.since(&a);
                self.tier_writes.add(now_secs(), all.sectors_written * 512);
                let others = ob.since(&oa);
                view.read_latency_us = others.read_latency_us();
                view.utilization = busy_share(&all, dt);
                view.others_utilization = busy_share(&others, dt);
            }
            let hz = tierd_sys::process::clock_ticks_per_sec() as f64;
            self.self_cpu_percent = cur.self_cpu_ticks.saturating_sub(prev.self_cpu_ticks) as f64 / hz / dt * 100.0;
        }
        let queue = self.tier.as_ref().map(|t| t.queue);
        if let Some(why) = self.read_trace.sample(queue, now_secs()) {
            self.events.info(None, format!("the tier's reads are timed on average only, without a p99: {why}"));
        }
        self.tier_view = view;
        self.io_prev = Some(cur);
        self.read_drive_health();
    }

    /// The tier's NVMe drive's own health log, read once a minute on a thread of its
    /// own (`drive::DriveWatch`), started for the tier's drive and ended with it.
    fn read_drive_health(&mut self) {
        let dev = self.tier.as_ref().and_then(|t| t.drive.as_deref());
        if self.drive.as_ref().map(|w| w.device()) != dev {
            self.drive = dev.and_then(|dev| match drive::DriveWatch::start(dev) {
                Ok(w) => Some(w),
                Err(e) => {
                    self.events.warn(None, format!("cannot start reading the tier drive's health log: {e}"));
                    None
                }
            });
        }
        let Some(w) = self.drive.as_mut() else { return };
        if let Some(said) = w.look() {
            let words = said.words(w.device());
            self.events.warn(None, words);
        }
    }

    /// Counts failed swap I/O on the tier in the kernel's log. At the first, every tenant is
    /// kept off the tier (the plan drops quotas and demotion: `tierd_core::tier_faults`).
    pub(super) fn watch_tier_faults(&mut self) {
        let Some(tier) = self.tier.as_ref() else { return };
        let (Some(log), Some(dev)) = (self.kernel_log.as_mut(), tier.device_number) else { return };
        let before = self.tier_faults;
        let new = self.tier_faults.count(&log.read_new(), dev);
        // Said when each kind first appears; the counts go on in status, health and metrics.
        if (new.write_errors > 0 && before.write_errors == 0) || (new.read_errors > 0 && before.read_errors == 0) {
            let disk = tier.disk.as_deref().unwrap_or_default();
            self.events.warn(
                None,
                format!(
                    "tier device {disk} is failing: {} in the kernel's log; nothing more is put on it (no \
                     quotas, no demotion, every tenant kept off it)",
                    self.tier_faults.describe()
                ),
            );
        }
        if self.tier_faults.failing() && !before.failing() {
            self.keep_all_off_tier();
        }
    }

    /// Whether the tier is failing, the kernel's log read just now. Demotions are where
    /// a failing device shows first, and reclaim after them (a cut, `memory.reclaim`)
    /// retries the refused writes (seen: 5.9 s and 32.3 s) with the loop waiting.
    pub(super) fn tier_failing_now(&mut self) -> bool {
        self.watch_tier_faults();
        self.tier_faults.failing()
    }

    /// Stops the kernel from putting any more of a tenant's pages on the tier (v1
    /// `memory.swappiness` 0, v2 `memory.swap.max` 0); what is there stays readable.
    fn keep_all_off_tier(&mut self) {
        let names: Vec<TenantName> =
            self.tenants.iter().filter(|(_, t)| t.is_running()).map(|(n, _)| n.clone()).collect();
        for name in names {
            let rel = self.tenant_rel(&name);
            if let Err(e) = self.cg.keep_off_swap(&rel) {
                let t = self.tenants.get_mut(&name).expect("listed above");
                t.count_error("keeping off a failing tier");
                self.events.warn(Some(name.as_str()), format!("cannot keep it off the failing tier: {e}"));
            }
        }
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
                swap_cached: t.measure.swap_cached,
                inactive_file: t.measure.inactive_file,
                page_cache: t.measure.page_cache,
                tier: t.measure.tier,
                pinned: t.measure.pinned,
                quota: t.quota,
                outside_group: t.adopted.is_some(),
                activeness: t.tracker.as_ref().and_then(|tr| tr.activeness()),
                tier_faults_per_sec: t.measure.major_faults_per_sec,
                tier_faults_per_sec_avg: t.faults.rate_before(),
                woke_secs_ago: t.progress.activity.since_rest_secs(now),
                at_rest_secs: t.progress.activity.rest_secs(now),
                since_rest_secs: t.progress.activity.since_rest_secs(now),
                rest_began_secs: t.progress.activity.rest_began_secs(now),
                demand_cores: t.progress.activity.usual,
                stall_share: t.progress.activity.stall_share,
                mean_rest_secs: t.progress.activity.mean_rest_secs,
                short_secs: t.progress.short_secs,
                regions: t
                    .tracker
                    .as_ref()
                    .map(|tr| tr.regions(now))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| tierd_core::snapshot::Region {
                        laid_out: t.layout.in_runs(r.range.pid, r.range.start),
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
            // No tier after `tierctl tier drain` (the only way to lose it while running).
            tier: TierView { drained: self.tier.is_none(), ..self.tier_view },
            tenants,
            quotas_in_force: self.quotas_in_force,
        }
    }
}

/// Says once what is known of a tenant's guest: found (with its RAM), not tierable
/// (with why), or — for a tenant started with `--vm` — no QEMU seen.
fn say_guest(events: &mut Events, name: &TenantName, t: &mut Tenant) {
    let now = match &t.vm.guest {
        Some(g) => (g.ram_found, g.tierable),
        None => (false, true),
    };
    if t.vm.said == Some(now) {
        return;
    }
    match &t.vm.guest {
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
    t.vm.said = Some(now);
}

/// Turns a tenant's counters into the rates of the interval that closes `now` (`prev`:
/// its figures at the last close) and keeps its last `keep` fault rates.
fn close_interval(
    t: &mut Tenant,
    prev: &Measure,
    now: Instant,
    pressure: Option<Pressure>,
    faults_now: u64,
    keep: usize,
) {
    let faults = if prev.at.is_some() { faults_now.saturating_sub(prev.major_faults) } else { 0 };
    t.measure.untracked_faults += faults;
    (t.measure.major_faults_per_sec, t.measure.tier_write_bytes_per_sec) = match prev.at {
        Some(at) if now > at => {
            let dt = (now - at).as_secs_f64();
            (faults as f64 / dt, t.measure.tier.saturating_sub(prev.tier_at_rate) as f64 / dt)
        }
        _ => (0.0, 0.0),
    };
    t.measure.tier_at_rate = t.measure.tier;
    (t.measure.pressure_some, t.measure.pressure_full) = match (prev.pressure, pressure, prev.at) {
        (Some(a), Some(b), Some(at)) if now > at => {
            let us = (now - at).as_secs_f64() * 1e6;
            let share = |from: u64, to: u64| Some((to.saturating_sub(from) as f64 / us).min(1.0));
            (share(a.some_us, b.some_us), share(a.full_us, b.full_us))
        }
        _ => (None, None),
    };
    t.measure.pressure = pressure;
    t.measure.at = Some(now);
    t.measure.major_faults = faults_now;
    t.faults.record_rate(t.measure.major_faults_per_sec, keep);
}

/// The share of `dt` seconds the device was busy with the span's I/O.
fn busy_share(span: &DiskStats, dt: f64) -> f64 {
    (span.io_ms as f64 / 1000.0 / dt).min(1.0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_tier_timed_for_tenants_leaves_tierds_own_deep_queue_out() {
        // 5 s: tenants read 1000 pages at 100 µs; tierd's prefetch 9000 at 2 ms each, in
        // flight together for 2.5 s of the device's time.
        let own = DiskStats { reads: 9000, read_ms: 18_000, io_ms: 2_500, ..DiskStats::default() };
        let all = DiskStats { reads: 10_000, read_ms: 18_100, io_ms: 3_000, ..DiskStats::default() };
        assert_eq!(all.read_latency_us(), Some(1810.0), "red, by tierd's own reads");
        let others = all.since(&own);
        assert_eq!(others.read_latency_us(), Some(100.0));
        assert_eq!((super::busy_share(&all, 5.0), super::busy_share(&others, 5.0)), (0.6, 0.1));
        assert_eq!(super::busy_share(&DiskStats { io_ms: 9_000, ..DiskStats::default() }, 5.0), 1.0);
    }

    use super::*;
    use tierd_core::TenantName;

    #[test]
    fn an_interval_closes_into_rates_and_the_shares_of_time_stalled() {
        let mut t = Tenant::new(TenantSpec::new(TenantName::new("w").unwrap()), Vec::new());
        let t0 = Instant::now();
        // The first close has no interval before it: no rates, only the readings kept.
        t.measure.tier = 64 << 20;
        close_interval(&mut t, &Measure::default(), t0, Some(Pressure { some_us: 1_000_000, full_us: 0 }), 500, 4);
        assert_eq!((t.measure.major_faults_per_sec, t.measure.pressure_some), (0.0, None));
        // Two seconds on: 2,000 faults, 32 MiB more on the tier, 0.5 s of some stall.
        let prev = t.measure;
        t.measure.tier = 96 << 20;
        let t1 = t0 + Duration::from_secs(2);
        close_interval(&mut t, &prev, t1, Some(Pressure { some_us: 1_500_000, full_us: 200_000 }), 2_500, 4);
        assert_eq!(t.measure.major_faults_per_sec, 1000.0);
        assert_eq!(t.measure.tier_write_bytes_per_sec, (16 << 20) as f64);
        assert_eq!((t.measure.pressure_some, t.measure.pressure_full), (Some(0.25), Some(0.1)));
        assert_eq!(t.measure.untracked_faults, 2_000);
        assert_eq!(t.faults.rates, [0.0, 1000.0], "each interval's rate is kept for the wake judgement");
    }
}

/// Measuring through the engine over a fake memory controller.
#[cfg(test)]
mod stages {
    use std::sync::Arc;

    use super::super::fixture::{self, FakeCgroups};

    use tierd_core::size::MIB;

    #[test]
    fn a_tenant_is_planned_from_what_its_cgroup_is_charged_and_holds_on_the_tier() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Arc::new(FakeCgroups {
            usage: 96 * MIB,
            swap: (160 * MIB).into(),
            swap_cached: 8 * MIB,
            inactive_file: 4 * MIB,
            page_cache: 6 * MIB,
            ..FakeCgroups::default()
        });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        fixture::add_tenant(&mut e, "db", Some(128 * MIB), 0);
        e.measure(true);
        let snap = e.snapshot();
        let db = snap.tenants.iter().find(|t| t.spec.name.as_str() == "db").expect("db is running");
        assert_eq!((db.dram, db.swap_cached, db.tier, db.quota), (96 * MIB, 8 * MIB, 160 * MIB, Some(128 * MIB)));
        assert_eq!(db.inactive_file, 4 * MIB, "page cache not reused, which the policy weighs apart");
        assert_eq!(db.page_cache, 6 * MIB, "and all its page cache, reused or not");
        assert_eq!(snap.dram_budget, 1 << 30);
    }

    #[test]
    fn nothing_is_counted_on_a_drained_tier() {
        let dir = tempfile::tempdir().unwrap();
        // A count the kernel has not caught up with (6.1's per-thread swap counts).
        let cg = Arc::new(FakeCgroups { usage: 96 * MIB, swap: (32 << 10).into(), ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        fixture::add_tenant(&mut e, "db", None, 0);
        e.tier = None;
        e.measure(true);
        let db = e.snapshot().tenants.into_iter().find(|t| t.spec.name.as_str() == "db").expect("db is running");
        assert_eq!((db.dram, db.tier), (96 * MIB, 0));
    }

    #[test]
    fn a_tenant_that_exited_is_not_planned_for() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = fixture::engine(dir.path(), Arc::new(FakeCgroups::default()) as _, "");
        fixture::add_tenant(&mut e, "gone", None, 64 * MIB);
        fixture::add_tenant(&mut e, "db", None, 64 * MIB);
        e.reap();
        assert!(e.snapshot().tenants.is_empty(), "a tenant with no processes left has exited");
        let said = fixture::said(&e);
        assert!(
            said.iter().any(|m| m.starts_with("gone: exited (exit code unknown); its cgroup is removed")),
            "{said:?}"
        );
    }
}
