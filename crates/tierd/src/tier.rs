//! The tier device: tier 1, a kernel swap area that tierd sets up, owns and removes.
//!
//! A file tier (the embedded default is `tier.swap` in the state directory) is put
//! behind a loop device unless asked otherwise, because the kernel splits huge pages
//! when swapping to a file but writes them whole to a block device. A block device or
//! partition is taken only when it is not in use and holds no filesystem (unless
//! forced). The tier's swap priority is above every other swap area, so cold pages go
//! to it first. On restart, a tier left active by an earlier tierd is adopted as is:
//! it holds tenants' pages.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tierd_core::config::{TierBacking, TierConfig};
use tierd_core::size::human;
use tierd_sys::blockdev::{self, BlockError};
use tierd_sys::procfs::ProcFs;
use tierd_sys::swap::{self, SwapError};

/// How the tier reaches the kernel's swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// The file itself is the swap area.
    File,
    /// A loop device over the file.
    Loop,
    /// A block device or partition.
    Device,
}

/// What tierd remembers about its tier across restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierRecord {
    pub path: PathBuf,
    pub swap_path: PathBuf,
    pub backing: Backing,
    /// tierd created the file, so tierd deletes it.
    pub created_file: bool,
    pub size: u64,
    pub priority: i32,
}

/// An active tier.
#[derive(Debug, Clone)]
pub struct Tier {
    pub record: TierRecord,
    /// Kernel name of the device whose `/proc/diskstats` tell the tier's latency.
    pub disk: Option<String>,
    /// That device's number, as the kernel's swap I/O errors name it.
    pub device_number: Option<(u32, u32)>,
}

