//! Virtual machines as tenants: a QEMU process's guest RAM is memory of that process,
//! so tierd tiers it like any other, without the guest knowing. What this module
//! knows is QEMU's side: how big the guest's RAM is (from the command line), which of
//! the process's mappings hold it, and what keeps it from being tiered at all.
//!
//! Pure: it reads a command line and a list of mappings, and is tested on tables.

use crate::size::{MIB, parse_size};

/// What a QEMU command line says about the guest's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QemuConfig {
    /// `-m`: guest RAM (QEMU's default is 128 MiB).
    pub ram_bytes: u64,
    /// Hardware acceleration asked for (`-enable-kvm`, `-accel kvm`, `-machine accel=kvm`).
    pub kvm: bool,
    /// Why the guest RAM cannot be tiered, as far as the command line tells.
    pub untierable: Vec<String>,
    /// Guest RAM is shared memory (`share=on`, `memory-backend-memfd`): tierd pages
    /// out private anonymous memory only.
    pub shared: bool,
}

/// QEMU's default guest RAM when `-m` is not given.
pub const QEMU_DEFAULT_RAM: u64 = 128 * MIB;

/// True when `argv0` names a QEMU system emulator (`qemu-system-x86_64`, `qemu-kvm`).
pub fn is_qemu(argv0: &str) -> bool {
    let base = argv0.rsplit('/').next().unwrap_or(argv0);
    base.starts_with("qemu-system-") || base == "qemu-kvm" || base == "kvm"
}

/// Reads a QEMU command line (without checking that it is one; see [`is_qemu`]).
pub fn parse_qemu(argv: &[String]) -> QemuConfig {
    let mut c = QemuConfig { ram_bytes: QEMU_DEFAULT_RAM, ..QemuConfig::default() };
    let mut args = argv.iter().skip(1).peekable();
    while let Some(a) = args.next() {
        // QEMU takes `-opt` and `--opt` alike.
        let opt = a.strip_prefix("--").map(|o| format!("-{o}")).unwrap_or_else(|| a.clone());
        let mut value = || args.next().cloned().unwrap_or_default();
        match opt.as_str() {
            "-m" => {
                if let Some(b) = ram_size(&value()) {
                    c.ram_bytes = b;
                }
            }
            "-enable-kvm" => c.kvm = true,
            "-accel" => c.kvm |= value().split(',').next() == Some("kvm"),
            "-machine" | "-M" => {
                let v = value();
                c.kvm |= option(&v, "accel").is_some_and(|a| a.split(':').next() == Some("kvm"));
            }
            "-mem-path" => c.untierable.push(format!(
                "guest RAM is backed by files under {} (-mem-path; hugetlbfs cannot be paged out)",
                value()
            )),
            "-mem-prealloc" => {}
            "-overcommit" | "-realtime" => {
                let key = if opt == "-overcommit" { "mem-lock" } else { "mlock" };
                if option(&value(), key).is_some_and(|v| v == "on") {
                    c.untierable.push(format!("guest RAM is locked in DRAM ({opt} {key}=on)"));
                }
            }
            "-object" => {
                let v = value();
                let kind = v.split(',').next().unwrap_or("");
                if kind == "memory-backend-file" {
                    let path = option(&v, "mem-path").unwrap_or_default();
                    if path.contains("huge") {
                        c.untierable.push(format!(
                            "guest RAM is on hugetlbfs ({path}): huge pages of a hugetlbfs pool cannot be paged out"
                        ));
                    } else {
                        c.shared = true;
                    }
                }
                if kind == "memory-backend-memfd" && option(&v, "hugetlb").is_some_and(|h| h == "on") {
                    c.untierable.push("guest RAM is memfd on hugetlbfs (hugetlb=on): cannot be paged out".into());
                }
                if kind == "memory-backend-memfd" || option(&v, "share").is_some_and(|s| s == "on") {
                    c.shared = true;
                }
            }
            "-device" => {
                let v = value();
                let dev = v.split(',').next().unwrap_or("");
                if dev.starts_with("vfio-") {
                    c.untierable
                        .push(format!("device pass-through ({dev}) pins all guest RAM for DMA; it must stay in DRAM"));
                }
            }
            _ => {}
        }
    }
    c
}

/// `-m 512`, `-m 2G`, `-m size=4G,slots=2,maxmem=8G`; a bare number is MiB.
fn ram_size(v: &str) -> Option<u64> {
    let size = option(v, "size").unwrap_or_else(|| v.split(',').next().unwrap_or("").to_string());
    let size = size.trim();
    if !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit()) {
        return size.parse::<u64>().ok().map(|m| m * MIB);
    }
    parse_size(size).ok()
}

/// The value of `key=` in a QEMU option string `a=1,key=v,…`.
fn option(v: &str, key: &str) -> Option<String> {
    v.split(',').find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')).map(str::to_string))
}

/// A mapping of the QEMU process, as far as choosing guest RAM goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingInfo {
    pub start: u64,
    pub len: u64,
    /// Private anonymous (what QEMU's default RAM backend is).
    pub anon_private: bool,
    pub hugetlb: bool,
}

