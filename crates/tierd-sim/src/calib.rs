//! Every figure the model rests on, with where it comes from.
//!
//! "DESIGN" is `../shared/DESIGN.md` ("Facts measured on these machines"); "suite" is
//! the committed real suite (`bench/results/suite/results.json`). Figures fitted on the
//! three calibration points (density-2x/2x, contention/125%, wake-up/fast) say so; no
//! other point of the real suite was used to set any figure here.

/// Wall time of one simulation step.
pub const DT: f64 = 0.02;
/// The machines have 2 cores (DESIGN).
pub const CPUS: f64 = 2.0;
pub const PAGE: f64 = tierd_core::size::PAGE as f64;
pub const REGION_PAGES: usize = 512;
pub const REGION: u64 = tierd_core::size::HUGE_PAGE;

/// CPU per access of the workload generator (a cache line read and checked, two clock
/// reads): density-2x/2x under `dram`, four tenants on two cores did 1.82 M ops/s each.
pub const WORKLOAD_OP_SECS: f64 = 0.5 / 1.82e6;
/// The workload's fill writes every page once: ~1 GiB/s of one core (assumed; the fill
/// is over before any figure is measured).
pub const FILL_PAGES_PER_CPU_SEC: f64 = (1u64 << 30) as f64 / PAGE;

/// Redis: the four clients together did 156 k ops/s on two cores under `dram`
/// (suite, redis/2x), server and client each one thread in ping-pong: 12.8 µs of CPU
/// per operation, two pages touched (its dictionary entry and its value).
pub const REDIS_OP_SECS: f64 = 2.0 / 156e3;
pub const REDIS_PAGES_PER_OP: f64 = 2.0;
/// PostgreSQL: 10 k pgbench transactions/s for four tenants under `dram` (suite,
/// postgres/2x): 200 µs of CPU each, about ten pages touched (assumed), of which one
/// heap page and one index leaf drawn by the account (the update and the select find
/// the same row) and the rest always hot (index root and inner pages, the WAL insert
/// position, the commit log, the page taking the new row version: ~2 MiB, assumed).
pub const PG_OP_SECS: f64 = 2.0 / 10e3;
pub const PG_PAGES_PER_OP: f64 = 10.0;
pub const PG_CORE_PAGES_PER_OP: f64 = 8.0;
pub const PG_CORE_BYTES: f64 = 2.0 * (1u64 << 20) as f64;
/// pgbench's accounts with PostgreSQL 15 here (`pg_relation_size` after `pgbench -i`):
/// at scale 48, 4.8 M rows in 644.6 MB of heap and 107.8 MB of primary key index
/// (scale 1: 13.4 and 2.26 MB), 157 bytes an account, 86% of it heap.
pub const PG_ACCOUNT_BYTES: f64 = 157.0;
pub const PG_HEAP_SHARE: f64 = 0.857;

/// Fast tier: the read time of an idle device and its capacity in random 4 KiB reads,
/// the device's queue an M/D/1 (see `device.rs`). Fitted on the swap-in path measured
/// here (`scripts/measure-swapin.sh`, `bench/results/sim/calib-swapin.md`): 1 to 12
/// tenants faulting back from the loop device at once, 17 k to 57 k reads/s taking
/// 42 to 131 µs each. (DESIGN's 75–90 µs a swap-in and 100 k IOPS at queue depth 32
/// were measured on another machine, with fio.)
pub const FAST_READ_SECS: f64 = 50e-6;
pub const FAST_IOPS: f64 = 63e3;
/// Sequential reads 1.6–2.5 GiB/s (DESIGN).
pub const FAST_BYTES_PER_SEC: f64 = 1.6 * (1u64 << 30) as f64;
/// Prefetch of laid-out regions comes back at ~1.5 GiB/s, of scattered pages at
/// ~150 MiB/s (DESIGN, the `tierd` policy's wake-up measurements).
pub const FAST_PREFETCH_RUN_BYTES_PER_SEC: f64 = 1.5 * (1u64 << 30) as f64;
pub const FAST_PREFETCH_SCATTERED_BYTES_PER_SEC: f64 = 150.0 * (1u64 << 20) as f64;
/// What one pass reads back to lay a resting working set out: the engine gives relayout
/// a 1 s slice a pass (it holds the control loop meanwhile), which read 63, 88 and
/// 87 MiB of scattered pages back on the fast tier (wake-up/fast, 2026-11-29).
pub const RELAYOUT_PASS_BYTES: f64 = 88.0 * (1u64 << 20) as f64;
/// The hard-disk-like tier: reads throttled to 150 IOPS and 150 MB/s (suite).
pub const SLOW_IOPS: f64 = 150.0;
pub const SLOW_BYTES_PER_SEC: f64 = 150e6;
/// A read of laid-out pages that the loop device merges: up to 128 KiB per I/O on the
/// slow tier (the block layer's default maximum request; an assumption).
pub const MERGED_READ_PAGES: f64 = 32.0;

