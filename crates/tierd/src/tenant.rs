//! A tenant as the daemon runs it: its settings, processes, cgroup and measurements.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::process::Child;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tierd_core::tenant::TenantSpec;
use tierd_sys::madvise::{AdviseResult, Pidfd};
use tierd_sys::procfs::Tally;

use crate::process_sum::{ProcessSum, Reading};
use crate::tracker::Tracker;

/// How many decisions `tierctl explain` can show per tenant.
const DECISIONS_KEPT: usize = 64;

/// `MADV_COLLAPSE` refusals, with no region laid out, that show a tenant's memory
/// cannot be laid out in runs at all.
pub const RELAYOUT_REFUSALS: u64 = 8;

/// Whether the tenant still runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Life {
    Running,
    /// `code` is the exit code (128 + signal for a signal), unknown for a process
    /// tierd did not start in this run.
    Exited {
        code: Option<i32>,
    },
}

/// One measurement of a tenant.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measure {
    pub at: Option<Instant>,
    /// Anonymous memory, resident + swapped.
    pub footprint: u64,
    /// Its DRAM: what its cgroup is charged, plus [`Self::charged_elsewhere`].
    pub dram: u64,
    /// Resident anonymous memory still charged to the cgroup it had before it was
    /// attached (the kernel moves no charges): its quota's reclaim cannot reach it,
    /// tierd's demotion can.
    pub charged_elsewhere: u64,
    /// Of `dram`, pages on the tier that no process maps (the cgroup's swap cache not in use).
    pub swap_cached: u64,
    /// Of `dram`, clean page cache read and not reused since (the kernel's inactive list).
    pub inactive_file: u64,
    /// Of `dram`, page cache, reused or not (the kernel's file lists).
    pub page_cache: u64,
    /// Bytes on the tier.
    pub tier: u64,
    pub huge: u64,
    pub pinned: u64,
    /// Major faults at the start of the current interval (the rate's baseline).
    pub major_faults: u64,
    /// Major faults so far.
    pub major_faults_total: u64,
    pub major_faults_per_sec: f64,
    /// Major faults since the tracker last observed (what it counts as pages touched;
    /// passes between intervals do not sample).
    pub untracked_faults: u64,
    /// Growth of the tier footprint per second over the last interval: a lower bound of
    /// the tenant's tier writes (cgroup v1 counts no per-cgroup swap-outs; pages written
    /// and read back within one interval are missed).
    pub tier_write_bytes_per_sec: f64,
    /// Tier bytes at the start of the current interval (the write rate's baseline).
    pub tier_at_rate: u64,
    /// The cgroup's memory stall totals at the start of the current interval (v2).
    pub pressure: Option<tierd_sys::cgroup::Pressure>,
    /// Shares of the last interval in which some, and all, of its tasks stalled on
    /// memory, as the kernel measures it (v2 with PSI); `None` elsewhere.
    pub pressure_some: Option<f64>,
    pub pressure_full: Option<f64>,
}

/// Resident anonymous memory of a tenant's processes beyond what its cgroup is charged
/// for anonymous memory: what stayed charged where they lived before. Gaps under 16 MiB
/// or a tenth of the resident memory are the two readings' timing, not a charge.
pub fn charged_elsewhere(resident_anon: u64, cgroup_anon: u64) -> u64 {
    let gap = resident_anon.saturating_sub(cgroup_anon);
    if gap >= (16 << 20).max(resident_anon / 10) { gap } else { 0 }
}

/// A decision with its reason, for `tierctl explain`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decision {
    pub time: f64,
    pub message: String,
}

/// A cgroup tierd did not create, taken as a tenant: tierd writes its memory-control
/// files and puts them back as they were when it lets go; its processes stay put.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adoption {
    /// Its path in the cgroup hierarchy (`/machine.slice/vm1.scope`).
    pub cgroup: String,
    /// Its memory-control files as tierd found them.
    pub settings: tierd_sys::cgroup::Settings,
}

