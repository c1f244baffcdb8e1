//! Running tierd and tenants for a benchmark, and cleaning up after them.
//!
//! A [`Tierd`] runs in a private directory, socket and cgroup subtree. Dropping it —
//! at the end, on an error, or after Ctrl-C (see [`interrupted`]) — stops tierd with
//! SIGTERM (limits lifted, tier removed), kills the tenants it started by PID, and
//! removes any swap area, loop device or cgroup left under its directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tierd::api::{Request, Status, TenantStatus, call};
use tierd_core::TenantName;
use tierd_core::tenant::TenantSpec;

static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Where each run's logs are kept (see [`keep_logs_in`]), and the name of the next run.
static KEEP_LOGS: OnceLock<PathBuf> = OnceLock::new();
static NEXT_LABEL: Mutex<String> = Mutex::new(String::new());

/// Keeps each tierd's log and its tenants' and clients' output in `dir/LABEL/` when
/// the tierd is dropped (the run directory itself is removed): to see afterwards what
/// tierd decided during a benchmark run.
pub fn keep_logs_in(dir: PathBuf) -> anyhow::Result<()> {
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    KEEP_LOGS.set(dir).map_err(|_| anyhow::anyhow!("logs are already kept elsewhere"))
}

/// Names the logs of the next tierd started (e.g. `wake-up-fast-tierd-1`).
pub fn label_next_run(label: &str) {
    let clean: String = label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    *NEXT_LABEL.lock().unwrap_or_else(|p| p.into_inner()) = clean;
}

/// Catches SIGINT/SIGTERM so a benchmark can stop between steps and clean up.
pub fn catch_interrupts() -> anyhow::Result<()> {
    let flag = INTERRUPTED.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    Ok(())
}

/// True once the user asked to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Sleeps, returning an error early if interrupted.
pub fn sleep(d: Duration) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if interrupted() {
            bail!("interrupted");
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(100)));
    }
    Ok(())
}

/// A binary next to the running one (the workspace's target directory), or one level
/// up when the running one is a test in `target/*/deps`.
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let here = me.with_file_name(name);
    let up = me.parent().and_then(Path::parent).map(|d| d.join(name));
    match [Some(here.clone()), up].into_iter().flatten().find(|p| p.exists()) {
        Some(p) => Ok(p),
        None => bail!(
            "{} not found next to {}; build the workspace (cargo build --release --workspace)",
            name,
            me.display()
        ),
    }
}

const RUN_PARENT: &str = "/var/tmp";
const RUN_PREFIX: &str = "tierd-bench-";
const SLOW_PREFIX: &str = "tierd-bench-slow-";

/// This process's cgroup directory in the v1 `blkio` hierarchy (slow tiers are blkio
/// throttles; memory goes through [`tierd_sys::cgroup::own_memory_dir`]).
fn own_blkio_cgroup() -> anyhow::Result<PathBuf> {
    let own = tierd_sys::procfs::ProcFs::new("/proc").cgroup(None, "blkio")?;
    let dir = Path::new("/sys/fs/cgroup/blkio").join(own.trim_start_matches('/'));
    if !dir.is_dir() {
        bail!("no blkio cgroup (v1) here: {} is not a directory", dir.display());
    }
    Ok(dir)
}

/// Releases what benchmark runs killed before their teardown left behind (their swap
/// above all, and the blkio groups of their slow tiers): once, before the first tierd.
fn sweep_killed_runs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(memory) = tierd_sys::cgroup::own_memory_dir() else { return };
        for line in tierd::leftovers::sweep(Path::new(RUN_PARENT), RUN_PREFIX, &memory) {
            eprintln!("tierd-bench: {line}");
        }
        if let Ok(blkio) = own_blkio_cgroup() {
            for dir in tierd::leftovers::orphaned(&blkio, SLOW_PREFIX) {
                if !tierd_sys::cgroup::remove_tree(&dir, Duration::from_secs(5)) {
                    eprintln!("tierd-bench: blkio cgroup {} of a killed run is still busy; left", dir.display());
                }
            }
        }
    });
}

/// A tierd under benchmark.
pub struct Tierd {
    pub dir: PathBuf,
    pub socket: PathBuf,
    child: Option<Child>,
    cgroup_name: String,
    pids: Vec<u32>,
    /// Load generators outside tierd (the clients of server tenants).
    clients: Vec<Child>,
    /// The name its logs are kept under, if they are (see [`keep_logs_in`]).
    label: String,
}

