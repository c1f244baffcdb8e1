//! `tierctl`: the command line for a running tierd. The binary only calls [`main`]; the
//! command-line definition lives here so man pages and completions can be made from it.

pub mod args;
mod commands;
pub mod show;

pub use args::Cli;
pub use commands::run;

/// Parses the command line, runs it, and exits 1 with the error on failure.
pub fn main() {
    use clap::Parser;
    tierd_sys::process::default_sigpipe();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("tierctl: {e:#}");
        std::process::exit(1);
    }
}
