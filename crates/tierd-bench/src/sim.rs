//! `tierd-bench sim`: the suite's points in the simulator (`tierd-sim`), every mode,
//! many seeds, written as `tierd-bench run` writes them (marked as simulated).
//!
//! Each (point, mode, seed) is one deterministic run; a seed is derived from the
//! point's name and the seed's index, so every mode of a point sees the same draws
//! (tenants' speeds, start times, sampling) and a figure changes only when the model
//! or the policy does. Runs are spread over the machine's cores.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tierd_core::size::MIB;

use crate::machine::RunInfo;
use crate::scenario::{App, Mode, Report, Run, TenantDef, TenantRun};
use crate::suite::{Plan, Point, Results, Sample, Simulated, aggregate, choose, sample};
use crate::workload::{Pattern, PhaseKind, parse_phases};

/// A catalogue point as the simulator takes it.
pub fn to_model(p: &Point) -> anyhow::Result<tierd_sim::Point> {
    let tenants = p.tenants.iter().map(tenant_model).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(tierd_sim::Point {
        budget: p.budget,
        tier_ratio: p.tier_ratio(),
        secs: p.secs as f64,
        slow: p.slow.map(|s| tierd_sim::Slow {
            after: s.after_secs as f64,
            iops: s.read_iops as f64,
            bytes_per_sec: s.read_bytes_per_sec as f64,
        }),
        tenants,
    })
}

fn tenant_model(d: &TenantDef) -> anyhow::Result<tierd_sim::TenantModel> {
    let phases = parse_phases(&d.phases)?
        .iter()
        .map(|ph| {
            let kind = match ph.kind {
                PhaseKind::Active => tierd_sim::PhaseKind::Active,
                PhaseKind::Idle => tierd_sim::PhaseKind::Idle,
                PhaseKind::Sweep => tierd_sim::PhaseKind::Sweep,
            };
            (kind, ph.duration.as_secs_f64())
        })
        .collect();
    let app = match d.app {
        App::Workload => tierd_sim::App::Workload,
        App::Redis { keys, value_size } => {
            let data = (keys * value_size as u64).max(1);
            tierd_sim::App::Redis { hot_pct: (d.hot * 100).div_ceil(data).clamp(1, 100) }
        }
        App::Postgres { shared_buffers_mib, .. } => {
            tierd_sim::App::Postgres { shared_buffers: shared_buffers_mib * MIB }
        }
    };
    Ok(tierd_sim::TenantModel {
        name: d.name.clone(),
        size: d.size,
        hot: d.hot,
        pattern: match d.pattern {
            Pattern::Uniform => tierd_sim::Pattern::Uniform,
            Pattern::Zipf => tierd_sim::Pattern::Zipf(0.99),
        },
        app,
        phases,
        reserve: d.reserve,
        shares: d.shares,
    })
}

/// The simulated run in the real suite's terms.
pub fn as_run(mode: Mode, r: tierd_sim::Run) -> Run {
    let phase = |k: tierd_sim::PhaseKind| match k {
        tierd_sim::PhaseKind::Active => "active",
        tierd_sim::PhaseKind::Idle => "idle",
        tierd_sim::PhaseKind::Sweep => "sweep",
    };
    let tenants = r
        .tenants
        .into_iter()
        .map(|(name, reports)| TenantRun {
            name,
            reports: reports
                .iter()
                .map(|x| Report {
                    t: x.t,
                    unix: 0.0,
                    phase: phase(x.phase).into(),
                    ops_per_sec: x.ops_per_sec,
                    p50_us: x.p50_us,
                    p99_us: x.p99_us,
                    hot_huge: None,
                    major_faults: None,
                })
                .collect(),
            failed: None,
        })
        .collect();
    Run {
        mode,
        tenants,
        tierd_cpu_percent: r.tierd_cpu_percent,
        moving_cpu_percent: None,
        events: 0,
        health: r.health,
        tracker_cpu_per_8gib: r.tracker_cpu_per_8gib,
        // The simulator models the tier's mean service time, not its tail.
        tier_tail: None,
    }
}

