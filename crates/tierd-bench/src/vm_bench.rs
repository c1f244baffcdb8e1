//! `tierd-bench vm`: live migration of a tiered VM, side by side with the same VM
//! all in DRAM.
//!
//! A QEMU guest (the test guest of `scripts/guest.sh`: Debian's kernel, busybox and
//! tierd-bench's workload, which verifies its memory) runs as a tierd tenant; once
//! its memory has settled, QEMU's own live migration moves it to a second QEMU on
//! this host (over a Unix socket; the second QEMU stands for the destination host and
//! is not a tenant). Measured: QEMU's total time and downtime, what it transferred,
//! and the guest workload's throughput during the migration against the 20 s before.
//!
//! Modes: `dram` (no limit), `tierd` (2x overcommit: most of the guest on the tier),
//! and `tierd-prefetch` (the same, with tierd prefetching the guest's tier pages
//! while the migration reads them — whether reading ahead of the stream helps).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};
use tierd_core::TenantName;
use tierd_core::size::{MIB, human};
use tierd_core::tenant::TenantSpec;

use crate::harness::{Tierd, sleep};
use crate::machine::RunInfo;
use crate::qmp::Qmp;
use crate::scenario::{Report, parse_reports};

/// Guest RAM, and the workload inside it.
const GUEST_RAM_MIB: u64 = 1024;
const WORKLOAD_MIB: u64 = 800;
const HOT_MIB: u64 = 96;
/// How long the guest's workload runs: past the migration, after which it verifies
/// every page of its memory on the destination.
const GUEST_ACTIVE_SECS: u64 = 200;
/// tierd's DRAM budget when tiering: about half of what the VM uses (2x).
const BUDGET_MIB: u64 = 560;

/// The test guest's kernel and initramfs.
#[derive(Debug, Clone)]
pub struct GuestImage {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

impl GuestImage {
    /// `target/guest`, beside the directory of the running binary's profile, and the
    /// QEMU that boots it; the error says how to get them.
    pub fn find() -> anyhow::Result<GuestImage> {
        let exe = std::env::current_exe()?;
        let dir = exe.parent().and_then(Path::parent).context("no target directory")?.join("guest");
        let img = GuestImage { kernel: dir.join("vmlinuz"), initrd: dir.join("initrd.img") };
        if !img.kernel.exists() || !img.initrd.exists() {
            bail!("no test guest in {}: build it with scripts/guest.sh", dir.display());
        }
        qemu_version()?;
        Ok(img)
    }

