//! tierd's command line, as clap reads it (also what man pages and completions are made from).

use std::path::PathBuf;

use clap::Parser;
use tierd_core::ByteSize;
use tierd_core::config::{PolicyKind, TierBacking, TierEncryption};

/// tierd makes an NVMe device a second tier of memory for unmodified processes:
/// it keeps hot memory in DRAM, lets cold memory live on the tier, and shares DRAM
/// between tenants by quota. Flags override the config file.
#[derive(Parser, Debug)]
#[command(name = "tierd", version)]
pub struct Args {
    /// TOML config file (see `--print-config` for a commented sample).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// DRAM all tenants may use together, e.g. 4G (default: half the host's memory).
    #[arg(long)]
    pub dram_budget: Option<ByteSize>,
    /// Tier bytes per DRAM byte (default 1.0, i.e. 1:1).
    #[arg(long)]
    pub ratio: Option<f64>,
    /// Tier device or file (default: tier.swap in the state directory).
    #[arg(long)]
    pub tier: Option<PathBuf>,
    /// Size of a file tier (default: DRAM budget x ratio).
    #[arg(long)]
    pub tier_size: Option<ByteSize>,
    /// How a file tier reaches swap: auto (loop device), file, loop.
    #[arg(long)]
    pub tier_backing: Option<TierBacking>,
    /// Encrypt the tier with dm-crypt and a key made at each start: auto (where the kernel
    /// can), on (or do not start), off.
    #[arg(long)]
    pub tier_encrypt: Option<TierEncryption>,
    /// Drive writes per day the tier's drive is rated for: health compares the tier's
    /// write rate with it (yellow above half, red above all of it).
    #[arg(long)]
    pub tier_dwpd: Option<f64>,
    /// Take a tier device even if it holds a filesystem signature.
    #[arg(long)]
    pub force_tier: bool,
    /// State directory (default /var/lib/tierd).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// API socket (default /run/tierd.sock).
    #[arg(long, env = crate::api::SOCKET_ENV)]
    pub socket: Option<PathBuf>,
    /// Placement policy: none (plain swap), static, tierd.
    #[arg(long)]
    pub policy: Option<PolicyKind>,
    /// Control-loop interval, e.g. 10s.
    #[arg(long)]
    pub interval: Option<String>,
    /// How long a tenant may wait at its memory limit with no progress before the OOM
    /// killer may act on it (default 30s).
    #[arg(long)]
    pub oom_grace: Option<String>,
    /// Activeness window: "hot" means touched within it (default 60s).
    #[arg(long)]
    pub window: Option<String>,
    /// Pages the tracker samples per tenant and interval at first (default 1024).
    #[arg(long)]
    pub sample_pages: Option<u32>,
    /// How activeness is measured: sampling (default, any kernel) or damon (the
    /// kernel's access monitor, 6.6+; falls back to sampling where it cannot be used).
    #[arg(long, value_name = "KIND")]
    pub tracker: Option<tierd_core::config::TrackerKind>,
    /// Name of tierd's cgroup subtree under its own cgroup.
    #[arg(long)]
    pub cgroup_name: Option<String>,
    /// A cgroup path below which `tierctl adopt` may take cgroups tierd did not create
    /// (e.g. /machine.slice); may be given more than once. Adds to the config's adopt_roots.
    #[arg(long = "adopt-root", value_name = "CGROUP")]
    pub adopt_roots: Vec<String>,
    /// Serve /metrics (Prometheus) and the live dashboard at / on this address, e.g.
    /// 127.0.0.1:9464 (off by default; port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Allow --http on a non-loopback address (it shows every tenant's figures).
    #[arg(long)]
    pub force_http: bool,
    /// Print the commented sample config and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Validate the configuration, print it resolved, and exit.
    #[arg(long)]
    pub check: bool,
    /// For a tierd that died and will not come back: re-adopt what it left in STATE_DIR
    /// (give the same --config / --cgroup-name), lift every limit, swap the tier off where
    /// DRAM can take it back, say what was done, and exit. Tenants keep running.
    #[arg(long, value_name = "STATE_DIR")]
    pub release: Option<PathBuf>,
}
