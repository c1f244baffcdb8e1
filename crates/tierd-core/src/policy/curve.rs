//! A tenant's fault curve: how often it would read from the tier with q bytes of DRAM,
//! and so the share of its work it gets done.
//!
//! From what the tracker measures: the memory it touches every interval (its hot set:
//! each page there is touched at least once an interval, and, when the tenant faults at
//! its quota now, as often as those faults say), and what it reuses less often within
//! the window (warm: about twice a window). With q bytes the kernel's LRU inside its
//! quota keeps the hottest: it faults on the hot bytes beyond q at the hot rate, and on
//! the warm bytes beyond what is left at the warm rate. Of a quota, a share
//! ([`Knobs::headroom`]) holds what rides on the pages rather than the pages: so a
//! quota of exactly the hot set thrashes, as it does on the machine. A fault costs the
//! tier's read time now (which carries the device's speed and its queue) and the CPU of
//! the fault, so the share of its work done is U = 1 / (1 + f·t), f its faults per
//! second of work.
//! U is convex in q over a uniformly used hot set — a share of a cliff is worth almost
//! nothing — which is why the allocation works on the curve's concave envelope.

use crate::policy::Knobs;
use crate::snapshot::{Activeness, Snapshot, TenantView, TierView};

const PAGE: f64 = crate::size::PAGE as f64;
/// A read from the tier when none was timed lately: the fast tier's p50 here.
const DEFAULT_READ_SECS: f64 = 80e-6;
/// Tier reads a second that say a working tenant lacks part of its hot set.
const FAULTING: f64 = 50.0;
/// A share of samples back within an interval that says every hot page was touched.
const STEEP: f64 = 0.95;
/// The least share of its time a stalled tenant is taken to run (bounds the full-speed
/// rate read from a tenant that barely runs).
const MIN_RUNNING: f64 = 0.02;
/// Least reuse priced for a warm part: once in four windows (it was touched within one).
const WARM_REUSES_FLOOR: f64 = 0.25;
/// A warm part this small is priced as before (its two readings' noise is all of it).
const MIN_WARM_BYTES: f64 = (16u64 << 20) as f64;

/// Seconds a read from the tier costs the thread that faults: the device's read time
/// at its load now, and the CPU of the fault.
pub fn fault_secs(tier: &TierView, k: &Knobs) -> f64 {
    tier.read_latency_us.map_or(DEFAULT_READ_SECS, |us| us / 1e6) + k.fault_cpu_secs
}

/// One tenant's curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve {
    /// Bytes touched every interval (with the estimate's confidence half-width).
    pub hot: u64,
    /// Bytes reused within the window beyond the hot set.
    pub warm: u64,
    /// Accesses per page per second at full speed: of the hot set, of the warm part.
    pub hot_rate: f64,
    pub warm_rate: f64,
    /// Seconds of work a second: its usual activity when working (cores).
    pub cores: f64,
    /// Its hot set is a cliff: every page of it touched many times an interval (its
    /// samples came back whole). A skewed one (a Zipf head and a tail) the kernel's LRU
    /// keeps about as well as any quota would.
    pub steep: bool,
    /// Share of its pages' bytes a quota must hold beyond them: the swap cache in
    /// flight, the tracker's samples, page tables (all charged to its cgroup).
    pub headroom: f64,
    /// Measured while working: holding these bytes it did this share of its work
    /// (1 − its stall share). See [`Curve::through`].
    pub seen: Option<(u64, f64)>,
}

/// How often a tenant reuses its warm part (what it touched within the window beyond
/// its hot set `hot`), from that part's share touched within the window's latter half:
/// pages each reused at a rate λ are touched within s with the chance 1 − e^(−λs), so
/// (T(w) − hot) / (T(w/2) − hot) = 1 + e^(−λw/2). A sweep that ended half a window ago
/// is not reused at all (at the floor); a tail reused twice a window reads 2 / w, the
/// most it is priced at.
fn warm_rate(hot: u64, a: &Activeness, window: f64) -> f64 {
    let (Some(all), Some(half)) = (a.touched_in_window_bytes, a.touched_in_half_window_bytes) else {
        return 2.0 / window;
    };
    let (all, half) = (all.saturating_sub(hot) as f64, half.saturating_sub(hot) as f64);
    if all < MIN_WARM_BYTES {
        return 2.0 / window;
    }
    // e^(−λw/2) = (T(w) − T(w/2)) / (T(w/2) − hot): none older is reuse without bound.
    let older = ((all - half) / half.max(1.0)).clamp(0.0, 1.0);
    (-2.0 * older.ln() / window).clamp(WARM_REUSES_FLOOR / window, 2.0 / window)
}