/// Smallest mapping taken for guest RAM: ROMs, VGA memory and the like are smaller.
const MIN_RAM_MAPPING: u64 = 16 * MIB;

/// The mappings that hold `ram_bytes` of guest RAM: the largest ones first until they
/// add up to it (QEMU's PC machines keep RAM in one block; NUMA guests and memory
/// backends in one per node). Slack for alignment: QEMU maps each block aligned, a
/// little larger than asked for. Empty when nothing fits (QEMU not started yet).
pub fn guest_ram(mappings: &[MappingInfo], ram_bytes: u64) -> Vec<MappingInfo> {
    let mut big: Vec<&MappingInfo> = mappings.iter().filter(|m| m.len >= MIN_RAM_MAPPING).collect();
    big.sort_by(|a, b| b.len.cmp(&a.len).then(a.start.cmp(&b.start)));
    let slack = ram_bytes / 64 + 4 * MIB;
    let mut out = Vec::new();
    let mut total = 0;
    for m in big {
        if total >= ram_bytes {
            break;
        }
        if total + m.len > ram_bytes + slack {
            continue;
        }
        total += m.len;
        out.push(m.clone());
    }
    if total + slack < ram_bytes {
        return Vec::new();
    }
    out.sort_by_key(|m| m.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::GIB;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn map(start: u64, len: u64) -> MappingInfo {
        MappingInfo { start, len, anon_private: true, hugetlb: false }
    }

    #[test]
    fn recognises_qemu_binaries() {
        assert!(is_qemu("/usr/bin/qemu-system-x86_64"));
        assert!(is_qemu("qemu-system-aarch64"));
        assert!(is_qemu("/usr/libexec/qemu-kvm"));
        assert!(!is_qemu("/usr/bin/qemu-img"));
        assert!(!is_qemu("redis-server"));
    }

    #[test]
    fn reads_the_ram_size_in_every_spelling() {
        for (cmd, want) in [
            ("qemu-system-x86_64 -m 512", 512 * MIB),
            ("qemu-system-x86_64 -m 2G -smp 2", 2 * GIB),
            ("qemu-system-x86_64 -m 1536M", 1536 * MIB),
            ("qemu-system-x86_64 --m size=4G,slots=2,maxmem=8G", 4 * GIB),
            ("qemu-system-x86_64 -nographic", QEMU_DEFAULT_RAM),
        ] {
            assert_eq!(parse_qemu(&argv(cmd)).ram_bytes, want, "{cmd}");
        }
    }

    #[test]
    fn reads_acceleration() {
        assert!(parse_qemu(&argv("q -enable-kvm")).kvm);
        assert!(parse_qemu(&argv("q -accel kvm")).kvm);
        assert!(parse_qemu(&argv("q -machine q35,accel=kvm:tcg")).kvm);
        assert!(!parse_qemu(&argv("q -accel tcg,tb-size=64")).kvm);
    }

    #[test]
    fn says_why_guest_ram_cannot_be_tiered() {
        let cases = [
            ("q -m 1G -mem-path /dev/hugepages", "-mem-path"),
            ("q -object memory-backend-file,id=m,size=1G,mem-path=/dev/hugepages,share=on", "hugetlbfs"),
            ("q -object memory-backend-memfd,id=m,size=1G,hugetlb=on", "hugetlb=on"),
            ("q -overcommit mem-lock=on", "locked"),
            ("q -realtime mlock=on", "locked"),
            ("q -device vfio-pci,host=0000:01:00.0", "vfio-pci"),
        ];
        for (cmd, why) in cases {
            let c = parse_qemu(&argv(cmd));
            assert_eq!(c.untierable.len(), 1, "{cmd}: {:?}", c.untierable);
            assert!(c.untierable[0].contains(why), "{cmd}: {:?}", c.untierable);
        }
        let plain = parse_qemu(&argv("q -m 1G -overcommit mem-lock=off -device virtio-net-pci"));
        assert!(plain.untierable.is_empty() && !plain.shared, "{plain:?}");
        assert!(parse_qemu(&argv("q -object memory-backend-memfd,id=m,size=1G")).shared);
        assert!(parse_qemu(&argv("q -object memory-backend-ram,id=m,size=1G,share=on")).shared);
    }

    #[test]
    fn guest_ram_is_the_large_block_that_matches_the_size() {
        // A PC guest: RAM (1 GiB, aligned a little larger), 16 MiB VGA, BIOS, heap.
        let maps = [map(0x1000, 64 * MIB), map(0x7f00_0000_0000, GIB + 2 * MIB), map(0x7f80_0000_0000, 16 * MIB)];
        assert_eq!(guest_ram(&maps, GIB), vec![maps[1].clone()]);
        // Two NUMA nodes of 512 MiB each.
        let numa = [map(0x1000, 512 * MIB), map(0x9000_0000, 512 * MIB), map(0xf000_0000, 16 * MIB)];
        assert_eq!(guest_ram(&numa, GIB), vec![numa[0].clone(), numa[1].clone()]);
        // QEMU has not mapped its RAM yet.
        assert!(guest_ram(&[map(0x1000, 32 * MIB)], GIB).is_empty());
    }
}