/// A managed tenant.
#[derive(Debug)]
pub struct Tenant {
    pub spec: TenantSpec,
    /// Set for a cgroup tierd adopted rather than created (`tierctl adopt`).
    pub adopted: Option<Adoption>,
    pub argv: Vec<String>,
    pub life: Life,
    /// Processes now in the tenant's cgroup, each pinned by a pidfd.
    pub procs: Vec<Pidfd>,
    /// Set when tierd started the process in this run (so it can be reaped).
    pub child: Option<Child>,
    /// The quota applied now.
    pub quota: Option<u64>,
    /// The limit a wake raised above the quota (see `Engine::release_waiters`), until
    /// the next quota write takes it back.
    pub room: Option<u64>,
    pub reason: String,
    pub decisions: VecDeque<Decision>,
    /// Failed operations, by name.
    pub errors: BTreeMap<String, u64>,
    pub measure: Measure,
    /// Activeness tracker (the `tierd` policy only: sampling disturbs the baselines).
    pub tracker: Option<Box<dyn Tracker>>,
    /// Its fault rates, its own major faults and the time it waited for the tier.
    pub faults: FaultHistory,
    /// Its processes' CPU time so far, in clock ticks.
    pub cpu_ticks: ProcessSum,
    /// Whether it works or rests, and how its progress compares with the plan's.
    pub progress: Progress,
    /// Its processes the kernel's OOM killer ended, as its cgroup last counted them.
    pub oom_kills: u64,
    /// Its waits at its quota (see `Engine::release_waiters`).
    pub waits: tierd_core::waits::Waits,
    /// What tierd has prefetched and laid out of its memory.
    pub layout: Layout,
    /// Its guest, when the tenant is a QEMU VM.
    pub vm: VmGuest,
}

impl Tenant {
    pub fn new(spec: TenantSpec, argv: Vec<String>) -> Tenant {
        Tenant {
            spec,
            argv,
            life: Life::Running,
            procs: Vec::new(),
            child: None,
            quota: None,
            reason: String::new(),
            decisions: VecDeque::new(),
            errors: BTreeMap::new(),
            measure: Measure::default(),
            tracker: None,
            faults: FaultHistory::default(),
            cpu_ticks: ProcessSum::default(),
            progress: Progress::default(),
            oom_kills: 0,
            room: None,
            waits: Default::default(),
            layout: Layout::default(),
            vm: VmGuest::default(),
            adopted: None,
        }
    }

    /// Reads its processes' counters once: returns the tenant's own major faults and
    /// its CPU time so far, in clock ticks, each kept across its processes' exits.
    pub fn read_counters(&mut self, proc: &tierd_sys::procfs::ProcFs) -> (u64, u64) {
        let read: Vec<(u32, tierd_sys::procfs::Counters)> =
            self.procs.iter().filter_map(|p| proc.counters(p.pid()).ok().map(|c| (p.pid(), c))).collect();
        let of = |tally: fn(&tierd_sys::procfs::Counters) -> Tally| -> Vec<Reading> {
            read.iter().map(|(pid, c)| Reading { pid: *pid, ppid: c.ppid, tally: tally(c) }).collect()
        };
        let faults = self.faults.own.update(&of(|c| c.major_faults));
        (faults, self.cpu_ticks.update(&of(|c| c.cpu_ticks)))
    }

    /// Follows the processes now in its cgroup: drops those gone, pins the new ones.
    pub fn sync_procs(&mut self, pids: &[u32]) {
        self.procs.retain(|p| pids.contains(&p.pid()) && !p.has_exited());
        self.pin_new_procs(pids);
    }

    /// Pins the processes in its cgroup it does not follow yet. Those gone stay until
    /// the reap: an emptied list is how it tells an exit it has yet to record.
    pub fn pin_new_procs(&mut self, pids: &[u32]) {
        for &pid in pids {
            if !self.procs.iter().any(|p| p.pid() == pid)
                && let Ok(fd) = Pidfd::open(pid)
            {
                self.procs.push(fd);
            }
        }
    }

    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(Pidfd::pid).collect()
    }

    pub fn is_running(&self) -> bool {
        self.life == Life::Running
    }

    /// Records a quota just written to its cgroup; the write took back any room a wake gave.
    pub fn quota_written(&mut self, quota: Option<u64>) {
        self.quota = quota;
        self.room = None;
    }

    /// The limit in force: the quota, or the room a wake gave above it.
    pub fn limit_in_force(&self) -> Option<u64> {
        self.room.or(self.quota)
    }

    /// Takes its cgroup's count of OOM-killed processes; says what is new.
    pub fn count_oom_kills(&mut self, counted: u64) -> Option<String> {
        let new = counted.saturating_sub(self.oom_kills);
        self.oom_kills = self.oom_kills.max(counted);
        (new > 0).then(|| format!("the kernel's OOM killer ended {new} of its processes ({} so far)", self.oom_kills))
    }

    pub fn count_error(&mut self, op: &str) {
        *self.errors.entry(op.to_string()).or_insert(0) += 1;
    }

    /// Counts the failed calls of a mover operation.
    pub fn count_advise(&mut self, op: &str, r: &AdviseResult) {
        if r.errors > 0 {
            *self.errors.entry(op.to_string()).or_insert(0) += r.errors;
        }
    }

    pub fn decide(&mut self, now: f64, message: String) {
        if self.decisions.len() == DECISIONS_KEPT {
            self.decisions.pop_front();
        }
        self.decisions.push_back(Decision { time: now, message });
    }
}

