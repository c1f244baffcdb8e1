//! tierd-bench: the workload generator and the benchmarks that measure tierd.
#![forbid(unsafe_code)]

pub mod catalogue;
pub mod chart;
pub mod engine;
pub mod goals;
pub mod harness;
pub mod huge_bench;
pub mod latency;
pub mod machine;
pub mod metrics_bench;
pub mod pass_bench;
pub mod pg_load;
pub mod property;
pub mod qmp;
pub mod random_hosts;
pub mod redis_load;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod soak;
pub mod suite;
pub mod validate;
pub mod vm_bench;
pub mod workload;
