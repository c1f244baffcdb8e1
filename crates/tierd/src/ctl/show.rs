//! What tierctl prints: status, health, heat maps, curves and plans as text.

use tierd_core::health::Check;
use tierd_core::size::human;

use crate::api::Status;

/// `green  active memory 32% of DRAM`, and for yellow or red what to do about it.
pub fn health_line(c: &Check, tty: bool) -> String {
    let colour = crate::top::paint(format!("{:<6}", c.colour.to_string()), c.colour, tty);
    match &c.advice {
        Some(a) => format!("{colour} {}: {a}", c.message),
        None => format!("{colour} {}", c.message),
    }
}

/// The average and, where sampled, the p99, with the colour health gives them.
pub fn latency(t: &crate::api::TierStatus) -> String {
    let p99 = t.read_latency_p99_us.map_or(String::new(), |us| format!(" p99 {us:.0}µs"));
    match (t.read_latency_us, t.read_latency_health.as_deref()) {
        (None, None) => "-".into(),
        (avg, colour) => {
            let avg = avg.map_or("-".into(), |us| format!("{us:.0}µs"));
            format!("{avg}{p99} ({})", colour.unwrap_or("?"))
        }
    }
}

pub fn tier_line(t: &crate::api::TierStatus) -> String {
    if t.drained {
        return "tier   drained: nothing is tiered until tierd restarts with a tier".into();
    }
    format!(
        "tier   {} via {} ({})  size {}  used {}  read {}/s  write {}/s  latency {}",
        t.path.display(),
        t.swap_path.display(),
        t.backing,
        human(t.size_bytes),
        human(t.used_bytes),
        human(t.read_bytes_per_sec as u64),
        human(t.write_bytes_per_sec as u64),
        latency(t)
    ) + if t.cipher.is_some() { "  encrypted" } else { "  not encrypted" }
        + &t.wear.map_or(String::new(), |w| format!("  written {}", human(w.written_bytes)))
        + &t.wear.and_then(|w| w.drive).map_or(String::new(), |d| format!("  drive life used {}%", d.percentage_used))
        + &failing(t)
}

/// `  FAILING: 3 writes, 1 read failed`, for a tier device with failed I/O.
fn failing(t: &crate::api::TierStatus) -> String {
    if t.read_errors + t.write_errors == 0 {
        return String::new();
    }
    format!("  FAILING: {} writes, {} reads failed", t.write_errors, t.read_errors)
}

pub fn rate(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 { "-".into() } else { human((bytes as f64 / secs) as u64) }
}

