//! What a killed run leaves behind, and sweeping it up.
//!
//! Tests and benchmarks give each tierd they start a directory named `{prefix}{pid}-…`
//! (`pid`: the test or benchmark process) for its state and tier file, and a cgroup of
//! the same name under their own. A process killed with SIGKILL (a CI timeout, a
//! session that ends) cannot tear these down, and its swap area would stay on for
//! good. The next run sweeps them: once `pid` is gone and no tierd holds the
//! directory's state lock, the swap areas and loop devices on its files are released,
//! its (empty) cgroups removed and the directory deleted. Nothing outside the
//! directory and the caller's own cgroup is touched.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Directories in `parent` named `{prefix}{pid}-…` whose `pid` no longer runs.
pub fn orphaned(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| owner(&e.file_name().to_string_lossy(), prefix).is_some_and(|pid| !running(pid)))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The pid in a name `{prefix}{pid}-…`.
fn owner(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split_once('-')?.0.parse().ok()
}

fn running(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A tierd still holds the state lock under `dir` (its owner died, it did not).
fn state_locked(dir: &Path) -> bool {
    File::open(dir.join("state/lock")).is_ok_and(|f| f.try_lock().is_err())
}

/// Sweeps the orphaned run directories in `parent` (see the module doc); their cgroups
/// were made under `cgroup_parent`. A directory that cannot be swept whole (a busy
/// swap area, a cgroup with processes left) is kept, to be tried again by the next
/// run. Returns one line per directory, saying what was done, for the caller to print.
pub fn sweep(parent: &Path, prefix: &str, cgroup_parent: &Path) -> Vec<String> {
    let mut report = Vec::new();
    for dir in orphaned(parent, prefix) {
        if state_locked(&dir) {
            report.push(format!("{}: its owner is gone but a tierd still runs there; left alone", dir.display()));
            continue;
        }
        let mut problems = tierd_sys::swap::release_under(Path::new("/proc"), Path::new("/sys"), &dir);
        let cgroup = cgroup_parent.join(dir.file_name().unwrap_or_default());
        if !tierd_sys::cgroup::remove_tree(&cgroup, Duration::from_secs(5)) {
            problems.push(format!("cgroup {} still has processes", cgroup.display()));
        }
        if problems.is_empty() {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => report.push(format!("{}: swept up after a killed run", dir.display())),
                Err(e) => report.push(format!("{}: released, but not deleted: {e}", dir.display())),
            }
        } else {
            report.push(format!("{}: left from a killed run, kept: {}", dir.display(), problems.join("; ")));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_of_gone_owners_are_orphaned() {
        let t = tempfile::tempdir().unwrap();
        let gone = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            c.wait().unwrap();
            c.id()
        };
        let me = std::process::id();
        for name in [
            format!("tierd-test-{gone}-a1"),
            format!("tierd-test-{me}-b2"),
            format!("tierd-bench-{gone}-c3"),
            "tierd-test-x-d4".to_string(),
            format!("tierd-test-{gone}"),
        ] {
            std::fs::create_dir(t.path().join(name)).unwrap();
        }
        assert_eq!(orphaned(t.path(), "tierd-test-"), vec![t.path().join(format!("tierd-test-{gone}-a1"))]);
        assert_eq!(orphaned(t.path(), "tierd-bench-"), vec![t.path().join(format!("tierd-bench-{gone}-c3"))]);
        assert!(orphaned(&t.path().join("missing"), "tierd-test-").is_empty());
    }

    #[test]
    fn a_directory_whose_tierd_still_runs_is_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("tierd-test-4294967-zz");
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let lock = File::create(dir.join("state/lock")).unwrap();
        lock.lock().unwrap();
        let report = sweep(t.path(), "tierd-test-", &t.path().join("no-cgroups"));
        assert!(report[0].contains("left alone"), "{report:?}");
        assert!(dir.exists());
        drop(lock);
        // Another test's `Command::spawn` may fork while a lock on the file is open (ours,
        // or the one each sweep takes to test it); the child shares that lock until it
        // execs. A sweep that sees it keeps the directory for the next one, so retry.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let report = loop {
            let report = sweep(t.path(), "tierd-test-", &t.path().join("no-cgroups"));
            if !report[0].contains("left alone") || std::time::Instant::now() >= deadline {
                break report;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(report[0].contains("swept up"), "{report:?}");
        assert!(!dir.exists());
    }
}