/// CPU a major fault costs its thread beyond the wait (allocating and charging the page,
/// the swap cache, submitting the read, mapping it): a swap-in took 75–90 µs from user
/// space against 47–71 µs for the disk's own read (DESIGN), so ~15 µs.
pub const FAULT_CPU_SECS: f64 = 15e-6;
/// A fault on a page still in the swap cache (a sampled page, a prefetched one):
/// no read, a minor fault.
pub const MINOR_FAULT_SECS: f64 = 1.5e-6;
/// CPU reclaim spends per page it frees at a limit (unmapping it, a TLB flush, adding it
/// to the swap cache, submitting its write; an assumption), and per page touched lately
/// that it passes over on the way (checking its references through the reverse map,
/// clearing them; up to [`MAX_SCAN_RATIO`] pages scanned per page freed, as reclaim
/// raises its priority). v1 has no background reclaim for a memory cgroup: the faulting
/// task reclaims. The second and the ratio are fitted on wake-up/fast (the woken
/// tenant's 1 GiB came back in 57 s under `swap`: ~200 µs a fault against 80 µs for the
/// read) and contention/125% (the tenant that lost its hot set still took ~0.5 of a
/// core: the two that kept theirs ran at 1.04 and 1.07 of `dram`, not at the 1.5 a free
/// core would have given them).
pub const RECLAIM_CPU_SECS: f64 = 10e-6;
pub const RECLAIM_SCAN_SECS: f64 = 25e-6;
pub const MAX_SCAN_RATIO: f64 = 4.0;
/// What a fault at a limit waits beyond its read for the page it evicts (its write is
/// submitted, not waited for).
pub const RECLAIM_WAIT_SECS: f64 = 0.0;
/// Seconds between the harness starting one tenant and the next (an API request, a
/// fork and exec each; assumed): under one limit the first tenant's hot set, filled
/// first, is the oldest memory when the others fill.
pub const START_GAP_SECS: f64 = 0.2;
/// Pages a demand fault reads when its neighbours lie in a run of swap slots: the
/// kernel's cluster readahead (`page-cluster` 3; this disk reports itself rotational,
/// so readahead follows slots, not addresses).
pub const READAHEAD_PAGES: f64 = 8.0;

/// What a tenant's cgroup is charged beyond its pages: its page tables (a 4 KiB table
/// per 2 MiB mapped) and the rest of its process (heap, stacks, kernel objects). A
/// workload of 512 MiB filled here: usage 2.06 MB above the region, 1.06 MiB of it
/// page tables (2026-11-29, `memory.usage_in_bytes`, `VmPTE`).
pub const PAGE_TABLE_SHARE: f64 = 1.0 / 512.0;
pub const PROCESS_BYTES: f64 = 0.9 * (1u64 << 20) as f64;

/// `MADV_PAGEOUT` from another process: ~2 GiB/s (DESIGN).
pub const PAGEOUT_BYTES_PER_SEC: f64 = 2.0 * (1u64 << 30) as f64;
/// A v1 limit written below usage reclaims in the write, 32 pages at a time: ~170 MiB/s
/// (measured for the `tierd` policy's quota cuts). A prefetch into a full cgroup goes
/// no faster: each page read reclaims one first, in the read's charge (measured in
/// bench/results/sim/judged/prefetch-into-a-full-group.md).
pub const LIMIT_RECLAIM_BYTES_PER_SEC: f64 = 170.0 * (1u64 << 20) as f64;
/// CPU per page the sampling tracker unmaps: ~62 µs per single-page iovec, ~20 µs per
/// page in 16-page runs (DESIGN); in its 4-page runs about 30 µs.
pub const SAMPLE_CPU_SECS: f64 = 30e-6;
/// CPU to scan a tenant's page table with `PAGEMAP_SCAN`: a few ms per GiB (DESIGN).
pub const SCAN_CPU_SECS_PER_GIB: f64 = 4e-3;
/// CPU of tierd's own pass per tenant (reading counters, planning): an assumption.
pub const PASS_CPU_SECS_PER_TENANT: f64 = 0.5e-3;
/// CPU of `MADV_PAGEOUT` / `MADV_WILLNEED` per GiB moved, charged to tierd.
pub const MOVE_CPU_SECS_PER_GIB: f64 = 0.25;

/// Run-to-run spread of a tenant's speed: `dram`'s own repetitions spread ±10–15%
/// around their median (DESIGN); a run draws one factor for all its tenants and a
/// smaller one per tenant.
pub const RUN_SPEED_SD: f64 = 0.04;
pub const TENANT_SPEED_SD: f64 = 0.02;
