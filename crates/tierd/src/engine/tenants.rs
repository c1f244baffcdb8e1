//! The API's tenant operations: admission, run, attach, detach, remove, stop, moves by hand,
//! and what the policy says about a tenant.

use super::*;

/// A tenant's claim on capacity: its declared size or footprint, whichever is larger.
fn claim(spec: &TenantSpec, footprint: u64, pinned: u64) -> Claim {
    Claim { size: spec.size.unwrap_or(0).max(footprint), reserve: spec.guaranteed(), pinned, off_tier: spec.no_tier }
}

impl Engine {
    pub(super) fn capacity(&self) -> Capacity {
        let tier_size = self.tier.as_ref().map(|t| t.usage(&self.proc).0).unwrap_or(0);
        let running = self.tenants.values().filter(|t| t.is_running());
        let dram_kept = running.filter(|t| t.spec.no_tier).map(|t| t.spec.guaranteed()).sum();
        Capacity { dram_budget: self.cfg.dram_budget, ratio: self.cfg.ratio, tier_size, dram_kept }
    }

    pub(super) fn claims(&self) -> Vec<Claim> {
        self.tenants
            .values()
            .filter(|t| t.is_running())
            .map(|t| claim(&t.spec, t.measure.footprint, t.measure.pinned))
            .collect()
    }

    pub(super) fn check_new(&self, spec: &TenantSpec, footprint: u64, pinned: u64) -> anyhow::Result<()> {
        spec.validate()?;
        if let Some(t) = self.tenants.get(&spec.name) {
            if t.is_running() {
                bail!("a tenant named {} already runs; pick another --name", spec.name);
            }
            bail!("tenant {} has exited but is still listed; `tierctl rm {}` first", spec.name, spec.name);
        }
        admit(&self.capacity(), &self.claims(), spec.name.as_str(), claim(spec, footprint, pinned))?;
        Ok(())
    }

    /// A tenant cgroup's bounds apart from its quota: the ceiling where the kernel may
    /// kill (`tierd_core::waits::ceiling`) and the protection of what it is guaranteed.
    pub(super) fn bound(&self, rel: &str, spec: &TenantSpec) -> anyhow::Result<()> {
        self.cg
            .set_ceiling(rel, Some(tierd_core::waits::ceiling(self.cfg.dram_budget)))
            .context("setting its ceiling")?;
        self.cg.set_protection(rel, spec.guaranteed()).context("protecting its guaranteed DRAM")?;
        Ok(())
    }

    /// Creates a tenant's cgroup with the quota the policy would give it.
    pub(super) fn prepare_cgroup(
        &mut self,
        spec: &TenantSpec,
        footprint: u64,
    ) -> anyhow::Result<(String, Option<u64>)> {
        let rel = self.tenant_rel(&spec.name);
        self.ready_cgroup(&rel, false)?;
        match self.limit_new(&rel, spec, footprint, false) {
            Ok(quota) => Ok((rel, quota)),
            Err(e) => {
                let _ = self.cg.remove(&rel);
                Err(e)
            }
        }
    }

