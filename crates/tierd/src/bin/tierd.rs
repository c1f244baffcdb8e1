//! `tierd`: the tiering daemon. Runs in the foreground; SIGTERM or Ctrl-C stops it
//! cleanly (limits lifted, tier swapped off and removed, tenants left running).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use tierd::board::Shared;
use tierd::daemon_args::Args;
use tierd::engine::Engine;
use tierd_core::config::{RawConfig, SAMPLE_CONFIG};
use tierd_sys::procfs::ProcFs;

/// How often tierd looks for tenants suddenly faulting from the tier.
const WATCH: Duration = Duration::from_millis(500);

fn main() {
    // Crash points named in FAILPOINTS (see `tierd::crash_point!`), in test builds only.
    #[cfg(feature = "failpoints")]
    let _crash_points = fail::FailScenario::setup();
    if let Err(e) = run() {
        eprintln!("tierd: error: {e:#}");
        std::process::exit(1);
    }
}

/// The config file's settings with the command line's on top.
fn merged_config(args: &Args) -> anyhow::Result<RawConfig> {
    let mut raw = match &args.config {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
            RawConfig::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => RawConfig::default(),
    };
    raw.dram_budget = args.dram_budget.or(raw.dram_budget);
    raw.ratio = args.ratio.or(raw.ratio);
    // A --policy flag picks the policy; the file's `[policy.tierd]` knobs stay.
    if let Some(kind) = args.policy {
        raw.policy = Some(match raw.policy.take() {
            Some(tierd_core::config::RawPolicy::Table(t)) => {
                tierd_core::config::RawPolicy::Table(tierd_core::config::PolicyTable { kind: Some(kind), ..t })
            }
            _ => tierd_core::config::RawPolicy::Name(kind),
        });
    }
    raw.interval = args.interval.clone().or(raw.interval);
    raw.oom_grace = args.oom_grace.clone().or(raw.oom_grace);
    raw.state_dir = args.release.clone().or(args.state_dir.clone()).or(raw.state_dir);
    raw.socket = args.socket.clone().or(raw.socket);
    raw.cgroup_name = args.cgroup_name.clone().or(raw.cgroup_name);
    raw.http = args.http.clone().or(raw.http);
    if !args.adopt_roots.is_empty() {
        raw.adopt_roots.get_or_insert_default().extend(args.adopt_roots.iter().cloned());
    }
    raw.tracker.window = args.window.clone().or(raw.tracker.window);
    raw.tracker.sample_pages = args.sample_pages.or(raw.tracker.sample_pages);
    raw.tracker.kind = args.tracker.or(raw.tracker.kind);
    raw.tier.path = args.tier.clone().or(raw.tier.path);
    raw.tier.size = args.tier_size.or(raw.tier.size);
    raw.tier.backing = args.tier_backing.unwrap_or(raw.tier.backing);
    raw.tier.force |= args.force_tier;
    raw.tier.encrypt = args.tier_encrypt.unwrap_or(raw.tier.encrypt);
    raw.tier.dwpd = args.tier_dwpd.or(raw.tier.dwpd);
    Ok(raw)
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.print_config {
        print!("{SAMPLE_CONFIG}");
        return Ok(());
    }
    let raw = merged_config(&args)?;
    let host = ProcFs::new("/proc").mem_total().unwrap_or(0);
    let cfg = raw.validate(host)?;
    let http = cfg.http.as_deref().map(|a| tierd::http::parse_address(a, args.force_http)).transpose()?;
    if args.check {
        println!("{}", serde_json::to_string_pretty(&cfg)?);
        return Ok(());
    }

    if args.release.is_some() {
        return release(cfg);
    }

    if let Err(e) = tierd_sys::process::lock_own_memory() {
        eprintln!("tierd: warning: cannot lock tierd's own memory in DRAM ({e}): it may be paged out to the tier");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    // Bind before setting up the tier so a second tierd fails before touching anything.
    let http = http.map(tierd::http::bind).transpose()?;
    let listener = tierd::server::bind(&cfg.socket)?;
    let socket = cfg.socket.clone();
    let interval = cfg.interval;
    let engine = match Engine::start(cfg, true) {
        Ok(e) => Shared::new(e),
        Err(e) => {
            let _ = std::fs::remove_file(&socket);
            return Err(e);
        }
    };
    engine.work("start-up", |e| announce(e, interval, &socket));
    // The HTTP address goes into the status before the socket answers, so a client that
    // reaches tierd never reads a status without it.
    if let Some(server) = http {
        let bound = tierd::http::spawn(server, engine.clone())?;
        eprintln!("tierd: dashboard at http://{bound}/, metrics at http://{bound}/metrics");
        engine.work("start-up", |e| e.http_address = Some(bound.to_string()));
    }
    let served = engine.clone();
    std::thread::spawn(move || tierd::server::serve(listener, served));

    control_loop(&engine, interval, &stop);
    eprintln!("tierd: stopping");
    // Swapping the tier off reads it all back: readers meanwhile are told so.
    engine.work("shutdown (lifting limits, swapping the tier off)", Engine::shutdown);
    let _ = std::fs::remove_file(&socket);
    eprintln!("tierd: stopped");
    Ok(())
}

/// The start-up line: how tierd runs, and what of this kernel changes that.
fn announce(e: &Engine, interval: Duration, socket: &std::path::Path) {
    eprintln!(
        "tierd: running, policy {}, DRAM budget {}, ratio {}, interval {}, socket {}",
        e.cfg.policy,
        tierd_core::size::human(e.cfg.dram_budget),
        e.cfg.ratio,
        humantime::format_duration(interval),
        socket.display()
    );
    // Only what changes how tierd works on this kernel; `tierctl doctor` has the rest.
    for note in tierd::doctor::Report::new(tierd_sys::kernel::KernelFeatures::probe()).startup_notes() {
        eprintln!("tierd: this kernel: {note}");
    }
}

/// A pass each interval, and the half-second watch between them, until `stop`.
fn control_loop(engine: &Shared, interval: Duration, stop: &AtomicBool) {
    let mut next = Instant::now() + interval;
    let mut next_watch = Instant::now() + WATCH;
    // A pass whose moves yielded to a request: the next follows once it is served.
    let mut yielded = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        // A tenant waking up is handled within half a second, not an interval.
        let mut early = std::mem::take(&mut yielded);
        if Instant::now() >= next_watch {
            next_watch = Instant::now() + WATCH;
            early |= engine.work("the half-second watch", |e| {
                e.release_waiters();
                e.fault_watch()
            });
        }
        // Sampling keeps its cadence: a pass between intervals only plans.
        if Instant::now() >= next {
            let started = Instant::now();
            yielded = engine.work("a control-loop pass", |e| {
                e.tick();
                e.moves_yielded()
            });
            next = tierd::engine::next_pass(next, started, interval);
        } else if early {
            yielded = engine.work("an early control-loop pass", |e| {
                e.tick_early();
                e.moves_yielded()
            });
        }
    }
}

/// `--release`: a start that re-adopts the dead tierd's tier and tenants, then a clean stop.
fn release(cfg: tierd_core::config::Config) -> anyhow::Result<()> {
    let state = tierd::state::state_file(&cfg.state_dir);
    if !state.exists() {
        anyhow::bail!("{}: no tierd state here, nothing to release", state.display());
    }
    // Refuses while a live tierd serves the socket: releasing under it would fight it.
    let _listener = tierd::server::bind(&cfg.socket)?;
    let socket = cfg.socket.clone();
    let result = Engine::start(cfg, true).map(|mut e| {
        eprintln!("tierd: releasing what the last tierd left");
        e.shutdown();
    });
    let _ = std::fs::remove_file(&socket);
    result?;
    eprintln!("tierd: released: limits lifted, tenants left running");
    Ok(())
}
