//! The model's parts against the figures they are calibrated to, and determinism.

use tierd_sim::{App, Mode, Pattern, PhaseKind, Point, Report, TenantModel, simulate};

use tierd_core::size::MIB;

fn tenant(name: &str, size_mib: u64, hot_mib: u64, phases: &[(PhaseKind, f64)]) -> TenantModel {
    TenantModel {
        name: name.into(),
        size: size_mib * MIB,
        hot: hot_mib * MIB,
        pattern: Pattern::Uniform,
        app: App::Workload,
        phases: phases.to_vec(),
        reserve: 0,
        shares: 100,
    }
}

fn point(budget_mib: u64, secs: f64, tenants: Vec<TenantModel>) -> Point {
    Point { budget: budget_mib * MIB, tier_ratio: 4.0, secs, slow: None, tenants }
}

/// Mean ops/s of active reports with `from <= t < to`.
fn ops(reports: &[Report], from: f64, to: f64) -> f64 {
    let v: Vec<f64> = reports
        .iter()
        .filter(|r| r.phase == PhaseKind::Active && r.t >= from && r.t < to)
        .map(|r| r.ops_per_sec)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[test]
fn a_uniform_hot_set_an_eighth_short_of_its_dram_runs_at_a_few_percent_of_dram() {
    // DESIGN: U = 1 / (1 + x·t_f / c) at x = 1/8: 1–3% of dram.
    let p = point(224, 40.0, vec![tenant("t", 512, 256, &[(PhaseKind::Active, 40.0)])]);
    let dram = simulate(&p, Mode::Dram, 1);
    let swap = simulate(&p, Mode::Swap, 1);
    let rel = ops(&swap.tenants[0].1, 20.0, 35.0) / ops(&dram.tenants[0].1, 20.0, 35.0);
    assert!(rel > 0.002 && rel < 0.05, "{rel}");
    // And with all of it in DRAM it runs as under dram.
    let fits = point(320, 40.0, vec![tenant("t", 512, 256, &[(PhaseKind::Active, 40.0)])]);
    let rel = ops(&simulate(&fits, Mode::Swap, 1).tenants[0].1, 20.0, 35.0) / ops(&dram.tenants[0].1, 20.0, 35.0);
    assert!(rel > 0.95, "{rel}");
}

#[test]
fn a_limit_of_exactly_a_uniform_hot_set_thrashes_as_the_cgroup_is_charged_its_page_tables_too() {
    // On the machine tenants at a quota of their 192 MiB hot set waited at it for
    // reclaim: page tables and the rest of the process are charged beside the pages.
    let run = |budget_mib| {
        let p = point(budget_mib, 40.0, vec![tenant("t", 512, 256, &[(PhaseKind::Active, 40.0)])]);
        let dram = simulate(&p, Mode::Dram, 1);
        ops(&simulate(&p, Mode::Swap, 1).tenants[0].1, 20.0, 35.0) / ops(&dram.tenants[0].1, 20.0, 35.0)
    };
    let exact = run(256);
    assert!(exact < 0.7, "{exact}");
    let with_room = run(256 + 256 / 20);
    assert!(with_room > 0.95, "{with_room}");
}

#[test]
fn a_pgbench_tenant_with_dram_for_half_of_it_keeps_its_hot_rows_and_loses_little() {
    // Scale 12: 180 MiB of tables and indexes, a 45 MiB buffer pool. Its transactions
    // draw one heap page and one index leaf by the account, hot rows clustered.
    let pg = TenantModel {
        app: App::Postgres { shared_buffers: 45 * MIB },
        ..tenant("pg", 225, 0, &[(PhaseKind::Active, 40.0)])
    };
    let run = |budget_mib| {
        let p = point(budget_mib, 40.0, vec![pg.clone()]);
        let dram = simulate(&p, Mode::Dram, 1);
        ops(&simulate(&p, Mode::Swap, 1).tenants[0].1, 20.0, 35.0) / ops(&dram.tenants[0].1, 20.0, 35.0)
    };
    // 0.95 here. Ten pages a transaction drawn Zipf over all of it ran at 0.66 (and
    // postgres/2x at 0.79-0.83, against 0.96-0.99 on the machine).
    let half = run(113);
    assert!(half > 0.92, "{half}");
    // With DRAM for a tenth of it, the tail of the accounts is read from the tier.
    let tenth = run(23);
    assert!(tenth < half - 0.05, "{tenth} vs {half}");
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let p = point(
        1024,
        60.0,
        vec![
            tenant("a", 512, 192, &[(PhaseKind::Active, 20.0), (PhaseKind::Idle, 20.0), (PhaseKind::Active, 20.0)]),
            tenant("b", 512, 192, &[(PhaseKind::Idle, 20.0), (PhaseKind::Active, 40.0)]),
            tenant("c", 768, 400, &[(PhaseKind::Sweep, 10.0), (PhaseKind::Active, 50.0)]),
        ],
    );
    for mode in [Mode::Swap, Mode::Tierd, Mode::MemoryMode] {
        let (x, y) = (simulate(&p, mode, 7), simulate(&p, mode, 7));
        assert_eq!(x.tenants, y.tenants, "{mode:?}");
        assert_eq!(x.tierd_cpu_percent, y.tierd_cpu_percent);
        assert_eq!(x.health, y.health);
    }
    let (x, z) = (simulate(&p, Mode::Tierd, 7), simulate(&p, Mode::Tierd, 8));
    assert_ne!(x.tenants, z.tenants, "a seed draws the tenants' speeds and the tracker's samples");
}

#[test]
fn a_woken_tenant_pushed_out_by_a_sweep_comes_back_faster_under_tierd_than_under_swap() {
    // wake-up/fast at half scale: swap reads the hot set back a fault at a time,
    // tierd's prefetch reads the regions it laid out in runs.
    let sleepy =
        tenant("sleepy", 640, 512, &[(PhaseKind::Active, 30.0), (PhaseKind::Idle, 55.0), (PhaseKind::Active, 60.0)]);
    let pusher =
        |n: &str| tenant(n, 512, 64, &[(PhaseKind::Active, 30.0), (PhaseKind::Sweep, 25.0), (PhaseKind::Active, 90.0)]);
    let p = point(1024, 145.0, vec![sleepy, pusher("p1"), pusher("p2")]);
    let base = ops(&simulate(&p, Mode::Dram, 3).tenants[0].1, 15.0, 29.0);
    let back = |mode| {
        let r = simulate(&p, mode, 3);
        let after: Vec<&Report> = r.tenants[0].1.iter().filter(|x| x.t > 85.0).collect();
        after.iter().find(|x| x.ops_per_sec >= 0.95 * base).map(|x| x.t - 85.0)
    };
    let (swap, tierd) = (back(Mode::Swap), back(Mode::Tierd));
    let tierd = tierd.expect("tierd brings it back within the run");
    assert!(swap.is_none_or(|s| s > 2.0 * tierd), "swap {swap:?} s, tierd {tierd} s");
}

/// Seconds the host takes to read tenant 0's regions back, laid out as `lay_out` leaves them.
fn read_back_secs(lay_out: impl Fn(&mut tierd_sim::memory::Memory)) -> f64 {
    let mut rng = fastrand::Rng::with_seed(1);
    let t = tenant("t", 1024, 1024, &[(PhaseKind::Idle, 100.0)]);
    let mut host = tierd_sim::host::Host::new(vec![t], None, &mut rng);
    let mem = &mut host.tenants[0].mem;
    mem.fill(1e9);
    lay_out(mem);
    for r in 0..mem.regions {
        let queued = tierd_sim::host::Queued { tenant: 0, region: r, relayout: false, until: f64::INFINITY };
        host.prefetch.push_back(queued);
    }
    let start = host.now;
    while !host.prefetch.is_empty() && host.now < start + 60.0 {
        host.step();
    }
    host.now - start
}

#[test]
fn a_hot_set_laid_out_in_runs_comes_back_at_the_prefetch_rate_and_a_scattered_one_ten_times_slower() {
    // DESIGN: regions demoted whole came back at 1.5 GiB/s, scattered pages at 150 MiB/s.
    let runs = read_back_secs(|m| {
        for r in 0..m.regions {
            m.page_out(r);
        }
        m.free_written(1e9);
    });
    assert!((runs - 1.0 / 1.5).abs() < 0.1, "{runs} s for 1 GiB in runs");
    let scattered = read_back_secs(|m| {
        m.evict(0, 1e9);
    });
    assert!((scattered - 1024.0 / 150.0).abs() < 0.5, "{scattered} s for 1 GiB scattered");
}
