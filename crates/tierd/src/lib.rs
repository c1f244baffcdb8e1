//! tierd: the daemon and the pieces `tierctl` shares with it.
//!
//! The [`engine`] owns the state and runs the control loop (measure, plan, enforce);
//! the [`tier`] module sets up tier 1; [`mover`] moves pages; [`server`] and [`api`]
//! are the local API; [`http`] serves [`metrics`], the dashboard and the [`history`];
//! [`leftovers`] sweeps up after test and benchmark runs that were killed; [`doctor`]
//! says what the kernel offers and how tierd works on it. Policies live in
//! `tierd-core`, kernel access in `tierd-sys`.
#![forbid(unsafe_code)]

/// A step where the crash test (`tests/crash.rs`) kills tierd: built with the
/// `failpoints` feature and run with `FAILPOINTS=<name>=return` (or `N*off->return`
/// for the N+1th pass), tierd SIGKILLs itself there, as a crash would leave things.
/// Without the feature it is nothing.
#[macro_export]
macro_rules! crash_point {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        if fail::eval($name, |_| ()).is_some() {
            let _ = tierd_sys::process::kill(std::process::id(), 9);
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    };
}

pub mod api;
pub mod board;
pub mod ctl;
pub mod daemon_args;
pub mod doctor;
pub mod engine;
pub mod events;
pub mod guest;
pub mod history;
pub mod http;
pub mod leftovers;
pub mod metrics;
pub mod mover;
pub mod process_sum;
pub mod server;
pub mod state;
pub mod tenant;
pub mod tier;
pub mod top;
pub mod tracker;
