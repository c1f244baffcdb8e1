//! Real-kernel tests of the `tierd` policy with workload-generator tenants whose hot
//! sets are known: the activeness estimate, one shared limit while hot sets fit and
//! whole hot sets when they do not, wake-up, and a noisy neighbour.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn mib(v: &Value) -> f64 {
    u(v) as f64 / MIB as f64
}

const FAST: [&str; 8] = ["--policy", "tierd", "--interval", "2s", "--window", "16s", "--sample-pages", "1024"];

fn daemon(budget: &str, extra: &[&str]) -> Daemon {
    let mut args = vec!["--dram-budget", budget, "--ratio", "2"];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    Daemon::start(&args)
}

/// Sample clusters (4 pages) the tracker drew in a tenant's `hot_mib` hot set in its
/// last interval, its samples spread over what is resident.
fn hot_set_draws(t: &Value, hot_mib: f64) -> f64 {
    u(&t["tracker_sample_pages"]) as f64 / 4.0 * (hot_mib / mib(&t["dram_bytes"]).max(hot_mib))
}

#[test]
fn the_activeness_estimate_lands_within_15_percent_of_the_hot_set() {
    let _g = serial();
    // On half its size, as tiered tenants are: the cold half goes to the tier and the
    // samples are drawn from what is resident. (With DRAM to spare tierd leaves cold
    // memory resident, and at this test's 2 s interval the CPU budget buys a sample
    // that measures a fully resident 1 GiB to ±15%, not better.)
    let mut d = daemon("512M", &[]);
    d.run_workload(
        "w",
        &["--size", "1G"],
        &["--size", "1G", "--hot", "256M", "--duration", "90s", "--json", "--report", "5s"],
    );
    // Fill, the hot set's swapped-out part coming back, then a full window (16 s) of
    // estimates. A fixed 30 s from the start read 199 MiB on a busy machine: the window
    // still held the fill.
    d.wait_filled("w", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(24));
    let mut readings = Vec::new();
    let mut draws = Vec::new();
    for _ in 0..5 {
        let t = d.tenant("w");
        readings.push((mib(&t["active_bytes"]), mib(&t["active_ci_bytes"])));
        draws.push(hot_set_draws(&t, 256.0));
        std::thread::sleep(Duration::from_secs(3));
    }
    for (active, ci) in &readings {
        assert!((active / 256.0 - 1.0).abs() <= 0.15, "estimate {active:.0} MiB vs hot set 256 MiB: {readings:?}");
        assert!(*ci < 0.15 * 256.0, "confidence interval ±{ci:.0} MiB too wide: {readings:?}");
    }
    let t = d.tenant("w");
    assert!(u(&t["tracker_sample_pages"]) > 0, "{t:#}");
    assert!(t["reason"].as_str().unwrap().contains("touches"), "the reason says what it touches: {t:#}");
    // The heat map: the hot set's regions are seen reused within the window (its
    // samples come back), the 384 regions only filled are not. A region is seen when a
    // sample lands in it, so how many of the 128 depends on the sample a busy CPU or a
    // slow tier leaves the tracker: 1024 pages find all, the 32-page floor a fifth.
    let regions: Value = serde_json::from_str(&d.ctl(&["regions", "w", "--json"])).unwrap();
    let regions = regions.as_array().unwrap();
    assert!(regions.len() >= 512, "a region per 2 MiB: {}", regions.len());
    let reused = regions.iter().filter(|r| r["reused_secs"].as_f64().is_some_and(|s| s <= 16.0)).count();
    let per_interval = draws.iter().sum::<f64>() / draws.len() as f64;
    let expected = 128.0 * (1.0 - (-per_interval * 8.0 / 128.0).exp());
    assert!(
        reused as f64 >= 0.7 * expected && reused <= 140,
        "{reused} regions reused within the window, for a 128-region hot set; {expected:.0} expected from \
         {per_interval:.0} sample clusters in it an interval"
    );
    let table = d.ctl(&["regions", "w"]);
    assert!(table.contains("idle 0–10 s:") && table.lines().count() > 512, "{table}");
}

