//! `tierd-dist OUT_DIR`: the man pages (`OUT_DIR/man/*.1`) and shell completions
//! (`OUT_DIR/completions/{bash,zsh,fish}/`) the Debian package ships, made from tierd's
//! and tierctl's command-line definitions so they always match `--help`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Command, CommandFactory, Parser};
use clap_complete::Shell;

/// Writes the man pages and shell completions for tierd and tierctl.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Directory to write `man/` and `completions/` into (created if missing).
    out: PathBuf,
}

fn main() {
    if let Err(e) = run(&Args::parse().out) {
        eprintln!("tierd-dist: {e:#}");
        std::process::exit(1);
    }
}

fn run(out: &Path) -> anyhow::Result<()> {
    let man = out.join("man");
    std::fs::create_dir_all(&man).with_context(|| format!("creating {}", man.display()))?;
    let mut written = 0;
    for cmd in [tierd::daemon_args::Args::command(), tierd::ctl::Cli::command()] {
        written += man_pages(&cmd, &man)?;
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            completions(cmd.clone(), shell, &out.join("completions").join(shell.to_string()))?;
        }
    }
    println!(
        "{written} man pages in {}, completions for bash, zsh and fish in {}",
        man.display(),
        out.join("completions").display()
    );
    Ok(())
}

/// One page for the command and one per subcommand (`tierctl-status.1`, as git does);
/// returns how many were written.
fn man_pages(cmd: &Command, dir: &Path) -> anyhow::Result<usize> {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut pages = vec![cmd.clone()];
    pages.extend(
        cmd.get_subcommands()
            .filter(|s| s.get_name() != "help")
            .map(|s| s.clone().name(format!("{}-{}", cmd.get_name(), s.get_name()))),
    );
    for page in &pages {
        let path = dir.join(format!("{}.1", page.get_name()));
        let mut text = Vec::new();
        clap_mangen::Man::new(page.clone()).render(&mut text)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(pages.len())
}

fn completions(mut cmd: Command, shell: Shell, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = cmd.get_name().to_string();
    clap_complete::generate_to(shell, &mut cmd, name, dir).with_context(|| format!("completions for {shell}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_subcommand_gets_a_page_and_every_shell_a_completion() {
        let out = std::env::temp_dir().join(format!("tierd-dist-test-{}", std::process::id()));
        run(&out).unwrap();
        let page = std::fs::read_to_string(out.join("man/tierctl.1")).unwrap();
        assert!(page.contains(".TH tierctl") && page.contains("tierctl\\-status"), "subcommands listed: {page}");
        let drain = std::fs::read_to_string(out.join("man/tierctl-tier.1")).unwrap();
        assert!(drain.contains("Drain") || drain.contains("drain"), "{drain}");
        let tierd = std::fs::read_to_string(out.join("man/tierd.1")).unwrap();
        assert!(tierd.contains("\\-\\-dram\\-budget"), "tierd's flags are in its page");
        assert!(!out.join("man/tierctl-help.1").exists(), "no page for clap's own help command");
        assert!(out.join("completions/bash/tierctl.bash").exists());
        assert!(out.join("completions/zsh/_tierd").exists());
        assert!(out.join("completions/fish/tierctl.fish").exists());
        std::fs::remove_dir_all(&out).unwrap();
    }
}
