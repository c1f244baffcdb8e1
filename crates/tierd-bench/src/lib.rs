//! tierd-bench: the workload generator and the benchmarks that measure tierd.
#![forbid(unsafe_code)]

pub mod workload;