/// Operations a `--json --report` workload did within `(from, to]` (unix seconds), each
/// report's count spread evenly over the period it covers.
fn ops_between(reports: &[Value], from: f64, to: f64) -> f64 {
    reports
        .iter()
        .filter_map(|r| {
            let (end, ops, rate) = (r["unix"].as_f64()?, r["ops"].as_f64()?, r["ops_per_sec"].as_f64()?);
            let start = end - ops / rate.max(1e-9);
            let overlap = (end.min(to) - start.max(from)).max(0.0);
            Some(ops * overlap / (end - start).max(1e-9))
        })
        .sum()
}

#[test]
fn memory_touched_now_and_then_counts_in_full_within_the_window() {
    let _g = serial();
    // On half its size, so its cold memory goes to the tier (see above).
    let mut d = daemon("128M", &[]);
    // A 64 MiB hot set at 2900 accesses/s: each page is touched every ~5.6 s, so about
    // 30% of it within a 2 s interval and 94% (60 MiB) within the 16 s window.
    d.run_workload(
        "slow",
        &["--size", "256M"],
        &["--size", "256M", "--hot", "64M", "--rate", "2900", "--duration", "90s", "--json", "--report", "5s"],
    );
    // Fill, the cold memory going to the tier, then a window more: read 36 s in, one
    // reading was 85 MiB, the estimate still holding the fill's window.
    d.wait_filled("slow", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(36));
    let mut readings = Vec::new();
    for _ in 0..8 {
        let s = d.status();
        let t = find_tenant(&s, "slow").unwrap().clone();
        readings.push(Reading {
            at: unix_now(),
            per_interval: mib(&t["active_bytes"]),
            touched: mib(&t["touched_in_window_bytes"]),
            ci: mib(&t["touched_in_window_ci_bytes"]),
            host: mib(&s["active_bytes"]),
        });
        std::thread::sleep(Duration::from_secs(3));
    }
    // The truth of each reading is what the tenant did in the window before it (each
    // access a page of the hot set at random): a loaded machine can hold it below its
    // rate for a while, and the estimate is judged against what it touched, not the plan.
    std::thread::sleep(Duration::from_secs(6));
    let reports = d.reports("slow");
    let truth = |at: f64| 64.0 * (1.0 - (-ops_between(&reports, at - 16.0, at) / (64.0 * 256.0)).exp());
    let explain = d.ctl(&["explain", "slow"]);
    let table: Vec<String> =
        readings.iter().map(|r| format!("{:.0}±{:.0}/{:.1}", r.touched, r.ci, truth(r.at))).collect();
    let why = format!("(estimate±95%/truth MiB: {table:?})\n{explain}");
    // Each reading rests on one batch of samples, whose size the CPU and tier-read
    // budgets set, and says how sure it is: the truth lies within twice its 95% interval,
    // about four standard deviations (docs/decisions/008).
    for r in &readings {
        assert!((r.touched - truth(r.at)).abs() <= 2.0 * r.ci, "touched within the window outside its interval {why}");
        // Host health judges memory touched within the window, or the per-interval part
        // where that reads more (`Activeness::touched_bytes`: two estimates, each noisy).
        let touched = r.touched.max(r.per_interval);
        assert_eq!(r.host, touched, "the host's active memory is what was touched within the window: {why}");
    }
    // What a user relies on besides: the readings centre on the truth. The median of
    // eight has about 1.25 / √8 of one reading's spread; three of those, or 15%.
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[3] + v[4]) / 2.0
    };
    let error = median(readings.iter().map(|r| r.touched / truth(r.at)).collect());
    let spread = median(readings.iter().map(|r| r.ci / 1.96 / truth(r.at)).collect());
    let bound = (3.0 * 1.25 / 8f64.sqrt() * spread).max(0.15);
    assert!((error - 1.0).abs() <= bound, "touched within the window at the median {error:.2} of the truth {why}");
    // At 30% a page an interval, the per-interval average counts about a third of it.
    let per_interval = median(readings.iter().map(|r| r.per_interval).collect());
    let touched = median(readings.iter().map(|r| r.touched).collect());
    assert!(touched >= 2.0 * per_interval, "the per-interval average counts a part: {why}");
}

