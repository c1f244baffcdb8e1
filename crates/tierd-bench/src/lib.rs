//! tierd-bench: the workload generator and the benchmarks that measure tierd.
#![forbid(unsafe_code)]

pub mod engine;
pub mod harness;
pub mod machine;
pub mod workload;