    /// Bounds a new tenant's cgroup and writes the quota the policy would give it.
    pub(super) fn limit_new(
        &mut self,
        rel: &str,
        spec: &TenantSpec,
        footprint: u64,
        outside_group: bool,
    ) -> anyhow::Result<Option<u64>> {
        if spec.no_tier || self.tier_faults.failing() {
            self.cg.keep_off_swap(rel).context("keeping the new tenant off the tier")?;
        }
        self.bound(rel, spec)?;
        let mut snap = self.snapshot();
        snap.tenants.push(TenantView { outside_group, ..TenantView::unmeasured(spec.clone(), footprint) });
        let quota =
            policy::plan(self.cfg.policy, &snap, &self.cfg.knobs).tenant(spec.name.as_str()).and_then(|p| p.quota);
        self.cg.set_limit(rel, quota).context("setting the new tenant's quota")?;
        Ok(quota)
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
            tierd_sys::create_dir_no_follow(&logs)?;
            let stdout = tierd_sys::create_no_follow(&logs.join("stdout"))?;
            let stderr = tierd_sys::create_no_follow(&logs.join("stderr"))?;
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
                "PID {pid} lives in memory cgroup {theirs}, outside tierd's own cgroup {}; tierd moves only processes in \
                 its own subtree (start the program with `tierctl run`), but it can tier that whole cgroup where it is: \
                 `tierctl adopt {theirs}` (allowed below tierd's cgroup and the config's adopt_roots)",
                self.cg.base().display()
            );
        }
        let before = self.proc.memory_cgroup(Some(pid)).unwrap_or_else(|_| "?".into());
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
        let mut msg = format!("attached pid {pid}, quota {}", show_quota(quota));
        let charged = self.cg.stats(&rel).map(|s| s.anon).unwrap_or(0);
        let elsewhere = crate::tenant::charged_elsewhere(m.rss_anon, charged);
        if elsewhere > 0 {
            msg += &format!(
                "; {} of its memory stays charged to its old cgroup {} (the kernel moves no charges): \
                 tierd counts it as the tenant's DRAM and tiers it by demotion, but the quota's own reclaim \
                 cannot reach it",
                human(elsewhere),
                before
            );
        }
        t.decide(now_secs(), msg.clone());
        self.tenants.insert(name.clone(), t);
        self.events.info(Some(name.as_str()), msg);
        self.save();
        Ok(())
    }

    pub(super) fn running(&mut self, name: &TenantName) -> anyhow::Result<&mut Tenant> {
        match self.tenants.get_mut(name) {
            Some(t) if t.is_running() => Ok(t),
            Some(_) => bail!("tenant {name} has exited"),
            None => bail!("no tenant named {name} (see `tierctl status`)"),
        }
    }

    /// Stops managing a tenant: its processes move to an unlimited cgroup and keep running.
    pub fn detach(&mut self, name: &TenantName) -> anyhow::Result<Vec<u32>> {
        let t = self.running(name)?;
        if let Some(a) = &t.adopted {
            bail!("tenant {name} was adopted in cgroup {}: `tierctl release {name}` lets it go", a.cgroup);
        }
        let pids = t.pids();
        let rel = format!("{}/{}", self.detached_rel(), name);
        self.cg.create(&rel, AtLimit::Kill)?;
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
        if self.tier.is_none() {
            bail!("the tier is drained: there is nowhere to demote to until tierd restarts with a tier");
        }
        if self.tier_faults.failing() {
            bail!("the tier device is failing ({}): tierd puts nothing more on it", self.tier_faults.describe());
        }
        let t = self.running(name)?;
        if t.spec.no_tier {
            bail!("tenant {name} is kept off the tier (--no-tier): its memory stays in DRAM");
        }

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
        let freed = if self.tier_failing_now() {
            let why = "the tier device failed writes: the pages it could not take stay in DRAM";
            self.events.warn(Some(name.as_str()), why.to_string());
            0
        } else {
            self.free_demoted(name, &rel, bytes, total.bytes)
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

    /// Frees what a demotion paged out and whatever else of the tenant waits in the swap
    /// cache (pages prefetched but never touched): both are already on the tier.
    fn free_demoted(&mut self, name: &TenantName, rel: &str, bytes: Option<u64>, demoted: u64) -> u64 {
        let cached = self.cg.stats(rel).map(|s| s.swap_cached).unwrap_or(0);
        let to_free = bytes.map_or(demoted + cached, |b| b.min(demoted + cached));
        match self.cg.reclaim(rel, to_free) {
            Ok(f) => f,
            Err(e) => {
                self.events.warn(Some(name.as_str()), format!("demoted pages stay in the swap cache: {e}"));
                0
            }
        }
    }

    /// Reads a tenant's swapped memory back: at most `bytes`, and by default what the
    /// limit that binds it has room for less a margin ([`moves::prefetch_room`]: more
    /// would be pushed out again, and a full limit fails the tenant's own charges).
    ///
    /// [`moves::prefetch_room`]: tierd_core::policy::moves::prefetch_room
    pub fn prefetch(&mut self, name: &TenantName, bytes: Option<u64>) -> anyhow::Result<MoveReport> {
        // The limit that binds it (its own, or the group's it shares) and what is charged
        // under it now: each call between passes fills only what the last one left.
        let own = self.running(name)?.limit_in_force();
        let rel = if own.is_some() { self.tenant_rel(name) } else { self.group_rel() };
        let stats = self.cg.stats(&rel).ok();
        // Unread, it counts as full: nothing is read back blind.
        let charged = stats.map_or(u64::MAX, |s| s.usage);
        let room = tierd_core::policy::moves::prefetch_room(own.or(stats.and_then(|s| s.limit)), charged);
        self.move_all(name, "prefetch", bytes.unwrap_or(room), mover::prefetch, "process_madvise MADV_WILLNEED")
    }

    /// Rebuilds a tenant's huge pages (`MADV_COLLAPSE`).
    pub fn collapse(&mut self, name: &TenantName) -> anyhow::Result<MoveReport> {
        self.move_all(name, "collapse", u64::MAX, mover::collapse, "process_madvise MADV_COLLAPSE")
    }

    pub(super) fn move_all(
        &mut self,
        name: &TenantName,
        what: &str,
        limit: u64,
        f: fn(&ProcFs, &Pidfd, u64) -> mover::Moved,
        op: &str,
    ) -> anyhow::Result<MoveReport> {
        let proc = self.proc.clone();
        let start = Instant::now();
        let mut total = mover::Moved::default();
        let disk_before = self.tier_disk();
        let t = self.running(name)?;
        for p in &t.procs {
            total.add(f(&proc, p, limit.saturating_sub(total.bytes)));
        }
        t.count_advise(op, &total.advise);
        self.own_tier_io_since(disk_before);
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
        let mut out: Vec<_> = t.decisions.iter().cloned().collect();
        // Where it stands now, also when nothing has changed since it started.
        if t.is_running() && !t.reason.is_empty() {
            out.push(crate::tenant::Decision { time: now_secs(), message: format!("now: {}", t.reason) });
        }
        Ok(out)
    }

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

    /// The tracker's regions of a tenant, coldest last seen first: its heat map.
    pub fn regions(&self, name: &TenantName) -> anyhow::Result<Vec<tierd_core::snapshot::Region>> {
        let t = self.tenants.get(name).ok_or_else(|| anyhow!("no tenant named {name}"))?;
        Ok(t.tracker.as_ref().map(|tr| tr.regions(now_secs())).unwrap_or_default())
    }
}