/// One status reading of a tenant and its host, MiB.
struct Reading {
    at: f64,
    per_interval: f64,
    touched: f64,
    ci: f64,
    host: f64,
}

#[test]
fn hot_sets_that_fit_share_one_limit_and_stay_resident() {
    let _g = serial();
    let mut d = daemon("512M", &[]);
    let work = |hot: &'static str| ["--size", "512M", "--hot", hot, "--duration", "90s", "--json", "--report", "5s"];
    d.run_workload("small", &["--size", "512M"], &work("64M"));
    d.run_workload("large", &["--size", "512M"], &work("256M"));
    // Past the fill and a window of samples: what each touches is known.
    std::thread::sleep(Duration::from_secs(30));
    let faults =
        |d: &mut Daemon| -> Vec<u64> { ["small", "large"].iter().map(|n| u(&d.tenant(n)["major_faults"])).collect() };
    let before = faults(&mut d);
    std::thread::sleep(Duration::from_secs(10));
    let after = faults(&mut d);
    for (i, name) in ["small", "large"].iter().enumerate() {
        let t = d.tenant(name);
        let e = d.ctl(&["explain", name]);
        assert!(t["quota_bytes"].is_null(), "no quota of its own while hot sets fit: {t:#}\n{e}");
        assert!(e.contains("one shared limit"), "{e}");
        // Its hot set stays in DRAM: a few hundred tracker samples fault back a second,
        // not a hot set (16384 pages for 64 MiB).
        assert!(after[i] - before[i] < 16384, "{name} faulted {} pages in 10 s\n{e}", after[i] - before[i]);
    }
    // The model behind it, for operators: the large tenant's curve says its hot set is
    // a cliff near 256 MiB, and two more like it would not fit on this budget.
    // One reading rests on one interval's samples (CI read 318 and 314 MiB, its samples
    // half back under a loaded host), so the median of five, an interval apart, is judged.
    let mut curves: Vec<Value> = (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_secs(2));
            serde_json::from_str(&d.ctl(&["curve", "large", "--json"])).unwrap()
        })
        .collect();
    curves.sort_by(|a, b| mib(&a["hot_bytes"]).total_cmp(&mib(&b["hot_bytes"])));
    let hots: Vec<f64> = curves.iter().map(|c| mib(&c["hot_bytes"]).round()).collect();
    eprintln!("large's hot set read {hots:?} MiB (256 MiB touched)");
    let curve = &curves[2];
    let hot = mib(&curve["hot_bytes"]);
    assert!((hot / 256.0 - 1.0).abs() <= 0.2, "median hot set {hot:.0} MiB of {hots:?}: {curve:#}");
    assert!(hots.iter().all(|h| (h / 256.0 - 1.0).abs() <= 0.4), "a reading far off: {hots:?}");
    let table = d.ctl(&["curve", "large"]);
    assert!(table.contains("tier reads/s") && table.lines().count() >= 18, "{table}");
    let plan: Value = serde_json::from_str(&d.ctl(&["plan", "--add", "2xlarge", "--json"])).unwrap();
    let mut names: Vec<&str> =
        plan["tenants"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["large", "large.1", "large.2", "small"], "{plan:#}");
    assert!(plan["work_done"].as_f64().unwrap() < 0.9, "832 MiB of hot sets do not fit in 512: {plan:#}");
    assert_eq!(plan["health"], "red", "{plan:#}");
    let more: Value = serde_json::from_str(&d.ctl(&["plan", "--budget", "1G", "--json"])).unwrap();
    assert!(more["work_done"].as_f64().unwrap() > 0.99, "{more:#}");
}

