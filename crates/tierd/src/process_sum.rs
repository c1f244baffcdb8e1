//! A counter of a tenant summed over its processes as they come and go (CPU time,
//! major faults), read from each process's own count and its reaped children's.
//!
//! Summing the processes there are now loses a process's count when it exits: a
//! tenant made of short-lived children (a shell loop, `make`, a server forking per
//! request) looked idle at every exit, and so at rest. The kernel adds a child's count
//! to its parent's reaped count when the parent waits for it, so the sum keeps it when
//! the parent is the tenant's, provided the part already counted is not counted twice.

use std::collections::{HashMap, HashSet};

use tierd_sys::procfs::Tally;

/// One process's reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub pid: u32,
    pub ppid: u32,
    pub tally: Tally,
}

#[derive(Debug, Clone, Default)]
pub struct ProcessSum {
    /// The count so far: it never goes down when a process exits.
    total: u64,
    /// Each process's reading at the last update.
    seen: HashMap<u32, Reading>,
    /// Per parent: counts of its children that exited after being counted, which its
    /// reaped count will carry again once it waits for them.
    owed: HashMap<u32, u64>,
    /// Whether a first update has set the baseline.
    started: bool,
}

impl ProcessSum {
    /// Adds what the tenant's processes counted since the last update, from a reading of
    /// each process in it now; returns the new total. A process seen for the first time
    /// counts whole if a process of the tenant forked it (it began since the last
    /// update); otherwise from now: its count is from before it was the tenant's (or,
    /// for a reused PID, another process's).
    pub fn update(&mut self, readings: &[Reading]) -> u64 {
        let pids: HashSet<u32> = readings.iter().map(|r| r.pid).collect();
        let here = |pid: u32| pids.contains(&pid);
        for gone in self.seen.values().filter(|s| !here(s.pid)) {
            if let Some(heir) = self.heir(gone.ppid, &here) {
                *self.owed.entry(heir).or_default() += gone.tally.own + gone.tally.reaped;
            }
        }
        for r in readings {
            self.total += match self.seen.get(&r.pid).copied() {
                Some(before) => self.growth(&before, r),
                None if self.started && (here(r.ppid) || self.seen.contains_key(&r.ppid)) => {
                    r.tally.own + r.tally.reaped
                }
                None => 0,
            };
        }
        self.owed.retain(|pid, owed| here(*pid) && *owed > 0);
        self.seen = readings.iter().map(|r| (r.pid, *r)).collect();
        self.started = true;
        self.total
    }

    /// The nearest of a gone process's ancestors still in the tenant, from `ppid` up
    /// through those that went with it: whose reaped count will carry it.
    fn heir(&self, mut ppid: u32, here: &impl Fn(u32) -> bool) -> Option<u32> {
        for _ in 0..16 {
            if here(ppid) {
                return Some(ppid);
            }
            ppid = self.seen.get(&ppid)?.ppid;
        }
        None
    }

    /// What a process counted since `before`, less what its reaped children had counted
    /// already. A count that went down is a reused PID: counted from there.
    fn growth(&mut self, before: &Reading, now: &Reading) -> u64 {
        let own = now.tally.own.saturating_sub(before.tally.own);
        let reaped = now.tally.reaped.saturating_sub(before.tally.reaped);
        let owed = self.owed.get_mut(&now.pid).map_or(0, |o| std::mem::replace(o, o.saturating_sub(reaped)));
        own + reaped.saturating_sub(owed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(pid: u32, ppid: u32, own: u64, reaped: u64) -> Reading {
        Reading { pid, ppid, tally: Tally { own, reaped } }
    }

    #[test]
    fn counts_only_what_each_process_counted_while_it_was_the_tenants() {
        let mut s = ProcessSum::default();
        assert_eq!(s.update(&[r(10, 1, 500, 40)]), 0, "counts from before it was seen are not the tenant's");
        assert_eq!(s.update(&[r(10, 1, 530, 40)]), 30);
        // A process moved in from outside brings counts of its own: counted from now.
        assert_eq!(s.update(&[r(10, 1, 530, 40), r(20, 7, 900, 0)]), 30);
        assert_eq!(s.update(&[r(10, 1, 530, 40), r(20, 7, 905, 0)]), 35);
        // It leaves (or is reaped by its parent outside): it keeps what it counted.
        assert_eq!(s.update(&[r(10, 1, 531, 40)]), 36);
        // Its PID is reused by a process with a lower count: counted from there.
        assert_eq!(s.update(&[r(10, 1, 531, 40), r(20, 7, 3, 0)]), 36);
        assert_eq!(s.update(&[r(10, 1, 531, 40), r(20, 7, 4, 0)]), 37);
    }

    #[test]
    fn a_child_counts_once_whether_seen_alive_or_only_in_its_parents_reaped_count() {
        let mut s = ProcessSum::default();
        assert_eq!(s.update(&[r(10, 1, 100, 0)]), 0);
        // A child forked since the last update: all of its count is new.
        assert_eq!(s.update(&[r(10, 1, 100, 0), r(11, 10, 20, 0)]), 20);
        assert_eq!(s.update(&[r(10, 1, 100, 0), r(11, 10, 50, 0)]), 50);
        // It exits (60 in all, 10 unseen) and is not yet waited for, then is: the
        // parent's reaped count carries its 60, of which 50 were counted.
        assert_eq!(s.update(&[r(10, 1, 101, 0)]), 51);
        assert_eq!(s.update(&[r(10, 1, 101, 60)]), 61);
        // A child that lived and was reaped between two updates: only the parent shows it.
        assert_eq!(s.update(&[r(10, 1, 101, 90)]), 91);
        // A grandchild reaped by the child, then the child by the parent.
        assert_eq!(s.update(&[r(10, 1, 101, 90), r(12, 10, 5, 0)]), 96);
        assert_eq!(s.update(&[r(10, 1, 101, 90), r(12, 10, 7, 3), r(13, 12, 1, 0)]), 102);
        // Both exit with nothing more done: the parent's reaped count carries the 11
        // counted while they ran.
        assert_eq!(s.update(&[r(10, 1, 101, 101)]), 102);
    }
}
