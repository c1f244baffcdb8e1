//! `tierctl top`: a live view like esxtop's memory screen. The host summary and health
//! on top, one row per tenant below, sortable by key. Plain ANSI through crossterm, so
//! it works over SSH; the terminal is restored however it ends (q, Ctrl-C, an error).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use crossterm::style::Stylize;
use crossterm::{cursor, execute, terminal};
use tierd_core::health::Colour;
use tierd_core::size::human;

use crate::api::{Request, Status, TenantStatus, call};

/// The column tenants are sorted by (largest first, except by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortBy {
    Name,
    Dram,
    Tier,
    Active,
    Quota,
    Read,
    Write,
    Faults,
}

impl SortBy {
    /// The key that selects it in the live view.
    fn from_key(c: char) -> Option<SortBy> {
        Some(match c {
            'n' => SortBy::Name,
            'd' => SortBy::Dram,
            't' => SortBy::Tier,
            'a' => SortBy::Active,
            'u' => SortBy::Quota,
            'r' => SortBy::Read,
            'w' => SortBy::Write,
            'f' => SortBy::Faults,
            _ => return None,
        })
    }

    fn key(self, t: &TenantStatus) -> f64 {
        match self {
            SortBy::Name => 0.0,
            SortBy::Dram => t.dram_bytes as f64,
            SortBy::Tier => t.tier_bytes as f64,
            SortBy::Active => t.active_bytes.unwrap_or(0) as f64,
            SortBy::Quota => t.quota_bytes.map_or(f64::MAX, |q| q as f64),
            SortBy::Read => t.tier_read_bytes_per_sec,
            SortBy::Write => t.tier_write_bytes_per_sec,
            SortBy::Faults => t.major_faults_per_sec,
        }
    }
}

/// `s` in its health colour when `colour` (a terminal), else as is.
pub fn paint(s: String, c: Colour, colour: bool) -> String {
    if !colour {
        return s;
    }
    match c {
        Colour::Green => s.green().to_string(),
        Colour::Yellow => s.yellow().to_string(),
        Colour::Red => s.red().bold().to_string(),
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 * 100.0 / b as f64 }
}

/// The screen as lines, `width` columns wide (reasons are cut to fit).
pub fn render(s: &Status, sort: SortBy, width: usize, colour: bool) -> Vec<String> {
    let mut out = host_lines(s, colour);
    out.push(String::new());
    out.extend(tenant_table(s, sort, width, colour));
    out
}

/// The header: tierd, DRAM, the tier, and every check not green.
fn host_lines(s: &Status, colour: bool) -> Vec<String> {
    let mut out = Vec::new();
    let up = s.uptime_secs as u64;
    out.push(format!(
        "tierd {}  policy {}  up {}h{:02}m  tenants {}  overcommit {:.2}x  tierd cpu {:.1}% rss {}",
        s.version,
        s.policy,
        up / 3600,
        up / 60 % 60,
        s.tenants.iter().filter(|t| t.state == "running").count(),
        s.overcommit,
        s.tierd_cpu_percent,
        human(s.tierd_rss_bytes)
    ));
    let active_colour = tierd_core::health::active_memory(s.active_bytes, s.dram_budget_bytes);
    out.push(format!(
        "DRAM   budget {}  used {}  free {}  active {}",
        human(s.dram_budget_bytes),
        human(s.dram_used_bytes),
        human(s.dram_free_bytes),
        paint(
            format!(
                "{} ({:.0}% of DRAM, {active_colour})",
                human(s.active_bytes),
                pct(s.active_bytes, s.dram_budget_bytes)
            ),
            active_colour,
            colour
        )
    ));
    use tierd_core::health::{TierReadLatency, tier_read_latency};
    let judged = TierReadLatency::judged(s.tier.read_latency_p99_us, s.tier.read_latency_us);
    let latency = match judged.map(tier_read_latency) {
        Some(c) => paint(crate::ctl::show::latency(&s.tier), c, colour),
        None => "- (no reads)".into(),
    };
    out.push(format!(
        "TIER   size {}  used {} ({:.0}%)  read {}/s  write {}/s  latency {}  promotions {:.0}/s  demotions {:.0}/s",
        human(s.tier.size_bytes),
        human(s.tier.used_bytes),
        pct(s.tier.used_bytes, s.tier.size_bytes),
        human(s.tier.read_bytes_per_sec as u64),
        human(s.tier.write_bytes_per_sec as u64),
        latency,
        s.promotions_per_sec,
        s.demotions_per_sec
    ));
    for c in s.health.iter().filter(|c| c.colour != Colour::Green) {
        let line = format!("{:<6} {}: {}", c.colour, c.message, c.advice.as_deref().unwrap_or(""));
        out.push(paint(line, c.colour, colour));
    }
    out
}

