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
use tierd_core::config::{TierBacking, TierConfig, TierEncryption};
use tierd_core::size::human;
use tierd_sys::blockdev::{self, BlockError};
use tierd_sys::crypt;
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
    /// The dm-crypt mapping the kernel swaps to, when the tier is encrypted.
    #[serde(default)]
    pub crypt: Option<CryptRecord>,
}

/// A dm-crypt mapping over the tier's block device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CryptRecord {
    /// `/dev/mapper/<name>`, which is then the swap path.
    pub name: String,
    /// The block device under it (a loop device, or the tier device).
    pub device: PathBuf,
}

/// An active tier.
#[derive(Debug, Clone)]
pub struct Tier {
    pub record: TierRecord,
    /// Kernel name of the device whose `/proc/diskstats` tell the tier's latency.
    pub disk: Option<String>,
    /// That device's number, as the kernel's swap I/O errors name it.
    pub device_number: Option<(u32, u32)>,
    /// The request queue under it, whose requests time the tier's reads one by one.
    pub queue: Option<blockdev::QueueExtent>,
    /// That device's size: what a drive's rated writes per day count in, unless configured.
    pub disk_bytes: Option<u64>,
    /// The NVMe drive under it (`/dev/nvme0n1`), whose own health log tells its wear.
    pub drive: Option<PathBuf>,
    /// Why `setup` left the tier unencrypted (see [`Tier::encryption`]).
    clear_because: Option<String>,
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
    /// tier.encrypt = on and no encryption possible
    #[error(
        "the tier cannot be encrypted ({0}), and tier.encrypt is on; set it to auto to run without, or make dm-crypt available"
    )]
    NoEncryption(String),
    /// file I/O
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error(transparent)]
    Swap(#[from] SwapError),
    #[error(transparent)]
    Block(#[from] BlockError),
    #[error(transparent)]
    Proc(#[from] tierd_sys::PathError),
}

/// What the tier must hold: the budget times the ratio.
struct Sizing {
    budget: u64,
    ratio: f64,
    need: u64,
}

impl Sizing {
    fn too_small(&self, path: &Path, size: u64) -> TierError {
        TierError::TooSmall {
            path: path.to_path_buf(),
            size: human(size),
            budget: human(self.budget),
            ratio: self.ratio,
            need: human(self.need),
            fit: size as f64 / self.budget as f64,
        }
    }
}

/// Where the swap area goes, its backing and size, and whether tierd made the file.
type Prepared = (PathBuf, Backing, u64, bool);

/// A block device as the tier: not in use, holding no file system (unless forced),
/// big enough.
fn on_device(cfg: &TierConfig, sizing: &Sizing) -> Result<Prepared, TierError> {
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
    if size < sizing.need {
        return Err(sizing.too_small(&cfg.path, size));
    }
    Ok((cfg.path.clone(), Backing::Device, size, false))
}

/// A file as the tier: an old swap file of the right size, or a new one where the
/// file system has room; behind a loop device unless `backing = "file"`.
fn on_file(cfg: &TierConfig, sizing: &Sizing, undo: &mut Undo) -> Result<Prepared, TierError> {
    let created = match std::fs::metadata(&cfg.path) {
        Ok(m) if m.is_file() => {
            if !cfg.force && blockdev::signature(&cfg.path)?.is_none_or(|t| t != "swap") {
                return Err(TierError::ForeignFile(cfg.path.clone()));
            }
            if m.len() < sizing.need {
                return Err(sizing.too_small(&cfg.path, m.len()));
            }
            false
        }
        Ok(_) => return Err(TierError::NotFileOrDevice(cfg.path.clone())),
        Err(_) => {
            create_file(cfg, sizing)?;
            undo.file = Some(cfg.path.clone());
            true
        }
    };
    let size = std::fs::metadata(&cfg.path).map(|m| m.len()).unwrap_or(cfg.size);
    match cfg.backing {
        TierBacking::File => Ok((cfg.path.clone(), Backing::File, size, created)),
        TierBacking::Auto | TierBacking::Loop => {
            let dev = blockdev::loop_attach(&cfg.path)?;
            undo.loop_dev = Some(dev.clone());
            Ok((dev, Backing::Loop, size, created))
        }
    }
}

/// Allocates the tier file, leaving 1 GiB of its file system free for everything else.
fn create_file(cfg: &TierConfig, sizing: &Sizing) -> Result<(), TierError> {
    let dir = cfg.path.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        return Err(TierError::Missing(cfg.path.clone()));
    }
    if cfg.size < sizing.need {
        return Err(sizing.too_small(&cfg.path, cfg.size));
    }
    let free = tierd_sys::process::free_space(dir).map_err(|source| TierError::Io { path: dir.into(), err: source })?;
    if free < cfg.size + (1 << 30) {
        return Err(TierError::NoSpace { dir: dir.into(), size: human(cfg.size), free: human(free) });
    }
    tierd_sys::process::allocate_file(&cfg.path, cfg.size)
        .map_err(|source| TierError::Io { path: cfg.path.clone(), err: source })
}

/// What it takes to remove a half-built tier if a later step fails.
struct Undo {
    file: Option<PathBuf>,
    loop_dev: Option<PathBuf>,
    crypt: Option<String>,
}

impl Undo {
    fn run(&mut self) {
        if let Some(name) = self.crypt.take() {
            let _ = crypt::close(&name);
        }
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
    /// A tier as the engine sees one, never set up: for the engine's fixture tests.
    #[cfg(test)]
    pub(crate) fn unset(record: TierRecord, disk: &str, device_number: (u32, u32)) -> Tier {
        Tier {
            record,
            disk: Some(disk.to_string()),
            device_number: Some(device_number),
            queue: None,
            disk_bytes: None,
            drive: None,
            clear_because: None,
        }
    }

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
        let sizing = Sizing { budget, ratio, need: (budget as f64 * ratio) as u64 };
        let areas = swap::areas(proc.root())?;
        if let Some(prev) = previous
            && let Some(tier) = Tier::reuse_previous(cfg, prev, &areas, sys)?
        {
            return Ok(tier);
        }
        if let Some(tier) = Tier::left_active(cfg, &areas, sys) {
            return Ok(tier);
        }
        close_stale_mappings(cfg, &areas, sys);
        if areas.iter().any(|a| a.path == cfg.path) {
            return Err(TierError::Busy { path: cfg.path.clone(), why: "already an active swap area".into() });
        }
        let priority = swap::priority_above_all(&areas);
        let mut undo = Undo { file: None, loop_dev: None, crypt: None };
        let (swap_path, backing, size, created_file) = if blockdev::is_block_device(&cfg.path) {
            on_device(cfg, &sizing)?
        } else {
            on_file(cfg, &sizing, &mut undo)?
        };
        let (crypt, clear_because) = encrypt(cfg.encrypt, &swap_path, backing, size, sys)?;
        undo.crypt = crypt.as_ref().map(|c| c.name.clone());
        let swap_path = crypt.as_ref().map_or(swap_path, |c| crypt::mapper_path(&c.name));
        swap::mkswap(&swap_path)?;
        swap::swapon(&swap_path, priority)?;
        // Success: the tier now owns the file, the loop device and the mapping.
        undo.file = None;
        undo.loop_dev = None;
        undo.crypt = None;
        let record = TierRecord { path: cfg.path.clone(), swap_path, backing, created_file, size, priority, crypt };
        let mut tier = Tier::from_record(record, sys);
        tier.clear_because = clear_because;
        Ok(tier)
    }

    /// The previous run's tier: still swapped on, it is taken over (refused if the
    /// configured path moved); inactive, its leftovers are cleared for a new one.
    fn reuse_previous(
        cfg: &TierConfig,
        prev: &TierRecord,
        areas: &[swap::SwapArea],
        sys: &Path,
    ) -> Result<Option<Tier>, TierError> {
        if let Some(active) = areas.iter().find(|a| a.path == prev.swap_path) {
            if prev.path != cfg.path {
                return Err(TierError::StaleTier {
                    old: prev.path.clone(),
                    new: cfg.path.clone(),
                    used: human(active.used_bytes),
                });
            }
            return Ok(Some(Tier::from_record(prev.clone(), sys)));
        }
        // Inactive leftovers of an earlier run: a mapping, a loop device and our own file.
        if let Some(c) = prev.crypt.as_ref().filter(|c| crypt::is_open(&c.name)) {
            let _ = crypt::close(&c.name);
        }
        if prev.backing == Backing::Loop {
            for dev in blockdev::loops_backed_by(sys, &prev.path) {
                let _ = blockdev::loop_detach(&dev);
            }
        }
        if prev.created_file && prev.path == cfg.path {
            let _ = std::fs::remove_file(&prev.path);
        }
        Ok(None)
    }

    /// The tier of a run that died before saving its record: a loop device over the
    /// configured file, or tierd's mapping over it or over the configured device, still
    /// swap. Adopted as it is: a second swap area over the same file would hand out
    /// slots the first still holds pages in. (Its file is kept at
    /// shutdown, as whether tierd made it is not known.)
    fn left_active(cfg: &TierConfig, areas: &[swap::SwapArea], sys: &Path) -> Option<Tier> {
        let device = blockdev::is_block_device(&cfg.path).then(|| cfg.path.clone());
        let loops = blockdev::loops_backed_by(sys, &cfg.path).into_iter().map(|l| (l, Backing::Loop));
        for (dev, backing) in loops.chain(device.map(|d| (d, Backing::Device))) {
            // A loop device itself, or the mapping tierd puts over it or over a device.
            let name = crypt_name(sys, &dev);
            let crypt = name.filter(|n| crypt::is_open(n)).map(|name| CryptRecord { name, device: dev.clone() });
            if crypt.is_none() && backing == Backing::Device {
                continue;
            }
            let swap_path = crypt.as_ref().map_or(dev.clone(), |c| crypt::mapper_path(&c.name));
            let Some(area) = areas.iter().find(|a| a.path == swap_path) else { continue };
            let record = TierRecord {
                path: cfg.path.clone(),
                swap_path,
                backing,
                created_file: false,
                size: area.size_bytes,
                priority: area.priority,
                crypt,
            };
            return Some(Tier::from_record(record, sys));
        }
        None
    }

    fn from_record(record: TierRecord, sys: &Path) -> Tier {
        let disk = match record.backing {
            Backing::Loop | Backing::Device => blockdev::kernel_name(sys, &record.swap_path),
            Backing::File => blockdev::device_of_file(sys, &record.path),
        };
        let device_number = disk.as_deref().and_then(|d| blockdev::device_number(sys, d));
        let queue = disk.as_deref().and_then(|d| blockdev::request_queue(sys, d));
        let disk_bytes = disk.as_deref().and_then(|d| blockdev::disk_size(sys, d));
        // The kernel names every NVMe namespace nvme<controller>n<namespace>.
        let drive = disk.as_deref().and_then(|d| blockdev::whole_drive(sys, d)).filter(|d| d.starts_with("nvme"));
        let drive = drive.map(|d| Path::new("/dev").join(d));
        Tier { record, disk, device_number, queue, disk_bytes, drive, clear_because: None }
    }

    /// The cipher the tier is encrypted with, or why it is not: the one answer that the
    /// start-up log, status and health give.
    pub fn encryption(&self) -> Result<&'static str, String> {
        match (&self.record.crypt, &self.clear_because) {
            (Some(_), _) => Ok(crypt::CIPHER),
            (None, Some(why)) => Err(why.clone()),
            // Adopted from an earlier run, which knew why.
            (None, None) => Err("set up unencrypted by an earlier tierd".into()),
        }
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
        if let Some(c) = &self.record.crypt {
            crypt::close(&c.name)?;
        }
        if self.record.backing == Backing::Loop {
            let dev = self.record.crypt.as_ref().map_or(&self.record.swap_path, |c| &c.device);
            blockdev::loop_detach(dev)?;
        }
        if self.record.created_file {
            std::fs::remove_file(&self.record.path)
                .map_err(|source| TierError::Io { path: self.record.path.clone(), err: source })?;
        }
        Ok(())
    }
}

