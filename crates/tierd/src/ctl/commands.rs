//! Each tierctl command: one API call (or none) and what it prints.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tierd_core::health::Colour;
use tierd_core::policy::report::{CurveReport, WhatIf};
use tierd_core::size::human;
use tierd_core::snapshot::Region;
use tierd_core::{ByteSize, TenantName};

use super::args::{Cli, Cmd, SpecArgs, TierCmd, default_name, parse_add, signal_number};
use super::show::{clock, curve_table, health_line, print_status, rate, regions_table, what_if_table};
use crate::api::{self, ClientError, DrainReport, Event, MoveReport, Request, Status};
use crate::tenant::Decision;

/// How long a request may take; a drain has its own, longer one.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs one command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let sock = cli.socket.as_path();
    match cli.cmd {
        Cmd::Tlb { entries, working_set } => tlb(&entries, &working_set),
        Cmd::Doctor { json } => doctor(json),
        Cmd::Status { json } => status(sock, json),
        Cmd::Run { name, spec, command } => run_tenant(sock, name, &spec, command),
        Cmd::Attach { pid, name, spec } => {
            let v = call(sock, &Request::Attach { spec: spec.spec(name), pid }, TIMEOUT)?;
            println!("{} {}", v["name"].as_str().unwrap_or("?"), v["pid"]);
            Ok(())
        }
        Cmd::Adopt { cgroup, name, spec } => {
            let name = match name {
                Some(n) => n,
                None => name_after_cgroup(&cgroup)?,
            };
            let v = call(sock, &Request::Adopt { spec: spec.spec(name), cgroup: cgroup.clone() }, TIMEOUT)?;
            println!("{} adopted cgroup {cgroup}: pids {}", v["name"].as_str().unwrap_or("?"), v["pids"]);
            Ok(())
        }
        Cmd::Release { name } => {
            let v = call(sock, &Request::Release { name: name.clone() }, TIMEOUT)?;
            println!("released {name}: cgroup {} has its own settings back", v["cgroup"].as_str().unwrap_or("?"));
            Ok(())
        }
        Cmd::Detach { name } => {
            let v = call(sock, &Request::Detach { name: name.clone() }, TIMEOUT)?;
            println!("detached {name}: pids {}", v["pids"]);
            Ok(())
        }
        Cmd::Stop { name, signal } => {
            let v = call(sock, &Request::Stop { name: name.clone(), signal: signal_number(&signal)? }, TIMEOUT)?;
            println!("signalled {name}: pids {}", v["pids"]);
            Ok(())
        }
        Cmd::Rm { name } => {
            call(sock, &Request::Remove { name: name.clone() }, TIMEOUT)?;
            println!("removed {name}");
            Ok(())
        }
        Cmd::Demote { name, bytes } => demote(sock, name, bytes),
        Cmd::Prefetch { name, bytes } => prefetch(sock, name, bytes),
        Cmd::Collapse { name } => {
            let r: MoveReport = ask(sock, &Request::Collapse { name: name.clone() })?;
            println!("{name}: collapsed {} into huge pages in {:.3}s, {} errors", human(r.bytes), r.seconds, r.errors);
            Ok(())
        }
        Cmd::Explain { name } => explain(sock, name),
        Cmd::Regions { name, json } => {
            view::<Vec<Region>>(sock, &Request::Regions { name }, json, |r| print!("{}", regions_table(&r)))
        }
        Cmd::Curve { name, json } => {
            view::<CurveReport>(sock, &Request::Curve { name }, json, |c| print!("{}", curve_table(&c)))
        }
        Cmd::Plan { budget, add, json } => {
            let add = add.iter().map(|a| parse_add(a)).collect::<anyhow::Result<Vec<_>>>()?;
            let req = Request::WhatIf { budget: budget.map(|b| b.0), add };
            view::<WhatIf>(sock, &req, json, |w| print!("{}", what_if_table(&w)))
        }
        Cmd::Health { json } => health(sock, json),
        Cmd::Top { sort, delay, batch, iterations } => {
            if !(delay.is_finite() && delay >= 0.1) {
                anyhow::bail!("--delay {delay}: must be at least 0.1 seconds");
            }
            let every = Duration::from_secs_f64(delay);
            if batch || !std::io::stdout().is_terminal() {
                crate::top::batch(sock, sort, every, iterations)
            } else {
                crate::top::live(sock, sort, every)
            }
        }
        Cmd::Tier { cmd: TierCmd::Drain } => drain(sock),
        Cmd::Events => events(sock),
    }
}

/// How long a request waits before tierctl says what holds tierd, and then how often.
const TELL_AFTER: Duration = Duration::from_secs(1);
const TELL_EVERY: Duration = Duration::from_secs(5);

/// [`api::call`], saying on stderr what tierd is busy with while the answer is slow to
/// come (a pass moving pages, a kernel call that hangs), so a wait is not taken for a
/// hang. Status is answered from the board meanwhile, so asking does not wait too.
fn call(sock: &Path, req: &Request, timeout: Duration) -> Result<serde_json::Value, ClientError> {
    let (answered, answer) = mpsc::channel::<()>();
    let teller = {
        let sock = sock.to_path_buf();
        std::thread::spawn(move || {
            let mut wait = TELL_AFTER;
            while answer.recv_timeout(wait) == Err(mpsc::RecvTimeoutError::Timeout) {
                if let Ok(s) = api::call(&sock, &Request::Status, TELL_AFTER)
                    && let (Some(doing), Some(secs)) = (s["busy"]["doing"].as_str(), s["busy"]["for_secs"].as_f64())
                {
                    eprintln!("tierctl: waiting for tierd: it has been busy with {doing} for {secs:.1} s");
                }
                wait = TELL_EVERY;
            }
        })
    };
    let r = api::call(sock, req, timeout);
    drop(answered);
    let _ = teller.join();
    r
}

