//! `tierctl status`: the engine's figures as the API and the dashboard show them.

use super::*;
use tierd_core::wear::Wear;

impl Engine {
    /// The status the API serves.
    pub fn status(&mut self) -> Status {
        self.reap();
        self.measure(false);
        let st = self.status_as_measured();
        self.board.post(st.clone());
        st
    }

    /// The status from the last measurement.
    pub(super) fn status_as_measured(&self) -> Status {
        self.status_of(&self.snapshot())
    }

    /// The status from `snap`, a snapshot of the last measurement (a pass passes its
    /// own, so it is not built twice).
    pub(super) fn status_of(&self, snap: &Snapshot) -> Status {
        let dram_used = self.dram_used().unwrap_or(0);
        let active: u64 = snap.tenants.iter().filter_map(|t| t.activeness.map(|a| a.touched_bytes())).sum();
        let tenants: Vec<TenantStatus> = self.tenants.values().map(|t| self.tenant_status(t)).collect();
        let tier = self.tier_status();
        let health = health::checks(&self.host_figures(active, &tenants, tier.wear));
        Status {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            policy: self.cfg.policy.to_string(),
            tracker: if self.damon.is_some() { "damon" } else { "sampling" }.into(),
            cgroup_version: format!("{:?}", self.cg.version()).to_lowercase(),
            cgroup_path: self.cg.base().join(self.root_rel()),
            dram_budget_bytes: self.cfg.dram_budget,
            dram_used_bytes: dram_used,
            dram_free_bytes: self.cfg.dram_budget.saturating_sub(dram_used),
            ratio: self.cfg.ratio,
            capacity_bytes: self.capacity().total(),
            committed_bytes: snap.committed_bytes(),
            overcommit: snap.overcommit(),
            active_bytes: active,
            active_health: health::active_memory(active, self.cfg.dram_budget).to_string(),
            tier,
            tierd_cpu_percent: self.self_cpu_percent,
            moving_cpu_seconds: self.moving_cpu_secs,
            tierd_rss_bytes: self.proc.memory(std::process::id()).map(|m| m.rss).unwrap_or(0),
            promotions_per_sec: self.tier_view.read_bytes_per_sec / 4096.0,
            demotions_per_sec: self.tier_view.write_bytes_per_sec / 4096.0,
            health,
            http_address: self.http_address.clone(),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            busy: None,
            tenants,
        }
    }

    fn tier_status(&self) -> TierStatus {
        let Some(t) = self.tier.as_ref() else { return TierStatus { drained: true, ..TierStatus::default() } };
        TierStatus {
            path: t.record.path.clone(),
            swap_path: t.record.swap_path.clone(),
            backing: format!("{:?}", t.record.backing).to_lowercase(),
            size_bytes: self.tier_view.size_bytes,
            used_bytes: self.tier_view.used_bytes,
            read_bytes_per_sec: self.tier_view.read_bytes_per_sec,
            write_bytes_per_sec: self.tier_view.write_bytes_per_sec,
            read_latency_us: self.tier_view.read_latency_us,
            read_latency_p99_us: self.read_trace.p99_us,
            read_latency_health: self.tier_read_latency().map(|l| health::tier_read_latency(l).to_string()),
            read_latency_histogram: self.read_trace.is_on().then(|| self.read_trace.tail.histogram()),
            read_latency_p99_off: self.read_trace.off_because().map(str::to_string),
            utilization: self.tier_view.utilization,
            drained: false,
            cipher: t.encryption().ok().map(str::to_string),
            not_encrypted_because: t.encryption().err(),
            read_errors: self.tier_faults.read_errors,
            write_errors: self.tier_faults.write_errors,
            wear: Some(self.tier_wear()),
        }
    }

    /// The tier's writes against its drive's rating (DWPD × the drive's size, the
    /// configured one or the tier device's).
    fn tier_wear(&self) -> Wear {
        let drive = self.cfg.tier.drive_size.or(self.tier.as_ref().and_then(|t| t.disk_bytes));
        let rated = self.cfg.tier.dwpd.zip(drive).map(|(dwpd, bytes)| dwpd * bytes as f64);
        let drive = self.drive.as_ref().and_then(|w| w.health());
        Wear { drive, ..self.tier_writes.wear(now_secs(), rated) }
    }

    fn tier_read_latency(&self) -> Option<health::TierReadLatency> {
        health::TierReadLatency::judged(self.read_trace.p99_us, self.tier_view.read_latency_us)
    }

    /// The host's figures the health checks judge.
    fn host_figures(&self, active: u64, tenants: &[TenantStatus], wear: Option<Wear>) -> health::HostFigures {
        health::HostFigures {
            dram_budget: self.cfg.dram_budget,
            active,
            tier_size: self.tier_view.size_bytes,
            tier_used: self.tier_view.used_bytes,
            tier_read_latency: self.tier_read_latency(),
            tenant_errors: tenant_errors(tenants),
            throttled: self.notes.iter().find(|n| n.throttles_demotion()).map(|n| n.to_string()),
            waiting: self
                .tenants
                .iter()
                .filter(|(_, t)| t.is_running())
                .filter_map(|(n, t)| Some((n.to_string(), t.waits.waiting_secs(now_secs())?)))
                .collect(),
            oom_grace_secs: self.cfg.oom_grace.as_secs_f64(),
            tier_drained: self.tier.is_none(),
            tier_faults: self.tier_faults,
            tier_encryption: self.tier.as_ref().map(|t| t.encryption().map(str::to_string)),
            tier_wear: wear,
        }
    }