    /// QEMU's command line for this guest with `ram_mib` of RAM running `workload`
    /// (tierd-bench workload arguments), its console on stdout. Software emulation
    /// (`tcg`); `kvm` where the host has hardware virtualization.
    pub fn qemu_argv(&self, ram_mib: u64, workload: &str, kvm: bool, extra: &[String]) -> Vec<String> {
        let accel = if kvm { "kvm" } else { "tcg,tb-size=64" };
        let mut v: Vec<String> = [
            "qemu-system-x86_64",
            "-machine",
            "pc",
            "-accel",
            accel,
            "-smp",
            "1",
            "-m",
            &format!("{ram_mib}M"),
            "-display",
            "none",
            "-serial",
            "stdio",
            "-monitor",
            "none",
            "-no-reboot",
            "-kernel",
            &self.kernel.to_string_lossy(),
            "-initrd",
            &self.initrd.to_string_lossy(),
            "-append",
            &format!("console=ttyS0 quiet panic=-1 workload=\"{workload}\""),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().cloned());
        v
    }
}

/// The guest workload's reports from a serial console's output.
pub fn guest_reports(console: &str) -> Vec<Report> {
    let clean: String = console.replace('\r', "");
    parse_reports(&clean)
}

/// One migration.
#[derive(Debug, Clone, Serialize)]
pub struct Migration {
    pub mode: &'static str,
    /// Guest RAM on the tier when the migration started.
    pub tier_bytes_at_start: u64,
    pub total_ms: u64,
    pub downtime_ms: u64,
    pub setup_ms: u64,
    pub transferred_bytes: u64,
    /// Zero pages QEMU sent as such (guest RAM never touched).
    pub zero_pages: u64,
    pub mbps: f64,
    /// Guest throughput during the migration against the 20 s before it.
    pub relative_throughput_during: f64,
    pub ops_per_sec_before: f64,
    pub ops_per_sec_during: f64,
    /// The guest's workload ended without finding a wrong byte (on the destination).
    pub guest_verified: bool,
    pub prefetched_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VmResults {
    pub run: RunInfo,
    pub guest_ram_bytes: u64,
    pub workload_bytes: u64,
    pub hot_bytes: u64,
    pub budget_bytes: u64,
    pub qemu_version: String,
    pub migrations: Vec<Migration>,
}

/// A QEMU started by the benchmark (the destination): killed by PID when dropped.
struct Destination {
    child: Child,
}

impl Drop for Destination {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tierd_args(mode: &str) -> Vec<String> {
    let (policy, budget) = if mode == "dram" { ("none", 16 * 1024 * MIB) } else { ("tierd", BUDGET_MIB * MIB) };
    ["--policy", policy, "--dram-budget", &budget.to_string(), "--ratio", "2", "--interval", "2s", "--window", "16s"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Ops per second over reports whose guest clock (`unix`) lies in `[from, to)`.
fn ops_between(reports: &[Report], from: f64, to: f64) -> f64 {
    let r: Vec<&Report> = reports.iter().filter(|r| r.unix >= from && r.unix < to).collect();
    if r.is_empty() { 0.0 } else { r.iter().map(|r| r.ops_per_sec).sum::<f64>() / r.len() as f64 }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn migrate_once(img: &GuestImage, mode: &'static str, kvm: bool) -> anyhow::Result<Migration> {
    let mut t = Tierd::start(&tierd_args(mode))?;
    let dir = t.dir.clone();
    let workload =
        format!("--size {}M --hot {}M --phase active:{}s --json --report 1s", WORKLOAD_MIB, HOT_MIB, GUEST_ACTIVE_SECS);
    let src_qmp = dir.join("src.qmp");
    let extra = vec!["-qmp".to_string(), format!("unix:{},server=on,wait=off", src_qmp.display())];
    let mut spec = TenantSpec::new(TenantName::new("vm")?);
    spec.vm = true;
    spec.size = Some((GUEST_RAM_MIB + 128) * MIB);
    t.run(spec, img.qemu_argv(GUEST_RAM_MIB, &workload, kvm, &extra))?;
    eprintln!("  {mode}: booting the guest and filling {WORKLOAD_MIB} MiB");
    let end = Instant::now() + Duration::from_secs(300);
    while guest_reports(&t.tenant_stdout("vm")).len() < 5 {
        if Instant::now() > end {
            bail!("the guest did not report within 300 s: {}", t.tenant_stdout("vm"));
        }
        sleep(Duration::from_secs(1))?;
    }
    // Let tierd settle the guest's memory (under `dram`: the same wait).
    sleep(Duration::from_secs(45))?;
    let g = t.tenant("vm")?.guest.context("tierd did not recognise the VM")?;
    let tier_at_start = g.ram_tier_bytes;
    eprintln!(
        "  {mode}: guest RAM {} in DRAM, {} on the tier; migrating",
        human(g.ram_dram_bytes),
        human(tier_at_start)
    );

    // The destination: the same guest, waiting for the migration stream.
    let mig = dir.join("migration.sock");
    let console = dir.join("destination.out");
    let _dst = start_destination(img, &dir, &mig, &console, &workload, kvm)?;
    let mut q = Qmp::connect(&src_qmp, Duration::from_secs(10))?;
    // No bandwidth cap (QEMU's default is 128 MiB/s): the tier, not a setting, limits.
    q.execute("migrate-set-parameters", json!({ "max-bandwidth": 8u64 << 30, "downtime-limit": 300 }))?;
    let started = unix_now();
    q.execute("migrate", json!({ "uri": format!("unix:{}", mig.display()) }))?;
    let (info, prefetched) = wait_for_migration(&mut q, &mut t, mode, started)?;
    let ended = unix_now();
    // The guest goes on on the destination: let it report, then check it is whole.
    sleep(Duration::from_secs(5))?;
    let before = guest_reports(&t.tenant_stdout("vm"));
    let after = guest_reports(&std::fs::read_to_string(&console).unwrap_or_default());
    let all: Vec<Report> = before.iter().chain(after.iter()).cloned().collect();
    let ops_before = ops_between(&all, started - 20.0, started);
    let ops_during = ops_between(&all, started, ended.max(started + 1.0));
    let ram = &info["ram"];
    // The guest ends its run on the destination by verifying all of its memory.
    let summary = finished_on(&console)?;
    if !after.iter().any(|r| r.unix < started + (GUEST_ACTIVE_SECS as f64) && r.unix > ended) {
        eprintln!("  {mode}: the guest finished its run before the migration did; throughput during it is partial");
    }
    Ok(Migration {
        mode,
        tier_bytes_at_start: tier_at_start,
        total_ms: info["total-time"].as_u64().unwrap_or(0),
        downtime_ms: info["downtime"].as_u64().unwrap_or(0),
        setup_ms: info["setup-time"].as_u64().unwrap_or(0),
        transferred_bytes: ram["transferred"].as_u64().unwrap_or(0),
        zero_pages: ram["duplicate"].as_u64().unwrap_or(0),
        mbps: ram["mbps"].as_f64().unwrap_or(0.0),
        relative_throughput_during: if ops_before > 0.0 { ops_during / ops_before } else { 0.0 },
        ops_per_sec_before: ops_before,
        ops_per_sec_during: ops_during,
        guest_verified: verified_whole(&summary),
        prefetched_bytes: prefetched,
    })
}

/// The destination QEMU, listening on `mig` for the stream, its console in `console`.
fn start_destination(
    img: &GuestImage,
    dir: &Path,
    mig: &Path,
    console: &Path,
    workload: &str,
    kvm: bool,
) -> anyhow::Result<(Destination, Qmp)> {
    let dst_qmp = dir.join("dst.qmp");
    let mut dst_extra = vec!["-qmp".to_string(), format!("unix:{},server=on,wait=off", dst_qmp.display())];
    dst_extra.extend(["-incoming".to_string(), format!("unix:{}", mig.display())]);
    let dst_argv = img.qemu_argv(GUEST_RAM_MIB, workload, kvm, &dst_extra);
    let child = Command::new(&dst_argv[0])
        .args(&dst_argv[1..])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(console)?)
        .stderr(Stdio::null())
        .spawn()
        .context("starting the destination QEMU")?;
    let dst = Destination { child };
    let dq = Qmp::connect(&dst_qmp, Duration::from_secs(30))?;
    let end = Instant::now() + Duration::from_secs(30);
    while !mig.exists() {
        if Instant::now() > end {
            bail!("the destination QEMU did not listen on {}", mig.display());
        }
        sleep(Duration::from_millis(100))?;
    }
    Ok((dst, dq))
}

/// Polls the source until the migration completes (600 s at most); in mode
/// `tierd-prefetch` asks tierd to read the guest back meanwhile. Returns QEMU's final
/// migration info and the bytes prefetched.
fn wait_for_migration(q: &mut Qmp, t: &mut Tierd, mode: &str, started: f64) -> anyhow::Result<(Value, u64)> {
    let mut prefetched = 0;
    loop {
        sleep(Duration::from_millis(250))?;
        if mode == "tierd-prefetch" {
            let name = TenantName::new("vm")?;
            if let Ok(v) = t.request(&tierd::api::Request::Prefetch { name, bytes: None }) {
                prefetched += v["bytes"].as_u64().unwrap_or(0);
            }
        }
        let v = q.execute("query-migrate", json!({}))?;
        match v["status"].as_str().unwrap_or("") {
            "completed" => return Ok((v, prefetched)),
            "failed" | "cancelled" => bail!("migration {}: {v}", v["status"]),
            _ => {}
        }
        if unix_now() - started > 600.0 {
            bail!("migration did not complete within 600 s: {v}");
        }
    }
}

/// The destination's console once the guest's workload has exited.
fn finished_on(console: &Path) -> anyhow::Result<String> {
    let end = Instant::now() + Duration::from_secs(GUEST_ACTIVE_SECS + 300);
    loop {
        let out = std::fs::read_to_string(console).unwrap_or_default().replace('\r', "");
        if out.contains("guest: workload exit") {
            return Ok(out);
        }
        if Instant::now() > end {
            bail!("the guest did not finish on the destination: {out}");
        }
        sleep(Duration::from_secs(1))?;
    }
}

/// The guest's workload exited 0 having verified every page of its memory.
fn verified_whole(console: &str) -> bool {
    console.contains("guest: workload exit 0")
        && console.lines().any(|l| {
            l.contains("\"summary\":true")
                && serde_json::from_str::<Value>(l).is_ok_and(|v| v["verified_pages"] == WORKLOAD_MIB * MIB / 4096)
        })
}

/// The first line of `qemu-system-x86_64 --version`.
fn qemu_version() -> anyhow::Result<String> {
    Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").to_string())
        .context("qemu-system-x86_64 not found: scripts/guest.sh installs it")
}

pub fn run(out: &Path, modes: &[String], kvm: bool) -> anyhow::Result<VmResults> {
    let img = GuestImage::find()?;
    let qemu_version = qemu_version()?;
    let mut res = VmResults {
        run: RunInfo::collect(),
        guest_ram_bytes: GUEST_RAM_MIB * MIB,
        workload_bytes: WORKLOAD_MIB * MIB,
        hot_bytes: HOT_MIB * MIB,
        budget_bytes: BUDGET_MIB * MIB,
        qemu_version,
        migrations: Vec::new(),
    };
    for (i, m) in modes.iter().enumerate() {
        let mode: &'static str = match m.as_str() {
            "dram" => "dram",
            "tierd" => "tierd",
            "tierd-prefetch" => "tierd-prefetch",
            other => bail!("unknown mode `{other}`: dram, tierd or tierd-prefetch"),
        };
        eprintln!("[{}/{}] live migration under {mode}", i + 1, modes.len());
        res.migrations.push(migrate_once(&img, mode, kvm)?);
        write(out, &res)?;
    }
    Ok(res)
}

fn write(out: &Path, r: &VmResults) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("vm.json"), serde_json::to_string_pretty(r)?)?;
    let mut md = String::from("# Live migration of a tiered VM\n\n");
    md += &r.run.markdown();
    md += &format!(
        "\n{}. Guest: {} of RAM, running tierd-bench's workload over {} with a {} hot set (it verifies \
         every read, and keeps running on the destination). `tierd` runs it on a {} DRAM budget \
         (2x); `dram` without a limit. The destination is a second QEMU on this host, over a Unix socket, \
         bandwidth uncapped. One run per mode.\n\n",
        r.qemu_version,
        human(r.guest_ram_bytes),
        human(r.workload_bytes),
        human(r.hot_bytes),
        human(r.budget_bytes)
    );
    md += "| mode | guest RAM on the tier | total time (s) | downtime (ms) | transferred | throughput during | guest verified |\n|---|---|---|---|---|---|---|\n";
    for m in &r.migrations {
        md += &format!(
            "| {} | {} | {:.1} | {} | {} | {:.2} | {} |\n",
            m.mode,
            human(m.tier_bytes_at_start),
            m.total_ms as f64 / 1000.0,
            m.downtime_ms,
            human(m.transferred_bytes),
            m.relative_throughput_during,
            if m.guest_verified { "yes" } else { "NO" }
        );
    }
    std::fs::write(out.join("vm.md"), md)?;
    Ok(())
}
