//! An engine over fakes, for tests of its stages: a memory controller that records
//! what is written to it, a tier that was never set up, and a kernel log from a file.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tierd_core::config::RawConfig;
use tierd_sys::cgroup::{CgroupError, MemoryStats, Settings, Version, Wake};

use super::*;
use crate::tier::{Backing, TierRecord};

/// The tier's device number in the fixture's kernel log.
pub const TIER_DEV: (u32, u32) = (7, 0);

/// A write the engine made to a cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Limit(String, Option<u64>),
    Ceiling(String, Option<u64>),
    OffSwap(String),
    Wake(String, Wake),
    Remove(String),
    OomKiller(String, bool),
}

/// A memory controller (v1, or v2 if `v2`) whose every cgroup is charged `usage` (of it
/// `swap_cached`, `page_cache` and of that `inactive_file` not reused), has `swap` on the tier, had `reclaimed_pages` taken by reclaim and
/// `limit_hits` charges meet its hard limit, holds `settings`, accepts every write, in
/// which the tasks of the cgroups in `waiting` wait at their limit and the cgroups in
/// `procs` hold processes. Its cgroups are directories below `base`, where settings
/// put back are written.
#[derive(Debug, Default)]
pub struct FakeCgroups {
    pub writes: Mutex<Vec<Write>>,
    pub v2: bool,
    pub usage: u64,
    pub swap: AtomicU64,
    pub reclaimed_pages: AtomicU64,
    pub limit_hits: AtomicU64,
    pub swap_cached: u64,
    pub inactive_file: u64,
    pub page_cache: u64,
    pub waiting: Vec<String>,
    pub procs: Vec<(String, Vec<u32>)>,
    pub settings: Settings,
    pub base: PathBuf,
    /// How many limit writes fail before one is taken, as a v1 limit below usage does
    /// where reclaim frees nothing.
    pub refuse_limits: AtomicU64,
}

impl FakeCgroups {
    /// The limits written to cgroup `rel`, in order.
    pub fn limits_of(&self, rel: &str) -> Vec<Option<u64>> {
        let writes = self.writes.lock().unwrap();
        writes
            .iter()
            .filter_map(|w| match w {
                Write::Limit(r, l) if r == rel => Some(*l),
                _ => None,
            })
            .collect()
    }

    fn record(&self, w: Write) -> Result<(), CgroupError> {
        self.writes.lock().unwrap().push(w);
        Ok(())
    }
}

impl MemoryController for FakeCgroups {
    fn version(&self) -> Version {
        if self.v2 { Version::V2 } else { Version::V1 }
    }
    fn base(&self) -> &Path {
        &self.base
    }
    fn create(&self, _rel: &str, _at_limit: AtLimit) -> Result<(), CgroupError> {
        Ok(())
    }
    fn remove(&self, rel: &str) -> Result<(), CgroupError> {
        self.record(Write::Remove(rel.to_string()))
    }
    fn set_limit(&self, rel: &str, limit: Option<u64>) -> Result<(), CgroupError> {
        let refuse = |n: u64| n.checked_sub(1);
        if self.refuse_limits.fetch_update(Ordering::Relaxed, Ordering::Relaxed, refuse).is_ok() {
            return Err(CgroupError::Escape(format!("{rel}: limit refused by the test")));
        }
        self.record(Write::Limit(rel.to_string(), limit))
    }
    fn set_oom_killer(&self, rel: &str, on: bool) -> Result<(), CgroupError> {
        self.record(Write::OomKiller(rel.to_string(), on))
    }
    fn set_ceiling(&self, rel: &str, ceiling: Option<u64>) -> Result<(), CgroupError> {
        self.record(Write::Ceiling(rel.to_string(), ceiling))
    }
    fn keep_off_swap(&self, rel: &str) -> Result<(), CgroupError> {
        self.record(Write::OffSwap(rel.to_string()))
    }
    fn stats(&self, _rel: &str) -> Result<MemoryStats, CgroupError> {
        Ok(MemoryStats {
            usage: self.usage,
            anon: self.usage,
            swap: self.swap.load(Ordering::Relaxed),
            reclaimed_pages: self.reclaimed_pages.load(Ordering::Relaxed),
            limit_hits: self.limit_hits.load(Ordering::Relaxed),
            swap_cached: self.swap_cached,
            inactive_file: self.inactive_file,
            page_cache: self.page_cache,
            ..MemoryStats::default()
        })
    }
    fn reclaim(&self, _rel: &str, _bytes: u64) -> Result<u64, CgroupError> {
        Ok(0)
    }
    fn waiting_at_limit(&self, rel: &str) -> Result<bool, CgroupError> {
        Ok(self.waiting.iter().any(|w| w == rel))
    }
    fn release_waiters(&self, rel: &str, wake: Wake) -> Result<Option<u64>, CgroupError> {
        self.record(Write::Wake(rel.to_string(), wake))?;
        Ok(Some(wake.limit(self.usage, self.usage)))
    }
    fn procs(&self, rel: &str) -> Result<Vec<u32>, CgroupError> {
        Ok(self.procs.iter().find(|(r, _)| r == rel).map(|(_, p)| p.clone()).unwrap_or_default())
    }
    fn allow_adoption(&mut self, _roots: &[String]) {}
    fn settings(&self, _rel: &str) -> Result<Settings, CgroupError> {
        Ok(self.settings.clone())
    }
    fn dir(&self, rel: &str) -> Result<PathBuf, CgroupError> {
        Ok(self.base.join(rel.trim_start_matches('/')))
    }
    fn add_proc(&self, _rel: &str, _pid: u32) -> Result<(), CgroupError> {
        Ok(())
    }
    fn own(&self) -> &str {
        "/"
    }
}

