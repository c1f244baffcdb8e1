//! Green / yellow / red health, with the thresholds of the tiering guidance in the seeds.

use serde::{Deserialize, Serialize};

pub use crate::colour::Colour;

/// Active memory as a share of the DRAM budget: below 50% green, 50–75% yellow, above
/// 75% red. Above half, tier-1 traffic starts to cost tenants noticeably.
pub fn active_memory(active_bytes: u64, dram_budget: u64) -> Colour {
    if dram_budget == 0 {
        return Colour::Red;
    }
    band(active_bytes as f64 * 100.0 / dram_budget as f64, 50.0, 75.0)
}

/// Green below `yellow`, yellow from it up to and including `red`, red above: the
/// shape of every threshold in the seeds' guidance.
fn band(v: f64, yellow: f64, red: f64) -> Colour {
    if v < yellow {
        Colour::Green
    } else if v <= red {
        Colour::Yellow
    } else {
        Colour::Red
    }
}

/// What the tier's reads are judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TierReadLatency {
    /// The p99 of sampled requests (`crate::read_tail`), where tierd can trace them.
    P99(f64),
    /// The interval's average from the device's own counters.
    Average(f64),
}

impl TierReadLatency {
    /// The tail where it is known (it is what a tenant's slowest faults wait), else the average.
    pub fn judged(p99_us: Option<f64>, average_us: Option<f64>) -> Option<TierReadLatency> {
        p99_us.map(TierReadLatency::P99).or(average_us.map(TierReadLatency::Average))
    }
}

impl std::fmt::Display for TierReadLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TierReadLatency::P99(us) => write!(f, "p99 {us:.0} µs"),
            TierReadLatency::Average(us) => write!(f, "average {us:.0} µs"),
        }
    }
}

/// Tier read latency: a p99 below 2 ms green, 2–8 ms yellow, above 8 ms red; an
/// average below 200 µs green, 200–400 µs yellow, above 400 µs red.
pub fn tier_read_latency(latency: TierReadLatency) -> Colour {
    match latency {
        TierReadLatency::P99(us) => band(us, 2_000.0, 8_000.0),
        TierReadLatency::Average(us) => band(us, 200.0, 400.0),
    }
}

/// Tier fill: below 80% green, 80–95% yellow, above 95% red. A full tier means the
/// kernel can no longer page out, and quotas stop holding.
pub fn tier_fill(used: u64, size: u64) -> Colour {
    if size == 0 {
        return Colour::Green;
    }
    band(used as f64 * 100.0 / size as f64, 80.0, 95.0)
}

/// tierd busy with one piece of work (a pass, a request) for `busy_secs`: below 3
/// intervals green, up to 12 yellow, beyond red. Page moves stop at one interval, so a
/// pass thrice as long waits on something that hangs (a stuck device, a blocked write).
pub fn engine_busy(busy_secs: f64, interval_secs: f64) -> Colour {
    band(busy_secs / interval_secs.max(0.001), 3.0, 12.0)
}

/// The check for [`engine_busy`], said only when it is not green.
pub fn engine_busy_check(doing: &str, busy_secs: f64, interval_secs: f64) -> Option<Check> {
    let colour = engine_busy(busy_secs, interval_secs);
    (colour != Colour::Green).then(|| {
        check(
            "engine",
            colour,
            format!(
                "tierd has been busy with {doing} for {busy_secs:.0} s ({:.0} intervals): its control loop \
                 waits, and these figures are the last pass's",
                busy_secs / interval_secs.max(0.001)
            ),
            "`tierctl events` names the slow step; a tier device that takes seconds per request makes every \
             page move slow (see tier_read_latency), and a process stuck in the kernel shows in \
             /proc/PID/stack of tierd's threads",
        )
    })
}

