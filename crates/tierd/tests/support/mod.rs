//! Harness for the real-kernel tests: a tierd in a private state directory, socket and
//! cgroup subtree, torn down on drop (also when a test panics): tierd stopped, every
//! tenant it ran killed by PID, its swap areas turned off, loop devices detached and
//! cgroups removed. Tests in one binary take [`serial`] so they never overlap.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const MIB: u64 = tierd_core::size::MIB;
pub const GIB: u64 = tierd_core::size::GIB;

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs kernel tests one at a time; a failed test does not poison the rest.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn tierd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tierd"))
}

pub fn tierctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tierctl"))
}

/// tierd built with its crash points (`--features failpoints`, by scripts/test.sh),
/// if built; required when `TIERD_REQUIRE_FAILPOINTS` is set (as in CI).
pub fn failpoints_bin() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/failpoints/release/tierd");
    if p.exists() {
        return Some(p);
    }
    let why = format!(
        "{} is missing: build it as scripts/test.sh does (cargo build --release --features tierd/failpoints)",
        p.display()
    );
    assert!(std::env::var("TIERD_REQUIRE_FAILPOINTS").is_err(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// The workload generator, built by the same `cargo build`/`cargo test` of the workspace.
pub fn bench_bin() -> PathBuf {
    let p = tierd_bin().with_file_name("tierd-bench");
    assert!(p.exists(), "{} is missing: build the workspace first (cargo build --release --workspace)", p.display());
    p
}

/// The memory cgroup directory this test process (and so tierd) runs in.
pub fn own_memory_cgroup() -> PathBuf {
    tierd_sys::cgroup::own_memory_dir().expect("a memory cgroup")
}

pub fn swap_paths() -> Vec<String> {
    std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The active swap areas of tiers that live under `dir` (a file, its loop device, or the
/// dm-crypt mapping over that), by path.
pub fn swaps_under(dir: &Path) -> Vec<String> {
    let areas = tierd_sys::swap::areas_under(Path::new("/proc"), Path::new("/sys"), dir).expect("/proc/swaps");
    areas.into_iter().map(|a| a.path.to_string_lossy().to_string()).collect()
}

pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.contains(") Z ")).unwrap_or(false)
}

/// Waits until `f` holds, at most `timeout` times [`time_scale`].
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    if poll_until(timeout, || f().then_some(())).is_none() {
        panic!("timed out after {:?} waiting for {what}", timeout.mul_f64(time_scale()));
    }
}

/// The first value `f` gives, polled for at most `timeout` times [`time_scale`];
/// `None` if it gave none by then.
pub fn poll_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout.mul_f64(time_scale());
    while Instant::now() < end {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// How much slower than this host's CPU the tests run: `TIERD_TEST_TIME_SCALE`, which
/// the emulated guests set (scripts/guest-kernel-tests.sh); 1 unset.
pub fn time_scale() -> f64 {
    env_factor("TIERD_TEST_TIME_SCALE", |s| s >= 1.0)
}

/// The factor in environment variable `name` where set and `valid`, else 1.
fn env_factor(name: &str, valid: impl Fn(f64) -> bool) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&s| valid(s)).unwrap_or(1.0)
}

/// What share of their sizes the tests that opt in use: `TIERD_TEST_SIZE_SCALE` (0 to
/// 1), which the emulated guests set so gigabytes of fills and tier writes fit their
/// time; 1 unset.
pub fn size_scale() -> f64 {
    env_factor("TIERD_TEST_SIZE_SCALE", |s| s > 0.0 && s <= 1.0)
}

/// `bytes` times [`size_scale`], in whole MiB.
pub fn scaled(bytes: u64) -> u64 {
    ((bytes as f64 * size_scale() / MIB as f64).round() as u64).max(1) * MIB
}

/// `mib` MiB times [`size_scale`], in bytes.
pub fn scaled_mib(mib: u64) -> u64 {
    scaled(mib * MIB)
}

/// `mib` MiB times [`size_scale`], as a size argument (`64M`).
pub fn scaled_arg(mib: u64) -> String {
    format!("{}M", scaled_mib(mib) / MIB)
}

/// A workload phase (`active:40s`) made [`time_scale`] times longer: a tenant must
/// outlast what the test does around it on a slower CPU too.
pub fn phase(kind: &str, secs: u64) -> String {
    format!("{kind}:{}s", (secs as f64 * time_scale()).round() as u64)
}

/// Sleeps `d` times [`time_scale`]: time for the kernel or tierd to act.
pub fn pause(d: Duration) {
    std::thread::sleep(d.mul_f64(time_scale()));
}

