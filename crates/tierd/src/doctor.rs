//! `tierctl doctor` and tierd's start-up notes: what the kernel offers, which way tierd
//! does each job on it and why, and what an operator could enable. The one place that
//! turns [`KernelFeatures`] into advice.

use serde::Serialize;
use tierd_sys::cgroup::Version;
use tierd_sys::kernel::KernelFeatures;

/// How a kernel feature stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// There and on.
    Yes,
    /// Built in but turned off.
    Off,
    /// The kernel lacks it.
    No,
}

impl State {
    fn of(present: bool) -> State {
        if present { State::Yes } else { State::No }
    }

    /// `None`: not built in; `Some(on)`.
    fn switch(setting: Option<bool>) -> State {
        match setting {
            None => State::No,
            Some(true) => State::Yes,
            Some(false) => State::Off,
        }
    }
}

/// One kernel feature: its state and what that means for tierd.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// A stable key for scripts (`pagemap_scan`).
    pub key: &'static str,
    pub feature: &'static str,
    pub state: State,
    /// What tierd does about it in this state (empty when nothing needs saying).
    pub note: String,
}

/// Which way tierd does one of its jobs on this kernel.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    pub job: &'static str,
    pub how: String,
}

/// The whole diagnosis.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: KernelFeatures,
    pub findings: Vec<Finding>,
    pub choices: Vec<Choice>,
    /// Why tierd cannot run here at all, if it cannot.
    pub blocker: Option<String>,
}

impl Report {
    pub fn new(kernel: KernelFeatures) -> Report {
        Report { findings: findings(&kernel), choices: choices(&kernel), blocker: blocker(&kernel), kernel }
    }

    /// The lines tierd logs at start-up: only what changes how it works here.
    pub fn startup_notes(&self) -> Vec<String> {
        const MATTER: [&str; 5] = ["process_madvise", "pagemap_scan", "madv_collapse", "swap_accounting", "zswap"];
        self.findings
            .iter()
            .filter(|f| MATTER.contains(&f.key) && !f.note.is_empty())
            .filter(|f| (f.state == State::Yes) == (f.key == "zswap"))
            .map(|f| format!("{}: {}", f.feature, f.note))
            .collect()
    }

    /// The report as `tierctl doctor` prints it.
    pub fn render(&self) -> String {
        let k = &self.kernel;
        let mut out = format!("kernel {}\n\n", if k.release.is_empty() { "(unknown)" } else { &k.release });
        let width = self.findings.iter().map(|f| f.feature.len()).max().unwrap_or(0);
        for f in &self.findings {
            let state = match f.state {
                State::Yes => "yes",
                State::Off => "off",
                State::No => "no ",
            };
            out += format!("{state}  {:width$}  {}", f.feature, f.note).trim_end();
            out += "\n";
        }
        out += "\nhow tierd works here\n";
        let width = self.choices.iter().map(|c| c.job.len()).max().unwrap_or(0);
        for c in &self.choices {
            out += &format!("  {:width$}  {}\n", c.job, c.how);
        }
        if let Some(b) = &self.blocker {
            out += &format!("\ntierd cannot run here: {b}\n");
        }
        out
    }
}

fn findings(k: &KernelFeatures) -> Vec<Finding> {
    let c = k.cgroup.as_ref();
    let v2 = c.is_some_and(|c| c.version == Version::V2);
    let mut out = vec![Finding {
        key: "memory_cgroup",
        feature: "memory cgroup",
        state: State::of(c.is_some()),
        note: match c {
            Some(c) => format!("{} at {}", if v2 { "v2" } else { "v1" }, c.dir),
            None => k.cgroup_error.clone().unwrap_or_default(),
        },
    }];
    if v2 {
        let delegated = c.is_some_and(|c| c.memory_delegated);
        out.push(Finding {
            key: "memory_delegated",
            feature: "memory delegated to tierd's cgroup",
            state: State::of(delegated),
            note: if delegated {
                String::new()
            } else {
                "run tierd in a delegated cgroup (systemd: Delegate=yes) or write +memory to its cgroup.subtree_control"
                    .into()
            },
        });
    }
    let calls = &k.calls;
    out.extend([
        presence(
            ("swap_accounting", "swap accounting"),
            c.is_some_and(|c| c.swap_accounting),
            "",
            "the tier is not charged per cgroup: tenants' tier bytes cannot be read from their groups \
             (boot without cgroup.memory=noswap, or with swapaccount=1 on v1)",
        ),
        presence(
            ("process_madvise", "process_madvise (5.10)"),
            calls.process_madvise,
            "demotes and prefetches a tenant's pages from outside it",
            "tierd cannot move a tenant's pages itself: only its quota's reclaim demotes, nothing prefetches",
        ),
        presence(
            ("pagemap_scan", "PAGEMAP_SCAN (6.7)"),
            calls.pagemap_scan,
            "page state in one ioctl per range",
            "page state is read from pagemap entries: slower on large tenants, and huge pages are not told apart",
        ),
        presence(
            ("madv_collapse", "MADV_COLLAPSE (6.1)"),
            calls.madv_collapse,
            "rebuilds huge pages after memory comes back from the tier",
            "huge pages are not rebuilt after memory comes back from the tier",
        ),
    ]);
    out.extend(optional_findings(k));
    out.extend(tier_device_findings(k));
    out
}

