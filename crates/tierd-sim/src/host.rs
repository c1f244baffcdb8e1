//! One host, stepped in time: tenants running on 2 CPUs, their memory under cgroup
//! limits, the kernel's reclaim, the tier device.
//!
//! Each step every running tenant does as many operations as its CPU share and its
//! faults allow: X operations cost X·c of CPU (at share s of a core, X·c/s of wall
//! time) and each read from the tier waits the device's latency. The CPU share is
//! processor sharing among what is runnable. Pages the tenants bring in over a limit
//! are reclaimed by the LRU of the cgroup at that limit, in Che's approximation: what
//! stays is the pages touched within the last T seconds, T such that they fill the
//! limit (a page of class c was touched within T with probability 1 − e^(−Λc), Λc its
//! accesses over T, so an idle tenant's pages go once its idleness exceeds T). Under
//! one shared limit a tenant that runs faster touches its pages more often and keeps
//! them: the kernel lets a few tenants win.

mod work;

use std::collections::VecDeque;

use crate::access::{Layout, PhaseKind, TenantModel};
use crate::calib::{
    CPUS, DT, FILL_PAGES_PER_CPU_SEC, LIMIT_RECLAIM_BYTES_PER_SEC, MAX_SCAN_RATIO, PAGE, PAGE_TABLE_SHARE,
    PROCESS_BYTES, RECLAIM_CPU_SECS, RECLAIM_SCAN_SECS, RECLAIM_WAIT_SECS, START_GAP_SECS,
};
use crate::device::{Device, Slow};
use crate::memory::{ClassTotals, Memory, Touched};
use work::{report, run_tenant, solve};

/// How often a tenant's exposure is remembered, and for how long an LRU looks back.
const HISTORY_SECS: f64 = 0.25;
const MAX_TURNOVER_SECS: f64 = 600.0;

/// One report of a tenant, as the workload generator prints each second.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub t: f64,
    pub phase: PhaseKind,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// What a tenant is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    Fill,
    Phase(PhaseKind),
    Done,
}

/// A tenant in the host.
#[derive(Debug)]
pub struct Tenant {
    pub model: TenantModel,
    pub layout: Layout,
    pub mem: Memory,
    /// This run's speed of the tenant relative to the calibration (run-to-run spread).
    pub speed: f64,
    /// When its fill ended: its own clock (phases, reports) starts there.
    pub started: Option<f64>,
    start_delay: f64,
    /// Accesses per page of each class so far.
    pub exposure: Vec<f64>,
    /// Pages of each class brought into DRAM without a touch so far (the fill's first
    /// write aside: read back by a prefetch): the LRU holds them young all the same.
    inserted: Vec<f64>,
    /// `exposure` and `inserted` as they were, every [`HISTORY_SECS`], newest last.
    history: VecDeque<(f64, Vec<f64>)>,
    pub cpu_secs: f64,
    /// Operations done so far.
    pub ops_done: f64,
    /// Its own major faults (reads it waited for), and minor ones.
    pub major_faults: f64,
    pub minor_faults: f64,
    /// The limit asked for and the one in force (a cut reclaims toward it), in pages.
    pub quota: Option<f64>,
    limit_now: Option<f64>,
    /// Pages its own limit's reclaim scans per page it frees.
    scan_ratio: f64,
    pub reports: Vec<Report>,
    window_ops: f64,
    window_ios: f64,
    window_fault_secs: f64,
    next_report: f64,
    totals: Vec<ClassTotals>,
    /// Operations per second in the last step.
    last_ops: f64,
}

impl Tenant {
    fn new(model: TenantModel, speed: f64, start_delay: f64) -> Tenant {
        let layout = Layout::of(&model);
        let mem = Memory::new(&layout);
        let classes = layout.classes;
        Tenant {
            model,
            layout,
            mem,
            speed,
            started: None,
            start_delay,
            exposure: vec![0.0; classes],
            inserted: vec![0.0; classes],
            history: VecDeque::new(),
            cpu_secs: 0.0,
            ops_done: 0.0,
            major_faults: 0.0,
            minor_faults: 0.0,
            quota: None,
            limit_now: None,
            scan_ratio: 1.0,
            reports: Vec::new(),
            window_ops: 0.0,
            window_ios: 0.0,
            window_fault_secs: 0.0,
            next_report: 1.0,
            totals: Vec::new(),
            last_ops: 0.0,
        }
    }