/// A tenant's recent fault rates and the readings they come from.
#[derive(Debug, Default)]
pub struct FaultHistory {
    /// Tier-1 fault rates of recent intervals, oldest first.
    pub rates: VecDeque<f64>,
    /// Its own major faults at the last between-interval look (see `Engine::fault_watch`).
    pub watch: Option<(Instant, u64)>,
    /// The tenant's own major faults (what its rates, and so wake-ups, are made of).
    /// Not its cgroup's `pgmajfault`: that also counts every page tierd itself reads
    /// in through `/proc/PID/mem` (prefetch, relayout), which the kernel charges to
    /// the memory's owner but counts as the reading thread's fault.
    pub own: ProcessSum,
    /// Seconds it has waited for the tier so far (its own faults × the read time):
    /// the stall signal where the kernel gives none per cgroup.
    pub stall_secs: f64,
}

impl FaultHistory {
    /// The average tier-1 fault rate before the last interval.
    pub fn rate_before(&self) -> f64 {
        let n = self.rates.len();
        if n < 2 {
            return 0.0;
        }
        self.rates.iter().take(n - 1).sum::<f64>() / (n - 1) as f64
    }

    /// Keeps an interval's fault rate, with at most `keep` intervals.
    pub fn record_rate(&mut self, rate: f64, keep: usize) {
        self.rates.push_back(rate);
        while self.rates.len() > keep {
            self.rates.pop_front();
        }
    }

    /// A between-interval look at its own faults, `own` so far: the new ones waited
    /// `per_fault_secs` each.
    pub fn look(&mut self, now: Instant, own: u64, per_fault_secs: f64) {
        if let Some((_, before)) = self.watch {
            self.stall_secs += own.saturating_sub(before) as f64 * per_fault_secs;
        }
        self.watch = Some((now, own));
    }
}

/// Whether a tenant works, and how its progress compares with what the plan predicted.
#[derive(Debug, Default)]
pub struct Progress {
    /// Its CPU and stall time, read at the between-interval looks: whether it works.
    pub activity: tierd_core::activity::Activity,
    /// The last plan's prediction of its progress, and how long it has fallen short.
    pub predicted: Option<f64>,
    pub shortfall: tierd_core::activity::Shortfall,
    pub short_secs: Option<f64>,
    /// The cgroup's PSI `some` total at the last look, in seconds, once it gave one.
    pub psi_secs: Option<f64>,
}

impl Progress {
    /// Seconds it has stalled so far: its cgroup's PSI `some` total where the kernel
    /// keeps one (v2), which also counts reclaim and `memory.high` throttling that cause
    /// no major fault; else `fault_estimate`, its tier waits. Once PSI was read, a
    /// failed read keeps the last total (a switch of source would read as a stall).
    pub fn stall_so_far(&mut self, psi: Option<tierd_sys::cgroup::Pressure>, fault_estimate: f64) -> f64 {
        match (psi, self.psi_secs) {
            (Some(p), _) => *self.psi_secs.insert(p.some_us as f64 / 1e6),
            (None, Some(last)) => last,
            (None, None) => fault_estimate,
        }
    }

    /// Judges the shortfall against the last prediction at `now`.
    pub fn judge_shortfall(&mut self, now: f64, by: f64) {
        self.short_secs = self.shortfall.observe(now, self.predicted, &self.activity, by);
    }
}

