//! Prometheus text exposition of a [`Status`]: host figures as `tierd_*`, tenants as
//! `tierd_tenant_*{tenant="…"}`. Base units (bytes, seconds, ratios) as Prometheus
//! asks; rates over the last control interval are gauges named `…_per_second`, and
//! monotonic totals are counters named `…_total`.

use std::fmt::Write;

use tierd_core::health::Colour;

use crate::api::{Status, TenantStatus, TierStatus};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Escapes a label value: backslash, double quote and newline.
fn label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn colour_value(c: Colour) -> u8 {
    match c {
        Colour::Green => 0,
        Colour::Yellow => 1,
        Colour::Red => 2,
    }
}

struct Writer {
    out: String,
}

impl Writer {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", label(val));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {v}");
    }

    fn gauge(&mut self, name: &str, help: &str, v: f64) {
        self.family(name, "gauge", help);
        self.sample(name, &[], v);
    }

    /// A Prometheus histogram from cumulative counts.
    fn histogram(&mut self, name: &str, help: &str, h: &tierd_core::read_tail::Histogram) {
        self.family(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        for (le, n) in h.le_us.iter().zip(&h.cumulative) {
            self.sample(&bucket, &[("le", &(*le as f64 / 1e6).to_string())], *n as f64);
        }
        self.sample(&bucket, &[("le", "+Inf")], h.count as f64);
        self.sample(&format!("{name}_sum"), &[], h.sum_secs);
        self.sample(&format!("{name}_count"), &[], h.count as f64);
    }

    /// A family whose one sample is there only when its value is known.
    fn maybe(&mut self, name: &str, kind: &str, help: &str, v: Option<f64>) {
        self.family(name, kind, help);
        if let Some(v) = v {
            self.sample(name, &[], v);
        }
    }
}