    /// What it does at `now`, and seconds into its own clock.
    pub fn doing(&self, now: f64) -> Doing {
        let Some(start) = self.started else {
            return if now >= self.start_delay { Doing::Fill } else { Doing::Done };
        };
        let mut t = now - start;
        for &(kind, secs) in &self.model.phases {
            if t < secs {
                return Doing::Phase(kind);
            }
            t -= secs;
        }
        Doing::Done
    }

    /// A thread of it is not asleep: running, waiting for a CPU or for the tier.
    pub fn busy(&self, now: f64) -> bool {
        matches!(self.doing(now), Doing::Fill | Doing::Phase(PhaseKind::Active) | Doing::Phase(PhaseKind::Sweep))
    }

    /// Pages its cgroup is charged: its own in DRAM and what rides on them.
    pub fn dram_pages(&self) -> f64 {
        self.mem.dram_pages() + self.overhead_pages()
    }

    /// Pages charged beyond its own, which reclaim cannot free: page tables and the
    /// rest of its process, from its first page on.
    fn overhead_pages(&self) -> f64 {
        let allocated = self.mem.allocated_pages();
        if allocated == 0.0 { 0.0 } else { PROCESS_BYTES / PAGE + allocated * PAGE_TABLE_SHARE }
    }

    /// Accesses per page of class `c`, and pages of it brought in untouched, over the
    /// last `secs`.
    fn lately(&self, c: usize, now: f64, secs: f64) -> (f64, f64) {
        let k = self.exposure.len();
        let at = now - secs;
        let i = self.history.partition_point(|(t, _)| *t <= at);
        let then = |j: usize| match (i.checked_sub(1).and_then(|x| self.history.get(x)), self.history.get(i)) {
            (Some((t0, a)), Some((t1, b))) => a[j] + (b[j] - a[j]) * (at - t0) / (t1 - t0).max(1e-9),
            (Some((_, a)), None) => a[j],
            _ => 0.0,
        };
        ((self.exposure[c] - then(c)).max(0.0), (self.inserted[c] - then(k + c)).max(0.0))
    }

    fn remember(&mut self, now: f64) {
        if self.history.back().is_none_or(|(t, _)| now - t >= HISTORY_SECS) {
            let mut v = self.exposure.clone();
            v.extend(&self.inserted);
            self.history.push_back((now, v));
            while self.history.front().is_some_and(|(t, _)| now - t > MAX_TURNOVER_SECS + 1.0) {
                self.history.pop_front();
            }
        }
    }

    /// The limit its cgroup has now, in pages.
    pub fn limit_now(&self) -> Option<f64> {
        self.limit_now
    }
}

/// What one tenant asks of a step at a given CPU share.
#[derive(Debug, Clone, Copy, Default)]
struct Demand {
    ops: f64,
    touched: Touched,
    fill_pages: f64,
    /// CPU work (seconds) and the share of the step it wants a CPU.
    cpu: f64,
    runnable: f64,
}

/// A region of a tenant queued to be read back from the tier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Queued {
    pub tenant: usize,
    pub region: usize,
    /// Paged out whole once read (a relayout).
    pub relayout: bool,
    /// No read of it starts after this: the daemon asks for a prefetch's reads until
    /// an interval after its pass began, and a slow tier leaves the rest unread.
    pub until: f64,
}

/// The host.
#[derive(Debug)]
pub struct Host {
    pub now: f64,
    pub tenants: Vec<Tenant>,
    pub device: Device,
    /// One limit over all tenants (their common parent cgroup), in pages.
    pub group_limit: Option<f64>,
    group_scan_ratio: f64,
    cpu_share: f64,
    /// CPU seconds of tierd's work not done yet: it runs on the same CPUs.
    pub tierd_debt: f64,
    /// CPU seconds the kernel's reclaim took in tierd's prefetch reads so far.
    pub prefetch_reclaim_secs: f64,
    /// Regions to read back from the tier, in order.
    pub prefetch: VecDeque<Queued>,
    /// Pages written to the tier this step (reclaim, page-outs).
    written: f64,
    /// `memory-mode`: DRAM is a direct-mapped cache of the tier instead.
    pub direct_mapped: Option<crate::memory_mode::DirectMapped>,
}

