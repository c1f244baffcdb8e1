//! Cgroups tierd did not create, taken as tenants (`tierctl adopt`) and let go
//! (`tierctl release`): a libvirt VM's scope, a container's cgroup.
//!
//! tierd writes only the memory-control files of such a cgroup (its quota, ceiling,
//! protection and swap setting), saves what they held first and puts that back when it
//! lets go, at a clean stop too; it never moves the cgroup's processes or removes it.
//! Which cgroups it may reach is decided once, in `tierd_sys::cgroup`'s reach: below
//! the configured `adopt_roots` and tierd's own cgroup.

use super::*;
use crate::tenant::Adoption;
use tierd_sys::cgroup::path_is_below;

/// Why `cgroup` cannot be adopted beside tierd (own cgroup `own`, tenants' subtree
/// `subtree`) and the tenants already adopted (`taken`: name, cgroup); otherwise the
/// path, tidied.
pub(crate) fn adoptable(cgroup: &str, own: &str, subtree: &str, taken: &[(&str, &str)]) -> Result<String, String> {
    let path = cgroup.trim_end_matches('/');
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    if !cgroup.starts_with('/') || parts.is_empty() || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err(format!(
            "{cgroup:?} is not a cgroup path: give it as /proc/PID/cgroup names it, e.g. /machine.slice/vm1.scope"
        ));
    }
    if path_is_below(own, path) {
        return Err(format!("cgroup {path} holds tierd itself; adopt the cgroups of the workloads below it"));
    }
    if path_is_below(path, subtree) {
        return Err(format!("cgroup {path} is tierd's own ({subtree}): its tenants are managed already"));
    }
    if let Some((name, theirs)) = taken.iter().find(|(_, c)| path_is_below(path, c) || path_is_below(c, path)) {
        return Err(format!("cgroup {path} overlaps tenant {name}'s cgroup {theirs}: a cgroup is adopted once"));
    }
    Ok(path.to_string())
}

impl Engine {
    /// Takes the cgroup `cgroup` (a hierarchy path) as the tenant `spec`; returns its PIDs.
    pub fn adopt(&mut self, spec: TenantSpec, cgroup: &str) -> anyhow::Result<Vec<u32>> {
        let taken: Vec<(&str, &str)> = self
            .tenants
            .iter()
            .filter_map(|(n, t)| t.adopted.as_ref().map(|a| (n.as_str(), a.cgroup.as_str())))
            .collect();
        let subtree = format!("{}/{}", self.cg.own().trim_end_matches('/'), self.cfg.cgroup_name);
        let cgroup = adoptable(cgroup, self.cg.own(), &subtree, &taken).map_err(|e| anyhow!(e))?;
        let dir = self.cg.dir(&cgroup)?;
        if !dir.is_dir() {
            bail!("no cgroup {cgroup} (looked for {})", dir.display());
        }
        let pids = self.cg.procs(&cgroup)?;
        if pids.is_empty() {
            bail!("cgroup {cgroup} has no processes: nothing to tier; adopt it once its workload runs");
        }
        if let Some((name, _)) = self.tenants.iter().find(|(_, t)| t.pids().iter().any(|p| pids.contains(p))) {
            bail!("a process of cgroup {cgroup} belongs to tenant {name} already");
        }
        let stats = self.cg.stats(&cgroup)?;
        let pinned = pids.iter().filter_map(|&p| self.proc.memory(p).ok()).map(|m| m.locked + m.hugetlb).sum();
        let footprint = stats.anon + stats.swap;
        self.check_new(&spec, footprint, pinned)?;
        let settings = self.cg.settings(&cgroup)?;
        let quota =
            match self.ready_cgroup(&cgroup, true).and_then(|()| self.limit_new(&cgroup, &spec, footprint, true)) {
                Ok(q) => q,
                Err(e) => {
                    let _ = self.cg.restore(&cgroup, &settings);
                    return Err(e.context(format!("adopting cgroup {cgroup}; its settings are put back")));
                }
            };
        let mut t = Tenant::new(spec, self.proc.cmdline(pids[0]).unwrap_or_default());
        t.procs = pids.iter().filter_map(|&p| Pidfd::open(p).ok()).collect();
        t.quota = quota;
        t.adopted = Some(Adoption { cgroup: cgroup.clone(), settings });
        let name = t.spec.name.clone();
        let msg = format!(
            "adopted cgroup {cgroup}, pids {pids:?}, quota {}; its memory settings are put back on `tierctl release`",
            show_quota(quota)
        );
        t.decide(now_secs(), msg.clone());
        self.tenants.insert(name.clone(), t);
        self.events.info(Some(name.as_str()), msg);
        self.save();
        Ok(pids)
    }