/// An engine of the `tierd` policy with a 1 GiB budget over `cg`, a tier on
/// [`TIER_DEV`] and a kernel log reading `kernel_log` (records as `/dev/kmsg` gives
/// them); its state lives in `dir`.
pub fn engine(dir: &Path, cg: Arc<FakeCgroups>, kernel_log: &str) -> Engine {
    let raw = RawConfig::from_toml(&format!(
        "dram_budget = \"1G\"\ninterval = \"1s\"\nstate_dir = \"{}\"\n",
        dir.join("state").display()
    ))
    .expect("fixture config parses");
    let cfg = raw.validate(24 << 30).expect("fixture config is valid");
    std::fs::create_dir_all(&cfg.state_dir).expect("fixture state directory");
    let log_path = dir.join("kmsg");
    std::fs::write(&log_path, kernel_log).expect("fixture kernel log written");
    let kernel_log = tierd_sys::kmsg::KernelLog::open(&log_path).expect("fixture kernel log opens");
    let lock = File::create(dir.join("lock")).expect("fixture lock file");
    Engine::assemble(cfg, ProcFs::new(dir.join("proc")), cg, Some(tier(dir)), Events::default(), Some(kernel_log), lock)
}

fn tier(dir: &Path) -> Tier {
    let record = TierRecord {
        path: dir.join("tier"),
        swap_path: dir.join("tier"),
        backing: Backing::File,
        created_file: false,
        size: 4 << 30,
        priority: 10,
        crypt: None,
    };
    Tier::unset(record, "loop0", TIER_DEV)
}

/// Adds a running tenant holding `dram` under `quota`, with no processes.
pub fn add_tenant<'a>(engine: &'a mut Engine, name: &str, quota: Option<u64>, dram: u64) -> &'a mut Tenant {
    let name = TenantName::new(name).expect("fixture tenant name");
    let mut t = Tenant::new(TenantSpec::new(name.clone()), Vec::new());
    t.quota = quota;
    t.measure.dram = dram;
    engine.tenants.entry(name).or_insert(t)
}

/// The engine's recent events as `tenant: message` (a host event has no `tenant: `).
pub fn said(e: &Engine) -> Vec<String> {
    let line = |ev: crate::api::Event| match ev.tenant {
        Some(t) => format!("{t}: {}", ev.message),
        None => ev.message,
    };
    e.events.recent(50).into_iter().map(line).collect()
}

/// This test's own process, as the one process of a tenant.
pub fn this_process() -> Pidfd {
    Pidfd::open(std::process::id()).expect("a pidfd of the test process")
}
