//! tierd: the daemon and the pieces `tierctl` shares with it.
//!
//! The [`engine`] owns the state and runs the control loop (measure, plan, enforce);
//! the [`tier`] module sets up tier 1; [`mover`] moves pages; [`server`] and [`api`]
//! are the local API; [`http`] serves [`metrics`], the dashboard and the [`history`];
//! [`leftovers`] sweeps up after test and benchmark runs that were killed; [`doctor`]
//! says what the kernel offers and how tierd works on it. Policies live in
//! `tierd-core`, kernel access in `tierd-sys`.
#![forbid(unsafe_code)]

pub mod api;
pub mod doctor;
pub mod engine;
pub mod events;
pub mod guest;
pub mod history;
pub mod http;
pub mod leftovers;
pub mod metrics;
pub mod mover;
pub mod server;
pub mod state;
pub mod tenant;
pub mod tier;
pub mod top;
pub mod tracker;
