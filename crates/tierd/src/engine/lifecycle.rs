//! Starting (state directory, cgroup subtree, tier, re-adoption), saving state, and the
//! clean stop.

use super::*;

impl Engine {
    /// Starts tierd: state directory, cgroup subtree, tier, and re-adoption of the
    /// tenants an earlier run left behind.
    pub fn start(cfg: Config, echo: bool) -> anyhow::Result<Engine> {
        let proc = ProcFs::new("/proc");
        let sys = PathBuf::from("/sys");
        create_private_dir(&cfg.state_dir)?;
        create_private_dir(&cfg.state_dir.join("tenants"))?;
        let lock_path = cfg.state_dir.join("lock");
        let lock = tierd_sys::create_no_follow(&lock_path)?;
        if lock.try_lock().is_err() {
            bail!(
                "another tierd is using the state directory {}; stop it or pick another --state-dir",
                cfg.state_dir.display()
            );
        }
        let saved = SavedState::load(&cfg.state_dir)?;
        let mut cg = cgroup::detect(Path::new("/"), &proc).context("finding the memory cgroup controller")?;
        cg.allow_adoption(&cfg.adopt_roots);
        let mut events = Events::default();
        events.echo = echo;
        let kernel_log = tierd_sys::kmsg::KernelLog::open(Path::new("/dev/kmsg"))
            .map_err(|e| {
                events.warn(None, format!("cannot read the kernel's log ({e}): failed tier I/O will not be seen"))
            })
            .ok();

        let tier = Tier::setup(&cfg.tier, cfg.dram_budget, cfg.ratio, saved.tier.as_ref(), &proc, &sys)?;
        let (size, _) = tier.usage(&proc);
        events.info(
            None,
            format!(
                "tier {} ready: {} on {} ({:?}), swap priority {}, {}",
                tier.record.path.display(),
                human(size),
                tier.record.swap_path.display(),
                tier.record.backing,
                tier.record.priority,
                match tier.encryption() {
                    Ok(cipher) => format!("encrypted (dm-crypt {cipher})"),
                    Err(why) => format!("not encrypted: {why}"),
                }
            ),
        );

        let mut engine = Engine::assemble(cfg, proc, cg.into(), Some(tier), events, kernel_log, lock);
        engine.start_damon(&sys);
        crate::crash_point!("start");
        let saved_tier = engine.tier.as_ref().map(|t| t.record.clone());
        engine.create_subtree()?;
        engine.readopt(saved.tenants);
        engine.save_with(saved_tier);
        engine.tick();
        Ok(engine)
    }

    /// With `--tracker damon`: tierd's kdamond, or the reason it measures by sampling.
    fn start_damon(&mut self, sys: &Path) {
        if self.cfg.tracker.kind != TrackerKind::Damon {
            return;
        }
        match DamonHub::start(sys, &self.cfg.state_dir, self.proc.clone()) {
            Ok(hub) => {
                self.damon = Some(hub);
                self.events.info(None, "activeness measured by DAMON (a kdamond of tierd's own)");
            }
            Err(e) => self.events.warn(None, format!("DAMON cannot measure activeness here ({e}): sampling instead")),
        }
    }

    /// Creates tierd's cgroup subtree: its root, the tenants' group and `detached`. If
    /// it cannot, it takes down the tier it made, so it leaves nothing behind.
    fn create_subtree(&mut self) -> anyhow::Result<()> {
        let subtree = [
            (self.root_rel(), AtLimit::Kill),
            (self.group_rel(), self.at_limit()),
            (self.detached_rel(), AtLimit::Kill),
        ];
        for (rel, at_limit) in &subtree {
            if let Err(e) = self.cg.create(rel, *at_limit) {
                if let Some(t) = self.tier.take() {
                    let _ = t.teardown();
                }
                return Err(anyhow!(e).context(format!("creating cgroup {rel} under {}", self.cg.base().display())));
            }
        }
        Ok(())
    }