/// What the host-wide checks look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFigures {
    pub dram_budget: u64,
    pub active: u64,
    pub tier_size: u64,
    pub tier_used: u64,
    /// Tier read latency, if there were enough reads to time.
    pub tier_read_latency: Option<TierReadLatency>,
    /// Tenants with failed syscalls or cgroup writes, with their error counts.
    pub tenant_errors: Vec<(String, u64)>,
    /// Why demotion is throttled, if it is.
    pub throttled: Option<String>,
    /// Tenants waiting at their memory limit with reclaim making no progress, and for
    /// how long (seconds; see [`crate::waits`]).
    pub waiting: Vec<(String, f64)>,
    /// How long a tenant may wait before the OOM killer may act on it (seconds).
    pub oom_grace_secs: f64,
    /// The tier was drained (`tierctl tier drain`): nothing is tiered.
    pub tier_drained: bool,
    /// Swap I/O errors on the tier device.
    pub tier_faults: crate::tier_faults::TierFaults,
    /// Whether the tier is encrypted: `Ok(cipher)`, or `Err(why not)`; `None` without a tier.
    pub tier_encryption: Option<Result<String, String>>,
    /// The tier's writes against the drive's rating; `None` without a tier.
    pub tier_wear: Option<crate::wear::Wear>,
}

/// One health check: its colour, what it saw and, when not green, what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub colour: Colour,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
}

fn check(name: &str, colour: Colour, message: String, advice: &str) -> Check {
    let advice = (colour != Colour::Green).then(|| advice.to_string());
    Check { name: name.into(), colour, message, advice }
}

/// The host's health checks, worst first within a stable order.
pub fn checks(h: &HostFigures) -> Vec<Check> {
    let mut out = vec![check(
        "active_memory",
        active_memory(h.active, h.dram_budget),
        format!("active memory {:.0}% of DRAM", pct(h.active, h.dram_budget)),
        "add DRAM (raise --dram-budget), move a tenant to another host, or lower the ratio",
    )];
    out.extend(tier_checks(h));
    if let Some(why) = &h.throttled {
        out.push(check("demotion", Colour::Yellow, why.clone(), "demotion waits until the tier recovers"));
    }
    out.extend(tenant_checks(h));
    out
}

/// `a` as a percentage of `b` (0 of nothing).
fn pct(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 * 100.0 / b as f64 }
}

/// The tier's latency, fill, encryption, drain and device.
fn tier_checks(h: &HostFigures) -> Vec<Check> {
    let mut out = vec![match h.tier_read_latency {
        Some(l) => check(
            "tier_read_latency",
            tier_read_latency(l),
            format!("tier read latency {l}"),
            "the tier device is slow or saturated: move the tier to a faster NVMe device, or lower the \
             ratio so fewer pages live there",
        ),
        None => check("tier_read_latency", Colour::Green, "no tier reads in the last interval".into(), ""),
    }];
    out.push(check(
        "tier_fill",
        tier_fill(h.tier_used, h.tier_size),
        format!("tier {:.0}% full", pct(h.tier_used, h.tier_size)),
        "a full tier cannot take more pages: give the tier more space or lower tenants' sizes",
    ));
    // Said either way, in green: a kernel without dm-crypt is no fault of the host's.
    match &h.tier_encryption {
        Some(Ok(cipher)) => out.push(check(
            "tier_encryption",
            Colour::Green,
            format!("tier encrypted: dm-crypt {cipher}, with a key made at this start and held by the kernel"),
            "",
        )),
        Some(Err(why)) => out.push(check(
            "tier_encryption",
            Colour::Green,
            format!("tier NOT encrypted ({why}): tenants' memory is written to it in the clear"),
            "",
        )),
        None => {}
    }
    out.extend(h.tier_wear.map(wear_check));
    if h.tier_drained {
        out.push(check(
            "tier",
            Colour::Yellow,
            "the tier is drained: nothing is tiered, and tenants share DRAM alone".into(),
            "restart tierd with the new tier (its tenants are re-adopted and keep running)",
        ));
    }
    if h.tier_faults.failing() {
        out.push(check(
            "tier_device",
            Colour::Red,
            format!(
                "the tier device is failing: {} (the kernel's log); nothing more is put on it",
                h.tier_faults.describe()
            ),
            "replace the device. A page that could not be written stays in DRAM; a page that cannot be read \
             back ends the process that touches it (SIGBUS). While reads still work, `tierctl tier drain` brings \
             the tier back into DRAM; then restart tierd with a new tier",
        ));
    }
    out
}