/// One request, its answer decoded.
fn ask<T: DeserializeOwned>(sock: &Path, req: &Request) -> anyhow::Result<T> {
    Ok(serde_json::from_value(call(sock, req, TIMEOUT)?)?)
}

/// A read-only view: the answer as JSON, or decoded and shown as text.
fn view<T: DeserializeOwned>(sock: &Path, req: &Request, json: bool, show: impl FnOnce(T)) -> anyhow::Result<()> {
    let v = call(sock, req, TIMEOUT)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        show(serde_json::from_value(v)?);
    }
    Ok(())
}

fn tlb(entries: &[u64], working_set: &[ByteSize]) -> anyhow::Result<()> {
    if entries.contains(&0) || working_set.iter().any(|w| w.0 == 0) {
        anyhow::bail!("--entries and --working-set must be positive");
    }
    let ws: Vec<u64> = working_set.iter().map(|w| w.0).collect();
    print!("{}", tierd_core::tlb::render(entries, &ws));
    Ok(())
}

fn doctor(json: bool) -> anyhow::Result<()> {
    let report = crate::doctor::Report::new(tierd_sys::kernel::KernelFeatures::probe());
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    if report.blocker.is_some() {
        std::process::exit(1);
    }
    Ok(())
}

fn status(sock: &Path, json: bool) -> anyhow::Result<()> {
    view::<Status>(sock, &Request::Status, json, |s| print_status(&s))
}

fn run_tenant(sock: &Path, name: Option<TenantName>, spec: &SpecArgs, command: Vec<String>) -> anyhow::Result<()> {
    let name = match name {
        Some(n) => n,
        None => {
            let st: Status = ask(sock, &Request::Status)?;
            default_name(&command, &st.tenants.iter().map(|t| t.name.clone()).collect::<Vec<_>>())?
        }
    };
    let cwd = std::env::current_dir().ok();
    let v = call(sock, &Request::Run { spec: spec.spec(name), argv: command, cwd }, TIMEOUT)?;
    println!("{} {}", v["name"].as_str().unwrap_or("?"), v["pid"]);
    Ok(())
}

fn demote(sock: &Path, name: TenantName, bytes: Option<ByteSize>) -> anyhow::Result<()> {
    let r: MoveReport = ask(sock, &Request::Demote { name: name.clone(), bytes: bytes.map(|b| b.0) })?;
    println!(
        "{name}: demoted {} in {:.3}s ({}/s), {} of DRAM freed, {} calls, {} errors",
        human(r.bytes),
        r.seconds,
        rate(r.bytes, r.seconds),
        human(r.freed_bytes),
        r.calls,
        r.errors
    );
    Ok(())
}

fn prefetch(sock: &Path, name: TenantName, bytes: Option<ByteSize>) -> anyhow::Result<()> {
    let r: MoveReport = ask(sock, &Request::Prefetch { name: name.clone(), bytes: bytes.map(|b| b.0) })?;
    println!(
        "{name}: prefetch of {} started in {:.3}s, {} calls, {} errors",
        human(r.bytes),
        r.seconds,
        r.calls,
        r.errors
    );
    Ok(())
}

fn explain(sock: &Path, name: TenantName) -> anyhow::Result<()> {
    let decisions: Vec<Decision> = ask(sock, &Request::Explain { name: name.clone() })?;
    if decisions.is_empty() {
        println!("no decisions about {name} yet");
    }
    for d in decisions {
        println!("{}  {}", clock(d.time), d.message);
    }
    Ok(())
}

/// Prints the checks and exits 0, 1 or 2 for green, yellow or red (for scripts and monitors).
fn health(sock: &Path, json: bool) -> anyhow::Result<()> {
    let st: Status = ask(sock, &Request::Status)?;
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

fn drain(sock: &Path) -> anyhow::Result<()> {
    let st: Status = ask(sock, &Request::Status)?;
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
    for (name, bytes) in &r.unreadable {
        println!(
            "  {name}: {} could not be read back (the device failed the reads); it gets SIGBUS where it touches them",
            human(*bytes)
        );
    }
    Ok(())
}

fn events(sock: &Path) -> anyhow::Result<()> {
    let events: Vec<Event> = ask(sock, &Request::Events)?;
    for e in events {
        let who = e.tenant.map(|t| format!(" [{t}]")).unwrap_or_default();
        println!("{}  {:<8}{who} {}", clock(e.time), e.level, e.message);
    }
    Ok(())
}

/// A tenant name from a cgroup path's last component (`vm1.scope`).
fn name_after_cgroup(cgroup: &str) -> anyhow::Result<TenantName> {
    let last = cgroup.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    TenantName::new(last).map_err(|e| anyhow::anyhow!("cannot name the tenant after {cgroup:?} ({e}); give --name"))
}