    /// Re-adopts the tenants of an earlier run (their cgroups survived it).
    pub(super) fn readopt(&mut self, saved: Vec<SavedTenant>) {
        let mut known: Vec<String> = Vec::new();
        for s in saved {
            known.push(s.spec.name.to_string());
            let mut t = Tenant::new(s.spec, s.argv);
            t.life = s.life;
            t.adopted = s.adopted;
            let name = t.spec.name.clone();
            if t.is_running() {
                let rel = self.cgroup_of(&name, t.adopted.as_ref());
                let pids = self.cg.procs(&rel).unwrap_or_default();
                t.procs = pids.iter().filter_map(|&p| Pidfd::open(p).ok()).collect();
                if t.procs.is_empty() {
                    t.life = Life::Exited { code: None };
                    if t.adopted.is_none() {
                        let _ = self.cg.remove(&rel);
                    }
                    self.events.info(Some(name.as_str()), "exited while tierd was down (exit code unknown)");
                } else {
                    self.events.info(Some(name.as_str()), format!("re-adopted, pids {:?}", t.pids()));
                    // The budget, or the policy (what a task meets at a limit), may have changed since.
                    let bounded = self.ready_cgroup(&rel, t.adopted.is_some());
                    if let Err(e) = bounded.and_then(|()| self.bound(&rel, &t.spec)) {
                        self.events.warn(Some(name.as_str()), format!("{e:#}"));
                    }
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

    pub(super) fn save_with(&mut self, tier: Option<crate::tier::TierRecord>) {
        let state = SavedState {
            tier,
            tenants: self
                .tenants
                .values()
                .map(|t| SavedTenant {
                    spec: t.spec.clone(),
                    argv: t.argv.clone(),
                    life: t.life.clone(),
                    adopted: t.adopted.clone(),
                })
                .collect(),
        };
        if let Err(e) = state.save(&self.cfg.state_dir) {
            self.events.warn(None, format!("cannot save state in {}: {e}", self.cfg.state_dir.display()));
        }
    }

    pub(super) fn save(&mut self) {
        let tier = self.tier.as_ref().map(|t| t.record.clone());
        self.save_with(tier);
    }

    /// Clean shutdown: lift every limit (so no tenant can be squeezed while its pages
    /// come back), turn the tier off and remove it, and remove empty cgroups. Running
    /// tenants keep running, with all their memory, and are re-adopted by the next tierd.
    pub fn shutdown(&mut self) {
        // Tenants that exited since the last interval count as exited: taken for running,
        // their empty cgroups (and tierd's whole subtree) were left behind for good.
        self.reap();
        let running = self.lift_quotas();
        // The tier's pages come back whatever their size: a ceiling below it would kill.
        for name in &running {
            if let Err(e) = self.cg.set_ceiling(&self.tenant_rel(name), None) {
                self.events.warn(Some(name.as_str()), format!("cannot lift its ceiling: {e}"));
            }
        }
        // Adopted cgroups get their own settings back; the next tierd takes them over again.
        for name in &running {
            self.give_back(name);
        }
        let _ = self.cg.set_limit(&self.group_rel(), None);
        self.group_limit = None;
        crate::crash_point!("shutdown");
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
            if !t.is_running() && t.adopted.is_none() {
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
        // The kdamond goes with the last tracker that uses it.
        for t in self.tenants.values_mut() {
            t.tracker = None;
        }
        self.damon = None;
        self.save();
    }
}

impl Engine {
    /// Lifts every running tenant's quota (the group's limit stays); returns their names.
    fn lift_quotas(&mut self) -> Vec<TenantName> {
        let running: Vec<TenantName> =
            self.tenants.iter().filter(|(_, t)| t.is_running()).map(|(n, _)| n.clone()).collect();
        for name in &running {
            let rel = self.tenant_rel(name);
            if let Err(e) = self.cg.set_limit(&rel, None) {
                self.events.warn(Some(name.as_str()), format!("cannot lift quota: {e}"));
            }
            if let Some(t) = self.tenants.get_mut(name) {
                t.quota_written(None);
            }
        }
        running
    }

    /// `tierctl tier drain`: reads everything on the tier back into DRAM and turns the
    /// tier off, so its device can be replaced; tierd runs on without a tier (every
    /// policy then plans one limit, the budget) until it is restarted with a new one.
    /// Refused with the numbers when the pages would not fit (see `tierd_core::drain`).
    pub fn drain_tier(&mut self) -> anyhow::Result<DrainReport> {
        let Some(tier) = self.tier.as_ref() else {
            bail!("there is no tier to drain: it was drained already; restart tierd with a tier to use one");
        };
        let (_, tier_used) = tier.usage(&self.proc);
        let figures = tierd_core::drain::DrainFigures {
            tier_used,
            dram_budget: self.cfg.dram_budget,
            dram_used: self.dram_used()?,
            host_available: self.proc.mem_available()?,
        };
        tierd_core::drain::judge(figures)?;
        let path = tier.record.path.clone();
        self.events
            .info(None, format!("draining tier {}: reading {} back into DRAM", path.display(), human(tier_used)));
        // No quota may squeeze a tenant while its pages come back; the budget still holds.
        self.lift_quotas();
        crate::crash_point!("drain");
        let start = Instant::now();
        let torn_down = self.tier.as_ref().expect("checked above").teardown();
        // The drain's own failed reads, counted while the tier is still known.
        self.watch_tier_faults();
        if let Err(e) = torn_down {
            let (_, left) = self.tier.as_ref().expect("kept").usage(&self.proc);
            bail!(
                "the drain stopped with {} still on the tier: {e}; quotas are back at the next interval",
                human(left)
            );
        }
        self.tier = None;
        let seconds = start.elapsed().as_secs_f64();
        let unreadable = self.unreadable_after_drain();
        let read_back = tier_used.saturating_sub(unreadable.iter().map(|(_, b)| b).sum());
        self.events.info(
            None,
            format!(
                "tier {} drained: {} read back into DRAM in {seconds:.1} s; tierd runs without a tier until it is \
                 restarted with one",
                path.display(),
                human(read_back)
            ),
        );
        self.save();
        Ok(DrainReport { path, read_back_bytes: read_back, seconds, unreadable })
    }

    /// After a drain of a device that fails reads: per tenant, the bytes the kernel
    /// could not read back. `swapoff` leaves each such page a poisoned entry, still
    /// "swapped" in the page tables with no swap area behind it, and the process that
    /// touches one gets `SIGBUS`. Named in a warning per tenant.
    fn unreadable_after_drain(&mut self) -> Vec<(String, u64)> {
        // Without a failed read, swapped pages are on another of the host's swap areas.
        if self.tier_faults.read_errors == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (name, t) in self.tenants.iter().filter(|(_, t)| t.is_running()) {
            let bytes: u64 = t.procs.iter().map(|p| tierd_sys::pagemap::swapped_bytes(&self.proc, p.pid())).sum();
            if bytes > 0 {
                out.push((name.to_string(), bytes));
            }
        }
        for (name, bytes) in &out {
            let msg = format!(
                "the drain could not read back {} of its memory: the tier device failed the reads; it gets SIGBUS \
                 where it touches those pages",
                human(*bytes)
            );
            self.events.warn(Some(name.as_str()), msg);
        }
        out
    }
}

pub(super) fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Starting over an earlier run's state and the clean stop, through the engine over a
/// fake memory controller.
#[cfg(test)]
mod stages {
    use std::sync::Arc;

    use super::super::fixture::{self, FakeCgroups, Write};
    use super::*;

    use tierd_core::size::MIB;
    const DB: &str = "tierd/tenants/db";

    fn name(n: &str) -> TenantName {
        TenantName::new(n).unwrap()
    }

    fn saved(n: &str) -> SavedTenant {
        SavedTenant { spec: TenantSpec::new(name(n)), argv: vec!["sleep".into()], life: Life::Running, adopted: None }
    }

    /// An engine whose tenant cgroup db holds this test's process.
    fn engine_with_db(dir: &Path) -> (Arc<FakeCgroups>, Engine) {
        let procs = vec![(DB.to_string(), vec![std::process::id()])];
        let cg = Arc::new(FakeCgroups { procs, ..FakeCgroups::default() });
        let e = fixture::engine(dir, Arc::clone(&cg) as _, "");
        (cg, e)
    }

    #[test]
    fn a_saved_tenant_whose_cgroup_still_has_processes_is_readopted_and_one_emptied_meanwhile_has_exited() {
        let dir = tempfile::tempdir().unwrap();
        let (cg, mut e) = engine_with_db(dir.path());
        e.readopt(vec![saved("db"), saved("old")]);
        assert!(e.tenants[&name("db")].is_running());
        assert_eq!(e.tenants[&name("db")].pids(), [std::process::id()]);
        assert_eq!(e.tenants[&name("old")].life, Life::Exited { code: None });
        let ceiling = Some(tierd_core::waits::ceiling(e.cfg.dram_budget));
        let kept = [Write::Ceiling(DB.into(), ceiling), Write::Remove("tierd/tenants/old".into())];
        assert_eq!(*cg.writes.lock().unwrap(), kept, "db's cgroup is kept, with its ceiling back");
        let said = fixture::said(&e);
        assert!(said.iter().any(|m| m.starts_with("db: re-adopted, pids")), "{said:?}");
        assert!(said.iter().any(|m| m == "old: exited while tierd was down (exit code unknown)"), "{said:?}");
    }

    #[test]
    fn a_tenant_cgroup_without_saved_settings_is_adopted_with_defaults_and_an_empty_one_removed() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("cg");
        for stray in ["lost", "empty"] {
            std::fs::create_dir_all(base.join("tierd/tenants").join(stray)).unwrap();
        }
        let procs = vec![("tierd/tenants/lost".to_string(), vec![std::process::id()])];
        let cg = Arc::new(FakeCgroups { procs, base, ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), Arc::clone(&cg) as _, "");
        e.readopt(Vec::new());
        assert!(e.tenants[&name("lost")].is_running());
        assert_eq!(e.tenants[&name("lost")].spec, TenantSpec::new(name("lost")), "defaults");
        assert!(!e.tenants.contains_key(&name("empty")));
        assert_eq!(*cg.writes.lock().unwrap(), [Write::Remove("tierd/tenants/empty".into())]);
        let said = fixture::said(&e);
        assert!(said.iter().any(|m| m.starts_with("lost: found a tenant cgroup without saved settings")), "{said:?}");
    }

    #[test]
    fn a_clean_stop_lifts_every_limit_keeps_running_tenants_cgroups_and_saves_them_for_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let (cg, mut e) = engine_with_db(dir.path());
        e.tier = None;
        e.group_limit = Some(1 << 30);
        fixture::add_tenant(&mut e, "db", Some(128 * MIB), 96 * MIB).procs.push(fixture::this_process());
        fixture::add_tenant(&mut e, "gone", Some(64 * MIB), 0);
        e.shutdown();
        let writes = cg.writes.lock().unwrap().clone();
        assert!(writes.contains(&Write::Limit(DB.into(), None)), "{writes:?}");
        assert!(writes.contains(&Write::Ceiling(DB.into(), None)), "its pages come back whole: {writes:?}");
        assert!(writes.contains(&Write::Limit("tierd/tenants".into(), None)), "{writes:?}");
        assert!(writes.contains(&Write::Remove("tierd/tenants/gone".into())), "{writes:?}");
        assert!(!writes.iter().any(|w| matches!(w, Write::Remove(r) if r == DB || r == "tierd")), "{writes:?}");
        assert_eq!((e.tenants[&name("db")].quota, e.group_limit), (None, None));
        let saved = SavedState::load(&e.cfg.state_dir).unwrap();
        let life: Vec<(String, Life)> = saved.tenants.into_iter().map(|t| (t.spec.name.to_string(), t.life)).collect();
        assert_eq!(life, [("db".into(), Life::Running), ("gone".into(), Life::Exited { code: None })]);
    }
}
