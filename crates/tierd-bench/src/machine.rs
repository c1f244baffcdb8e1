//! What every benchmark result records about where and how it was taken.

use serde::{Deserialize, Serialize};

/// The machine, kernel, command and date of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub date: String,
    pub host: String,
    pub kernel: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    pub command: String,
    pub tierd_version: String,
    /// The source the binaries were built from (`git describe`, when run in the repository).
    #[serde(default)]
    pub commit: String,
    /// The `tierd` policy's generation ([`tierd_core::policy::GENERATION`]); empty in
    /// runs of the rule-based policy, from before it was recorded.
    #[serde(default)]
    pub policy: String,
}

impl RunInfo {
    pub fn collect() -> RunInfo {
        let sh = |c: &str| {
            std::process::Command::new("sh")
                .args(["-c", c])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        };
        RunInfo {
            date: sh("date -u +%Y-%m-%dT%H:%M:%SZ"),
            host: sh("uname -n"),
            kernel: sh("uname -r"),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            memory_bytes: tierd_sys::procfs::ProcFs::new("/proc").mem_total().unwrap_or(0),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            tierd_version: env!("CARGO_PKG_VERSION").to_string(),
            // The commit built from; where the build saw none, the checkout run in.
            commit: Some(env!("TIERD_BUILD_COMMIT"))
                .filter(|c| !c.is_empty())
                .map_or_else(|| sh("git describe --always --dirty 2>/dev/null"), str::to_string),
            policy: tierd_core::policy::GENERATION.to_string(),
        }
    }

    /// A Markdown paragraph for the head of a report.
    pub fn markdown(&self) -> String {
        format!(
            "Taken {} on `{}` (kernel {}, {} CPUs, {} RAM), tierd {}{}, with:\n\n```\n{}\n```\n",
            self.date,
            self.host,
            self.kernel,
            self.cpus,
            tierd_core::size::human(self.memory_bytes),
            self.tierd_version,
            match self.commit.as_str() {
                "" => String::new(),
                c if c.ends_with("-dirty") =>
                    format!(" ({c}: **built with uncommitted changes**, not for committed results)"),
                c => format!(" ({c})"),
            },
            self.command
        )
    }
}

/// CPU time (user + system) of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let ticks = tierd_sys::procfs::ProcFs::new("/proc").cpu_ticks(pid).unwrap_or(0);
    ticks as f64 / tierd_sys::process::clock_ticks_per_sec() as f64
}

/// Resident memory of a process, in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    tierd_sys::procfs::ProcFs::new("/proc").memory(pid).map(|m| m.rss).unwrap_or(0)
}

/// Median of a non-empty sample.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn a_run_names_the_commit_it_was_built_from_wherever_it_runs() {
        // Built in a checkout, the commit is the build's, not the working directory's
        // (a copy of the binaries runs anywhere).
        if std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.git")).exists() {
            let run = RunInfo::collect();
            assert!(!run.commit.is_empty(), "{run:?}");
            assert_eq!(run.commit, env!("TIERD_BUILD_COMMIT"));
        }
    }

    #[test]
    fn own_cpu_and_rss_are_measurable() {
        let me = std::process::id();
        assert!(rss_bytes(me) > 1 << 20, "a running test holds more than a MiB");
        let before = cpu_seconds(me);
        let t0 = tierd_sys::process::thread_cpu_secs();
        let mut x = 0u64;
        while tierd_sys::process::thread_cpu_secs() - t0 < 0.3 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let used = cpu_seconds(me) - before;
        assert!((0.2..5.0).contains(&used), "0.3 s of work counted as {used} s");
    }
}