/// A feature the kernel has or lacks, with what that means for tierd either way.
fn presence((key, feature): (&'static str, &'static str), present: bool, if_yes: &str, if_no: &str) -> Finding {
    let note = if present { if_yes } else { if_no };
    Finding { key, feature, state: State::of(present), note: note.to_string() }
}

/// The features tierd can do without, or does not use yet.
fn optional_findings(k: &KernelFeatures) -> Vec<Finding> {
    let thp = match k.thp.as_deref() {
        None => State::No,
        Some("never") => State::Off,
        Some(_) => State::Yes,
    };
    let zswap = State::switch(k.zswap);
    let rows = [
        (
            "thp",
            "transparent huge pages",
            thp,
            match k.thp.as_deref() {
                Some("never") => "tenants get no huge pages (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)".to_string(),
                Some(mode) => format!("mode {mode}"),
                None => String::new(),
            },
        ),
        (
            "damon",
            "DAMON sysfs",
            State::of(k.damon_sysfs),
            if k.damon_sysfs {
                "tierd measures activeness with it under --tracker damon (vaddr and target filters, 6.6+; \
                 never where a kdamond it did not create exists)"
            } else {
                "tierd samples pages itself"
            }
            .into(),
        ),
        (
            "mglru",
            "multi-gen LRU",
            State::switch(k.mglru),
            match k.mglru {
                Some(false) => "the kernel's reclaim under quotas picks pages by the older LRU (echo y > /sys/kernel/mm/lru_gen/enabled)",
                _ => "",
            }
            .into(),
        ),
        (
            "psi",
            "memory pressure (PSI)",
            State::of(k.psi_memory),
            match (k.psi_memory, k.cgroup.as_ref().map(|c| c.version)) {
                (true, Some(Version::V2)) => "each tenant's memory stall is reported (status, metrics)",
                (true, _) => "per cgroup only on v2: not used here",
                (false, _) => "",
            }
            .into(),
        ),
        (
            "zswap",
            "zswap",
            zswap,
            if zswap == State::Yes {
                "pages are compressed in DRAM before the tier: tier figures understate what leaves DRAM \
                 (echo N > /sys/module/zswap/parameters/enabled to measure the tier alone)"
            } else {
                ""
            }
            .into(),
        ),
    ];
    rows.into_iter().map(|(key, feature, state, note)| Finding { key, feature, state, note }).collect()
}

/// What keeps the tier's contents private and its failures and tail seen.
fn tier_device_findings(k: &KernelFeatures) -> [Finding; 3] {
    [
        presence(
            ("device_mapper", "device-mapper (an encrypted tier)"),
            k.device_mapper,
            "the tier is encrypted by default: dm-crypt, with a key that lives only in memory (tier.encrypt)",
            "the tier is written in the clear: a tenant's paged-out memory can be read from the disk \
             (load dm-mod and dm-crypt to encrypt it)",
        ),
        presence(
            ("kernel_log", "kernel log (/dev/kmsg)"),
            k.kernel_log,
            "a failing tier device is seen from the kernel's swap I/O errors",
            "a failing tier device is seen only when a tenant dies of it (tierd cannot read the kernel's log)",
        ),
        Finding {
            key: "block_trace",
            feature: "block tracepoints as perf events",
            state: State::of(k.block_trace_error.is_none()),
            note: match &k.block_trace_error {
                None => "the tier's reads are timed one by one: health judges their p99".into(),
                Some(why) => format!("the tier's reads are timed on average only ({why})"),
            },
        },
    ]
}

fn choices(k: &KernelFeatures) -> Vec<Choice> {
    let quota = match k.cgroup.as_ref().map(|c| c.version) {
        Some(Version::V2) => "memory.high: the kernel throttles a tenant over its quota instead of failing it",
        Some(Version::V1) => {
            "memory.limit_in_bytes with the OOM killer off in tierd's groups: a tenant at its limit waits, \
             for --oom-grace at most"
        }
        None => "none: no memory cgroup",
    };
    let demotion = if k.calls.process_madvise {
        "process_madvise(MADV_PAGEOUT) on a tenant's cold ranges, then its group's reclaim frees the swap cache"
    } else {
        "the quota's reclaim alone"
    };
    let tracking = match (k.calls.pagemap_scan, k.damon_sysfs) {
        (true, true) => {
            "sampling: a few pages per interval paged out, and which came back read by PAGEMAP_SCAN \
             (--tracker damon: the kernel's DAMON)"
        }
        (true, false) => "sampling: a few pages per interval paged out, and which came back read by PAGEMAP_SCAN",
        (false, _) => "sampling: a few pages per interval paged out, and which came back read from pagemap entries",
    };
    let huge = if k.calls.madv_collapse { "MADV_COLLAPSE after promotion" } else { "left to khugepaged" };
    [
        ("DRAM quota", quota),
        ("demotion", demotion),
        ("activeness", tracking),
        ("huge pages", huge),
        ("stall signal", "major faults times the tier's read time (PSI reported beside it on v2)"),
    ]
    .into_iter()
    .map(|(job, how)| Choice { job, how: how.to_string() })
    .collect()
}

