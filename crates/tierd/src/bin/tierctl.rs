//! `tierctl`: the command line for a running tierd (see `tierd::ctl`).

fn main() {
    tierd::ctl::main();
}