#[test]
fn hot_sets_that_do_not_fit_are_given_whole_to_those_that_fit() {
    let _g = serial();
    let mut d = daemon("512M", &[]);
    let work = ["--size", "384M", "--hot", "320M", "--duration", "70s", "--json", "--report", "2s"];
    d.run_workload("a", &["--size", "384M"], &work);
    d.run_workload("b", &["--size", "384M"], &work);
    // 640 MiB of hot sets on 512: shared alike, both would thrash. One of them gets all of
    // its hot set: by a quota, or under the shared limit when the LRU has already let one
    // win (quotas must then beat what the tenants measurably do, see docs/design.md).
    let holder = |d: &mut Daemon| {
        ["a", "b"].into_iter().find(|n| {
            let t = d.tenant(n);
            t["quota_bytes"].as_u64().unwrap_or_else(|| u(&t["dram_bytes"])) >= 320 * MIB
        })
    };
    let end = Instant::now() + Duration::from_secs(60);
    let mut winner = holder(&mut d);
    while winner.is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
        winner = holder(&mut d);
    }
    let winner = winner.unwrap_or_else(|| panic!("no tenant held its whole hot set within 60 s: {}", d.log()));
    // On v1 a cut the kernel cannot reclaim at once is held partway for a pass or two
    // while the winner's rise is written; the quotas (if any) then settle within the budget.
    let mut read_quotas = || -> Vec<u64> {
        d.status()["tenants"].as_array().unwrap().iter().map(|t| t["quota_bytes"].as_u64().unwrap_or(0)).collect()
    };
    let end = Instant::now() + Duration::from_secs(20);
    let mut quotas = read_quotas();
    while quotas.iter().sum::<u64>() > 512 * MIB + MIB && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(500));
        quotas = read_quotas();
    }
    assert!(quotas.iter().sum::<u64>() <= 512 * MIB + MIB, "the quotas never settled within the budget: {quotas:?}");
    eprintln!(
        "{winner} holds its hot set; quotas {:?} MiB (0: the shared limit)",
        quotas.iter().map(|q| q / MIB).collect::<Vec<_>>()
    );
    // A winner runs: its throughput climbs to where a tenant with its hot set in DRAM is.
    // Under the shared limit the first holder is one instant's LRU (CI once saw it lose
    // its hot set before the first quota pass), so whichever tenant gets there counts.
    let from_dram = |d: &Daemon, n: &str| {
        let r: Vec<f64> = d
            .tenant_stdout(n)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["ops_per_sec"].as_f64())
            .collect();
        r.len() >= 2 && r[r.len() - 1] > 200_000.0 && r[r.len() - 2] > 200_000.0
    };
    let mut running = None;
    wait_for(&format!("a winner running from DRAM (first holder {winner})"), Duration::from_secs(30), || {
        running = ["a", "b"].into_iter().find(|n| from_dram(&d, n));
        running.is_some()
    });
    let winner = running.unwrap();
    let e = d.ctl(&["explain", winner]);
    assert!(e.contains("quota"), "{e}");
    assert!(d.log().contains("DRAM short"), "the plan says why: {}", d.log());
}

/// Wall-clock bounds of the wake-up: the last idle report and the first active one
/// after it (the phase changed in between).
fn wake_window(stdout: &str) -> Option<(f64, f64)> {
    let mut last_idle = None;
    for line in stdout.lines().filter(|l| l.starts_with('{') && l.contains("\"phase\"")) {
        let v: Value = serde_json::from_str(line).ok()?;
        match v["phase"].as_str()? {
            "idle" => last_idle = v["unix"].as_f64(),
            "active" if last_idle.is_some() => return Some((last_idle?, v["unix"].as_f64()?)),
            _ => {}
        }
    }
    None
}