    /// The policy's view of a running tenant at its last pass (the `tierd` policy's).
    fn curve_of(&self, t: &Tenant) -> Option<tierd_core::policy::curve::Curve> {
        let snap = self.last_snapshot.as_ref()?;
        let v = snap.tenants.iter().find(|v| v.spec.name == t.spec.name)?;
        (self.cfg.policy == PolicyKind::Tierd && t.is_running())
            .then(|| tierd_core::policy::curve::Curve::in_snapshot(v, snap, &self.cfg.knobs))
    }

    /// One tenant's row; an exited tenant's rates and holdings read zero.
    fn tenant_status(&self, t: &Tenant) -> TenantStatus {
        let running = t.is_running();
        let live = |v: f64| if running { v } else { 0.0 };
        let activeness = t.tracker.as_ref().and_then(|tr| tr.activeness());
        let curve = self.curve_of(t);
        TenantStatus {
            name: t.spec.name.to_string(),
            state: if running { "running".into() } else { "exited".into() },
            exit_code: match t.life {
                Life::Exited { code } => code,
                Life::Running => None,
            },
            pids: t.pids(),
            command: t.argv.clone(),
            size_bytes: t.measure.footprint,
            declared_size_bytes: t.spec.size,
            dram_bytes: if running { t.measure.dram } else { 0 },
            tier_bytes: if running { t.measure.tier } else { 0 },
            huge_bytes: t.measure.huge,
            pinned_bytes: t.measure.pinned,
            quota_bytes: t.quota,
            reserve_bytes: t.spec.guaranteed(),
            charged_elsewhere_bytes: t.measure.charged_elsewhere,
            adopted_cgroup: t.adopted.as_ref().map(|a| a.cgroup.clone()),
            no_tier: t.spec.no_tier,
            limit_bytes: t.spec.limit,
            shares: t.spec.shares,
            active_bytes: activeness.map(|a| a.active_bytes),
            active_ci_bytes: activeness.map(|a| a.ci_bytes),
            touched_in_window_bytes: activeness.and_then(|a| a.touched_in_window_bytes),
            touched_in_window_ci_bytes: activeness.and_then(|a| a.touched_in_window_ci_bytes),
            tracker_sample_pages: t.tracker.as_ref().map_or(0, |tr| tr.cost().sample_pages),
            tracker_seconds: t.tracker.as_ref().map_or(0.0, |tr| tr.cost().seconds),
            major_faults: t.measure.major_faults_total,
            oom_kills: t.oom_kills,
            major_faults_per_sec: live(t.measure.major_faults_per_sec),
            tier_read_bytes_per_sec: live(t.measure.major_faults_per_sec * 4096.0),
            tier_write_bytes_per_sec: live(t.measure.tier_write_bytes_per_sec),
            memory_pressure_some: t.measure.pressure_some.filter(|_| running),
            memory_pressure_full: t.measure.pressure_full.filter(|_| running),
            cpu_cores: live(t.progress.activity.cpu),
            at_rest_secs: if running { t.progress.activity.rest_secs(now_secs()) } else { None },
            stall_share: live(t.progress.activity.stall_share),
            waiting_at_limit_secs: if running { t.waits.waiting_secs(now_secs()) } else { None },
            hot_bytes: curve.as_ref().map(|c| c.hot),
            warm_bytes: curve.as_ref().map(|c| c.warm),
            steep: curve.as_ref().map(|c| c.steep),
            predicted_useful: t.progress.predicted,
            reason: t.reason.clone(),
            errors: t.errors.clone(),
            vm: t.spec.vm || t.vm.guest.is_some(),
            guest: t.vm.guest.clone(),
        }
    }
}

/// Running tenants with failed operations, and how many.
pub(super) fn tenant_errors(tenants: &[TenantStatus]) -> Vec<(String, u64)> {
    tenants
        .iter()
        .filter(|t| t.state == "running")
        .map(|t| (t.name.clone(), t.errors.values().sum::<u64>()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The status as served, through the engine over a fake memory controller.
#[cfg(test)]
mod stages {
    use std::sync::Arc;

    use super::super::fixture::{self, FakeCgroups};

    use tierd_core::size::MIB;

    #[test]
    fn a_running_tenant_shows_what_it_holds_and_an_exited_one_its_exit_and_nothing_held() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Arc::new(FakeCgroups { usage: 96 * MIB, ..FakeCgroups::default() });
        let mut e = fixture::engine(dir.path(), cg as _, "");
        let db = fixture::add_tenant(&mut e, "db", Some(128 * MIB), 96 * MIB);
        db.measure.tier = 32 * MIB;
        let gone = fixture::add_tenant(&mut e, "gone", None, 64 * MIB);
        gone.life = crate::tenant::Life::Exited { code: Some(3) };
        gone.measure.tier = 16 * MIB;
        let s = e.status_as_measured();
        assert_eq!((s.dram_budget_bytes, s.dram_used_bytes, s.dram_free_bytes), (1 << 30, 96 * MIB, 928 * MIB));
        let row = |n: &str| s.tenants.iter().find(|t| t.name == n).expect("a row per tenant");
        let (db, gone) = (row("db"), row("gone"));
        assert_eq!(
            (db.state.as_str(), db.quota_bytes, db.dram_bytes, db.tier_bytes),
            ("running", Some(128 * MIB), 96 * MIB, 32 * MIB)
        );
        assert_eq!((gone.state.as_str(), gone.exit_code, gone.dram_bytes, gone.tier_bytes), ("exited", Some(3), 0, 0));
        assert_eq!(s.policy, "tierd");
        assert!(!s.tier.drained, "the tier is in place");
    }
}