/// The tier's writes against what its drive is rated to take per day.
fn wear_check(w: crate::wear::Wear) -> Check {
    use crate::size::human;
    let rate = match w.per_day_bytes {
        Some(r) => format!(
            "tier writes {}/day over the last hour ({} in the last day)",
            human(r as u64),
            human(w.last_day_bytes)
        ),
        None => format!(
            "tier writes: {} in {:.0} min (a rate is judged after an hour)",
            human(w.written_bytes),
            w.measured_secs / 60.0
        ),
    };
    let rating = match (w.rated_per_day_bytes, w.per_day_bytes) {
        (Some(rated), Some(r)) => {
            format!(", {:.0}% of the drive's rated {}/day", r * 100.0 / rated, human(rated as u64))
        }
        (Some(rated), None) => format!("; the drive is rated for {}/day", human(rated as u64)),
        (None, _) => "; the drive's endurance is not configured (tier.dwpd)".to_string(),
    };
    let drive = w.drive.map(drive_words).unwrap_or_default();
    let advice = if w.drive.is_some_and(|d| d.colour() > Colour::Green) {
        "the drive under the tier is worn or failing by its own health log: replace it (`tierctl tier drain` first \
         brings the tier back into DRAM where it fits), and until then give tenants more DRAM so fewer pages move"
    } else {
        "the tier is written faster than its drive is rated for and will wear out early: lower the ratio or give \
         tenants more DRAM (fewer pages move), or put the tier on a drive rated for more writes a day"
    };
    check("tier_wear", w.colour(), rate + &rating + &drive, advice)
}

/// What an NVMe drive's health log says of it, for the wear line.
fn drive_words(d: crate::wear::DriveHealth) -> String {
    let warns = d.warnings();
    let warned = if warns.is_empty() { String::new() } else { format!(", and warns: {}", warns.join(", ")) };
    format!("; the drive reports {}% of its rated life used (NVMe health log){warned}", d.percentage_used)
}