/// UTC wall-clock time of day for event lines.
pub fn clock(t: f64) -> String {
    let s = t as u64 % 86400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Share of DRAM on huge pages, as the HUGE column shows it.
pub fn huge_share(huge: u64, dram: u64) -> String {
    if dram == 0 { "-".into() } else { format!("{:.0}%", (huge as f64 / dram as f64 * 100.0).min(100.0)) }
}

pub fn opt(b: Option<u64>) -> String {
    b.map_or("-".into(), human)
}

pub fn print_status(s: &Status) {
    println!(
        "tierd {} (pid {}), policy {}, tracker {}, cgroup {} at {}",
        s.version,
        s.pid,
        s.policy,
        s.tracker,
        s.cgroup_version,
        s.cgroup_path.display()
    );
    println!(
        "DRAM   budget {}  used {}  free {}   active {} ({})",
        human(s.dram_budget_bytes),
        human(s.dram_used_bytes),
        human(s.dram_free_bytes),
        human(s.active_bytes),
        s.active_health
    );
    println!("{}", tier_line(&s.tier));
    if let Some(b) = &s.busy {
        println!("busy   with {} for {:.1} s: these figures are {:.1} s old", b.doing, b.for_secs, b.figures_age_secs);
    }
    println!(
        "commit {} of {} (ratio 1:{}), overcommit {:.2}x   tierd cpu {:.1}%  rss {}",
        human(s.committed_bytes),
        human(s.capacity_bytes),
        s.ratio,
        s.overcommit,
        s.tierd_cpu_percent,
        human(s.tierd_rss_bytes)
    );
    println!();
    println!(
        "{:<16} {:<10} {:>8} {:>10} {:>10} {:>5} {:>10} {:>10} {:>10} {:>9}",
        "TENANT", "STATE", "PID", "SIZE", "DRAM", "HUGE", "TIER", "QUOTA", "ACTIVE", "MAJFLT/s"
    );
    for t in &s.tenants {
        let state = match (t.state.as_str(), t.exit_code) {
            ("exited", Some(c)) => format!("exit {c}"),
            (s, _) => s.to_string(),
        };
        println!(
            "{:<16} {:<10} {:>8} {:>10} {:>10} {:>5} {:>10} {:>10} {:>10} {:>9.0}",
            t.name,
            state,
            t.pids.first().map_or("-".into(), |p| p.to_string()),
            human(t.size_bytes),
            human(t.dram_bytes),
            huge_share(t.huge_bytes, t.dram_bytes),
            human(t.tier_bytes),
            opt(t.quota_bytes),
            opt(t.active_bytes),
            t.major_faults_per_sec
        );
    }
    let adopted: Vec<String> = s
        .tenants
        .iter()
        .filter_map(|t| t.adopted_cgroup.as_ref().map(|c| format!("{} is adopted in cgroup {c}", t.name)))
        .collect();
    if !adopted.is_empty() {
        println!();
        println!("{}", adopted.join("\n"));
    }
    let guests: Vec<String> =
        s.tenants.iter().filter_map(|t| t.guest.as_ref().map(|g| guest_line(&t.name, g, t.active_bytes))).collect();
    if !guests.is_empty() {
        println!();
        for g in guests {
            println!("{g}");
        }
    }
}

/// One line per region in address order, then how much was seen touched when.
pub fn regions_table(regions: &[tierd_core::snapshot::Region]) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "{:>8} {:>14} {:>8} {:>5} {:>10} {:>10} {:>10}\n",
        "PID", "START", "IDLE", "COLD", "DRAM", "TIER", "HUGE"
    );
    for r in regions {
        let idle = r.idle_secs.map_or("never".into(), |s| format!("{s:.0}s"));
        let _ = writeln!(
            out,
            "{:>8} {:>#14x} {:>8} {:>5} {:>10} {:>10} {:>10}",
            r.range.pid,
            r.range.start,
            idle,
            r.cold_samples,
            human(r.dram_bytes),
            human(r.tier_bytes),
            human(r.huge_bytes)
        );
    }
    let mut buckets = [(10.0, 0u64, 0u64, 0u64), (60.0, 0, 0, 0), (600.0, 0, 0, 0), (f64::INFINITY, 0, 0, 0)];
    for r in regions {
        let idle = r.idle_secs.unwrap_or(f64::INFINITY);
        if let Some(b) = buckets.iter_mut().find(|b| idle <= b.0) {
            b.1 += 1;
            b.2 += r.dram_bytes;
            b.3 += r.tier_bytes;
        }
    }
    let mut from = 0.0;
    for (upto, n, dram, tier) in buckets {
        let span = if upto.is_finite() {
            format!("idle {from:.0}–{upto:.0} s")
        } else {
            format!("idle > {from:.0} s or never seen touched")
        };
        let _ = writeln!(out, "{span}: {n} regions, {} in DRAM, {} on the tier", human(dram), human(tier));
        from = upto;
    }
    out
}

/// One VM tenant's guest: its RAM, where that is, and whether it can be tiered.
pub fn guest_line(name: &str, g: &crate::api::GuestStatus, active: Option<u64>) -> String {
    let head = format!("vm {name}: guest RAM {} ({}, QEMU pid {})", human(g.ram_bytes), g.accel, g.pid);
    if !g.tierable {
        return format!("{head}, not tierable: {}", g.untierable.join("; "));
    }
    if !g.ram_found {
        return format!("{head}, guest RAM not mapped yet");
    }
    format!(
        "{head}: DRAM {}, tier {}, active {} (of the whole QEMU process)",
        human(g.ram_dram_bytes),
        human(g.ram_tier_bytes),
        opt(active)
    )
}

/// A tenant's fault curve: tier reads and work done for each amount of DRAM.
pub fn curve_table(c: &tierd_core::policy::report::CurveReport) -> String {
    let mut out = format!(
        "{}: {}, touches {} every interval ({}, ~{:.1} accesses/s a page) and {} more within the window; \
         {:.2} cores of work; a read from the tier costs {:.0} µs; holds {}\n\n{:>12} {:>14} {:>8}\n",
        c.name,
        if c.working { "working" } else { "at rest" },
        human(c.hot_bytes),
        if c.steep { "used evenly: a cliff" } else { "skewed" },
        c.hot_rate,
        human(c.warm_bytes),
        c.demand_cores,
        c.fault_secs * 1e6,
        human(c.dram_bytes),
        "DRAM",
        "tier reads/s",
        "work"
    );
    for p in &c.points {
        out += &format!("{:>12} {:>14.0} {:>7.0}%\n", human(p.dram_bytes), p.faults_per_sec, p.useful * 100.0);
    }
    out
}

