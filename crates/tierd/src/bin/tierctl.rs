//! `tierctl`: the command line for a running tierd.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tierd::api::{DrainReport, Event, MoveReport, Request, SOCKET_ENV, Status, call};
use tierd::top::SortBy;
use tierd_core::health::{Check, Colour};
use tierd_core::size::human;
use tierd_core::tenant::{DEFAULT_SHARES, TenantSpec};
use tierd_core::{ByteSize, TenantName};

/// Control a running tierd: start and adopt tenants, move their memory, and see what
/// tierd measures and decides.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// tierd's API socket.
    #[arg(long, env = SOCKET_ENV, default_value = tierd_core::config::DEFAULT_SOCKET, global = true)]
    socket: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Settings shared by `run` and `attach`.
#[derive(clap::Args, Debug)]
struct SpecArgs {
    /// Declared memory size, counted by admission (e.g. 2G).
    #[arg(long)]
    size: Option<ByteSize>,
    /// DRAM guaranteed to the tenant.
    #[arg(long)]
    reserve: Option<ByteSize>,
    /// Most DRAM the tenant may hold.
    #[arg(long)]
    limit: Option<ByteSize>,
    /// Weight when DRAM is short (default 100).
    #[arg(long, default_value_t = DEFAULT_SHARES)]
    shares: u32,
    /// The tenant is a virtual machine (a QEMU process).
    #[arg(long)]
    vm: bool,
    /// Keep the tenant wholly in DRAM: never demoted, swap off in its cgroup, its
    /// whole --size set aside (and not backing any tier).
    #[arg(long, requires = "size")]
    no_tier: bool,
}

impl SpecArgs {
    fn spec(&self, name: TenantName) -> TenantSpec {
        TenantSpec {
            name,
            size: self.size.map(|s| s.0),
            reserve: self.reserve.map_or(0, |s| s.0),
            limit: self.limit.map(|s| s.0),
            shares: self.shares,
            vm: self.vm,
            no_tier: self.no_tier,
        }
    }
}