impl Host {
    pub fn new(models: Vec<TenantModel>, slow: Option<Slow>, rng: &mut fastrand::Rng) -> Host {
        let run_speed = 1.0 + crate::calib::RUN_SPEED_SD * normal(rng);
        let tenants = models
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let speed = run_speed * (1.0 + crate::calib::TENANT_SPEED_SD * normal(rng));
                // The harness starts tenants one after another through tierd's API.
                Tenant::new(m, speed.max(0.5), START_GAP_SECS * i as f64 + 0.05 * rng.f64())
            })
            .collect();
        Host {
            now: 0.0,
            tenants,
            device: Device::new(slow),
            group_limit: None,
            group_scan_ratio: 1.0,
            cpu_share: 1.0,
            tierd_debt: 0.0,
            prefetch_reclaim_secs: 0.0,
            prefetch: VecDeque::new(),
            written: 0.0,
            direct_mapped: None,
        }
    }

    /// Sets tenant `i`'s quota (`None`: no limit of its own). A cut below what it holds
    /// is reclaimed at the speed a v1 limit write reclaims; returns the seconds the
    /// write takes (the control loop waits for it).
    pub fn set_quota(&mut self, i: usize, quota: Option<f64>) -> f64 {
        let t = &mut self.tenants[i];
        t.quota = quota;
        match quota {
            Some(q) if q < t.dram_pages() => {
                let cut = t.dram_pages() - q;
                t.limit_now = Some(t.limit_now.unwrap_or(f64::INFINITY).min(t.dram_pages()));
                cut * PAGE / LIMIT_RECLAIM_BYTES_PER_SEC
            }
            _ => {
                t.limit_now = quota;
                0.0
            }
        }
    }

    /// Pages tierd wrote out (page-outs) outside a step.
    pub fn add_written(&mut self, pages: f64) {
        self.written += pages;
    }

    /// One step of `DT`.
    pub fn step(&mut self) {
        let now = self.now;
        for t in &mut self.tenants {
            t.totals = t.mem.totals();
            if t.started.is_none() && t.mem.filled() && now >= t.start_delay {
                t.started = Some(now);
                t.next_report = 1.0;
            }
        }
        self.update_direct_mapped();
        let latency = self.device.read_latency();
        let tierd_cores = (self.tierd_debt / DT).min(1.0);
        let mut demands = self.share_cpu(latency, tierd_cores);
        // The device serves what it can; faulting tenants slow down to it.
        let reads: f64 = demands.iter().map(|d| d.touched.ios).sum();
        let pages: f64 = demands.iter().map(|d| d.touched.pages_in).sum();
        let served = self.device.admit(now, reads, pages, DT);
        if served < 1.0 {
            for d in &mut demands {
                if d.touched.ios > 0.0 {
                    d.ops *= served;
                }
            }
        }
        let direct_mapped = self.direct_mapped.is_some();
        let (mut reads_done, mut pages_done) = (0.0, 0.0);
        for (t, d) in self.tenants.iter_mut().zip(&demands) {
            let got = run_tenant(t, d, now, served, latency, direct_mapped);
            reads_done += got.ios;
            pages_done += got.pages_in;
        }
        self.tierd_debt = (self.tierd_debt - tierd_cores * self.cpu_share * DT).max(0.0);
        let demand_rho = self.device.demand_rho(now, reads_done, pages_done, DT);
        let prefetch_rho = self.run_prefetch(demand_rho);
        for t in &mut self.tenants {
            t.remember(now + DT);
        }
        self.enforce_limits();
        let written = std::mem::take(&mut self.written);
        self.device.step(now, DT, reads_done, pages_done, prefetch_rho, written);
        self.now += DT;
        let share = self.cpu_share;
        for t in &mut self.tenants {
            report(t, self.now, share, latency);
        }
    }

    /// Processor sharing: the share follows what is runnable, settled over two rounds
    /// (and across steps: phases change far more slowly than a step). Returns what each
    /// tenant would do at that share.
    fn share_cpu(&mut self, latency: f64, tierd_cores: f64) -> Vec<Demand> {
        let mut demands = Vec::new();
        for _ in 0..2 {
            demands = self.tenants.iter().enumerate().map(|(i, t)| self.demand(i, t, latency)).collect();
            let runnable: f64 = demands.iter().map(|d: &Demand| d.runnable).sum::<f64>() + tierd_cores;
            let target = if runnable <= CPUS { 1.0 } else { CPUS / runnable };
            self.cpu_share += (target - self.cpu_share) * 0.5;
        }
        demands
    }

    /// What tenant `i` would do this step at the current CPU share.
    fn demand(&self, i: usize, t: &Tenant, latency: f64) -> Demand {
        let s = self.cpu_share;
        let reclaim = self.reclaim_secs(i);
        match t.doing(self.now) {
            Doing::Fill => {
                let per_page = 1.0 / (FILL_PAGES_PER_CPU_SEC * t.speed) + reclaim.0;
                Demand { fill_pages: s * DT / per_page, cpu: s * DT, runnable: 1.0, ..Demand::default() }
            }
            Doing::Phase(PhaseKind::Idle) | Doing::Done => Demand::default(),
            Doing::Phase(kind) => {
                let miss = self.direct_mapped.as_ref().map(|dm| dm.miss[i].as_slice());
                solve(t, kind, s, latency, reclaim, miss)
            }
        }
    }

    /// What a page brought in costs tenant `i` in reclaim: nothing below its limits; at
    /// one, CPU for the pages the LRU scans to find one to free (seconds of CPU, and
    /// seconds waited for the page it writes out).
    fn reclaim_secs(&self, i: usize) -> (f64, f64) {
        let t = &self.tenants[i];
        let own = t.limit_now.is_some_and(|l| t.dram_pages() >= l - 64.0).then_some(t.scan_ratio);
        let held: f64 = self.tenants.iter().map(Tenant::dram_pages).sum();
        let group = self.group_limit.is_some_and(|g| held >= g - 64.0).then_some(self.group_scan_ratio);
        match (own, group) {
            (None, None) => (0.0, 0.0),
            (a, b) => {
                let passed = a.unwrap_or(1.0).max(b.unwrap_or(1.0)) - 1.0;
                (RECLAIM_CPU_SECS + RECLAIM_SCAN_SECS * passed, RECLAIM_WAIT_SECS)
            }
        }
    }

    /// `memory-mode`: the miss probabilities follow the tenants' rates now.
    fn update_direct_mapped(&mut self) {
        let Some(dm) = self.direct_mapped.as_mut() else { return };
        if self.now < dm.next_update {
            return;
        }
        dm.next_update = self.now + crate::memory_mode::UPDATE_SECS;
        let classes: Vec<Vec<(f64, f64)>> = self
            .tenants
            .iter()
            .map(|t| {
                let per_page = match t.doing(self.now) {
                    Doing::Phase(k) => t.layout.per_page(k),
                    _ => vec![0.0; t.layout.classes],
                };
                // A tenant just starting counts at its calibrated speed, not at zero.
                let x = if t.last_ops > 0.0 { t.last_ops } else { 0.5 / t.layout.op_secs };
                t.layout.class_pages.iter().zip(&per_page).map(|(&p, a)| (p, a * x)).collect()
            })
            .collect();
        dm.update(&classes);
    }

    /// Reads queued regions back while the device has room, and while the limits that
    /// bind each tenant have room or the kernel's reclaim in the reads' charges frees
    /// it; returns the device's share used.
    fn run_prefetch(&mut self, demand_rho: f64) -> f64 {
        let (full_runs, full_scat) = self.device.prefetch_room(self.now, 0.0, DT);
        let (mut runs, mut scat) = self.device.prefetch_room(self.now, demand_rho, DT);
        let (room_runs, room_scat) = (runs, scat);
        let mut reclaim = LIMIT_RECLAIM_BYTES_PER_SEC / PAGE * DT;
        while let Some(&Queued { tenant: i, region: r, relayout, until }) = self.prefetch.front() {
            if self.now > until {
                self.prefetch.pop_front();
                continue;
            }
            if runs < 1.0 && scat < 1.0 {
                break;
            }
            let free = self.free_pages(i);
            let allowed = free + reclaim;
            if allowed < 1.0 {
                break;
            }
            let t = &mut self.tenants[i];
            // Runs first, then scattered pages, `allowed` in all.
            let run_take = runs.min(allowed).min(t.mem.region_tier(r).0);
            let (got_runs, got_scat, by_class) = t.mem.read_back(r, run_take, scat.min(allowed - run_take));
            // Pages read beyond the room were reclaimed first, on tierd's CPU.
            let reclaimed = (got_runs + got_scat - free).max(0.0);
            reclaim = (reclaim - reclaimed).max(0.0);
            let cpu = reclaimed * RECLAIM_CPU_SECS;
            self.tierd_debt += cpu;
            self.prefetch_reclaim_secs += cpu;
            for (x, n) in t.inserted.iter_mut().zip(by_class) {
                *x += n;
            }
            let mem = &mut t.mem;
            runs -= got_runs;
            scat -= got_scat;
            let (left_runs, left_scat) = mem.region_tier(r);
            if left_runs + left_scat < 0.5 {
                if relayout {
                    self.written += mem.relay_out(r);
                }
                self.prefetch.pop_front();
            } else if got_runs + got_scat < 0.5 {
                break;
            }
        }
        (room_runs - runs) / full_runs.max(1.0) + (room_scat - scat) / full_scat.max(1.0)
    }

    /// Pages tenant `i` may take before a limit that binds it (its own, the group's)
    /// is reached.
    fn free_pages(&self, i: usize) -> f64 {
        let t = &self.tenants[i];
        let own = t.limit_now.map_or(f64::INFINITY, |l| l - t.dram_pages());
        let held: f64 = self.tenants.iter().map(Tenant::dram_pages).sum();
        let group = self.group_limit.map_or(f64::INFINITY, |g| g - held);
        own.min(group).max(0.0)
    }

    /// Reclaims what tenants hold over their own limits, then over the group's.
    fn enforce_limits(&mut self) {
        for i in 0..self.tenants.len() {
            let t = &mut self.tenants[i];
            if let (Some(q), Some(now)) = (t.quota, t.limit_now)
                && q < now
            {
                t.limit_now = Some((now - LIMIT_RECLAIM_BYTES_PER_SEC / PAGE * DT).max(q));
            }
            if let Some(l) = t.limit_now
                && t.dram_pages() > l
            {
                self.tenants[i].scan_ratio = self.evict(&[i], l);
            }
        }
        if let Some(g) = self.group_limit {
            let held: f64 = self.tenants.iter().map(Tenant::dram_pages).sum();
            if held > g {
                let all: Vec<usize> = (0..self.tenants.len()).collect();
                self.group_scan_ratio = self.evict(&all, g);
            }
        }
    }

    /// Reclaims from the tenants `idx` that share an LRU until they hold `capacity`:
    /// written-out pages first, then what each class holds beyond its share in Che's
    /// approximation — the pages touched within the last T seconds, T such that they
    /// fill the capacity. Returns the pages reclaim scans per page it frees: what it
    /// holds over what was not touched within T (touched pages are passed over).
    fn evict(&mut self, idx: &[usize], capacity: f64) -> f64 {
        let capacity = capacity - idx.iter().map(|&i| self.tenants[i].overhead_pages()).sum::<f64>();
        let totals: Vec<Vec<ClassTotals>> = idx.iter().map(|&i| self.tenants[i].mem.totals()).collect();
        let held: f64 = totals.iter().flatten().map(|c| c.res + c.pref + c.out).sum();
        let mut left = held - capacity;
        let outs: Vec<f64> = totals.iter().map(|t| t.iter().map(|c| c.out).sum()).collect();
        let written: f64 = outs.iter().sum();
        if written > 0.0 {
            let share = (left / written).min(1.0);
            for (&i, mine) in idx.iter().zip(&outs) {
                left -= self.tenants[i].mem.free_written(mine * share);
            }
        }
        if left < 0.5 {
            return 1.0;
        }
        let now = self.now + DT;
        // Each class's pages touched within T, and what it holds now.
        let classes: Vec<(usize, usize, f64, f64)> = idx
            .iter()
            .zip(&totals)
            .flat_map(|(&i, tots)| {
                let t = &self.tenants[i];
                let alloc = t.mem.class_allocated().to_vec();
                tots.iter().enumerate().map(move |(c, tot)| (i, c, alloc[c], tot.res + tot.pref)).collect::<Vec<_>>()
            })
            .collect();
        // Under LRU a page is resident when touched within T, or brought in within T
        // and not touched since.
        let touched = |secs: f64| -> Vec<f64> {
            classes
                .iter()
                .map(|&(i, c, alloc, _)| {
                    let (exposure, inserted) = self.tenants[i].lately(c, now, secs);
                    let p = 1.0 - (-exposure).exp();
                    (alloc * p + inserted.min(alloc) * (1.0 - p)).min(alloc)
                })
                .collect()
        };
        let (mut lo, mut hi) = (DT.ln(), MAX_TURNOVER_SECS.ln());
        for _ in 0..24 {
            let mid = 0.5 * (lo + hi);
            if touched(mid.exp()).iter().sum::<f64>() > capacity { hi = mid } else { lo = mid }
        }
        let target = touched(lo.exp());
        if std::env::var("SIM_DEBUG").is_ok() && (self.now * 50.0).round() as i64 % 250 == 0 {
            eprintln!("t={:.1} T={:.2} cap={capacity:.0} held={held:.0} left={left:.0}", self.now, lo.exp());
            for (c, t) in classes.iter().zip(&target) {
                eprintln!("   tenant {} class {} alloc {:.0} held {:.0} target {:.0}", c.0, c.1, c.2, c.3, t);
            }
        }
        let excess: Vec<f64> = classes.iter().zip(&target).map(|(c, t)| (c.3 - t).max(0.0)).collect();
        let sum: f64 = excess.iter().sum();
        // What a class holds beyond its share goes; if that is not enough (every class
        // within it, in expectation), the rest goes by what each holds.
        let ask = left;
        for (k, &(i, c, _, held)) in classes.iter().enumerate() {
            let n = if sum >= ask {
                ask * excess[k] / sum
            } else {
                excess[k] + (ask - sum) * held / self.held_all(&classes)
            };
            let n = n.min(held);
            if n > 0.0 {
                self.written += self.tenants[i].mem.evict(c, n);
            }
        }
        let untouched: f64 = classes.iter().zip(&target).map(|(c, t)| c.3 * (1.0 - t / c.2.max(1e-9))).sum();
        let held_now: f64 = classes.iter().map(|c| c.3).sum();
        (held_now / untouched.max(1.0)).clamp(1.0, MAX_SCAN_RATIO)
    }

    fn held_all(&self, classes: &[(usize, usize, f64, f64)]) -> f64 {
        classes.iter().map(|c| c.3).sum::<f64>().max(1.0)
    }
}