/// The policy's allocation on another budget or with more tenants, as `tierctl plan` prints it.
pub fn what_if_table(w: &tierd_core::policy::report::WhatIf) -> String {
    let mut out = format!(
        "on {}: {} touched within the window ({}), {:.0}% of the working tenants' work done\n",
        human(w.budget),
        human(w.active_bytes),
        w.health,
        w.work_done * 100.0
    );
    for n in &w.notes {
        out += &format!("  {n}\n");
    }
    out += &format!("\n{:<20} {:>12} {:>12} {:>8}\n", "tenant", "hot set", "quota", "work");
    for t in &w.tenants {
        let quota = t.quota.map_or("shared".to_string(), human);
        let work = t.useful.map_or("at rest".to_string(), |u| format!("{:.0}%", u * 100.0));
        out += &format!("{:<20} {:>12} {:>12} {:>8}\n", t.name, human(t.hot_bytes), quota, work);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierd_core::health::Colour;
    use tierd_core::size::GIB;

    #[test]
    fn guest_lines_say_where_guest_ram_is_or_why_it_stays_in_dram() {
        let mut g = crate::api::GuestStatus {
            pid: 7,
            ram_bytes: GIB,
            ram_found: true,
            ram_mappings: 1,
            ram_dram_bytes: GIB / 4,
            ram_tier_bytes: 3 * GIB / 4,
            accel: "tcg".into(),
            tierable: true,
            untierable: Vec::new(),
        };
        assert_eq!(
            guest_line("web", &g, Some(GIB / 8)),
            "vm web: guest RAM 1 GiB (tcg, QEMU pid 7): DRAM 256 MiB, tier 768 MiB, active 128 MiB (of the whole QEMU process)"
        );
        g.tierable = false;
        g.untierable = vec!["device pass-through (vfio-pci) pins all guest RAM for DMA; it must stay in DRAM".into()];
        assert!(guest_line("web", &g, None).ends_with(
            "not tierable: device pass-through (vfio-pci) pins all guest RAM for DMA; it must stay in DRAM"
        ));
    }

    #[test]
    fn the_region_table_shows_heat_and_sums_it_by_idle_time() {
        use tierd_core::snapshot::{Range, Region};
        let region = |start: u64, idle: Option<f64>, dram: u64, tier: u64| Region {
            range: Range { pid: 42, start, len: 2 << 20 },
            idle_secs: idle,
            reused_secs: idle,
            laid_out: false,
            cold_samples: 2,
            dram_bytes: dram,
            tier_bytes: tier,
            wants_huge: false,
            huge_bytes: 0,
        };
        let mib = 1 << 20;
        let t = regions_table(&[
            region(0x7f00_0000_0000, Some(3.0), 2 * mib, 0),
            region(0x7f00_0020_0000, Some(45.0), mib, mib),
            region(0x7f00_0040_0000, None, 0, 2 * mib),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].contains("0x7f0000000000") && lines[1].contains("3s"), "{t}");
        assert!(lines[3].contains("never"), "{t}");
        assert!(t.contains("idle 0–10 s: 1 regions, 2 MiB in DRAM, 0 B on the tier"), "{t}");
        assert!(t.contains("idle 10–60 s: 1 regions, 1 MiB in DRAM, 1 MiB on the tier"), "{t}");
        assert!(t.contains("idle > 600 s or never seen touched: 1 regions, 0 B in DRAM, 2 MiB on the tier"), "{t}");
    }

    #[test]
    fn health_lines_give_advice_only_when_not_green() {
        let mut c = Check {
            name: "active_memory".into(),
            colour: Colour::Red,
            message: "active memory 81% of DRAM".into(),
            advice: Some("add DRAM".into()),
        };
        assert_eq!(health_line(&c, false), "red    active memory 81% of DRAM: add DRAM");
        c.colour = Colour::Green;
        c.advice = None;
        assert_eq!(health_line(&c, false), "green  active memory 81% of DRAM");
        let coloured = health_line(&c, true);
        assert!(coloured.starts_with("\x1b[") && coloured.contains("green"), "coloured on a terminal: {coloured:?}");
    }

    #[test]
    fn the_tier_line_says_what_the_device_took() {
        let mut t = crate::api::TierStatus { size_bytes: GIB, ..Default::default() };
        assert!(!tier_line(&t).contains("written"), "nothing said before anything is measured");
        t.wear = Some(tierd_core::wear::Wear { written_bytes: 3 * GIB, ..Default::default() });
        assert!(tier_line(&t).ends_with("not encrypted  written 3 GiB"), "{}", tier_line(&t));
        let drive = tierd_core::wear::DriveHealth { percentage_used: 4, ..Default::default() };
        t.wear = Some(tierd_core::wear::Wear { written_bytes: 3 * GIB, drive: Some(drive), ..Default::default() });
        assert!(tier_line(&t).ends_with("written 3 GiB  drive life used 4%"), "{}", tier_line(&t));
    }

    #[test]
    fn huge_share_is_a_capped_percentage_of_dram() {
        assert_eq!(huge_share(0, 0), "-");
        assert_eq!(huge_share(GIB / 2, GIB), "50%");
        // cgroup counters are sampled apart: never above 100%.
        assert_eq!(huge_share(2 * GIB, GIB), "100%");
    }
}