#[derive(Subcommand, Debug)]
enum TierCmd {
    /// Read everything on the tier back into DRAM and turn the tier off, to replace its
    /// device. Refused, with the numbers, when it would not fit in DRAM. Tenants keep
    /// running; tierd runs on without a tier until it is restarted with one.
    Drain,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Host and tenant status.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Start a program as a tenant and print its name and PID once it runs.
    Run {
        /// Tenant name (default: the program's name and a number).
        #[arg(long)]
        name: Option<TenantName>,
        #[command(flatten)]
        spec: SpecArgs,
        /// The program and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Adopt a running process (it must live in tierd's cgroup or below).
    Attach {
        pid: u32,
        #[arg(long)]
        name: TenantName,
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Stop managing a tenant; its processes keep running without limits.
    Detach { name: TenantName },
    /// Signal a tenant's processes (default TERM).
    Stop {
        name: TenantName,
        #[arg(long, default_value = "TERM")]
        signal: String,
    },
    /// Forget an exited tenant.
    Rm { name: TenantName },
    /// Page a tenant's memory out to the tier now.
    Demote {
        name: TenantName,
        /// At most this much (default: all resident anonymous memory).
        #[arg(long)]
        bytes: Option<ByteSize>,
    },
    /// Read a tenant's memory back from the tier now, as much as its quota has room for.
    Prefetch {
        name: TenantName,
        /// At most this much (default: the room left under the tenant's quota).
        #[arg(long)]
        bytes: Option<ByteSize>,
    },
    /// Rebuild a tenant's huge pages now.
    Collapse { name: TenantName },
    /// Recent decisions about a tenant, with their reasons.
    Explain { name: TenantName },
    /// A tenant's heat map: per 2 MiB region, how long since it was last seen touched,
    /// what it holds in DRAM and on the tier, and the samples that say it is cold.
    Regions {
        name: TenantName,
        #[arg(long)]
        json: bool,
    },
    /// A tenant's fault curve as the policy sees it: how often it would read from the
    /// tier, and the share of its work it would get done, for each amount of DRAM.
    Curve {
        name: TenantName,
        #[arg(long)]
        json: bool,
    },
    /// What if: the policy's allocation on another DRAM budget, or with more tenants
    /// like running ones, from their measured curves: each tenant's quota, the share of
    /// its work it would get done, and the host's health colour.
    Plan {
        /// The DRAM budget to plan for (default: the one in force), e.g. 8G.
        #[arg(long)]
        budget: Option<ByteSize>,
        /// N more tenants like NAME, written NxNAME (e.g. 3xweb); repeatable.
        #[arg(long, value_name = "NxNAME")]
        add: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// The tier device.
    Tier {
        #[command(subcommand)]
        cmd: TierCmd,
    },
    /// Recent events: decisions, warnings, tenant starts and exits.
    Events,
    /// Health checks, one per line, with what to do about a yellow or red. Exit code 0
    /// when all are green, 1 with a yellow, 2 with a red (for scripts and monitors).
    Health {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// TLB coverage for 4 KiB, 2 MiB and 1 GiB pages: entries × page size, and the
    /// fraction of each working set it covers under uniform access (a simple model of
    /// one unified TLB; `tierd-bench latency` measures the real effect). Needs no tierd.
    Tlb {
        /// TLB sizes in entries, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "64,256,2048")]
        entries: Vec<u64>,
        /// Working-set sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "8G,64G")]
        working_set: Vec<ByteSize>,
    },
    /// What this kernel offers tierd (cgroup version and delegation, process_madvise,
    /// PAGEMAP_SCAN, MADV_COLLAPSE, THP, DAMON, MGLRU, PSI, zswap), how tierd works on
    /// it, and what could be enabled. Needs no tierd; exit code 1 when tierd cannot run.
    Doctor {
        /// Print JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
    /// Live view of the host and its tenants, like esxtop's memory screen.
    Top {
        /// Column to sort tenants by (in the view: n d t a u r w f).
        #[arg(long, value_enum, default_value = "dram")]
        sort: SortBy,
        /// Seconds between refreshes.
        #[arg(long, short = 'd', default_value_t = 2.0)]
        delay: f64,
        /// Print plain text screens instead of the live view (for scripts and logs).
        #[arg(long, short)]
        batch: bool,
        /// With --batch: how many screens.
        #[arg(long, short = 'n', default_value_t = 1)]
        iterations: u32,
    },
}

fn main() {
    tierd_sys::process::default_sigpipe();
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("tierctl: {e:#}");
        std::process::exit(1);
    }
}

fn signal_number(s: &str) -> anyhow::Result<i32> {
    let name = s.trim_start_matches("SIG").to_ascii_uppercase();
    Ok(match name.as_str() {
        "TERM" => 15,
        "KILL" => 9,
        "INT" => 2,
        "HUP" => 1,
        "USR1" => 10,
        "USR2" => 12,
        "STOP" => 19,
        "CONT" => 18,
        n => n.parse().with_context(|| {
            format!("unknown signal `{s}`: use TERM, KILL, INT, HUP, USR1, USR2, STOP, CONT or a number")
        })?,
    })
}

fn default_name(command: &[String], taken: &[String]) -> anyhow::Result<TenantName> {
    let base: String = std::path::Path::new(&command[0])
        .file_name()
        .map(|f| f.to_string_lossy().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')).collect())
        .unwrap_or_default();
    let base = if base.is_empty() { "tenant".to_string() } else { base.chars().take(48).collect() };
    for i in 1.. {
        let candidate = format!("{base}-{i}");
        if !taken.contains(&candidate) {
            return Ok(TenantName::new(&candidate)?);
        }
    }
    unreachable!()
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let sock = &cli.socket;
    let t = Duration::from_secs(120);
    match cli.cmd {
        Cmd::Tlb { entries, working_set } => {
            if entries.contains(&0) || working_set.iter().any(|w| w.0 == 0) {
                anyhow::bail!("--entries and --working-set must be positive");
            }
            let ws: Vec<u64> = working_set.iter().map(|w| w.0).collect();
            print!("{}", tierd_core::tlb::render(&entries, &ws));
        }
        Cmd::Doctor { json } => {
            let report = tierd::doctor::Report::new(tierd_sys::kernel::KernelFeatures::probe());
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.render());
            }
            if report.blocker.is_some() {
                std::process::exit(1);
            }
        }
        Cmd::Status { json } => {
            let v = call(sock, &Request::Status, t)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print_status(&serde_json::from_value(v)?);
            }
        }
        Cmd::Run { name, spec, command } => {
            let name = match name {
                Some(n) => n,
                None => {
                    let st: Status = serde_json::from_value(call(sock, &Request::Status, t)?)?;
                    default_name(&command, &st.tenants.iter().map(|t| t.name.clone()).collect::<Vec<_>>())?
                }
            };
            let cwd = std::env::current_dir().ok();
            let v = call(sock, &Request::Run { spec: spec.spec(name), argv: command, cwd }, t)?;
            println!("{} {}", v["name"].as_str().unwrap_or("?"), v["pid"]);
        }
        Cmd::Attach { pid, name, spec } => {
            let v = call(sock, &Request::Attach { spec: spec.spec(name), pid }, t)?;
            println!("{} {}", v["name"].as_str().unwrap_or("?"), v["pid"]);
        }
        Cmd::Detach { name } => {
            let v = call(sock, &Request::Detach { name: name.clone() }, t)?;
            println!("detached {name}: pids {}", v["pids"]);
        }
        Cmd::Stop { name, signal } => {
            let v = call(sock, &Request::Stop { name: name.clone(), signal: signal_number(&signal)? }, t)?;
            println!("signalled {name}: pids {}", v["pids"]);
        }
        Cmd::Rm { name } => {
            call(sock, &Request::Remove { name: name.clone() }, t)?;
            println!("removed {name}");
        }
        Cmd::Demote { name, bytes } => {
            let r: MoveReport = serde_json::from_value(call(
                sock,
                &Request::Demote { name: name.clone(), bytes: bytes.map(|b| b.0) },
                t,
            )?)?;
            println!(
                "{name}: demoted {} in {:.3}s ({}/s), {} of DRAM freed, {} calls, {} errors",
                human(r.bytes),
                r.seconds,
                rate(r.bytes, r.seconds),
                human(r.freed_bytes),
                r.calls,
                r.errors
            );
        }
        Cmd::Prefetch { name, bytes } => {
            let req = Request::Prefetch { name: name.clone(), bytes: bytes.map(|b| b.0) };
            let r: MoveReport = serde_json::from_value(call(sock, &req, t)?)?;
            println!(
                "{name}: prefetch of {} started in {:.3}s, {} calls, {} errors",
                human(r.bytes),
                r.seconds,
                r.calls,
                r.errors
            );
        }
        Cmd::Collapse { name } => {
            let r: MoveReport = serde_json::from_value(call(sock, &Request::Collapse { name: name.clone() }, t)?)?;
            println!("{name}: collapsed {} into huge pages in {:.3}s, {} errors", human(r.bytes), r.seconds, r.errors);
        }
        Cmd::Explain { name } => {
            let v: Vec<tierd::tenant::Decision> =
                serde_json::from_value(call(sock, &Request::Explain { name: name.clone() }, t)?)?;
            if v.is_empty() {
                println!("no decisions about {name} yet");
            }
            for d in v {
                println!("{}  {}", clock(d.time), d.message);
            }
        }
        Cmd::Regions { name, json } => {
            let v = call(sock, &Request::Regions { name: name.clone() }, t)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let regions: Vec<tierd_core::snapshot::Region> = serde_json::from_value(v)?;
                print!("{}", regions_table(&regions));
            }
        }
        Cmd::Curve { name, json } => {
            let v = call(sock, &Request::Curve { name }, t)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let c: tierd_core::policy::report::CurveReport = serde_json::from_value(v)?;
                print!("{}", curve_table(&c));
            }
        }
        Cmd::Plan { budget, add, json } => {
            let add = add.iter().map(|a| parse_add(a)).collect::<anyhow::Result<Vec<_>>>()?;
            let v = call(sock, &Request::WhatIf { budget: budget.map(|b| b.0), add }, t)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let w: tierd_core::policy::report::WhatIf = serde_json::from_value(v)?;
                print!("{}", what_if_table(&w));
            }
        }
        Cmd::Health { json } => {
            let st: Status = serde_json::from_value(call(sock, &Request::Status, t)?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&st.health)?);
            } else {
                let tty = std::io::stdout().is_terminal();
                for c in &st.health {
                    println!("{}", health_line(c, tty));
                }
            }
            let worst = st.health.iter().map(|c| c.colour).max().unwrap_or(Colour::Green);
            std::process::exit(match worst {
                Colour::Green => 0,
                Colour::Yellow => 1,
                Colour::Red => 2,
            });
        }
        Cmd::Top { sort, delay, batch, iterations } => {
            if !(delay.is_finite() && delay >= 0.1) {
                anyhow::bail!("--delay {delay}: must be at least 0.1 seconds");
            }
            let every = Duration::from_secs_f64(delay);
            if batch || !std::io::stdout().is_terminal() {
                tierd::top::batch(sock, sort, every, iterations)?;
            } else {
                tierd::top::live(sock, sort, every)?;
            }
        }
        Cmd::Tier { cmd: TierCmd::Drain } => {
            let st: Status = serde_json::from_value(call(sock, &Request::Status, t)?)?;
            if !st.tier.drained {
                println!("draining {}: reading its pages back into DRAM ...", st.tier.path.display());
            }
            // Reading a large tier back takes minutes; the daemon answers when done.
            let r: DrainReport = serde_json::from_value(call(sock, &Request::DrainTier, Duration::from_secs(3600))?)?;
            println!(
                "tier {} drained: {} back in DRAM in {:.1} s; restart tierd with the new tier to tier again",
                r.path.display(),
                human(r.read_back_bytes),
                r.seconds
            );
        }
        Cmd::Events => {
            let v: Vec<Event> = serde_json::from_value(call(sock, &Request::Events, t)?)?;
            for e in v {
                let who = e.tenant.map(|t| format!(" [{t}]")).unwrap_or_default();
                println!("{}  {:<8}{who} {}", clock(e.time), e.level, e.message);
            }
        }
    }
    Ok(())
}