/// Tenants stuck at their limit, and tenants whose operations failed.
fn tenant_checks(h: &HostFigures) -> Vec<Check> {
    let mut out = Vec::new();
    let stuck: Vec<String> = h
        .waiting
        .iter()
        .filter(|w| w.1 >= crate::waits::RED_AFTER_SECS)
        .map(|(n, secs)| format!("{n} ({secs:.0} s)"))
        .collect();
    if !stuck.is_empty() {
        out.push(check(
            "tenants_waiting",
            Colour::Red,
            format!("waiting at their memory limit, reclaim making no progress: {}", stuck.join(", ")),
            &format!(
                "they grew beyond DRAM and the tier (tier {:.0}% full: after {:.0} s of this the kernel's OOM \
                 killer may act on them), or reclaim waits on a slow tier: give the tier room, or stop a tenant",
                pct(h.tier_used, h.tier_size),
                h.oom_grace_secs
            ),
        ));
    }
    if !h.tenant_errors.is_empty() {
        let list: Vec<String> = h.tenant_errors.iter().map(|(n, c)| format!("{n} ({c})")).collect();
        out.push(check(
            "tenant_errors",
            Colour::Yellow,
            format!("failed operations for {}", list.join(", ")),
            "see `tierctl status --json` (errors) and `tierctl explain NAME`",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_memory_edges() {
        let b = 1000;
        let cases = [
            (0, Colour::Green),
            (499, Colour::Green),
            (500, Colour::Yellow),
            (750, Colour::Yellow),
            (751, Colour::Red),
            (2000, Colour::Red),
        ];
        for (active, want) in cases {
            assert_eq!(active_memory(active, b), want, "{active}");
        }
        assert_eq!(active_memory(1, 0), Colour::Red);
    }

    #[test]
    fn latency_edges() {
        use TierReadLatency::{Average, P99};
        let cases = [
            (Average(0.0), Colour::Green),
            (Average(199.9), Colour::Green),
            (Average(200.0), Colour::Yellow),
            (Average(400.0), Colour::Yellow),
            (Average(400.1), Colour::Red),
            // A tail ten times an average's bands: one read in a hundred may queue.
            (P99(1_999.0), Colour::Green),
            (P99(2_000.0), Colour::Yellow),
            (P99(8_000.0), Colour::Yellow),
            (P99(8_001.0), Colour::Red),
        ];
        for (l, want) in cases {
            assert_eq!(tier_read_latency(l), want, "{l}");
        }
    }

    #[test]
    fn the_tail_is_judged_where_it_is_known_and_the_average_where_not() {
        use TierReadLatency::{Average, P99};
        assert_eq!(TierReadLatency::judged(Some(900.0), Some(300.0)), Some(P99(900.0)));
        assert_eq!(TierReadLatency::judged(None, Some(300.0)), Some(Average(300.0)));
        assert_eq!(TierReadLatency::judged(None, None), None);
        let h = HostFigures { tier_read_latency: Some(P99(9_000.0)), ..HostFigures::default() };
        let c = checks(&h).into_iter().find(|c| c.name == "tier_read_latency").unwrap();
        assert_eq!((c.colour, c.message.as_str()), (Colour::Red, "tier read latency p99 9000 µs"));
    }

    #[test]
    fn a_pass_past_three_intervals_is_yellow_and_past_twelve_red() {
        assert_eq!(engine_busy(29.0, 10.0), Colour::Green);
        assert_eq!(engine_busy(30.0, 10.0), Colour::Yellow);
        assert_eq!(engine_busy(120.0, 10.0), Colour::Yellow);
        assert_eq!(engine_busy(121.0, 10.0), Colour::Red);
        assert_eq!(engine_busy_check("a control-loop pass", 2.0, 1.0), None, "green is not said");
        let c = engine_busy_check("a control-loop pass", 40.0, 2.0).unwrap();
        assert_eq!((c.name.as_str(), c.colour), ("engine", Colour::Red));
        assert!(c.message.contains("busy with a control-loop pass for 40 s (20 intervals)"), "{}", c.message);
        assert!(c.advice.is_some());
    }

    #[test]
    fn tier_fill_edges() {
        let cases = [
            (0, Colour::Green),
            (799, Colour::Green),
            (800, Colour::Yellow),
            (950, Colour::Yellow),
            (951, Colour::Red),
        ];
        for (used, want) in cases {
            assert_eq!(tier_fill(used, 1000), want, "{used}");
        }
        assert_eq!(tier_fill(5, 0), Colour::Green, "no tier yet");
    }

    #[test]
    fn checks_say_what_to_do_when_not_green() {
        let h = HostFigures {
            dram_budget: 1000,
            active: 810,
            tier_size: 100,
            tier_used: 10,
            tier_read_latency: Some(TierReadLatency::Average(150.0)),
            ..HostFigures::default()
        };
        let c = checks(&h);
        let active = c.iter().find(|c| c.name == "active_memory").unwrap();
        assert_eq!(active.colour, Colour::Red);
        assert_eq!(active.message, "active memory 81% of DRAM");
        assert!(active.advice.as_deref().unwrap().contains("add DRAM"));
        let lat = c.iter().find(|c| c.name == "tier_read_latency").unwrap();
        assert_eq!((lat.colour, lat.advice.is_none()), (Colour::Green, true), "{lat:?}");
        assert!(c.iter().all(|c| c.name != "tenant_errors" && c.name != "demotion"));
    }

    #[test]
    fn tier_wear_is_judged_against_the_drives_rating_and_said_either_way() {
        use crate::wear::Wear;
        let gib = (1u64 << 30) as f64;
        let wear = |w: Wear| {
            let c = checks(&HostFigures { tier_wear: Some(w), ..HostFigures::default() });
            c.into_iter().find(|c| c.name == "tier_wear").expect("said whenever there is a tier")
        };
        let hot = wear(Wear {
            per_day_bytes: Some(1500.0 * gib),
            last_day_bytes: 1 << 40,
            rated_per_day_bytes: Some(1000.0 * gib),
            measured_secs: 7200.0,
            ..Wear::default()
        });
        assert_eq!(hot.colour, Colour::Red);
        assert!(hot.message.contains("150% of the drive's rated 1000 GiB/day"), "{}", hot.message);
        assert!(hot.advice.as_deref().unwrap().contains("lower the ratio"));
        let unrated = wear(Wear { per_day_bytes: Some(1500.0 * gib), ..Wear::default() });
        assert_eq!((unrated.colour, unrated.message.contains("not configured (tier.dwpd)")), (Colour::Green, true));
        let early = wear(Wear {
            written_bytes: 3 << 30,
            measured_secs: 600.0,
            rated_per_day_bytes: Some(gib),
            ..Wear::default()
        });
        assert_eq!(early.colour, Colour::Green, "ten minutes decide nothing: {}", early.message);
        assert!(early.message.contains("3 GiB in 10 min"), "{}", early.message);
        // An NVMe drive's own health log: said, and judged beside the rate.
        let drive = crate::wear::DriveHealth { percentage_used: 7, critical_warning: 0b100, ..Default::default() };
        let failing = wear(Wear { drive: Some(drive), ..Wear::default() });
        assert_eq!(failing.colour, Colour::Red, "{}", failing.message);
        assert!(
            failing.message.contains("7% of its rated life used (NVMe health log), and warns: reliability degraded")
        );
        assert!(failing.advice.as_deref().unwrap().contains("replace it"));
        let sound = wear(Wear { drive: Some(crate::wear::DriveHealth::default()), ..Wear::default() });
        assert_eq!(sound.colour, Colour::Green);
        assert!(sound.message.ends_with("0% of its rated life used (NVMe health log)"), "{}", sound.message);
    }

    #[test]
    fn errors_and_throttling_show_as_yellow_checks() {
        let h = HostFigures {
            dram_budget: 1000,
            tenant_errors: vec![("db".into(), 3)],
            throttled: Some("demotion throttled: tier read latency 900 µs is above 400 µs".into()),
            ..HostFigures::default()
        };
        let c = checks(&h);
        let errs = c.iter().find(|c| c.name == "tenant_errors").unwrap();
        assert_eq!(errs.colour, Colour::Yellow);
        assert!(errs.message.contains("db (3)"), "{}", errs.message);
        assert!(c.iter().any(|c| c.name == "demotion" && c.colour == Colour::Yellow));
        assert!(c.iter().all(|c| c.name != "tier" && c.name != "tier_device"), "a tier in use is not news");
        let clear =
            checks(&HostFigures { tier_encryption: Some(Err("tier.encrypt is off".into())), ..HostFigures::default() });
        let enc = clear.iter().find(|c| c.name == "tier_encryption").expect("encryption is always said");
        assert_eq!(
            enc.message,
            "tier NOT encrypted (tier.encrypt is off): tenants' memory is written to it in the clear"
        );
        let faults = crate::tier_faults::TierFaults { read_errors: 2, write_errors: 0 };
        let failing = checks(&HostFigures { dram_budget: 1000, tier_faults: faults, ..HostFigures::default() });
        let device = failing.iter().find(|c| c.name == "tier_device").expect("a failing tier is shown");
        assert_eq!(device.colour, Colour::Red);
        assert!(device.message.contains("at least 2 failed reads"), "{device:?}");
        assert!(device.advice.as_deref().unwrap().contains("SIGBUS"), "{device:?}");
        let drained = checks(&HostFigures { dram_budget: 1000, tier_drained: true, ..HostFigures::default() });
        let tier = drained.iter().find(|c| c.name == "tier").expect("a drained tier is shown");
        assert_eq!(tier.colour, Colour::Yellow);
        assert!(tier.advice.as_deref().unwrap().contains("restart tierd"), "{tier:?}");
    }

    #[test]
    fn a_tenant_waiting_at_its_limit_turns_health_red_by_name() {
        let h = |secs: f64| HostFigures {
            dram_budget: 1000,
            tier_size: 100,
            tier_used: 100,
            waiting: vec![("big".into(), secs)],
            oom_grace_secs: 30.0,
            ..HostFigures::default()
        };
        assert!(checks(&h(1.0)).iter().all(|c| c.name != "tenants_waiting"), "a short wait is reclaim catching up");
        let c = checks(&h(12.0));
        let w = c.iter().find(|c| c.name == "tenants_waiting").unwrap();
        assert_eq!(w.colour, Colour::Red);
        assert!(w.message.contains("big (12 s)"), "{}", w.message);
        assert!(
            w.advice.as_deref().unwrap().contains("tier 100% full") && w.advice.as_deref().unwrap().contains("30 s")
        );
    }
}