/// Closes tierd's own mappings over the configured device, or over loop devices on the
/// configured file, that are not swap areas: a run that died between making one and its
/// `swapon` left it, and it would hold the device busy.
fn close_stale_mappings(cfg: &TierConfig, areas: &[swap::SwapArea], sys: &Path) {
    let device = blockdev::is_block_device(&cfg.path).then(|| cfg.path.clone());
    for dev in blockdev::loops_backed_by(sys, &cfg.path).into_iter().chain(device) {
        if let Some(name) = crypt_name(sys, &dev).filter(|n| crypt::is_open(n))
            && !areas.iter().any(|a| a.path == crypt::mapper_path(&name))
        {
            let _ = crypt::close(&name);
        }
    }
}

/// The name of tierd's dm-crypt mapping over `device`: `tierd-tier-loop3`.
fn crypt_name(sys: &Path, device: &Path) -> Option<String> {
    Some(format!("tierd-tier-{}", blockdev::kernel_name(sys, device)?))
}

/// Puts a dm-crypt mapping over the tier's block device, as `wanted` asks; returns it, or
/// why the tier stays unencrypted (an error if encryption was required).
fn encrypt(
    wanted: TierEncryption,
    device: &Path,
    backing: Backing,
    size: u64,
    sys: &Path,
) -> Result<(Option<CryptRecord>, Option<String>), TierError> {
    let why = match (wanted, backing) {
        (TierEncryption::Off, _) => return Ok((None, Some("tier.encrypt is off".into()))),
        (_, Backing::File) => {
            "the kernel swaps to the file itself (tier.backing = file), not a block device".to_string()
        }
        _ => {
            let name = crypt_name(sys, device).unwrap_or_else(|| "tierd-tier".into());
            if crypt::is_open(&name) {
                return Err(TierError::Busy {
                    path: crypt::mapper_path(&name),
                    why: "a mapping of that name exists".into(),
                });
            }
            match crypt::open(&name, device, size / 512) {
                Ok(_) => return Ok((Some(CryptRecord { name, device: device.to_path_buf() }), None)),
                Err(_) if !crypt::has_device_mapper(sys) => "this kernel has no device-mapper".into(),
                Err(e) => format!("no dm-crypt: {e}"),
            }
        }
    };
    match wanted {
        TierEncryption::On => Err(TierError::NoEncryption(why)),
        _ => Ok((None, Some(why))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_names_its_path_and_cause_once_in_the_chain_tierd_prints() {
        let e = TierError::Io { path: "/var/tmp/tier.swap".into(), err: std::io::Error::from_raw_os_error(95) };
        let said = format!("{:#}", anyhow::Error::from(e));
        assert!(said.starts_with("/var/tmp/tier.swap: "), "{said}");
        assert_eq!(said.matches("os error 95").count(), 1, "{said}");
    }
}
