//! Records the commit the benchmarks were built from: results name the code that
//! measured them even when the binaries run outside the checkout (as long runs do, from
//! a copy, so that rebuilding meanwhile does not change what is measured).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=TIERD_BUILD_COMMIT={commit}");
    // A commit moves HEAD's log; an edit anywhere in the sources or scenarios changes
    // whether the tree is dirty, so the stamp is never older than the code it names.
    for f in [
        "../../.git/logs/HEAD",
        "../../.git/HEAD",
        "../../.git/index",
        "../../crates",
        "../../bench/scenarios",
        "../../Cargo.lock",
    ] {
        if std::path::Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
}