    /// Lets an adopted tenant go: its cgroup's memory settings are put back as tierd
    /// found them, and its processes run on where they are. Returns the cgroup.
    pub fn release(&mut self, name: &TenantName) -> anyhow::Result<String> {
        let t = self.tenants.get(name).ok_or_else(|| anyhow!("no tenant named {name} (see `tierctl status`)"))?;
        let Some(a) = t.adopted.clone() else {
            bail!("tenant {name} was not adopted (tierd made its cgroup): `tierctl detach {name}` lets it go");
        };
        if t.is_running() {
            self.cg.restore(&a.cgroup, &a.settings).map_err(|e| {
                anyhow!("cannot put back the memory settings of cgroup {}: {e}; {name} stays adopted", a.cgroup)
            })?;
        }
        self.tenants.remove(name);
        self.events.info(Some(name.as_str()), format!("released; cgroup {} has its own settings back", a.cgroup));
        self.save();
        Ok(a.cgroup)
    }

    /// Puts back what tierd changed in the cgroup of an adopted tenant that ended (a
    /// cgroup already gone has nothing to put back).
    pub(super) fn give_back(&mut self, name: &TenantName) {
        let Some(a) = self.tenants.get(name).and_then(|t| t.adopted.clone()) else { return };
        if self.cg.dir(&a.cgroup).is_ok_and(|d| d.is_dir())
            && let Err(e) = self.cg.restore(&a.cgroup, &a.settings)
        {
            self.events.warn(Some(name.as_str()), format!("cannot put back the settings of cgroup {}: {e}", a.cgroup));
        }
    }

    /// DRAM the tenants hold: tierd's group, and the adopted cgroups outside it.
    pub(super) fn dram_used(&self) -> anyhow::Result<u64> {
        let adopted = self.tenants.values().filter(|t| t.is_running()).filter_map(|t| t.adopted.as_ref());
        let outside: u64 = adopted.filter_map(|a| self.cg.stats(&a.cgroup).ok()).map(|s| s.usage).sum();
        Ok(self.cg.stats(&self.group_rel())?.usage + outside)
    }

    /// Readies a tenant's cgroup for its limits: tierd's own is created (an existing one
    /// is fine); an adopted one is taken over as it stands.
    pub(super) fn ready_cgroup(&self, rel: &str, adopted: bool) -> anyhow::Result<()> {
        let done = if adopted { self.cg.take_over(rel, self.at_limit()) } else { self.cg.create(rel, self.at_limit()) };
        done.with_context(|| format!("readying cgroup {rel}"))
    }
}

#[cfg(test)]
mod tests {
    use super::adoptable;