impl Tierd {
    /// Starts tierd with `args` (budget, policy, …) in a fresh directory under `/var/tmp`.
    pub fn start(args: &[String]) -> anyhow::Result<Tierd> {
        sweep_killed_runs();
        // Named for this process, so a later run can tell it was killed (see `leftovers`).
        let cgroup_name = format!("{RUN_PREFIX}{}-{}", std::process::id(), fastrand::u64(..));
        let dir = Path::new(RUN_PARENT).join(&cgroup_name);
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("tierd.sock");
        let log = std::fs::File::create(dir.join("tierd.log"))?;
        let child = Command::new(sibling("tierd")?)
            .args(args)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--socket")
            .arg(&socket)
            .arg("--cgroup-name")
            .arg(&cgroup_name)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting tierd")?;
        let label = std::mem::take(&mut *NEXT_LABEL.lock().unwrap_or_else(|p| p.into_inner()));
        let label = if label.is_empty() { cgroup_name.clone() } else { label };
        let mut t =
            Tierd { dir, socket, child: Some(child), cgroup_name, pids: Vec::new(), clients: Vec::new(), label };
        let end = Instant::now() + Duration::from_secs(60);
        while call(&t.socket, &Request::Status, Duration::from_secs(5)).is_err() {
            if let Some(st) = t.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("tierd exited ({st}): {}", t.log());
            }
            if Instant::now() > end {
                bail!("tierd did not answer within 60 s: {}", t.log());
            }
            sleep(Duration::from_millis(100))?;
        }
        Ok(t)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tierd.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn request(&self, req: &Request) -> anyhow::Result<serde_json::Value> {
        Ok(call(&self.socket, req, Duration::from_secs(300))?)
    }

    pub fn status(&self) -> anyhow::Result<Status> {
        Ok(serde_json::from_value(self.request(&Request::Status)?)?)
    }

    pub fn tenant(&self, name: &str) -> anyhow::Result<TenantStatus> {
        self.status()?.tenants.into_iter().find(|t| t.name == name).with_context(|| format!("no tenant {name}"))
    }

    /// Starts `argv` as tenant `spec.name`; returns its PID.
    pub fn run(&mut self, spec: TenantSpec, argv: Vec<String>) -> anyhow::Result<u32> {
        let v = self.request(&Request::Run { spec, argv, cwd: None })?;
        let pid = v["pid"].as_u64().context("no pid in answer")? as u32;
        self.pids.push(pid);
        Ok(pid)
    }

    /// Starts a workload-generator tenant.
    pub fn run_workload(&mut self, name: &str, size: u64, workload_args: &[&str]) -> anyhow::Result<u32> {
        let mut spec = TenantSpec::new(TenantName::new(name)?);
        spec.size = Some(size);
        let mut argv = vec![sibling("tierd-bench")?.to_string_lossy().to_string(), "workload".to_string()];
        argv.extend(workload_args.iter().map(|s| s.to_string()));
        self.run(spec, argv)
    }

    /// Starts `tierd-bench ARGS` outside tierd as the client of tenant `name`: its own
    /// memory and CPU are not the tenant's. Output to `NAME.client.{out,err}`.
    pub fn spawn_client(&mut self, name: &str, args: &[String]) -> anyhow::Result<()> {
        let out = std::fs::File::create(self.dir.join(format!("{name}.client.out")))?;
        let err = std::fs::File::create(self.dir.join(format!("{name}.client.err")))?;
        let child = Command::new(sibling("tierd-bench")?)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting the client of {name}"))?;
        self.clients.push(child);
        Ok(())
    }

    /// What the client of tenant `name` printed.
    pub fn client_stdout(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.client.out"))).unwrap_or_default()
    }

    pub fn tenant_stdout(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join("state/tenants").join(name).join("stdout")).unwrap_or_default()
    }

    /// Waits until `f` holds, polling tierd's status.
    pub fn wait_until(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Status) -> bool) -> anyhow::Result<()> {
        let end = Instant::now() + timeout;
        loop {
            if f(&self.status()?) {
                return Ok(());
            }
            if Instant::now() > end {
                bail!("timed out after {timeout:?} waiting for {what}");
            }
            sleep(Duration::from_millis(200))?;
        }
    }
}

fn kill(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).stderr(Stdio::null()).status();
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.contains(") Z ")).unwrap_or(false)
}