/// A tierd under test.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub cgroup_name: String,
    pub args: Vec<String>,
    /// Crash points for the next spawn (`FAILPOINTS`, see `tierd::crash_point!`): it
    /// runs the failpoints build ([`failpoints_bin`]) and may die before its API is up.
    pub crash_at: Option<String>,
    child: Option<Child>,
    /// Every tenant PID seen, so teardown can stop them.
    pub tenant_pids: Vec<u32>,
}

impl Daemon {
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Starts tierd with `args` plus the private paths, and waits for its API.
    pub fn start(args: &[&str]) -> Daemon {
        Daemon::start_with(args, None)
    }

    /// [`Daemon::start`] with crash points (see [`Daemon::crash_at`]).
    pub fn start_with(args: &[&str], crash_at: Option<&str>) -> Daemon {
        let dir = run_dir();
        let socket = dir.path().join("tierd.sock");
        let cgroup_name = dir.path().file_name().unwrap().to_string_lossy().to_string();
        let mut d = Daemon {
            dir,
            socket,
            cgroup_name,
            args: args.iter().map(|s| s.to_string()).collect(),
            crash_at: crash_at.map(String::from),
            child: None,
            tenant_pids: Vec::new(),
        };
        d.spawn();
        d
    }

    pub fn spawn(&mut self) {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("tierd.log")).unwrap();
        let crash_at = self.crash_at.take();
        let bin = if crash_at.is_some() { failpoints_bin().expect("the failpoints build") } else { tierd_bin() };
        let child = Command::new(bin)
            .env("FAILPOINTS", crash_at.as_deref().unwrap_or(""))
            .args(&self.args)
            .arg("--state-dir")
            .arg(self.state_dir())
            .arg("--socket")
            .arg(&self.socket)
            .arg("--cgroup-name")
            .arg(&self.cgroup_name)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                assert!(crash_at.is_some(), "tierd exited early ({st}): {}", self.log());
                return;
            }
            if self.try_ctl(&["status", "--json"]).status.success() {
                return;
            }
            assert!(Instant::now() < end, "tierd did not come up: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tierd.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn try_ctl(&self, args: &[&str]) -> Output {
        Command::new(tierctl_bin()).arg("--socket").arg(&self.socket).args(args).output().unwrap()
    }

    /// Runs tierctl and returns its stdout; panics with its stderr on failure.
    pub fn ctl(&mut self, args: &[&str]) -> String {
        let out = self.try_ctl(args);
        assert!(
            out.status.success(),
            "tierctl {args:?} failed: {}\n--- tierd log ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        if args.first() == Some(&"run")
            && let Some(pid) = s.split_whitespace().nth(1).and_then(|p| p.parse().ok())
        {
            self.tenant_pids.push(pid);
        }
        s
    }

    pub fn status(&mut self) -> Value {
        serde_json::from_str(&self.ctl(&["status", "--json"])).unwrap()
    }

    pub fn tenant(&mut self, name: &str) -> Value {
        let st = self.status();
        find_tenant(&st, name).cloned().unwrap_or_else(|| panic!("no tenant {name} in {st:#}"))
    }

    /// Starts a workload tenant; returns its PID.
    pub fn run_workload<S: AsRef<str>>(&mut self, name: &str, spec: &[&str], workload: &[S]) -> u32 {
        let bench = bench_bin();
        let mut args = vec!["run", "--name", name];
        args.extend_from_slice(spec);
        args.push("--");
        let bench = bench.to_string_lossy().to_string();
        args.push(&bench);
        args.push("workload");
        args.extend(workload.iter().map(AsRef::as_ref));
        let out = self.ctl(&args);
        out.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    pub fn tenant_stdout(&self, name: &str) -> String {
        std::fs::read_to_string(self.state_dir().join("tenants").join(name).join("stdout")).unwrap_or_default()
    }

    /// The JSON reports of a `--json --report` workload so far (a guest's console
    /// lines carry `\r`).
    pub fn reports(&self, name: &str) -> Vec<Value> {
        self.tenant_stdout(name)
            .lines()
            .map(|l| l.trim_matches(['\r', '\n', ' ']))
            .filter(|l| l.starts_with("{\"t\""))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until a `--json --report` workload has filled its memory: its first report
    /// line comes one report period after the fill, which under a tight budget takes
    /// seconds to tens of seconds depending on how busy the machine is.
    pub fn wait_filled(&self, name: &str, timeout: Duration) {
        wait_for(&format!("{name} to fill its memory"), timeout, || self.tenant_stdout(name).contains("\"phase\""));
    }

    /// The workload's final summary line, once it has exited.
    pub fn summary(&self, name: &str) -> Value {
        let out = self.tenant_stdout(name);
        let line = out
            .lines()
            .rev()
            .find(|l| l.contains("\"summary\":true"))
            .unwrap_or_else(|| panic!("no summary from {name}: {out}"));
        serde_json::from_str(line).unwrap()
    }

    /// SIGTERM and wait: tierd's clean shutdown.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        send_signal(c.id(), 15);
        let end = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > end {
                let _ = c.kill();
                return c.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `kill -9`: tierd dies without cleaning anything up.
    pub fn kill9(&mut self) {
        let mut c = self.child.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Waits for tierd to die at a crash point: killed by SIGKILL, as a crash leaves it.
    pub fn wait_crashed(&mut self, timeout: Duration) {
        use std::os::unix::process::ExitStatusExt;
        let end = Instant::now() + timeout;
        let c = self.child.as_mut().expect("running");
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                assert_eq!(st.signal(), Some(9), "tierd did not die at its crash point ({st}): {}", self.log());
                self.child = None;
                return;
            }
            assert!(Instant::now() < end, "tierd did not reach its crash point in {timeout:?}: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether tierd runs on cgroup v1, where some memory files differ from v2's.
    pub fn cgroup_v1(&mut self) -> bool {
        self.status()["cgroup_version"] == "v1"
    }

    /// Swap areas of the tier inside this test's directory ([`swaps_under`]).
    pub fn owned_swaps(&self) -> Vec<String> {
        swaps_under(self.dir.path())
    }

    /// Loop devices over files inside this test's directory.
    pub fn owned_loops(&self) -> Vec<String> {
        tierd_sys::blockdev::loops_under(Path::new("/sys"), self.dir.path())
            .into_iter()
            .map(|p| p.to_string_lossy().to_string())
            .collect()
    }

    pub fn cgroup_dir(&self) -> PathBuf {
        own_memory_cgroup().join(&self.cgroup_name)
    }
}

const RUN_PREFIX: &str = "tierd-test-";

/// A directory for one test's files under /var/tmp, named for this process so a later
/// run can tell it was killed and release what lies on its files (see `leftovers`).
pub fn run_dir() -> tempfile::TempDir {
    sweep_killed_runs();
    tempfile::Builder::new().prefix(&format!("{RUN_PREFIX}{}-", std::process::id())).tempdir_in("/var/tmp").unwrap()
}

/// Releases what test runs killed before their teardown left behind (their swap above
/// all): once per test binary, before its first tierd.
fn sweep_killed_runs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for line in tierd::leftovers::sweep(Path::new("/var/tmp"), RUN_PREFIX, &own_memory_cgroup()) {
            eprintln!("test harness: {line}");
        }
        // The blkio groups of read throttles (kernel.rs), empty once their test is gone.
        for dir in own_blkio_cgroup().map(|b| tierd::leftovers::orphaned(&b, RUN_PREFIX)).unwrap_or_default() {
            let _ = std::fs::remove_dir(&dir);
        }
    });
}

/// This process's cgroup in the v1 `blkio` hierarchy, where there is one.
pub fn own_blkio_cgroup() -> Option<PathBuf> {
    let own = tierd_sys::procfs::ProcFs::new("/proc").cgroup(None, "blkio").ok()?;
    Some(Path::new("/sys/fs/cgroup/blkio").join(own.trim_start_matches('/'))).filter(|d| d.is_dir())
}

/// Tenant `name` in a `tierctl status --json`, if it is there.
pub fn find_tenant<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["tenants"].as_array()?.iter().find(|t| t["name"] == name)
}

/// Sends a signal by PID (through the `kill` command, so tests need no unsafe).
pub fn send_signal(pid: u32, sig: i32) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).stderr(Stdio::null()).status();
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        for &pid in &self.tenant_pids {
            if alive(pid) {
                send_signal(pid, 9);
            }
        }
        for pid in &self.tenant_pids {
            let end = Instant::now() + Duration::from_secs(10);
            while alive(*pid) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        for problem in tierd_sys::swap::release_under(Path::new("/proc"), Path::new("/sys"), self.dir.path()) {
            eprintln!("warning: {problem}");
        }
        let dir = self.cgroup_dir();
        if !tierd_sys::cgroup::remove_tree(&dir, Duration::from_secs(30)) {
            eprintln!("warning: cgroup {} is still busy after 30 s; left behind", dir.display());
        }
    }
}