/// Bytes it touches every interval (see [`Curve::of`]).
fn hot_bytes(t: &TenantView, a: &Activeness, window: f64, interval: f64, k: &Knobs) -> u64 {
    // What it touched in the last two intervals: the window's average lags a phase
    // change by a window either way (a server that loaded all of its memory read as
    // wholly hot for 30 s after). What it reuses less often is the warm part below.
    let now = a.recent_bytes.unwrap_or(a.active_bytes);
    let mut hot = (now + a.ci_bytes).min(t.size().max(now));
    // Woken within the window: the tracker's window still holds its rest, and what
    // it will touch is the working set it had before (see `moves::working_set`).
    let reused: u64 = crate::policy::moves::working_set(t, window).map(|r| r.dram_bytes + r.tier_bytes).sum();
    let woken = t.at_rest_secs.is_none() && t.since_rest_secs.is_some_and(|s| s <= window);
    if woken {
        hot = hot.max(reused);
    }
    // Faulting at its quota, it touches each hot page seldom and an interval's samples
    // undercount its hot set. Reclaim at the quota keeps what it uses, so what it holds
    // is in use, and its faults say how much more is out.
    let faulting = t.at_rest_secs.is_none() && t.tier_faults_per_sec >= FAULTING;
    let out = faulting.then(|| out_bytes(t, a, interval));
    if let Some(out) = out {
        hot = hot.max(((t.dram as f64 + out) as u64).min(t.size()));
    }
    // Never more than the regions it reused lately (or what it touched now): the
    // estimates above count a page that faults twice twice. Not what it holds: a
    // tenant holding cold pages grew its estimate with them, and its quota with that.
    // But faulting at a quota of its own that it fills, never less than the quota keeps
    // and what is out: what else the cgroup holds (page cache, page tables) crowds out
    // its pages. (Under the shared limit the LRU settles who holds what; just woken, it
    // faults on what its rest left out.)
    let at_quota = t.quota.is_some_and(|q| t.dram as f64 * (1.0 + k.headroom) >= q as f64);
    let floor = out.filter(|_| at_quota && !woken).map_or(0, |out| (t.dram as f64 / (1.0 + k.headroom) + out) as u64);
    if reused > 0 {
        hot = hot.min(reused.max(now).max(floor));
    }
    // Nor more than it has, in DRAM or on the tier: a thrashing tenant's pages fault,
    // and its samples come back, again and again within an interval.
    hot.min(t.footprint.max(t.dram + t.tier))
}

/// Bytes of its hot set out of DRAM, as its faults at its quota say: each page it holds
/// is touched at the rate its samples came back (λ = −ln(1 − r) / interval; counting
/// only the share r that came back took a thrashing uniform hot set for a small one),
/// so F faults a second are F / λ pages out. With nothing it holds touched (it has just
/// begun on memory that is all out), probe: a quarter of what it holds more, again at
/// the next pass while it still faults.
fn out_bytes(t: &TenantView, a: &Activeness, interval: f64) -> f64 {
    let held = t.dram as f64;
    match a.returned_share {
        Some(r) if r > 0.02 && r < 0.99 => t.tier_faults_per_sec / (-(1.0 - r).ln() / interval) * PAGE,
        Some(r) if r >= 0.99 => t.tier_faults_per_sec * interval * PAGE,
        _ => held * 0.25 + (32u64 << 20) as f64,
    }
}