fn blocker(k: &KernelFeatures) -> Option<String> {
    match &k.cgroup {
        None => Some(k.cgroup_error.clone().unwrap_or_else(|| "no memory cgroup".into())),
        Some(c) if c.version == Version::V2 && !c.memory_delegated => Some(format!(
            "the memory controller is not delegated to {}: run tierd with Delegate=yes (systemd) \
             or write +memory to its cgroup.subtree_control",
            c.dir
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierd_sys::kernel::{CgroupFacts, SyscallProbes};

    fn kernel(version: Version, calls: SyscallProbes) -> KernelFeatures {
        KernelFeatures {
            release: "6.1.0-test".into(),
            cgroup: Some(CgroupFacts {
                version,
                dir: "/sys/fs/cgroup".into(),
                memory_delegated: true,
                swap_accounting: true,
            }),
            cgroup_error: None,
            calls,
            thp: Some("always".into()),
            damon_sysfs: false,
            mglru: Some(false),
            psi_memory: true,
            zswap: Some(false),
            device_mapper: true,
            kernel_log: true,
            block_trace_error: None,
        }
    }

    const ALL: SyscallProbes = SyscallProbes { process_madvise: true, pagemap_scan: true, madv_collapse: true };

    fn finding<'a>(r: &'a Report, key: &str) -> &'a Finding {
        r.findings.iter().find(|f| f.key == key).unwrap_or_else(|| panic!("no {key} in {r:#?}"))
    }

    #[test]
    fn a_kernel_without_pagemap_scan_is_told_how_page_state_is_read() {
        let r = Report::new(kernel(Version::V2, SyscallProbes { pagemap_scan: false, ..ALL }));
        assert_eq!(finding(&r, "pagemap_scan").state, State::No);
        assert!(r.choices.iter().any(|c| c.job == "activeness" && c.how.contains("pagemap entries")));
        let notes = r.startup_notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("huge pages are not told apart"), "{notes:?}");
        assert!(r.render().contains("no   PAGEMAP_SCAN (6.7)"), "{}", r.render());
    }

    #[test]
    fn a_kernel_with_everything_needs_no_start_up_note() {
        let r = Report::new(kernel(Version::V2, ALL));
        assert!(r.startup_notes().is_empty(), "{:?}", r.startup_notes());
        assert!(r.blocker.is_none());
        assert!(r.choices.iter().any(|c| c.job == "DRAM quota" && c.how.starts_with("memory.high")));
        assert_eq!(finding(&r, "mglru").state, State::Off);
    }

    #[test]
    fn v1_quota_is_the_hard_limit_and_has_no_delegation_row() {
        let r = Report::new(kernel(Version::V1, ALL));
        assert!(r.choices.iter().any(|c| c.job == "DRAM quota" && c.how.contains("limit_in_bytes")));
        assert!(!r.findings.iter().any(|f| f.key == "memory_delegated"));
    }

    #[test]
    fn an_undelegated_v2_cgroup_blocks_tierd_with_the_fix() {
        let mut k = kernel(Version::V2, ALL);
        k.cgroup.as_mut().unwrap().memory_delegated = false;
        let r = Report::new(k);
        assert!(r.blocker.as_deref().is_some_and(|b| b.contains("Delegate=yes")), "{:?}", r.blocker);
        assert!(r.render().contains("tierd cannot run here"));
    }

    #[test]
    fn a_kernel_without_device_mapper_is_told_its_tier_is_in_the_clear() {
        let mut k = kernel(Version::V2, ALL);
        k.device_mapper = false;
        let r = Report::new(k);
        assert_eq!(finding(&r, "device_mapper").state, State::No);
        assert!(finding(&r, "device_mapper").note.contains("in the clear"), "{r:#?}");
        assert!(r.render().contains("no   device-mapper (an encrypted tier)"), "{}", r.render());
        assert!(finding(&Report::new(kernel(Version::V2, ALL)), "device_mapper").note.contains("encrypted by default"));
    }

    #[test]
    fn a_kernel_that_cannot_trace_requests_is_told_its_tier_is_judged_on_average() {
        let mut k = kernel(Version::V2, ALL);
        assert!(finding(&Report::new(k.clone()), "block_trace").note.contains("p99"));
        k.block_trace_error = Some("perf_event_open on CPU 0: Permission denied".into());
        let r = Report::new(k);
        assert_eq!(finding(&r, "block_trace").state, State::No);
        assert!(r.render().contains("on average only (perf_event_open on CPU 0: Permission denied)"), "{}", r.render());
    }

    #[test]
    fn zswap_on_is_a_start_up_note() {
        let mut k = kernel(Version::V2, ALL);
        k.zswap = Some(true);
        let notes = Report::new(k).startup_notes();
        assert!(notes.len() == 1 && notes[0].starts_with("zswap:"), "{notes:?}");
    }
}