impl Drop for Tierd {
    fn drop(&mut self) {
        // Clients first (a pg-client stops its pgbench on SIGTERM), then the tenants: a
        // server asked to stop (SIGINT: PostgreSQL's fast shutdown) takes its own
        // processes and shared memory with it; what is still alive after 10 s is killed.
        for c in &self.clients {
            kill(c.id(), "TERM");
        }
        let end = Instant::now() + Duration::from_secs(10);
        for c in &mut self.clients {
            while c.try_wait().ok().flatten().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for &pid in &self.pids {
            if alive(pid) {
                kill(pid, "INT");
            }
        }
        let end = Instant::now() + Duration::from_secs(10);
        while self.pids.iter().any(|&p| alive(p)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        for &pid in &self.pids {
            if alive(pid) {
                kill(pid, "KILL");
            }
        }
        if let Some(mut c) = self.child.take() {
            kill(c.id(), "TERM");
            let end = Instant::now() + Duration::from_secs(120);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for problem in tierd_sys::swap::release_under(Path::new("/proc"), Path::new("/sys"), &self.dir) {
            eprintln!("tierd-bench: {problem}");
        }
        if let Ok(own) = tierd_sys::cgroup::own_memory_dir() {
            let dir = own.join(&self.cgroup_name);
            if !tierd_sys::cgroup::remove_tree(&dir, Duration::from_secs(30)) {
                eprintln!("tierd-bench: cgroup {} is still busy after 30 s; left behind", dir.display());
            }
        }
        if let Some(keep) = KEEP_LOGS.get()
            && let Err(e) = self.keep_logs(&keep.join(&self.label))
        {
            eprintln!("tierd-bench: keeping the logs of {}: {e:#}", self.label);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Tierd {
    /// Copies tierd's log, and what its tenants and their clients printed, to `to`.
    fn keep_logs(&self, to: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(to)?;
        std::fs::copy(self.dir.join("tierd.log"), to.join("tierd.log"))?;
        let tenants = std::fs::read_dir(self.dir.join("state/tenants")).into_iter().flatten().flatten();
        for e in tenants {
            for stream in ["stdout", "stderr"] {
                let from = e.path().join(stream);
                if from.exists() {
                    std::fs::copy(&from, to.join(format!("{}.{stream}", e.file_name().to_string_lossy())))?;
                }
            }
        }
        for e in std::fs::read_dir(&self.dir)?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".client.out") || name.ends_with(".client.err") {
                std::fs::copy(e.path(), to.join(&name))?;
            }
        }
        Ok(())
    }
}

/// Read limits that make the tier device behave like a slower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Throttle {
    pub read_iops: u64,
    pub read_bytes_per_sec: u64,
    /// Seconds into the run before the limits apply: tenants fill and settle on the
    /// fast tier first, so what is measured is the slow tier's effect on the phase
    /// that follows, not on the set-up.
    pub after_secs: u64,
}

impl Throttle {
    /// A hard disk: 150 random reads a second, 150 MB/s sequential.
    pub const fn hard_disk(after_secs: u64) -> Throttle {
        Throttle { read_iops: 150, read_bytes_per_sec: 150_000_000, after_secs }
    }
}

/// A blkio cgroup (cgroup v1) under our own whose members' reads of one device are
/// throttled: the slow tier of DESIGN.md. Processes put in it go back to our own
/// blkio cgroup, and the group is removed, when it is dropped.
pub struct SlowTier {
    dir: PathBuf,
    parent: PathBuf,
}

/// The disk whose reads a throttle on `device` should limit, as `major:minor`. A loop
/// device's reads are limited where they reach the disk under its backing file: there
/// the loop driver has merged adjacent pages into one request, as a disk queue would,
/// so sequential reads count as few I/Os (throttling the loop device itself counts
/// every 4 KiB page as one, which no real disk does).
pub fn throttle_target(device: &Path) -> anyhow::Result<(u32, u32, String)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(device).with_context(|| format!("tier device {}", device.display()))?;
    if !meta.file_type().is_block_device() {
        bail!("a slow tier needs a block-device tier; {} is not one", device.display());
    }
    let name = device.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let backing = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok();
    let dev = match backing {
        Some(f) => std::fs::metadata(f.trim()).with_context(|| format!("backing file of {name}"))?.dev(),
        None => meta.rdev(),
    };
    let (mut major, mut minor) = (libc::major(dev), libc::minor(dev));
    // Throttle rules take whole disks: a partition's limits go on its disk.
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists()
        && let Ok(d) = std::fs::read_to_string(sys.join("../dev"))
        && let Some((a, b)) = d.trim().split_once(':')
    {
        (major, minor) = (a.parse()?, b.parse()?);
    }
    let disk = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| format!("{major}:{minor}"));
    Ok((major, minor, disk))
}

impl SlowTier {
    pub fn new(device: &Path, th: Throttle) -> anyhow::Result<SlowTier> {
        let (major, minor, _) = throttle_target(device)?;
        let parent = own_blkio_cgroup().context("a slow tier cannot be emulated")?;
        let dir = parent.join(format!("{SLOW_PREFIX}{}-{}", std::process::id(), fastrand::u32(..)));
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let g = SlowTier { dir, parent };
        std::fs::write(g.dir.join("blkio.throttle.read_iops_device"), format!("{major}:{minor} {}", th.read_iops))?;
        std::fs::write(
            g.dir.join("blkio.throttle.read_bps_device"),
            format!("{major}:{minor} {}", th.read_bytes_per_sec),
        )?;
        Ok(g)
    }

    /// Moves a process (all its threads) into the group.
    pub fn add(&self, pid: u32) -> anyhow::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("moving {pid} into {}", self.dir.display()))
    }
}

impl Drop for SlowTier {
    fn drop(&mut self) {
        // Only processes this benchmark put here (and their children) are members.
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
        }
        let end = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        if self.dir.exists() {
            eprintln!("tierd-bench: blkio cgroup {} is still busy; left behind", self.dir.display());
        }
    }
}