/// A per-tenant family: name, type, help, and the value (absent: no sample).
type TenantFamily = (&'static str, &'static str, &'static str, fn(&TenantStatus) -> Option<f64>);

/// The per-tenant families, one sample per running tenant each.
const TENANT_FAMILIES: [TenantFamily; 27] = [
    ("tierd_tenant_size_bytes", "gauge", "Anonymous memory, resident plus on the tier.", |t| Some(t.size_bytes as f64)),
    ("tierd_tenant_dram_bytes", "gauge", "DRAM the tenant holds.", |t| Some(t.dram_bytes as f64)),
    ("tierd_tenant_tier_bytes", "gauge", "Bytes the tenant has on the tier.", |t| Some(t.tier_bytes as f64)),
    ("tierd_tenant_huge_bytes", "gauge", "DRAM the tenant holds on transparent huge pages.", |t| {
        Some(t.huge_bytes as f64)
    }),
    (
        "tierd_tenant_pinned_bytes",
        "gauge",
        "Memory that cannot be tiered (mlocked, hugetlbfs, guest RAM QEMU pins).",
        |t| Some(t.pinned_bytes as f64),
    ),
    ("tierd_tenant_active_bytes", "gauge", "Memory the tenant touched per interval, averaged over the window.", |t| {
        t.active_bytes.map(|v| v as f64)
    }),
    (
        "tierd_tenant_touched_in_window_bytes",
        "gauge",
        "Memory the tenant touched at any time within the window.",
        |t| t.touched_in_window_bytes.map(|v| v as f64),
    ),
    ("tierd_tenant_active_ci_bytes", "gauge", "95% confidence half-width of the active estimate.", |t| {
        t.active_ci_bytes.map(|v| v as f64)
    }),
    (
        "tierd_tenant_touched_in_window_ci_bytes",
        "gauge",
        "95% confidence half-width of the memory touched within the window.",
        |t| t.touched_in_window_ci_bytes.map(|v| v as f64),
    ),
    (
        "tierd_tenant_hot_bytes",
        "gauge",
        "The tenant's hot set in the policy's fault curve (touched every interval).",
        |t| t.hot_bytes.map(|v| v as f64),
    ),
    ("tierd_tenant_warm_bytes", "gauge", "The warm part of its fault curve (reused within the window).", |t| {
        t.warm_bytes.map(|v| v as f64)
    }),
    (
        "tierd_tenant_predicted_useful_ratio",
        "gauge",
        "Share of its work the policy predicts it gets done under its quota.",
        |t| t.predicted_useful,
    ),
    ("tierd_tenant_stall_ratio", "gauge", "Share of its activity lately that was waiting for memory.", |t| {
        Some(t.stall_share)
    }),
    (
        "tierd_tenant_waiting_at_limit_seconds",
        "gauge",
        "How long a task of the tenant has waited at its memory limit, reclaim making no progress (absent: none).",
        |t| t.waiting_at_limit_secs,
    ),
    (
        "tierd_tenant_memory_pressure_some_ratio",
        "gauge",
        "Share of the last interval in which some of the tenant's tasks stalled on memory (cgroup v2 PSI; absent on v1).",
        |t| t.memory_pressure_some,
    ),
    (
        "tierd_tenant_memory_pressure_full_ratio",
        "gauge",
        "Share of the last interval in which all of the tenant's tasks stalled on memory (cgroup v2 PSI).",
        |t| t.memory_pressure_full,
    ),
    ("tierd_tenant_quota_bytes", "gauge", "The tenant's DRAM quota (absent: unlimited).", |t| {
        t.quota_bytes.map(|v| v as f64)
    }),
    ("tierd_tenant_reserve_bytes", "gauge", "DRAM guaranteed to the tenant.", |t| Some(t.reserve_bytes as f64)),
    ("tierd_tenant_limit_bytes", "gauge", "Most DRAM the tenant may hold (absent: no cap).", |t| {
        t.limit_bytes.map(|v| v as f64)
    }),
    ("tierd_tenant_tier_read_bytes_per_second", "gauge", "Pages the tenant waited for from the tier.", |t| {
        Some(t.tier_read_bytes_per_sec)
    }),
    (
        "tierd_tenant_tier_write_bytes_per_second",
        "gauge",
        "Growth of the tenant's tier footprint (a lower bound of its tier writes).",
        |t| Some(t.tier_write_bytes_per_sec),
    ),
    ("tierd_tenant_major_faults_per_second", "gauge", "Major faults per second.", |t| Some(t.major_faults_per_sec)),
    ("tierd_tenant_major_faults_total", "counter", "Major faults since the tenant started.", |t| {
        Some(t.major_faults as f64)
    }),
    ("tierd_tenant_oom_kills_total", "counter", "Processes of the tenant the kernel's OOM killer ended.", |t| {
        Some(t.oom_kills as f64)
    }),
    ("tierd_tenant_guest_ram_bytes", "gauge", "A VM tenant's guest RAM (QEMU -m).", |t| {
        t.guest.as_ref().map(|g| g.ram_bytes as f64)
    }),
    ("tierd_tenant_guest_ram_dram_bytes", "gauge", "A VM tenant's guest RAM in DRAM.", |t| {
        t.guest.as_ref().filter(|g| g.ram_found).map(|g| g.ram_dram_bytes as f64)
    }),
    ("tierd_tenant_guest_ram_tier_bytes", "gauge", "A VM tenant's guest RAM on the tier.", |t| {
        t.guest.as_ref().filter(|g| g.ram_found).map(|g| g.ram_tier_bytes as f64)
    }),
];

/// Renders the `/metrics` page.
pub fn render(s: &Status) -> String {
    let mut w = Writer { out: String::with_capacity(4096 + s.tenants.len() * 2048) };
    let b = |v: u64| v as f64;
    w.gauge("tierd_dram_budget_bytes", "DRAM all tenants may use together.", b(s.dram_budget_bytes));
    w.gauge("tierd_dram_used_bytes", "DRAM the tenants use now.", b(s.dram_used_bytes));
    w.gauge("tierd_dram_free_bytes", "DRAM budget not in use.", b(s.dram_free_bytes));
    w.gauge("tierd_active_bytes", "Memory touched within the activeness window, all tenants.", b(s.active_bytes));
    let ratio = if s.dram_budget_bytes == 0 { 0.0 } else { s.active_bytes as f64 / s.dram_budget_bytes as f64 };
    w.gauge("tierd_active_dram_ratio", "Active memory as a fraction of the DRAM budget.", ratio);
    w.family("tierd_health_status", "gauge", "Health of each check: 0 green, 1 yellow, 2 red.");
    for c in &s.health {
        w.sample("tierd_health_status", &[("check", &c.name)], colour_value(c.colour) as f64);
    }
    w.gauge("tierd_capacity_bytes", "DRAM + ratio x DRAM, limited by the tier's size.", b(s.capacity_bytes));
    w.gauge("tierd_committed_bytes", "Memory committed to tenants.", b(s.committed_bytes));
    w.gauge("tierd_overcommit_ratio", "Sum of tenant sizes over the DRAM budget.", s.overcommit);
    tier(&mut w, &s.tier);
    w.gauge(
        "tierd_promotions_per_second",
        "Pages read back from the tier per second (tier-1 faults, prefetch).",
        s.promotions_per_sec,
    );
    w.gauge("tierd_demotions_per_second", "Pages written to the tier per second.", s.demotions_per_sec);
    w.gauge("tierd_process_cpu_ratio", "tierd's own CPU use, in cores.", s.tierd_cpu_percent / 100.0);
    w.family(
        "tierd_moving_cpu_seconds_total",
        "counter",
        "CPU seconds tierd spent moving pages (the kernel's paging work in its threads).",
    );
    w.sample("tierd_moving_cpu_seconds_total", &[], s.moving_cpu_seconds);
    w.gauge("tierd_process_resident_memory_bytes", "tierd's own resident memory.", b(s.tierd_rss_bytes));
    w.gauge("tierd_uptime_seconds", "Seconds since tierd started.", s.uptime_secs);
    w.gauge(
        "tierd_engine_busy_seconds",
        "How long one piece of work (a pass, a request) has held tierd's engine; 0 when free.",
        s.busy.as_ref().map_or(0.0, |b| b.for_secs),
    );

    tenants(&mut w, &s.tenants);
    w.out
}

/// The tier's size, traffic, errors, latency and wear.
fn tier(w: &mut Writer, t: &TierStatus) {
    let b = |v: u64| v as f64;
    w.gauge("tierd_tier_size_bytes", "Size of the tier (swap area).", b(t.size_bytes));
    w.gauge("tierd_tier_used_bytes", "Bytes on the tier.", b(t.used_bytes));
    w.gauge("tierd_tier_read_bytes_per_second", "Tier reads over the last interval.", t.read_bytes_per_sec);
    w.gauge("tierd_tier_write_bytes_per_second", "Tier writes over the last interval.", t.write_bytes_per_sec);
    w.family(
        "tierd_tier_io_errors_total",
        "counter",
        "Swap I/O the tier device failed (the kernel's log; a lower bound).",
    );
    w.sample("tierd_tier_io_errors_total", &[("op", "read")], t.read_errors as f64);
    w.sample("tierd_tier_io_errors_total", &[("op", "write")], t.write_errors as f64);
    w.maybe(
        "tierd_tier_read_latency_seconds",
        "gauge",
        "Average read latency of the tier device over the last interval (absent without reads).",
        t.read_latency_us.map(|us| us / 1e6),
    );
    w.maybe(
        "tierd_tier_read_latency_p99_seconds",
        "gauge",
        "p99 of sampled tier reads over the last 10 s, submission to completion (absent with fewer than 100).",
        t.read_latency_p99_us.map(|us| us / 1e6),
    );
    if let Some(h) = &t.read_latency_histogram {
        w.histogram(
            "tierd_tier_sampled_read_latency_seconds",
            "Sampled tier reads (one page in 8) since start, submission to completion.",
            h,
        );
    }
    if let Some(wear) = &t.wear {
        let help = "Bytes written to the tier device since tierd started.";
        w.maybe("tierd_tier_written_bytes_total", "counter", help, Some(wear.written_bytes as f64));
        w.maybe(
            "tierd_tier_writes_per_day_bytes",
            "gauge",
            "The last hour's tier writes as bytes a day (absent until an hour is measured).",
            wear.per_day_bytes,
        );
        w.maybe(
            "tierd_tier_rated_writes_per_day_bytes",
            "gauge",
            "What the tier's drive is rated to take a day: DWPD x its size (absent unless tier.dwpd is set).",
            wear.rated_per_day_bytes,
        );
        let drive = wear.drive.as_ref();
        let help = "The tier's NVMe drive's rated life used, by its own health log (1 = all; absent unless NVMe).";
        w.maybe("tierd_tier_drive_life_used_ratio", "gauge", help, drive.map(|d| d.percentage_used as f64 / 100.0));
        let help = "The critical warning bits of the tier's NVMe drive's health log (0: none).";
        w.maybe("tierd_tier_drive_critical_warning", "gauge", help, drive.map(|d| d.critical_warning as f64));
        let help = "Media and data integrity errors the tier's NVMe drive has counted in its life.";
        w.maybe("tierd_tier_drive_media_errors_total", "counter", help, drive.map(|d| d.media_errors as f64));
    }
    w.gauge("tierd_tier_utilization_ratio", "Fraction of the last interval the tier device was busy.", t.utilization);
}

/// One sample per running tenant of each tenant family, its errors and its last decision.
fn tenants(w: &mut Writer, all: &[TenantStatus]) {
    let running: Vec<&TenantStatus> = all.iter().filter(|t| t.state == "running").collect();
    w.gauge("tierd_tenants", "Running tenants.", running.len() as f64);
    for (name, kind, help, value) in TENANT_FAMILIES {
        w.family(name, kind, help);
        for t in &running {
            if let Some(v) = value(t) {
                w.sample(name, &[("tenant", &t.name)], v);
            }
        }
    }
    w.family("tierd_tenant_errors_total", "counter", "Failed syscalls and cgroup writes, by operation.");
    for t in &running {
        for (op, n) in &t.errors {
            w.sample("tierd_tenant_errors_total", &[("tenant", &t.name), ("op", op)], *n as f64);
        }
    }
    w.family("tierd_tenant_decision_info", "gauge", "The reason of the last quota decision, as a label.");
    for t in &running {
        w.sample("tierd_tenant_decision_info", &[("tenant", &t.name), ("reason", &t.reason)], 1.0);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tierd_core::health::Check;

    fn tenant(name: &str, state: &str) -> TenantStatus {
        TenantStatus {
            name: name.into(),
            state: state.into(),
            exit_code: None,
            pids: vec![1],
            command: vec![],
            size_bytes: 300,
            declared_size_bytes: None,
            dram_bytes: 200,
            tier_bytes: 100,
            huge_bytes: 0,
            pinned_bytes: 0,
            quota_bytes: Some(250),
            reserve_bytes: 0,
            no_tier: false,
            charged_elsewhere_bytes: 0,
            adopted_cgroup: None,
            limit_bytes: None,
            shares: 100,
            active_bytes: Some(150),
            active_ci_bytes: Some(5),
            touched_in_window_bytes: None,
            touched_in_window_ci_bytes: None,
            tracker_sample_pages: 0,
            tracker_seconds: 0.0,
            major_faults: 42,
            oom_kills: 1,
            major_faults_per_sec: 2.5,
            tier_read_bytes_per_sec: 10240.0,
            tier_write_bytes_per_sec: 0.0,
            memory_pressure_some: None,
            memory_pressure_full: None,
            cpu_cores: 0.0,
            at_rest_secs: None,
            stall_share: 0.25,
            waiting_at_limit_secs: None,
            hot_bytes: Some(120),
            warm_bytes: Some(30),
            steep: Some(true),
            predicted_useful: Some(0.9),
            reason: "active 150 B \"hot\"\nfine".into(),
            errors: [("pageout".to_string(), 3)].into(),
            vm: false,
            guest: None,
        }
    }

    /// A status with one running and one exited tenant (also for other modules' tests).
    pub(crate) fn status() -> Status {
        Status {
            version: "0".into(),
            pid: 1,
            policy: "tierd".into(),
            tracker: "sampling".into(),
            cgroup_version: "v1".into(),
            cgroup_path: "/x".into(),
            dram_budget_bytes: 1000,
            dram_used_bytes: 600,
            dram_free_bytes: 400,
            ratio: 1.0,
            capacity_bytes: 2000,
            committed_bytes: 900,
            overcommit: 0.9,
            active_bytes: 810,
            active_health: "red".into(),
            tier: TierStatus { read_latency_us: Some(250.0), write_errors: 7, ..TierStatus::default() },
            tierd_cpu_percent: 0.5,
            moving_cpu_seconds: 2.5,
            tierd_rss_bytes: 4 << 20,
            promotions_per_sec: 1.0,
            demotions_per_sec: 2.0,
            health: vec![Check {
                name: "active_memory".into(),
                colour: Colour::Red,
                message: String::new(),
                advice: None,
            }],
            http_address: None,
            uptime_secs: 3.0,
            busy: None,
            tenants: vec![tenant("db", "running"), tenant("gone", "exited")],
        }
    }

    /// Every non-comment line is `name{labels} value` with a known family.
    #[test]
    fn the_page_is_well_formed_text_exposition() {
        let page = render(&status());
        let mut families = std::collections::HashSet::new();
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut it = rest.split(' ');
                families.insert(it.next().unwrap().to_string());
                assert!(matches!(it.next(), Some("gauge" | "counter" | "histogram")), "{line}");
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
            assert!(families.contains(name) || families.contains(family), "sample before its TYPE: {line}");
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
        assert!(page.contains("tierd_active_dram_ratio 0.81\n"), "{page}");
        assert!(page.contains("tierd_health_status{check=\"active_memory\"} 2\n"));
        assert!(page.contains("tierd_tier_read_latency_seconds 0.00025\n"));
        assert!(page.contains("tierd_tier_io_errors_total{op=\"write\"} 7\n"), "{page}");
        assert!(page.contains("tierd_tier_io_errors_total{op=\"read\"} 0\n"), "{page}");
        assert!(page.contains("tierd_tenant_tier_read_bytes_per_second{tenant=\"db\"} 10240\n"));
        assert!(page.contains("tierd_tenant_errors_total{tenant=\"db\",op=\"pageout\"} 3\n"));
        assert!(page.contains("tierd_tenant_oom_kills_total{tenant=\"db\"} 1\n"), "{page}");
        assert!(page.contains("tierd_tenants 1\n"));
        assert!(page.contains("# TYPE tierd_moving_cpu_seconds_total counter\ntierd_moving_cpu_seconds_total 2.5\n"));
        assert!(!page.contains("tenant=\"gone\""), "exited tenants have no samples");
    }

    #[test]
    fn sampled_read_latency_is_a_histogram_and_a_p99() {
        let mut s = status();
        assert!(!render(&s).contains("tierd_tier_sampled_read_latency_seconds_bucket"), "untraced: no histogram");
        let mut tail = tierd_core::read_tail::ReadTail::default();
        tail.add(0.0, &[80, 700, 700, 30_000]);
        s.tier.read_latency_histogram = Some(tail.histogram());
        s.tier.read_latency_p99_us = Some(700.0);
        let page = render(&s);
        assert!(page.contains("tierd_tier_read_latency_p99_seconds 0.0007\n"), "{page}");
        assert!(page.contains("tierd_tier_sampled_read_latency_seconds_bucket{le=\"0.0001\"} 1\n"), "{page}");
        assert!(page.contains("tierd_tier_sampled_read_latency_seconds_bucket{le=\"0.001\"} 3\n"), "{page}");
        assert!(page.contains("tierd_tier_sampled_read_latency_seconds_bucket{le=\"+Inf\"} 4\n"), "{page}");
        assert!(page.contains("tierd_tier_sampled_read_latency_seconds_count 4\n"), "{page}");
        assert!(page.contains("tierd_tier_sampled_read_latency_seconds_sum 0.03148\n"), "{page}");
    }

    #[test]
    fn label_values_are_escaped() {
        let page = render(&status());
        assert!(page.contains(r#"reason="active 150 B \"hot\"\nfine"} 1"#), "{page}");
    }

    #[test]
    fn tier_wear_is_exposed_once_measured_and_rated() {
        let mut s = status();
        s.tier.wear = Some(tierd_core::wear::Wear { written_bytes: 5 << 30, ..Default::default() });
        let page = render(&s);
        assert!(page.contains("tierd_tier_written_bytes_total 5368709120\n"), "{page}");
        assert!(!page.lines().any(|l| l.starts_with("tierd_tier_writes_per_day_bytes ")), "not before an hour");
        assert!(!page.lines().any(|l| l.starts_with("tierd_tier_rated_writes_per_day_bytes ")), "unrated");
        s.tier.wear = Some(tierd_core::wear::Wear {
            per_day_bytes: Some(2e12),
            rated_per_day_bytes: Some(1e12),
            ..Default::default()
        });
        let page = render(&s);
        assert!(page.contains("tierd_tier_writes_per_day_bytes 2000000000000\n"), "{page}");
        assert!(page.contains("tierd_tier_rated_writes_per_day_bytes 1000000000000\n"), "{page}");
        assert!(!page.lines().any(|l| l.starts_with("tierd_tier_drive_")), "no NVMe health log, no drive figures");
        let drive = tierd_core::wear::DriveHealth {
            percentage_used: 12,
            critical_warning: 4,
            media_errors: 3,
            ..Default::default()
        };
        s.tier.wear = Some(tierd_core::wear::Wear { drive: Some(drive), ..Default::default() });
        let page = render(&s);
        assert!(page.contains("tierd_tier_drive_life_used_ratio 0.12\n"), "{page}");
        assert!(page.contains("tierd_tier_drive_critical_warning 4\n"), "{page}");
        assert!(page.contains("tierd_tier_drive_media_errors_total 3\n"), "{page}");
    }

    #[test]
    fn no_latency_sample_without_reads() {
        let mut s = status();
        s.tier.read_latency_us = None;
        let page = render(&s);
        assert!(!page.lines().any(|l| l.starts_with("tierd_tier_read_latency_seconds ")));
    }
}