impl Curve {
    /// The curve of a working tenant, a read from the tier costing `fault_secs`. Not
    /// measured yet: all of it taken as hot, and not steep (it is filling; the kernel's
    /// LRU sees to it until sampling does). Just woken: at least the working set it had
    /// before its rest.
    pub fn of(t: &TenantView, window: f64, interval: f64, fault_secs: f64, k: &Knobs) -> Curve {
        let cores = t.demand_cores.max(k.min_busy_cores);
        let Some(a) = t.activeness else {
            let size = t.size();
            return Curve {
                hot: size,
                warm: 0,
                hot_rate: k.min_hot_rate,
                warm_rate: 2.0 / window,
                cores,
                steep: false,
                headroom: k.headroom,
                seen: None,
            };
        };
        let hot = hot_bytes(t, &a, window, interval, k);
        let warm = a.touched_bytes().min(t.size()).saturating_sub(hot);
        // How steep its hot set is: samples that nearly all came back within an interval
        // say each page is touched many times over (a cliff, at least `min_hot_rate`);
        // fewer say it is skewed, a head touched often and a tail now and then, and a
        // page at the edge of what it keeps is touched about as often as its samples
        // came back: λ = −ln(1 − r) / interval.
        // Stalled on memory, it touches every page as much slower as it runs: the rate
        // its samples say, over the share of its time it ran, is the full-speed rate (a
        // uniform hot set thrashing at its quota otherwise reads as a gentle slope).
        let running = (1.0 - t.stall_share).max(MIN_RUNNING);
        let full_rate = a.returned_share.map(|r| -(1.0 - r).ln() / interval / running);
        let steep = full_rate.is_none_or(|l| l * interval >= -(1.0 - STEEP).ln());
        let hot_rate = match full_rate {
            Some(l) if !steep => l.max(2.0 / window),
            _ => k.min_hot_rate,
        };
        let warm_rate = warm_rate(hot, &a, window);
        let curve = Curve { hot, warm, hot_rate, warm_rate, cores, steep, headroom: k.headroom, seen: None };
        // What it did with what it holds is measured, not estimated: the curve goes through it.
        match t.at_rest_secs.is_none() && t.dram > 0 {
            true => curve.through(t.dram, 1.0 - t.stall_share, fault_secs),
            false => curve,
        }
    }

    /// The curve of `t` as the policy sees it in `snap`.
    pub fn in_snapshot(t: &TenantView, snap: &Snapshot, k: &Knobs) -> Curve {
        let window = snap.window_secs.max(snap.interval_secs);
        Curve::of(t, window, snap.interval_secs, fault_secs(&snap.tier, k), k)
    }

    /// The curve through a measured point: holding `held` bytes it did `done` of its
    /// work. Below that point its hot rate is at least what explains the stall (read
    /// from samples, a thrashing hot set looks gentler than it is); at or past it no
    /// quota is worth less than what it did (the estimates carry a confidence margin).
    fn through(self, held: u64, done: f64, fault_secs: f64) -> Curve {
        let q = self.kept(held);
        let short_hot = self.hot.saturating_sub(q) as f64 / PAGE;
        let short_warm = self.touched().saturating_sub(q.max(self.hot)) as f64 / PAGE;
        let faults = (1.0 / done.max(MIN_RUNNING) - 1.0) * self.cores / fault_secs;
        let rate = if short_hot >= 1.0 { (faults - short_warm * self.warm_rate) / short_hot } else { 0.0 };
        Curve { hot_rate: self.hot_rate.max(rate), seen: Some((held, done)), ..self }
    }

    /// The quota that keeps `bytes` of its pages in DRAM.
    pub fn quota_for(&self, bytes: u64) -> u64 {
        bytes + (bytes as f64 * self.headroom) as u64
    }

    /// Bytes of its pages a quota of `q` keeps in DRAM.
    pub(crate) fn kept(&self, q: u64) -> u64 {
        (q as f64 / (1.0 + self.headroom)).ceil() as u64
    }

    /// What it touches within the window.
    pub fn touched(&self) -> u64 {
        self.hot + self.warm
    }

    /// Reads a second from the tier at full speed with `q` bytes of DRAM.
    pub fn faults_per_sec(&self, q: u64) -> f64 {
        let q = self.kept(q);
        let short_hot = self.hot.saturating_sub(q) as f64 / PAGE;
        let short_warm = self.touched().saturating_sub(q.max(self.hot)) as f64 / PAGE;
        short_hot * self.hot_rate + short_warm * self.warm_rate
    }