/// `green  active memory 32% of DRAM`, and for yellow or red what to do about it.
fn health_line(c: &Check, tty: bool) -> String {
    let colour = tierd::top::paint(format!("{:<6}", c.colour.to_string()), c.colour, tty);
    match &c.advice {
        Some(a) => format!("{colour} {}: {a}", c.message),
        None => format!("{colour} {}", c.message),
    }
}

fn tier_line(t: &tierd::api::TierStatus) -> String {
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
        t.read_latency_us
            .map_or("-".into(), |l| format!("{l:.0}µs ({})", t.read_latency_health.as_deref().unwrap_or("?")))
    )
}

fn rate(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 { "-".into() } else { human((bytes as f64 / secs) as u64) }
}

/// UTC wall-clock time of day for event lines.
fn clock(t: f64) -> String {
    let s = t as u64 % 86400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Share of DRAM on huge pages, as the HUGE column shows it.
fn huge_share(huge: u64, dram: u64) -> String {
    if dram == 0 { "-".into() } else { format!("{:.0}%", (huge as f64 / dram as f64 * 100.0).min(100.0)) }
}

fn opt(b: Option<u64>) -> String {
    b.map_or("-".into(), human)
}

fn print_status(s: &Status) {
    println!(
        "tierd {} (pid {}), policy {}, cgroup {} at {}",
        s.version,
        s.pid,
        s.policy,
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
    let guests: Vec<String> =
        s.tenants.iter().filter_map(|t| t.guest.as_ref().map(|g| guest_line(&t.name, g, t.active_bytes))).collect();
    if !guests.is_empty() {
        println!();
        for g in guests {
            println!("{g}");
        }
    }
}

/// One VM tenant's guest: its RAM, where that is, and whether it can be tiered.
/// One line per region in address order, then how much was seen touched when.
fn regions_table(regions: &[tierd_core::snapshot::Region]) -> String {
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

fn guest_line(name: &str, g: &tierd::api::GuestStatus, active: Option<u64>) -> String {
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

/// `3xweb` into (3, web).
fn parse_add(s: &str) -> anyhow::Result<(u32, TenantName)> {
    let (n, name) = s.split_once('x').ok_or_else(|| anyhow::anyhow!("--add {s}: write NxNAME, e.g. 3xweb"))?;
    let n: u32 = n.parse().map_err(|_| anyhow::anyhow!("--add {s}: `{n}` is not a count"))?;
    if n == 0 || n > 64 {
        anyhow::bail!("--add {s}: between 1 and 64 more tenants");
    }
    Ok((n, TenantName::new(name)?))
}

fn curve_table(c: &tierd_core::policy::report::CurveReport) -> String {
    use tierd_core::size::human;
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

fn what_if_table(w: &tierd_core::policy::report::WhatIf) -> String {
    use tierd_core::size::human;
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
    use tierd_core::size::GIB;

    #[test]
    fn guest_lines_say_where_guest_ram_is_or_why_it_stays_in_dram() {
        let mut g = tierd::api::GuestStatus {
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
    fn huge_share_is_a_capped_percentage_of_dram() {
        assert_eq!(huge_share(0, 0), "-");
        assert_eq!(huge_share(GIB / 2, GIB), "50%");
        // cgroup counters are sampled apart: never above 100%.
        assert_eq!(huge_share(2 * GIB, GIB), "100%");
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal_number("TERM").unwrap(), 15);
        assert_eq!(signal_number("SIGKILL").unwrap(), 9);
        assert_eq!(signal_number("9").unwrap(), 9);
        assert!(signal_number("BOGUS").is_err());
    }

    #[test]
    fn default_names_are_valid_and_unique() {
        let n = default_name(&["/usr/bin/redis-server".into()], &["redis-server-1".into()]).unwrap();
        assert_eq!(n.as_str(), "redis-server-2");
        let n = default_name(&["./a b$c".into()], &[]).unwrap();
        assert_eq!(n.as_str(), "abc-1");
    }
}
