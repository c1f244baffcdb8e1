//! VM tenants: finds a QEMU tenant's guest RAM and measures it.
//!
//! Guest RAM is ordinary memory of the QEMU process, so the tracker, the policy and
//! the movers handle it like any other tenant's, transparently to the guest. This
//! module only says which mapping it is, how much of it is in DRAM and on the tier,
//! and why it cannot be tiered when QEMU pins it (hugetlbfs, locked memory, device
//! pass-through) or shares it (memfd backends: tierd pages out private memory only).

use tierd_core::size::human;
use tierd_core::vm::{self, MappingInfo};
use tierd_sys::procfs::ProcFs;

use crate::api::GuestStatus;

/// The guest of the first QEMU among `pids`, or `None` when none of them is QEMU.
pub fn inspect(proc: &ProcFs, pids: &[u32]) -> Option<GuestStatus> {
    pids.iter().find_map(|&pid| {
        let argv = proc.cmdline(pid).ok()?;
        vm::is_qemu(argv.first()?).then(|| inspect_qemu(proc, pid, &argv))
    })
}

fn inspect_qemu(proc: &ProcFs, pid: u32, argv: &[String]) -> GuestStatus {
    let cfg = vm::parse_qemu(argv);
    let maps: Vec<MappingInfo> = proc
        .maps(pid)
        .unwrap_or_default()
        .iter()
        .map(|m| MappingInfo {
            start: m.start,
            len: m.len(),
            anon_private: m.is_anon_private(),
            hugetlb: m.is_hugetlb(),
        })
        .collect();
    let ram = vm::guest_ram(&maps, cfg.ram_bytes);
    let usage = if ram.is_empty() { Default::default() } else { proc.smaps_usage(pid).unwrap_or_default() };
    let (mut dram, mut tier) = (0, 0);
    for m in &ram {
        if let Some(u) = usage.get(&m.start) {
            dram += u.rss;
            tier += u.swap;
        }
    }
    let mut untierable = cfg.untierable.clone();
    if untierable.is_empty() && ram.iter().any(|m| m.hugetlb) {
        untierable.push("guest RAM is on hugetlbfs: huge pages of a hugetlbfs pool cannot be paged out".into());
    }
    if cfg.shared || ram.iter().any(|m| !m.anon_private && !m.hugetlb) {
        untierable.push(
            "guest RAM is shared memory (share=on or memory-backend-memfd): tierd tiers private memory only".into(),
        );
    }
    // Locked memory the command line does not explain (QEMU locks it for mem-lock and
    // device pass-through, both said above).
    let locked = proc.memory(pid).map_or(0, |m| m.locked);
    if locked > 0 && untierable.is_empty() {
        untierable.push(format!("{} of QEMU's memory is locked (VmLck)", human(locked)));
    }
    GuestStatus {
        pid,
        ram_bytes: cfg.ram_bytes,
        ram_found: !ram.is_empty(),
        ram_mappings: ram.len(),
        ram_dram_bytes: dram,
        ram_tier_bytes: tier,
        accel: if cfg.kvm { "kvm".into() } else { "tcg".into() },
        tierable: untierable.is_empty(),
        untierable,
    }
}