/// What tierd has moved of a tenant's memory lately.
#[derive(Debug, Default)]
pub struct Layout {
    /// Regions prefetched lately, by (pid, start), with when: not asked for again
    /// within the interval (between intervals the loop also runs early on a wake-up).
    pub prefetched: HashMap<(u32, u64), f64>,
    /// Regions, by (pid, start), whose tier pages are known to lie in runs since its
    /// last rest began (checked or laid out by tierd; see `mover::relayout`). Cleared
    /// when a rest begins (pages rewritten while it ran may be scattered again), not
    /// when it ends: the wake-up's prefetch reads the regions in runs first.
    pub laid_out: std::collections::HashSet<(u32, u64)>,
    /// Regions laid out and regions `MADV_COLLAPSE` refused so far.
    pub relayout_tally: (u64, u64),
}

impl Layout {
    /// `MADV_COLLAPSE` refuses its memory, so its working set cannot be laid out: taken
    /// so only after [`RELAYOUT_REFUSALS`] refusals and no success (one small odd
    /// mapping must not stop the rest).
    pub fn relayout_refused(&self) -> bool {
        self.relayout_tally.0 == 0 && self.relayout_tally.1 >= RELAYOUT_REFUSALS
    }

    /// Whether the region at (pid, start) lies in runs on the tier, as far as tierd knows.
    pub fn in_runs(&self, pid: u32, start: u64) -> bool {
        self.relayout_refused() || self.laid_out.contains(&(pid, start))
    }
}

/// A VM tenant's guest, as last inspected.
#[derive(Debug, Default)]
pub struct VmGuest {
    pub guest: Option<crate::api::GuestStatus>,
    /// What was last said about the guest (found, tierable), so it is said once.
    pub said: Option<(bool, bool)>,
}

/// Exit code of a reaped child: its code, or 128 + the signal that killed it.
pub fn exit_code(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_charged_elsewhere_is_the_resident_gap_beyond_timing_noise() {
        use tierd_core::size::MIB;
        assert_eq!(charged_elsewhere(512 * MIB, 4 * MIB), 508 * MIB, "attached: charges stayed behind");
        assert_eq!(charged_elsewhere(512 * MIB, 500 * MIB), 0, "a fill between two readings");
        assert_eq!(charged_elsewhere(64 * MIB, 60 * MIB), 0);
        assert_eq!(charged_elsewhere(4 * MIB, 8 * MIB), 0, "charged more than resident: swap cache");
    }

    #[test]
    fn fault_history_keeps_recent_rates_and_counts_new_faults_as_waits() {
        let mut f = FaultHistory::default();
        for r in [10.0, 20.0, 30.0, 40.0] {
            f.record_rate(r, 3);
        }
        assert_eq!(f.rates, [20.0, 30.0, 40.0], "the oldest beyond three goes");
        assert_eq!(f.rate_before(), 25.0, "the rates before the last interval");
        let t0 = Instant::now();
        f.look(t0, 100, 0.001);
        assert_eq!(f.stall_secs, 0.0, "the first look has nothing to compare with");
        f.look(t0, 600, 0.001);
        assert!((f.stall_secs - 0.5).abs() < 1e-9, "500 new faults at 1 ms: {}", f.stall_secs);
    }

    #[test]
    fn regions_lie_in_runs_once_laid_out_or_when_relayout_is_refused_altogether() {
        let mut l = Layout::default();
        l.laid_out.insert((7, 0));
        assert!(l.in_runs(7, 0) && !l.in_runs(7, 2 << 20));
        l.relayout_tally = (0, RELAYOUT_REFUSALS);
        assert!(l.in_runs(7, 2 << 20), "refused everywhere: nothing is gained by trying");
        l.relayout_tally = (1, RELAYOUT_REFUSALS);
        assert!(!l.in_runs(7, 2 << 20), "one success: the refusals were odd mappings");
    }

    #[test]
    fn stall_is_the_cgroups_psi_where_it_keeps_one_and_never_switches_back() {
        use tierd_sys::cgroup::Pressure;
        let mut v1 = Progress::default();
        assert_eq!(v1.stall_so_far(None, 2.5), 2.5, "no PSI: the tier-wait estimate");
        let mut v2 = Progress::default();
        // Throttled at memory.high with no major fault: PSI sees the stall the faults miss.
        assert_eq!(v2.stall_so_far(Some(Pressure { some_us: 4_000_000, full_us: 0 }), 0.0), 4.0);
        assert_eq!(v2.stall_so_far(None, 0.0), 4.0, "a failed read keeps the last total");
        assert_eq!(v2.stall_so_far(Some(Pressure { some_us: 4_500_000, full_us: 0 }), 0.0), 4.5);
    }
}