/// The running tenants, one line each, sorted by `sort` (marked in the heading), each
/// line's reason cut to `width`.
fn tenant_table(s: &Status, sort: SortBy, width: usize, colour: bool) -> Vec<String> {
    let heads = [
        ("TENANT", SortBy::Name),
        ("DRAM", SortBy::Dram),
        ("TIER", SortBy::Tier),
        ("ACTIVE", SortBy::Active),
        ("QUOTA", SortBy::Quota),
        ("RD/s", SortBy::Read),
        ("WR/s", SortBy::Write),
        ("MAJF/s", SortBy::Faults),
    ];
    let mark = |h: &str, by: SortBy| if by == sort { format!("{h}*") } else { h.to_string() };
    let mut head = format!("{:<16}", mark(heads[0].0, heads[0].1));
    for (h, by) in &heads[1..] {
        head += &format!(" {:>10}", mark(h, *by));
    }
    head += "  REASON";
    let mut out = vec![if colour { head.reverse().to_string() } else { head }];
    let mut rows: Vec<&TenantStatus> = s.tenants.iter().filter(|t| t.state == "running").collect();
    match sort {
        SortBy::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        by => rows.sort_by(|a, b| by.key(b).total_cmp(&by.key(a)).then(a.name.cmp(&b.name))),
    }
    for t in rows {
        let mut line = format!(
            "{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10.0}  ",
            t.name,
            human(t.dram_bytes),
            human(t.tier_bytes),
            t.active_bytes.map_or("-".into(), human),
            t.quota_bytes.map_or("unlimited".into(), human),
            human(t.tier_read_bytes_per_sec as u64),
            human(t.tier_write_bytes_per_sec as u64),
            t.major_faults_per_sec
        );
        let room = width.saturating_sub(line.chars().count());
        line.extend(t.reason.chars().take(room));
        out.push(line);
    }
    out
}

const HELP: &str = "sort: n name, d DRAM, t tier, a active, u quota, r reads, w writes, f faults · q quit";

/// Prints `iterations` screens as plain text, `every` apart (for scripts and logs).
pub fn batch(socket: &Path, sort: SortBy, every: Duration, iterations: u32) -> anyhow::Result<()> {
    for i in 0..iterations.max(1) {
        if i > 0 {
            std::thread::sleep(every);
            println!();
        }
        let s: Status = serde_json::from_value(call(socket, &Request::Status, Duration::from_secs(30))?)?;
        for line in render(&s, sort, 200, false) {
            println!("{line}");
        }
    }
    Ok(())
}