/// A standard normal draw (Box–Muller).
pub fn normal(rng: &mut fastrand::Rng) -> f64 {
    let (u, v) = (rng.f64().max(1e-12), rng.f64());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{App, Pattern};

    /// One idle 256 MiB tenant with 128 MiB of it out on the tier and queued for a prefetch.
    fn half_out_on_the_tier() -> Host {
        let size = 256 << 20;
        let phases = vec![(PhaseKind::Idle, 60.0)];
        let m = TenantModel {
            name: "a".into(),
            size,
            hot: size,
            pattern: Pattern::Uniform,
            app: App::Workload,
            phases,
            reserve: 0,
            shares: 1,
        };
        let mut h = Host::new(vec![m], None, &mut fastrand::Rng::with_seed(1));
        let mem = &mut h.tenants[0].mem;
        mem.fill(mem.total_pages());
        for r in 0..64 {
            mem.page_out(r);
            h.prefetch.push_back(Queued { tenant: 0, region: r, relayout: false, until: f64::INFINITY });
        }
        let written = mem.swap_cached_pages();
        mem.free_written(written);
        h
    }

    fn read_back_in_a_step(h: &mut Host) -> f64 {
        let before = h.tenants[0].dram_pages();
        h.run_prefetch(0.0);
        h.tenants[0].dram_pages() - before
    }

    #[test]
    fn a_prefetch_into_a_group_at_its_limit_reads_no_faster_than_reclaim_frees_room() {
        let reclaim_per_step = LIMIT_RECLAIM_BYTES_PER_SEC / PAGE * DT;
        let mut room = half_out_on_the_tier();
        let with_room = read_back_in_a_step(&mut room);
        assert!(with_room > 5.0 * reclaim_per_step, "{with_room} pages at the device's speed");
        let mut full = half_out_on_the_tier();
        full.group_limit = Some(full.tenants[0].dram_pages());
        let at_limit = read_back_in_a_step(&mut full);
        assert!((at_limit - reclaim_per_step).abs() < 1.0, "{at_limit} pages, reclaim frees {reclaim_per_step}");
        let cpu = reclaim_per_step * RECLAIM_CPU_SECS;
        assert!((full.prefetch_reclaim_secs - cpu).abs() < 1e-9, "reclaim's CPU is tierd's");
        assert_eq!(room.prefetch_reclaim_secs, 0.0, "into free room nothing is reclaimed");
    }
}