    #[test]
    fn only_a_workloads_own_cgroup_can_be_adopted() {
        let own = "/system.slice/tierd.service";
        let subtree = "/system.slice/tierd.service/tierd";
        let taken = [("vm1", "/machine.slice/vm1.scope")];
        let try_ = |c: &str| adoptable(c, own, subtree, &taken);
        assert_eq!(try_("/machine.slice/vm2.scope/").unwrap(), "/machine.slice/vm2.scope");
        assert_eq!(
            try_("/system.slice/tierd.service/containers/c1").unwrap(),
            "/system.slice/tierd.service/containers/c1"
        );
        for (bad, why) in [
            ("machine.slice/vm2.scope", "not a cgroup path"),
            ("/machine.slice/../system.slice", "not a cgroup path"),
            ("/", "not a cgroup path"),
            ("/system.slice", "holds tierd itself"),
            ("/system.slice/tierd.service", "holds tierd itself"),
            ("/system.slice/tierd.service/tierd/tenants/db", "tierd's own"),
            ("/machine.slice", "overlaps tenant vm1"),
            ("/machine.slice/vm1.scope/vcpu0", "overlaps tenant vm1"),
        ] {
            let e = try_(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}

/// Adopting a cgroup and letting it go, through the engine over a fake memory controller.
#[cfg(test)]
mod stages {
    use std::sync::Arc;

    use super::super::fixture::{self, FakeCgroups, Write};
    use super::*;

    const WEB: &str = "/lxc/web";
    const LIMIT: &str = "memory.limit_in_bytes";

    /// An engine beside cgroup /lxc/web, whose one process is this test's and whose limit
    /// held 2 GiB before tierd came.
    fn engine(dir: &Path) -> (Arc<FakeCgroups>, Engine) {
        let base = dir.join("cg");
        std::fs::create_dir_all(base.join("lxc/web")).unwrap();
        std::fs::write(base.join("lxc/web").join(LIMIT), "1").unwrap();
        let cg = Arc::new(FakeCgroups {
            usage: 64 << 20,
            procs: vec![(WEB.into(), vec![std::process::id()])],
            settings: vec![(LIMIT.into(), "2147483648".into())],
            base,
            ..FakeCgroups::default()
        });
        let e = fixture::engine(dir, Arc::clone(&cg) as _, "");
        (cg, e)
    }

    #[test]
    fn an_adopted_cgroup_holds_its_quota_while_a_tenant_and_gets_its_own_settings_back_on_release() {
        let dir = tempfile::tempdir().unwrap();
        let (cg, mut e) = engine(dir.path());
        let web = TenantName::new("web").unwrap();
        assert_eq!(e.adopt(TenantSpec::new(web.clone()), WEB).unwrap(), [std::process::id()]);
        assert_eq!(cg.limits_of(WEB), [e.tenants[&web].quota], "the quota recorded is the one written");
        assert_eq!(e.tenants[&web].adopted.as_ref().map(|a| a.cgroup.as_str()), Some(WEB));
        assert_eq!(e.release(&web).unwrap(), WEB);
        assert!(!e.tenants.contains_key(&web));
        let limit = std::fs::read_to_string(dir.path().join("cg/lxc/web").join(LIMIT)).unwrap();
        assert_eq!(limit, "2147483648", "the limit it had before tierd");
        assert!(!cg.writes.lock().unwrap().contains(&Write::Remove(WEB.into())), "an adopted cgroup is never removed");
    }

    #[test]
    fn a_cgroup_that_is_missing_empty_taken_or_tierds_own_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (cg, mut e) = engine(dir.path());
        std::fs::create_dir_all(dir.path().join("cg/lxc/idle")).unwrap();
        let mut adopt = |n: &str, cgroup: &str| {
            e.adopt(TenantSpec::new(TenantName::new(n).unwrap()), cgroup).map_err(|e| format!("{e:#}"))
        };
        assert!(adopt("gone", "/lxc/gone").unwrap_err().starts_with("no cgroup /lxc/gone"));
        assert!(adopt("idle", "/lxc/idle").unwrap_err().contains("has no processes"));
        assert!(adopt("ours", "/tierd/tenants/db").unwrap_err().contains("is tierd's own"));
        adopt("web", WEB).unwrap();
        assert!(adopt("again", WEB).unwrap_err().contains("overlaps tenant web's cgroup"));
        assert_eq!(cg.limits_of("/lxc/idle"), [], "nothing is written to a cgroup refused");
        fixture::add_tenant(&mut e, "made", None, 0);
        let made = e.release(&TenantName::new("made").unwrap()).unwrap_err().to_string();
        assert!(made.contains("`tierctl detach made`"), "{made}");
    }
}