/// Restores the terminal when the live view ends, however it ends.
struct Screen;

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        terminal::enable_raw_mode()?;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(Screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// The live view: redraws every `every`, or at once on a key.
pub fn live(socket: &Path, mut sort: SortBy, every: Duration) -> anyhow::Result<()> {
    let _screen = Screen::enter()?;
    let mut out = std::io::stdout();
    let mut status: Option<Status> = None;
    let mut error = String::new();
    let mut next = Instant::now();
    loop {
        if Instant::now() >= next {
            match call(socket, &Request::Status, Duration::from_secs(10)) {
                Ok(v) => {
                    status = serde_json::from_value(v).ok();
                    error.clear();
                }
                Err(e) => error = format!("{e}"),
            }
            next = Instant::now() + every;
        }
        let (w, h) = terminal::size().unwrap_or((120, 40));
        execute!(out, cursor::MoveTo(0, 0), terminal::Clear(terminal::ClearType::All))?;
        let mut lines = status.as_ref().map(|s| render(s, sort, w as usize, true)).unwrap_or_default();
        if !error.is_empty() {
            lines.insert(0, error.clone().red().to_string());
        }
        lines.truncate((h as usize).saturating_sub(1));
        for (i, l) in lines.iter().enumerate() {
            execute!(out, cursor::MoveTo(0, i as u16))?;
            write!(out, "{l}")?;
        }
        execute!(out, cursor::MoveTo(0, h.saturating_sub(1)))?;
        write!(out, "{}", HELP.dim())?;
        out.flush()?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(KeyEvent { code: KeyCode::Char('c'), modifiers, .. })
                    if modifiers.contains(KeyModifiers::CONTROL) =>
                {
                    return Ok(());
                }
                Event::Key(KeyEvent { code: KeyCode::Char('q') | KeyCode::Esc, .. }) => return Ok(()),
                Event::Key(KeyEvent { code: KeyCode::Char(c), .. }) => {
                    if let Some(by) = SortBy::from_key(c) {
                        sort = by;
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierd_core::health::Check;

    fn tenant(name: &str, dram: u64, faults: f64) -> TenantStatus {
        serde_json::from_value(serde_json::json!({
            "name": name, "state": "running", "exit_code": null, "pids": [1], "command": [],
            "size_bytes": dram * 2, "declared_size_bytes": null, "dram_bytes": dram, "tier_bytes": dram,
            "huge_bytes": 0, "pinned_bytes": 0, "quota_bytes": dram, "reserve_bytes": 0, "limit_bytes": null,
            "shares": 100, "active_bytes": dram / 2, "active_ci_bytes": 0, "major_faults": 0,
            "major_faults_per_sec": faults, "reason": "a long reason that goes on and on", "errors": {}, "vm": false
        }))
        .unwrap()
    }

    fn status() -> Status {
        serde_json::from_value(serde_json::json!({
            "version": "0.1.0", "pid": 1, "policy": "tierd", "cgroup_version": "v1", "cgroup_path": "/x",
            "dram_budget_bytes": 1u64 << 30, "dram_used_bytes": 0, "dram_free_bytes": 0, "ratio": 1.0,
            "capacity_bytes": 0, "committed_bytes": 0, "overcommit": 2.0, "active_bytes": 900u64 << 20,
            "active_health": "red", "tier": {"path": "/t", "swap_path": "/t", "backing": "file", "size_bytes": 0,
            "used_bytes": 0, "read_bytes_per_sec": 0.0, "write_bytes_per_sec": 0.0, "read_latency_us": null,
            "read_latency_health": null}, "tierd_cpu_percent": 0.1, "tierd_rss_bytes": 0,
            "tenants": [], "uptime_secs": 3725.0
        }))
        .unwrap()
    }

    #[test]
    fn rows_sort_by_the_chosen_column() {
        let mut s = status();
        s.tenants = vec![tenant("a", 10 << 20, 5.0), tenant("b", 30 << 20, 1.0), tenant("c", 20 << 20, 9.0)];
        let names = |lines: Vec<String>| -> Vec<char> {
            let at = lines.iter().position(|l| l.starts_with("TENANT")).unwrap();
            lines[at + 1..].iter().map(|l| l.chars().next().unwrap()).collect()
        };
        assert_eq!(names(render(&s, SortBy::Dram, 200, false)), vec!['b', 'c', 'a']);
        assert_eq!(names(render(&s, SortBy::Faults, 200, false)), vec!['c', 'a', 'b']);
        assert_eq!(names(render(&s, SortBy::Name, 200, false)), vec!['a', 'b', 'c']);
        let head = render(&s, SortBy::Faults, 200, false).into_iter().find(|l| l.starts_with("TENANT")).unwrap();
        assert!(head.contains("MAJF/s*"), "the sorted column is marked: {head}");
    }

    #[test]
    fn the_summary_shows_health_and_advice_and_rows_fit_the_width() {
        let mut s = status();
        s.health = vec![Check {
            name: "active_memory".into(),
            colour: Colour::Red,
            message: "active memory 88% of DRAM".into(),
            advice: Some("add DRAM".into()),
        }];
        s.tenants = vec![tenant("a", 10 << 20, 5.0)];
        let lines = render(&s, SortBy::Dram, 100, false);
        assert!(lines[0].contains("up 1h02m") && lines[0].contains("tenants 1"), "{}", lines[0]);
        assert!(lines[1].contains("88% of DRAM, red"), "{}", lines[1]);
        assert!(lines.iter().any(|l| l.starts_with("red") && l.contains("add DRAM")));
        assert!(lines.last().unwrap().chars().count() <= 100);
        let coloured = render(&s, SortBy::Dram, 100, true);
        assert!(coloured[1].contains("\u{1b}["), "colours on a terminal");
    }
}