/// Why the tier could not be set up or removed.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// path missing
    #[error("tier path {0} does not exist; give an existing device, or a file path in an existing directory")]
    Missing(PathBuf),
    /// not enough space
    #[error(
        "not enough space for a {size} tier file in {dir}: {free} free; free space, pick another --tier path or a smaller --tier-size"
    )]
    NoSpace { dir: PathBuf, size: String, free: String },
    /// device busy
    #[error("tier device {path} is in use ({why}); pick another device or stop what uses it")]
    Busy { path: PathBuf, why: String },
    /// holds a filesystem
    #[error(
        "tier device {path} holds a {fstype} signature; tierd will not overwrite it unless forced (tier.force = true or --force-tier)"
    )]
    HasFilesystem { path: PathBuf, fstype: String },
    /// too small
    #[error(
        "tier {path} holds {size}, too small for the DRAM budget {budget} x ratio {ratio} = {need}; give a bigger tier or lower the ratio to {fit:.2}"
    )]
    TooSmall { path: PathBuf, size: String, budget: String, ratio: f64, need: String, fit: f64 },
    /// neither file nor block device
    #[error("tier path {0} is neither a regular file nor a block device")]
    NotFileOrDevice(PathBuf),
    /// an existing file that is not ours
    #[error(
        "tier file {0} exists and is not a swap area tierd made; remove it, pick another path, or set tier.force = true to overwrite it"
    )]
    ForeignFile(PathBuf),
    /// a previous tier is still active elsewhere
    #[error(
        "the tier of an earlier tierd run ({old}) is still active with {used} on it, but the configuration asks for {new}; start with the same tier, or stop the tenants and swapoff {old} first"
    )]
    StaleTier { old: PathBuf, new: PathBuf, used: String },
    /// file I/O
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Swap(#[from] SwapError),
    #[error(transparent)]
    Block(#[from] BlockError),
    #[error(transparent)]
    Proc(#[from] tierd_sys::PathError),
}

/// What it takes to remove a half-built tier if a later step fails.
struct Undo {
    file: Option<PathBuf>,
    loop_dev: Option<PathBuf>,
}

impl Undo {
    fn run(&mut self) {
        if let Some(dev) = self.loop_dev.take() {
            let _ = blockdev::loop_detach(&dev);
        }
        if let Some(f) = self.file.take() {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        self.run();
    }
}

impl Tier {
    /// Sets up the tier described by `cfg`, or adopts the one `previous` left active.
    /// `need` is DRAM budget × ratio: the least the tier must hold.
    pub fn setup(
        cfg: &TierConfig,
        budget: u64,
        ratio: f64,
        previous: Option<&TierRecord>,
        proc: &ProcFs,
        sys: &Path,
    ) -> Result<Tier, TierError> {
        let need = (budget as f64 * ratio) as u64;
        let areas = swap::areas(proc.root())?;
        if let Some(prev) = previous {
            if let Some(active) = areas.iter().find(|a| a.path == prev.swap_path) {
                if prev.path != cfg.path {
                    return Err(TierError::StaleTier {
                        old: prev.path.clone(),
                        new: cfg.path.clone(),
                        used: human(active.used_bytes),
                    });
                }
                return Ok(Tier::from_record(prev.clone(), sys));
            }
            // Inactive leftovers of an earlier run: a loop device and our own file.
            if prev.backing == Backing::Loop {
                for dev in blockdev::loops_backed_by(sys, &prev.path) {
                    let _ = blockdev::loop_detach(&dev);
                }
            }
            if prev.created_file && prev.path == cfg.path {
                let _ = std::fs::remove_file(&prev.path);
            }
        }
        if let Some(tier) = Tier::left_active(cfg, &areas, sys) {
            return Ok(tier);
        }
        if areas.iter().any(|a| a.path == cfg.path) {
            return Err(TierError::Busy { path: cfg.path.clone(), why: "already an active swap area".into() });
        }
        let priority = swap::priority_above_all(&areas);
        let too_small = |size: u64| TierError::TooSmall {
            path: cfg.path.clone(),
            size: human(size),
            budget: human(budget),
            ratio,
            need: human(need),
            fit: size as f64 / budget as f64,
        };

        let mut undo = Undo { file: None, loop_dev: None };
        let (swap_path, backing, size, created_file) = if blockdev::is_block_device(&cfg.path) {
            blockdev::check_not_in_use(&cfg.path)
                .map_err(|e| TierError::Busy { path: cfg.path.clone(), why: e.to_string() })?;
            // Forced, the signature is not asked for (nor is blkid needed).
            if !cfg.force
                && let Some(fstype) = blockdev::signature(&cfg.path)?
                && fstype != "swap"
            {
                return Err(TierError::HasFilesystem { path: cfg.path.clone(), fstype });
            }
            let size = blockdev::device_size(&cfg.path)?;
            if size < need {
                return Err(too_small(size));
            }
            (cfg.path.clone(), Backing::Device, size, false)
        } else {
            let created = match std::fs::metadata(&cfg.path) {
                Ok(m) if m.is_file() => {
                    if !cfg.force && blockdev::signature(&cfg.path)?.is_none_or(|t| t != "swap") {
                        return Err(TierError::ForeignFile(cfg.path.clone()));
                    }
                    if m.len() < need {
                        return Err(too_small(m.len()));
                    }
                    false
                }
                Ok(_) => return Err(TierError::NotFileOrDevice(cfg.path.clone())),
                Err(_) => {
                    let dir = cfg.path.parent().unwrap_or(Path::new("/"));
                    if !dir.is_dir() {
                        return Err(TierError::Missing(cfg.path.clone()));
                    }
                    if cfg.size < need {
                        return Err(too_small(cfg.size));
                    }
                    let free = tierd_sys::process::free_space(dir)
                        .map_err(|source| TierError::Io { path: dir.into(), source })?;
                    // Keep 1 GiB of the filesystem free for everything else.
                    if free < cfg.size + (1 << 30) {
                        return Err(TierError::NoSpace { dir: dir.into(), size: human(cfg.size), free: human(free) });
                    }
                    tierd_sys::process::allocate_file(&cfg.path, cfg.size)
                        .map_err(|source| TierError::Io { path: cfg.path.clone(), source })?;
                    undo.file = Some(cfg.path.clone());
                    true
                }
            };
            let size = std::fs::metadata(&cfg.path).map(|m| m.len()).unwrap_or(cfg.size);
            match cfg.backing {
                TierBacking::File => (cfg.path.clone(), Backing::File, size, created),
                TierBacking::Auto | TierBacking::Loop => {
                    let dev = blockdev::loop_attach(&cfg.path)?;
                    undo.loop_dev = Some(dev.clone());
                    (dev, Backing::Loop, size, created)
                }
            }
        };
        swap::mkswap(&swap_path)?;
        swap::swapon(&swap_path, priority)?;
        // Success: the tier now owns the file and the loop device.
        undo.file = None;
        undo.loop_dev = None;
        let record = TierRecord { path: cfg.path.clone(), swap_path, backing, created_file, size, priority };
        Ok(Tier::from_record(record, sys))
    }

    /// The tier of a run that died before saving its record: a loop device over the
    /// configured file, still swap. Adopted as it is: a second swap area over the same
    /// file would hand out slots the first still holds pages in. (Its file is kept at
    /// shutdown, as whether tierd made it is not known.)
    fn left_active(cfg: &TierConfig, areas: &[swap::SwapArea], sys: &Path) -> Option<Tier> {
        let dev = blockdev::loops_backed_by(sys, &cfg.path);
        let area = areas.iter().find(|a| dev.contains(&a.path))?;
        let record = TierRecord {
            path: cfg.path.clone(),
            swap_path: area.path.clone(),
            backing: Backing::Loop,
            created_file: false,
            size: area.size_bytes,
            priority: area.priority,
        };
        Some(Tier::from_record(record, sys))
    }

    fn from_record(record: TierRecord, sys: &Path) -> Tier {
        let disk = match record.backing {
            Backing::Loop | Backing::Device => blockdev::kernel_name(sys, &record.swap_path),
            Backing::File => blockdev::device_of_file(sys, &record.path),
        };
        let device_number = disk.as_deref().and_then(|d| blockdev::device_number(sys, d));
        Tier { record, disk, device_number }
    }

    /// Size and bytes in use, from `/proc/swaps`.
    pub fn usage(&self, proc: &ProcFs) -> (u64, u64) {
        match swap::find(proc.root(), &self.record.swap_path) {
            Ok(Some(a)) => (a.size_bytes, a.used_bytes),
            _ => (self.record.size, 0),
        }
    }

    /// Turns the tier off and removes what tierd made: `swapoff` (reading every page
    /// back into DRAM), the loop device, and the file if tierd created it.
    pub fn teardown(&self) -> Result<(), TierError> {
        swap::swapoff(&self.record.swap_path)?;
        if self.record.backing == Backing::Loop {
            blockdev::loop_detach(&self.record.swap_path)?;
        }
        if self.record.created_file {
            std::fs::remove_file(&self.record.path)
                .map_err(|source| TierError::Io { path: self.record.path.clone(), source })?;
        }
        Ok(())
    }
}
