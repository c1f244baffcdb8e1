//! tierctl's command line, as clap reads it (also what man pages and completions are made from).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tierd_core::tenant::{DEFAULT_SHARES, TenantSpec};
use tierd_core::{ByteSize, TenantName};

use crate::api::SOCKET_ENV;
use crate::top::SortBy;

/// Control a running tierd: start and adopt tenants, move their memory, and see what
/// tierd measures and decides.
#[derive(Parser, Debug)]
#[command(name = "tierctl", version)]
pub struct Cli {
    /// tierd's API socket.
    #[arg(long, env = SOCKET_ENV, default_value = tierd_core::config::DEFAULT_SOCKET, global = true)]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Settings shared by `run`, `attach` and `adopt`.
#[derive(clap::Args, Debug)]
pub struct SpecArgs {
    /// Declared memory size, counted by admission (e.g. 2G).
    #[arg(long)]
    pub size: Option<ByteSize>,
    /// DRAM guaranteed to the tenant.
    #[arg(long)]
    pub reserve: Option<ByteSize>,
    /// Most DRAM the tenant may hold.
    #[arg(long)]
    pub limit: Option<ByteSize>,
    /// Weight when DRAM is short (default 100).
    #[arg(long, default_value_t = DEFAULT_SHARES)]
    pub shares: u32,
    /// The tenant is a virtual machine (a QEMU process).
    #[arg(long)]
    pub vm: bool,
    /// Keep the tenant wholly in DRAM: never demoted, swap off in its cgroup, its
    /// whole --size set aside (and not backing any tier).
    #[arg(long, requires = "size")]
    pub no_tier: bool,
}

impl SpecArgs {
    pub fn spec(&self, name: TenantName) -> TenantSpec {
        TenantSpec {
            name,
            size: self.size.map(|s| s.0),
            reserve: self.reserve.map_or(0, |s| s.0),
            limit: self.limit.map(|s| s.0),
            shares: self.shares,
            vm: self.vm,
            no_tier: self.no_tier,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum TierCmd {
    /// Read everything on the tier back into DRAM and turn the tier off, to replace its
    /// device. Refused, with the numbers, when it would not fit in DRAM. Tenants keep
    /// running; tierd runs on without a tier until it is restarted with one.
    Drain,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Host and tenant status.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Start a program as a tenant and print its name and PID once it runs.
    Run {
        /// Tenant name (default: the program's name and a number).
        #[arg(long)]
        name: Option<TenantName>,
        #[command(flatten)]
        spec: SpecArgs,
        /// The program and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Adopt a running process (it must live in tierd's cgroup or below).
    Attach {
        pid: u32,
        #[arg(long)]
        name: TenantName,
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Take an existing cgroup tierd did not create as a tenant (a libvirt VM's scope, a
    /// container's cgroup): tierd writes only its memory limits, moves none of its
    /// processes, and puts its settings back on `release`. It must lie below tierd's own
    /// cgroup or one of the config's adopt_roots.
    Adopt {
        /// The cgroup's path as /proc/PID/cgroup names it, e.g. /machine.slice/vm1.scope.
        cgroup: String,
        /// The tenant's name (default: the cgroup's last path component).
        #[arg(long)]
        name: Option<TenantName>,
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Let an adopted tenant go: its cgroup gets back the memory settings it had.
    Release { name: TenantName },
    /// Stop managing a tenant; its processes keep running without limits.
    Detach { name: TenantName },
    /// Signal a tenant's processes (default TERM).
    Stop {
        name: TenantName,
        #[arg(long, default_value = "TERM")]
        signal: String,
    },
    /// Forget an exited tenant.
    Rm { name: TenantName },
    /// Page a tenant's memory out to the tier now.
    Demote {
        name: TenantName,
        /// At most this much (default: all resident anonymous memory).
        #[arg(long)]
        bytes: Option<ByteSize>,
    },
    /// Read a tenant's memory back from the tier now, as much as its limit has room for.
    Prefetch {
        name: TenantName,
        /// At most this much (default: the room left under the limit that binds the
        /// tenant, its quota or the group's it shares, less 16 MiB or a sixteenth of that
        /// limit kept free for the tenant's own allocations).
        #[arg(long)]
        bytes: Option<ByteSize>,
    },
    /// Rebuild a tenant's huge pages now.
    Collapse { name: TenantName },
    /// Recent decisions about a tenant, with their reasons.
    Explain { name: TenantName },
    /// A tenant's heat map: per 2 MiB region, how long since it was last seen touched,
    /// what it holds in DRAM and on the tier, and the samples that say it is cold.
    Regions {
        name: TenantName,
        #[arg(long)]
        json: bool,
    },
    /// A tenant's fault curve as the policy sees it: how often it would read from the
    /// tier, and the share of its work it would get done, for each amount of DRAM.
    Curve {
        name: TenantName,
        #[arg(long)]
        json: bool,
    },
    /// What if: the policy's allocation on another DRAM budget, or with more tenants
    /// like running ones, from their measured curves: each tenant's quota, the share of
    /// its work it would get done, and the host's health colour.
    Plan {
        /// The DRAM budget to plan for (default: the one in force), e.g. 8G.
        #[arg(long)]
        budget: Option<ByteSize>,
        /// N more tenants like NAME, written NxNAME (e.g. 3xweb); repeatable.
        #[arg(long, value_name = "NxNAME")]
        add: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// The tier device.
    Tier {
        #[command(subcommand)]
        cmd: TierCmd,
    },
    /// Recent events: decisions, warnings, tenant starts and exits.
    Events,
    /// Health checks, one per line, with what to do about a yellow or red. Exit code 0
    /// when all are green, 1 with a yellow, 2 with a red (for scripts and monitors).
    Health {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// TLB coverage for 4 KiB, 2 MiB and 1 GiB pages: entries × page size, and the
    /// fraction of each working set it covers under uniform access (a simple model of
    /// one unified TLB; `tierd-bench latency` measures the real effect). Needs no tierd.
    Tlb {
        /// TLB sizes in entries, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "64,256,2048")]
        entries: Vec<u64>,
        /// Working-set sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "8G,64G")]
        working_set: Vec<ByteSize>,
    },
    /// What this kernel offers tierd (cgroup version and delegation, process_madvise,
    /// PAGEMAP_SCAN, MADV_COLLAPSE, THP, DAMON, MGLRU, PSI, zswap), how tierd works on
    /// it, and what could be enabled. Needs no tierd; exit code 1 when tierd cannot run.
    Doctor {
        /// Print JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
    /// Live view of the host and its tenants, like esxtop's memory screen.
    Top {
        /// Column to sort tenants by (in the view: n d t a u r w f).
        #[arg(long, value_enum, default_value = "dram")]
        sort: SortBy,
        /// Seconds between refreshes.
        #[arg(long, short = 'd', default_value_t = 2.0)]
        delay: f64,
        /// Print plain text screens instead of the live view (for scripts and logs).
        #[arg(long, short)]
        batch: bool,
        /// With --batch: how many screens.
        #[arg(long, short = 'n', default_value_t = 1)]
        iterations: u32,
    },
}

pub fn signal_number(s: &str) -> anyhow::Result<i32> {
    let name = s.trim_start_matches("SIG").to_ascii_uppercase();
    Ok(match name.as_str() {
        "TERM" => 15,
        "KILL" => 9,
        "INT" => 2,
        "HUP" => 1,
        "USR1" => 10,
        "USR2" => 12,
        "STOP" => 19,
        "CONT" => 18,
        n => n.parse().with_context(|| {
            format!("unknown signal `{s}`: use TERM, KILL, INT, HUP, USR1, USR2, STOP, CONT or a number")
        })?,
    })
}

pub fn default_name(command: &[String], taken: &[String]) -> anyhow::Result<TenantName> {
    let base: String = std::path::Path::new(&command[0])
        .file_name()
        .map(|f| f.to_string_lossy().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')).collect())
        .unwrap_or_default();
    let base = if base.is_empty() { "tenant".to_string() } else { base.chars().take(48).collect() };
    for i in 1.. {
        let candidate = format!("{base}-{i}");
        if !taken.contains(&candidate) {
            return Ok(TenantName::new(&candidate)?);
        }
    }
    unreachable!()
}

/// `3xweb` into (3, web).
pub fn parse_add(s: &str) -> anyhow::Result<(u32, TenantName)> {
    let (n, name) = s.split_once('x').ok_or_else(|| anyhow::anyhow!("--add {s}: write NxNAME, e.g. 3xweb"))?;
    let n: u32 = n.parse().map_err(|_| anyhow::anyhow!("--add {s}: `{n}` is not a count"))?;
    if n == 0 || n > 64 {
        anyhow::bail!("--add {s}: between 1 and 64 more tenants");
    }
    Ok((n, TenantName::new(name)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal_number("TERM").unwrap(), 15);
        assert_eq!(signal_number("SIGKILL").unwrap(), 9);
        assert_eq!(signal_number("9").unwrap(), 9);
        assert!(signal_number("BOGUS").is_err());
    }

    #[test]
    fn default_names_are_valid_and_unique() {
        let n = default_name(&["/usr/bin/redis-server".into()], &["redis-server-1".into()]).unwrap();
        assert_eq!(n.as_str(), "redis-server-2");
        let n = default_name(&["./a b$c".into()], &[]).unwrap();
        assert_eq!(n.as_str(), "abc-1");
    }
}