/// Wall-clock time of the first idle report (the phase began within the second before).
fn first_idle_report(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{') && l.contains("\"phase\":\"idle\""))
        .find_map(|l| serde_json::from_str::<Value>(l).ok()?["unix"].as_f64())
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

#[test]
fn an_idle_tenant_is_seen_at_rest_within_seconds_and_its_hot_set_is_back_soon_after_it_wakes() {
    let _g = serial();
    let mut d = daemon("512M", &[]);
    d.run_workload(
        "sleepy",
        &["--size", "384M"],
        // Its last phase outlasts the 76 s of polling below, counted from its fill.
        &["--size", "384M", "--hot", "192M", "--phase", "active:26s,idle:34s,active:30s", "--json", "--report", "1s"],
    );
    d.run_workload(
        "busy",
        &["--size", "512M"],
        // A hot set that needs the DRAM the idle one holds while it rests, and rests
        // itself from just before the other wakes: what comes back is then a matter of
        // prefetch speed. (Two uniform hot sets that cannot both fit are the allocation's
        // to settle, whole to one: `hot_sets_that_do_not_fit_are_given_whole_to_those_that_fit`.)
        &["--size", "512M", "--hot", "400M", "--phase", "active:56s,idle:30s", "--json", "--report", "5s"],
    );
    // Its phases start once it has filled, which beside the busy tenant's fill and other
    // load can take tens of seconds (one run saw no idle phase in 80 s from the start):
    // the polling starts 18 s into its first active phase.
    d.wait_filled("sleepy", Duration::from_secs(150));
    std::thread::sleep(Duration::from_secs(18));
    let mut samples: Vec<(f64, f64, bool)> = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(58) {
        let t = d.tenant("sleepy");
        samples.push((unix_now(), mib(&t["tier_bytes"]), !t["at_rest_secs"].is_null()));
        std::thread::sleep(Duration::from_millis(250));
    }
    let pushed = samples.iter().map(|s| s.1).fold(0.0, f64::max);
    assert!(pushed > 100.0, "its memory went to the tier while idle: {pushed:.0} MiB");

    // Its CPU stopped when it went idle: tierd sees it at rest within seconds, not after
    // an interval or two of samples. The bound is under one 5 s interval: the reports give
    // the idle start to the second, the watch's quiet step waits while a pass moves pages
    // (up to a second), and the poll adds a quarter (CI under load read 3.6 s once).
    let stdout = d.tenant_stdout("sleepy");
    let tail: Vec<&str> = stdout.lines().rev().take(20).collect();
    let idle_from = first_idle_report(&stdout)
        .unwrap_or_else(|| panic!("the workload reported no idle phase; its last lines, newest first:\n{tail:#?}"))
        - 1.0;
    let rested = samples.iter().find(|s| s.2).unwrap_or_else(|| panic!("never seen at rest: {samples:?}"));
    assert!(rested.0 - idle_from <= 4.5, "at rest {:.1} s after it went idle", rested.0 - idle_from);
    assert!(!samples.iter().any(|s| s.2 && s.0 < idle_from), "at rest while it was busy: {samples:?}");
    let (idle_end, _) = wake_window(&stdout).expect("the workload reported its wake-up");
    // Back means the part of its hot set on the tier at the wake-up (what it has there
    // beyond its cold 192 MiB) read back: prefetched in runs, not a fault at a time
    // (under plain swap 192 MiB takes ~7 s of faults here). When that part left varies
    // with load: under CI's, the kernel's reclaim for the busy tenant took much of it
    // before tierd saw the rest, and once while it was still active.
    let tier_at = |when: f64| samples.iter().rev().find(|s| s.0 <= when).map_or(0.0, |s| s.1);
    let tier_at_wake = tier_at(idle_end);
    let sent = tier_at_wake - 192.0;
    assert!(sent >= 64.0, "its hot set went to the tier while idle: {sent:.0} MiB\n{samples:?}");
    let resident = samples
        .iter()
        .find(|s| s.0 > idle_end && tier_at_wake - s.1 >= 0.8 * sent)
        .unwrap_or_else(|| panic!("the hot set did not come back from the tier: {samples:?}"));
    assert!(resident.0 - idle_end <= 5.0, "hot set back in DRAM {:.1} s after the wake-up", resident.0 - idle_end);
    let explain = d.ctl(&["explain", "sleepy"]);
    assert!(explain.contains("woke"), "tierd says it saw the wake-up: {explain}");
    assert!(explain.contains("at rest for"), "and that it was at rest: {explain}");
}

#[test]
fn a_noisy_tenant_leaves_the_others_hot_sets_resident() {
    let _g = serial();
    let mut d = daemon("1G", &[]);
    let steady = ["--size", "384M", "--hot", "64M", "--duration", "105s", "--json", "--report", "5s"];
    for name in ["s1", "s2", "s3"] {
        d.run_workload(name, &["--size", "384M"], &steady);
    }
    let faults =
        |d: &mut Daemon| -> Vec<u64> { ["s1", "s2", "s3"].iter().map(|n| u(&d.tenant(n)["major_faults"])).collect() };
    // A quiet baseline: the steady tenants' own faults over 30 s, which include the
    // tracker's samples (each sampled hot page is paged out and faults back).
    std::thread::sleep(Duration::from_secs(25));
    let quiet_start = faults(&mut d);
    std::thread::sleep(Duration::from_secs(30));
    let quiet_end = faults(&mut d);
    d.run_workload(
        "noisy",
        &["--size", "1G"],
        &["--size", "1G", "--hot", "4K", "--phase", "sweep:35s", "--json", "--report", "5s", "--no-verify-all"],
    );
    std::thread::sleep(Duration::from_secs(30));
    let noisy_end = faults(&mut d);
    let st = d.status();
    for (i, name) in ["s1", "s2", "s3"].iter().enumerate() {
        let t = find_tenant(&st, name).unwrap();
        // 64 MiB is 16384 pages: a hot set pushed out would fault all of them again.
        let quiet = quiet_end[i] - quiet_start[i];
        let noisy = noisy_end[i] - quiet_end[i];
        assert!(
            noisy < quiet + 4096,
            "{name} faulted {noisy} pages from the tier in 30 s beside the noisy tenant, {quiet} in 30 s \
             before it: {t:#}\n{}",
            d.ctl(&["explain", name])
        );
        // Under one shared limit (its hot set is hot, the sweep's pages are not) or a quota
        // of its own, it keeps DRAM for its hot set.
        assert!(t["quota_bytes"].is_null() || mib(&t["quota_bytes"]) >= 64.0, "{name}: {t:#}");
    }
    let noisy = find_tenant(&st, "noisy").unwrap().clone();
    assert!(mib(&noisy["tier_bytes"]) > 100.0, "the noisy tenant pays with its own memory: {noisy:#}");
}

/// Where the swapped pages of `pid`'s largest anonymous mapping lie, over its first
/// `len` bytes.
fn swap_layout(pid: u32, len: u64) -> tierd_sys::pagemap::SwapLayout {
    let proc = tierd_sys::procfs::ProcFs::new("/proc");
    let maps = proc.maps(pid).unwrap();
    let m = maps.iter().filter(|m| m.is_anon_private()).max_by_key(|m| m.end - m.start).unwrap();
    let pm = tierd_sys::pagemap::Pagemap::open(std::path::Path::new("/proc"), pid).unwrap();
    pm.swap_layout(m.start, len.min(m.end - m.start)).unwrap()
}

/// A tenant whose work is done by short-lived children (a shell loop, `make`, a
/// server forking per request) works while they do: a child's CPU time counts from
/// its start and is not lost when it exits. Summed over the processes there were at
/// the last interval, such a tenant looked idle between children and came to rest.
#[test]
fn a_tenant_working_through_short_lived_children_is_never_taken_for_at_rest() {
    let _g = serial();
    let mut d = daemon("256M", &[]);
    // Each child spins for a second and a half; the loop ends by itself after 60 s.
    let spin = "i=0; while [ $i -lt 40 ]; do timeout 1.5 sh -c 'while :; do :; done'; i=$((i+1)); done";
    d.ctl(&["run", "--name", "builder", "--size", "32M", "--", "sh", "-c", spin]);
    // Its usual activity is learnt over its first seconds; then 30 s of looks.
    std::thread::sleep(Duration::from_secs(8));
    let start = Instant::now();
    let mut looks = 0;
    while start.elapsed() < Duration::from_secs(30) {
        let t = d.tenant("builder");
        assert!(
            t["at_rest_secs"].is_null(),
            "taken for at rest after {looks} looks: {t:#}\n{}",
            d.ctl(&["explain", "builder"])
        );
        looks += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    let explain = d.ctl(&["explain", "builder"]);
    assert!(!explain.contains("came to rest"), "{explain}");
    d.ctl(&["stop", "builder"]);
}

#[test]
fn a_resting_tenants_scattered_working_set_is_laid_out_in_runs_on_the_tier() {
    let _g = serial();
    // Huge pages go to the tier whole only into free 2 MiB clusters of slots: the tier
    // needs room beyond what the tenant fills (the thrash leaves holes all over).
    let mut d = daemon("256M", &["--tier-size", "1G"]);
    // A 320 MiB hot set on a 256 MiB budget thrashes: the kernel's reclaim writes it to
    // the tier a page at a time, and pages read back keep those scattered slots. (A hot
    // set the size of the budget is not enough: reclaim may take the cold tail instead.)
    let pid = d.run_workload(
        "r",
        &["--size", "384M"],
        &["--size", "384M", "--hot", "320M", "--phase", "active:16s,idle:60s,active:6s", "--json", "--report", "2s"],
    );
    std::thread::sleep(Duration::from_secs(15));
    let before = swap_layout(pid, 320 * MIB);
    assert!(before.swapped_pages > 4096, "the thrash put part of the hot set on the tier: {before:?}");
    assert!(before.long_run_share() < 0.1, "the thrash scattered it: {before:?}");
    // At rest, tierd reads its scattered regions back, rebuilds each as a huge page and
    // writes it out whole.
    wait_for("its working set laid out", Duration::from_secs(35), || {
        d.ctl(&["explain", "r"]).contains("regions of its working set in runs")
    });
    // Layout goes a pass at a time while the tier is idle: wait for the runs themselves
    // (up to 45 s, before the tenant's next active phase), not a fixed time. Judged by
    // the share of its pages in long runs: the mean run swung from 54 to 157 pages
    // between runs of the same layout, with a few hundred stray pages between regions.
    let laid_out = |l: &tierd_sys::pagemap::SwapLayout| l.swapped_pages > 16384 && l.long_run_share() >= 0.9;
    let end = Instant::now() + Duration::from_secs(45);
    let after = loop {
        let l = swap_layout(pid, 320 * MIB);
        if laid_out(&l) || Instant::now() >= end {
            break l;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    let mean = |l: &tierd_sys::pagemap::SwapLayout| l.swapped_pages as f64 / l.runs.max(1) as f64;
    eprintln!(
        "pages per run of slots: {:.1} before, {:.1} after; in runs of 64 or more: {:.0}% before, {:.0}% after",
        mean(&before),
        mean(&after),
        before.long_run_share() * 100.0,
        after.long_run_share() * 100.0
    );
    assert!(laid_out(&after), "before {before:?}, after {after:?}\n{}", d.ctl(&["explain", "r"]));
    let log = d.ctl(&["explain", "r"]);
    assert!(!log.contains("cannot be laid out"), "{log}");
    // Every page is still what the tenant wrote (the workload verifies each read and,
    // at the end, all of its memory).
    // (Its last check reads 384 MiB back through a 256 MiB budget: up to a minute.)
    wait_for("the workload to finish", Duration::from_secs(120), || d.tenant_stdout("r").contains("\"summary\":true"));
    let s = d.summary("r");
    assert_eq!(s["corrupt_pages"], 0, "{s}");
    assert!(u(&s["verified_pages"]) >= 98304, "{s}");
}

#[test]
fn a_tenant_that_opted_out_of_huge_pages_is_told_its_layout_stays_scattered() {
    let _g = serial();
    let mut d = daemon("128M", &["--tier-size", "512M"]);
    // MADV_NOHUGEPAGE: MADV_COLLAPSE refuses its memory with EINVAL.
    d.run_workload(
        "s",
        &["--size", "192M"],
        &["--size", "192M", "--hot", "160M", "--small-pages", "--phase", "active:10s,idle:40s", "--no-verify-all"],
    );
    wait_for("the refusal explained", Duration::from_secs(45), || {
        d.ctl(&["explain", "s"]).contains("cannot be laid out in runs on the tier")
    });
    let log = d.ctl(&["explain", "s"]);
    assert!(!log.contains("regions of its working set in runs"), "{log}");
}
