//! tierd-core: the domain of tierd without any I/O.
//!
//! Types for tenants, sizes and tiers; the daemon's configuration, parsed and validated
//! as a whole; the snapshot the daemon takes of the host each interval; and the
//! policies, pure functions from a [`snapshot::Snapshot`] to a [`plan::Plan`]. Nothing
//! here touches the kernel, so every decision can be unit-tested on tables of cases.
#![forbid(unsafe_code)]

pub mod activity;
pub mod admission;
pub mod colour;
pub mod config;
pub mod drain;
pub mod estimates;
pub mod health;
pub mod name;
pub mod plan;
pub mod policy;
pub mod read_tail;
pub mod size;
pub mod snapshot;
pub mod tenant;
pub mod tier_faults;
pub mod tlb;
pub mod vm;
pub mod waits;
pub mod wear;

pub use name::TenantName;
pub use size::ByteSize;