    /// The share of its work it gets done with `q` bytes, each read costing `fault_secs`.
    pub fn useful(&self, q: u64, fault_secs: f64) -> f64 {
        let model = 1.0 / (1.0 + self.faults_per_sec(q) / self.cores * fault_secs);
        match self.seen {
            Some((held, done)) if q >= held => model.max(done),
            _ => model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testutil::*;
    use crate::snapshot::Activeness;

    fn working(active: u64, touched: u64) -> TenantView {
        let mut t = tenant("t", GIB);
        t.activeness =
            Some(Activeness { active_bytes: active, touched_in_window_bytes: Some(touched), ..Default::default() });
        t.demand_cores = 0.5;
        t
    }

    #[test]
    fn a_uniform_hot_set_an_eighth_short_runs_at_a_few_percent_and_whole_at_full_speed() {
        let c = Curve::of(&working(256 * MIB, 256 * MIB), 30.0, 5.0, 100e-6, &Knobs::default());
        assert_eq!((c.hot, c.warm), (256 * MIB, 0));
        let t = 100e-6;
        assert_eq!(c.useful(c.quota_for(256 * MIB), t), 1.0);
        // A quota of exactly the hot set leaves no room for what rides on its pages
        // (on the machine such a tenant waited at its quota for reclaim to progress).
        assert!(c.useful(256 * MIB, t) < 0.2, "{}", c.useful(256 * MIB, t));
        let eighth = c.useful(224 * MIB, t);
        assert!(eighth < 0.1, "{eighth}");
        // Convex: half of the hot set is worth far less than half of the whole.
        assert!(c.useful(128 * MIB, t) < 0.05);
    }

    #[test]
    fn a_warm_tail_costs_little_a_page_and_faults_at_its_quota_raise_the_hot_rate() {
        let k = Knobs::default();
        let c = Curve::of(&working(100 * MIB, 300 * MIB), 30.0, 5.0, 100e-6, &k);
        assert_eq!(c.warm, 200 * MIB);
        let t = 100e-6;
        // A page of the tail is touched about twice a window, a hot one at least ten
        // times a second: 100 MiB of tail costs a quarter of its work, 50 MiB of hot
        // set nearly all of it.
        let tail = c.useful(200 * MIB, t);
        assert!(tail > 0.7 && tail < 0.8, "half the warm tail cut: {tail}");
        assert!(c.useful(50 * MIB, t) < 0.05);
        // Samples that came back whole: a cliff; three quarters back: a skewed hot set,
        // its edge touched ~0.28 times a second.
        let mut v = working(256 * MIB, 256 * MIB);
        v.activeness.as_mut().unwrap().returned_share = Some(0.99);
        assert_eq!(Curve::of(&v, 30.0, 5.0, 100e-6, &k).hot_rate, k.min_hot_rate);
        v.activeness.as_mut().unwrap().returned_share = Some(0.75);
        let skewed = Curve::of(&v, 30.0, 5.0, 100e-6, &k);
        assert!((skewed.hot_rate - 4f64.ln() / 5.0).abs() < 1e-9);
        assert!(skewed.useful(skewed.quota_for(192 * MIB), t) > 0.5, "a quarter short of a skewed hot set is no cliff");
    }

    #[test]
    fn a_warm_part_is_priced_by_how_much_of_it_the_windows_latter_half_reused() {
        let k = Knobs::default();
        let with_half = |half: u64| {
            let mut t = working(100 * MIB, 300 * MIB);
            t.activeness.as_mut().unwrap().touched_in_half_window_bytes = Some(half);
            Curve::of(&t, 30.0, 5.0, 100e-6, &k)
        };
        // Reused twice a window: of what the window touched beyond the hot set, the
        // share (1 − e^−1) / (1 − e^−2) within its latter half.
        let steady = with_half(100 * MIB + (200.0 * (1.0 - (-1f64).exp()) / (1.0 - (-2f64).exp())) as u64 * MIB);
        assert!((steady.warm_rate - 2.0 / 30.0).abs() < 0.002, "{}", steady.warm_rate);
        // A sweep that ended half a window ago: nothing of it touched since; priced at
        // once in four windows, an eighth of the steady tail's price.
        let swept = with_half(100 * MIB);
        assert_eq!(swept.warm_rate, 0.25 / 30.0);
        assert!(swept.useful(100 * MIB + 100 * MIB / 10, 100e-6) > steady.useful(200 * MIB, 100e-6));
        // All of it within the latter half: priced no higher than before (a reading that
        // close is mostly the two estimates' noise).
        assert_eq!(with_half(300 * MIB).warm_rate, 2.0 / 30.0);
        // Not measured: twice a window, as before.
        assert_eq!(Curve::of(&working(100 * MIB, 300 * MIB), 30.0, 5.0, 100e-6, &k).warm_rate, 2.0 / 30.0);
    }

    #[test]
    fn a_hot_set_read_while_the_tenant_barely_runs_is_rated_at_full_speed() {
        // Two fifths of its samples back in an interval: a gentle slope for a tenant
        // that ran all the time; for one stalled 95% of it, a cliff.
        let k = Knobs::default();
        let mut v = working(256 * MIB, 256 * MIB);
        v.activeness.as_mut().unwrap().returned_share = Some(0.4);
        let running = Curve::of(&v, 30.0, 5.0, 100e-6, &k);
        assert!(!running.steep && (running.hot_rate - (1.0f64 / 0.6).ln() / 5.0).abs() < 1e-9);
        v.stall_share = 0.5;
        let halved = Curve::of(&v, 30.0, 5.0, 100e-6, &k);
        assert!((halved.hot_rate - 2.0 * running.hot_rate).abs() < 1e-9, "{}", halved.hot_rate);
        v.stall_share = 0.95;
        let stalled = Curve::of(&v, 30.0, 5.0, 100e-6, &k);
        assert!(stalled.steep && stalled.hot_rate == k.min_hot_rate, "{stalled:?}");
    }

    #[test]
    fn the_curve_goes_through_what_the_tenant_did_with_what_it_holds() {
        let (k, t) = (Knobs::default(), 100e-6);
        // Thrashing at 16 MiB of a 192 MiB hot set whose samples read as a gentle slope:
        // from them alone it would do two fifths of its work there. It did 7%.
        let mut v = working(192 * MIB, 192 * MIB);
        v.activeness.as_mut().unwrap().returned_share = Some(0.05);
        (v.dram, v.stall_share) = (16 * MIB, 0.93);
        let c = Curve::of(&v, 30.0, 5.0, t, &k);
        assert!((c.useful(16 * MIB, t) - 0.07).abs() < 0.005, "{}", c.useful(16 * MIB, t));
        assert_eq!(c.useful(c.quota_for(192 * MIB), t), 1.0);
        assert!(c.useful(96 * MIB, t) < 0.2, "half of it is worth little: {}", c.useful(96 * MIB, t));
        // Unstalled on 193 MiB with an estimate 4 MiB over that (its confidence margin):
        // what it holds is worth all of its work; below, the estimate stands.
        let mut v = working(196 * MIB, 196 * MIB);
        (v.dram, v.stall_share) = (193 * MIB, 0.0);
        let c = Curve::of(&v, 30.0, 5.0, t, &k);
        assert_eq!(c.useful(193 * MIB, t), 1.0);
        assert!(c.useful(180 * MIB, t) < 0.2, "{}", c.useful(180 * MIB, t));
    }

    #[test]
    fn a_uniform_hot_set_thrashing_at_its_quota_is_all_it_holds_and_what_its_faults_say_is_out() {
        // 665 MiB touched uniformly, 453 MiB of it held: two fifths of its samples back
        // in an interval and 6,400 reads a second from the tier.
        let (k, t) = (Knobs::default(), 100e-6);
        let mut v = working(286 * MIB, 665 * MIB);
        v.activeness.as_mut().unwrap().returned_share = Some(0.42);
        (v.dram, v.stall_share, v.tier_faults_per_sec) = (453 * MIB, 0.48, 6400.0);
        let c = Curve::of(&v, 30.0, 5.0, t, &k);
        // λ = −ln(0.58) / 5 s: 6,400 / λ is 229 MiB out beside the 453 it holds (the
        // share that came back alone, 190 MiB of it, read it as a 419 MiB hot set).
        assert!(c.hot > 670 * MIB && c.hot < 690 * MIB, "{} MiB", c.hot >> 20);
        assert!(c.useful(c.quota_for(c.hot), t) > 0.95 && c.useful(453 * MIB, t) < 0.6, "{c:?}");
    }

    #[test]
    fn a_thrashing_hot_set_is_never_taken_for_more_than_the_tenant_has() {
        // 84 MiB in all, 12 of it in DRAM, faulting 9,000 pages a second back in: its
        // pages fault and come back many times an interval, and the tracker read 135 MiB
        // touched (the simulator's host-19, where that 170 MiB claim lost it the DRAM).
        let mut v = working(135 * MIB, 135 * MIB);
        v.activeness.as_mut().unwrap().recent_bytes = Some(135 * MIB);
        v.activeness.as_mut().unwrap().returned_share = Some(1.0);
        (v.footprint, v.dram, v.tier) = (84 * MIB, 12 * MIB, 72 * MIB);
        (v.stall_share, v.tier_faults_per_sec) = (0.6, 9000.0);
        let c = Curve::of(&v, 30.0, 5.0, 100e-6, &Knobs::default());
        assert_eq!(c.hot, 84 * MIB, "{c:?}");
        // Memory charged to it beyond its anonymous pages (files, shared memory) counts.
        (v.footprint, v.dram) = (20 * MIB, 60 * MIB);
        assert_eq!(Curve::of(&v, 30.0, 5.0, 100e-6, &Knobs::default()).hot, 132 * MIB);
    }

    #[test]
    fn a_slow_tier_makes_every_fault_dearer() {
        let k = Knobs::default();
        let fast = TierView { read_latency_us: Some(90.0), ..TierView::default() };
        let slow = TierView { read_latency_us: Some(7000.0), ..TierView::default() };
        assert!(fault_secs(&slow, &k) > 50.0 * fault_secs(&fast, &k) / 2.0);
        assert!((fault_secs(&TierView::default(), &k) - 100e-6).abs() < 1e-9);
    }
}