/// The seed of a point's `i`-th run: the same for every mode (FNV-1a of the name).
pub fn seed(point: &str, i: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in point.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Simulates `plan` with `seeds` seeds per point and mode; writes results to `out` as
/// it finishes each point when `out` is given.
pub fn run(plan: &Plan, seeds: usize, out: Option<&Path>) -> anyhow::Result<Results> {
    let chosen = choose(plan)?;
    let res = run_scenarios(plan, &chosen, seeds)?;
    if let Some(out) = out {
        crate::report::write(out, &res)?;
    }
    Ok(res)
}

/// Simulates the points of `chosen` in the plan's modes with `seeds` seeds each.
pub fn run_scenarios(plan: &Plan, chosen: &[crate::suite::Scenario], seeds: usize) -> anyhow::Result<Results> {
    if seeds == 0 {
        anyhow::bail!("--seeds must be at least 1");
    }
    let started = std::time::Instant::now();
    // Every job up front: (scenario, point, mode, seed).
    let mut jobs = Vec::new();
    for (si, sc) in chosen.iter().enumerate() {
        for (pi, p) in sc.points.iter().enumerate() {
            let model = to_model(p)?;
            let name = format!("{}/{}", sc.name, p.label);
            for &m in plan.modes.iter().filter(|m| p.only.as_ref().is_none_or(|o| o.contains(m))) {
                for i in 0..seeds {
                    jobs.push((si, pi, m, seed(&name, i), model.clone()));
                }
            }
        }
    }
    let bar = indicatif::ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Sample>>> = Mutex::new(vec![None; jobs.len()]);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some((si, pi, m, sd, model)) = jobs.get(k) else { break };
                    let r = as_run(*m, tierd_sim::simulate(model, *m, *sd));
                    let got = sample(&chosen[*si].points[*pi], &r);
                    done.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(got);
                    bar.inc(1);
                }
            });
        }
    });
    bar.finish_and_clear();
    let done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut res = Results {
        run: RunInfo::collect(),
        simulated: Some(Simulated { seeds, wall_secs: started.elapsed().as_secs_f64() }),
        reps: seeds,
        scale: plan.scale,
        tier: "simulated: the tierd default file tier on this machine's disk (tierd-sim's fast tier)".into(),
        results: Vec::new(),
    };
    for (si, sc) in chosen.iter().enumerate() {
        for (pi, p) in sc.points.iter().enumerate() {
            let samples: Vec<(Mode, Vec<Sample>)> = plan
                .modes
                .iter()
                .map(|&m| {
                    let got = jobs
                        .iter()
                        .zip(&done)
                        .filter(|((s, q, jm, ..), _)| *s == si && *q == pi && *jm == m)
                        .filter_map(|(_, d)| d.clone())
                        .collect();
                    (m, got)
                })
                .collect();
            res.results.push(aggregate(p, sc, &samples));
        }
    }
    Ok(res)
}

/// Prints one run of the plan's only point, second by second.
pub fn trace(plan: &Plan, repetition: usize) -> anyhow::Result<i32> {
    let chosen = crate::suite::select(plan)?;
    let points: Vec<(&str, &Point)> =
        chosen.iter().flat_map(|s| s.points.iter().map(move |p| (s.name.as_str(), p))).collect();
    let [(name, p)] = points.as_slice() else {
        anyhow::bail!("--trace follows one point: name it as SCENARIO/POINT ({} chosen)", points.len())
    };
    let mode = plan.modes.first().copied().unwrap_or(Mode::Tierd);
    let model = to_model(p)?;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let header = format!(
        "# {name}/{} in {}, seed {repetition}\n{:>6} {:<10} {:<14} {:>11} {:>9} {:>9} {:>9} {:>9} {:>6} {:>8}",
        p.label,
        mode.name(),
        "t",
        "tenant",
        "doing",
        "ops/s",
        "dram MiB",
        "tier MiB",
        "quota",
        "faults/s",
        "cores",
        "read µs"
    );
    // A reader that stops early (`| head`) ends the output, not the program.
    let mut open = writeln!(out, "{header}").is_ok();
    let sd = seed(&format!("{name}/{}", p.label), repetition);
    tierd_sim::simulate_traced(&model, mode, sd, |lines| {
        for l in lines {
            if !open {
                return;
            }
            let quota = l.quota_mib.map_or("-".to_string(), |q| format!("{q:.0}"));
            open = writeln!(
                out,
                "{:>6.0} {:<10} {:<14} {:>11.0} {:>9.0} {:>9.0} {:>9} {:>9.0} {:>6.2} {:>8.0}  {}",
                l.t,
                l.tenant,
                l.doing,
                l.ops_per_sec,
                l.dram_mib,
                l.tier_mib,
                quota,
                l.faults_per_sec,
                l.cores,
                l.read_latency_us,
                l.reason
            )
            .is_ok();
        }
    });
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(points: &[&str], modes: &[Mode]) -> Plan {
        Plan {
            scenarios: points.iter().map(|s| s.to_string()).collect(),
            files: Vec::new(),
            modes: modes.to_vec(),
            reps: 1,
            scale: 1.0,
            fresh: true,
            simulated: true,
        }
    }

    #[test]
    fn a_short_simulation_writes_the_suites_results_marked_as_simulated() {
        let dir = std::env::temp_dir().join(format!("tierd-sim-smoke-{}", std::process::id()));
        let p = plan(&["density-2x/2x", "wake-up/fast"], &[Mode::Dram, Mode::Swap, Mode::Tierd]);
        let r = run(&p, 1, Some(&dir)).unwrap();
        assert_eq!(r.simulated.as_ref().unwrap().seeds, 1);
        let d = &r.results[0];
        assert_eq!(d.name, "density-2x/2x");
        // Hot sets at half of DRAM: neither swap nor tierd loses much.
        for m in [Mode::Swap, Mode::Tierd] {
            let rel = d.mode(m).unwrap().relative_throughput;
            assert!(rel > 0.9 && rel < 1.1, "{m:?} {rel}");
        }
        // A woken tenant: tierd is back sooner than swap.
        let w = &r.results[1];
        let back = |m| w.mode(m).unwrap().recovery_secs.unwrap_or(f64::INFINITY);
        assert!(back(Mode::Tierd) < back(Mode::Swap), "{} vs {}", back(Mode::Tierd), back(Mode::Swap));
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.starts_with("# Simulated benchmark suite"), "{}", &md[..80]);
        assert!(dir.join("results.json").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn memory_mode_is_the_simulators_alone() {
        let mut p = plan(&["density-2x/2x"], &[Mode::Dram, Mode::MemoryMode]);
        assert!(choose(&p).is_ok());
        p.simulated = false;
        assert!(choose(&p).unwrap_err().to_string().contains("only in the simulator"));
    }
}
