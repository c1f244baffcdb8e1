//! The tier's read latency request by request: the block layer's `block_bio_queue` and
//! `block_rq_complete` tracepoints as perf events, one ring per CPU. No BPF: its programs
//! need a compiler the hosts tierd builds on may lack, and user space can pair a
//! sample of requests cheaply. The kernel's own filter keeps the tier's reads, about
//! one page in [`SAMPLED_ONE_IN`] (by sector bits), and drops tierd's own requests.
//!
//! A read is timed from its submission, not from the request's issue to the driver: the
//! wait for a free tag and in the I/O scheduler's queue is part of what a fault waits.

use crate::blockdev::QueueExtent;
use perf_event_open_sys as perf;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Requests whose start sector has these bits clear are sampled: bits 3–5 of a sector
/// number, so one 4 KiB page in eight (swap pages start on 8-sector boundaries).
const SAMPLED_SECTOR_BITS: u64 = 0b111_000;
/// How many of the tier's reads one sampled read stands for.
pub const SAMPLED_ONE_IN: u64 = 8;
/// Data pages of each CPU's ring (128 KiB): about 1,400 sampled requests between reads.
const RING_DATA_PAGES: usize = 32;
/// A submission whose completion was never seen (lost from a full ring, or merged into a
/// request that starts at an unsampled sector) is forgotten after this.
const PENDING_NS: u64 = 30_000_000_000;
/// At most this many submissions wait for their completion (about 2 MiB); past it the
/// older half is forgotten, so a flood of merged reads cannot grow tierd.
const MAX_PENDING: usize = 65_536;
/// Sectors between two sampled ones where swap pages lie (8-sector aligned): bit 6 up.
const SAMPLED_STRIDE: u64 = SAMPLED_SECTOR_BITS + 8;

/// Why the tier's requests cannot be traced.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// tracefs cannot be read
    #[error("cannot read the block tracepoints' formats from tracefs: {0}")]
    Tracefs(io::Error),
    /// a format not as expected
    #[error("block tracepoint {event}: {why}")]
    Format { event: &'static str, why: String },
    /// perf_event_open or its setup failed
    #[error("{what} on CPU {cpu}: {err} (needs root or CAP_PERFMON)")]
    Perf { what: &'static str, cpu: u32, err: io::Error },
}

/// Where a field lies in a tracepoint's raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    offset: usize,
    size: usize,
}

/// What tierd reads from one tracepoint's raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EventFormat {
    id: u64,
    dev: Field,
    sector: Field,
    nr_sector: Field,
}

/// Parses a tracepoint's `format` file for its id and the `dev`, `sector` and
/// `nr_sector` fields, whose offsets differ between kernels.
fn parse_format(event: &'static str, text: &str) -> Result<EventFormat, TraceError> {
    let bad = |why: &str| TraceError::Format { event, why: why.to_string() };
    let id = text.lines().find_map(|l| l.strip_prefix("ID:")).ok_or_else(|| bad("no ID"))?;
    let id = id.trim().parse().map_err(|_| bad("an ID that is not a number"))?;
    let field = |name: &str| -> Result<Field, TraceError> {
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| {
                l.strip_prefix("field:")
                    .and_then(|f| f.split(';').next())
                    .is_some_and(|d| d.ends_with(&format!(" {name}")))
            })
            .ok_or_else(|| bad(&format!("no field {name}")))?;
        let number = |key: &str| {
            line.split(';').find_map(|p| p.trim().strip_prefix(key)).and_then(|v| v.trim().parse::<usize>().ok())
        };
        let f = Field {
            offset: number("offset:").ok_or_else(|| bad("no offset"))?,
            size: number("size:").ok_or_else(|| bad("no size"))?,
        };
        Ok(f)
    };
    let (dev, sector, nr_sector) = (field("dev")?, field("sector")?, field("nr_sector")?);
    if dev.size != 4 || sector.size != 8 || nr_sector.size != 4 {
        let sizes = format!("{}, {} and {}", dev.size, sector.size, nr_sector.size);
        return Err(bad(&format!("dev, sector and nr_sector of {sizes} bytes, not 4, 8 and 4")));
    }
    Ok(EventFormat { id, dev, sector, nr_sector })
}

/// The kernel's own encoding of a device number in tracepoints (`MKDEV`).
fn kernel_dev((major, minor): (u32, u32)) -> u32 {
    (major << 20) | minor
}

/// Which of the tier's reads an event keeps.
#[derive(Debug, Clone, Copy)]
enum Keep<'a> {
    /// Submissions at sampled sectors, but none made by the task named this (tierd's
    /// moves, timed in its deep queue). A submission runs in its submitter's context.
    SampledNotBy(Option<&'a str>),
    /// Every completion: a sampled read merged into a request that starts at an
    /// unsampled sector completes with it, and must not wait on to be paired with a later
    /// read of its sector (tierd's own, whose submission is not seen).
    All,
}

/// The perf filter of one event: the tier's reads that `keep` says.
fn filter(extent: &QueueExtent, keep: Keep) -> String {
    let mut f = format!("dev == {} && rwbs ~ \"R*\"", kernel_dev(extent.dev));
    if let Keep::SampledNotBy(_) = keep {
        f += &format!(" && !(sector & {SAMPLED_SECTOR_BITS})");
    }
    if extent.first_sector > 0 {
        f += &format!(" && sector >= {}", extent.first_sector);
    }
    if let Some(n) = extent.sectors {
        f += &format!(" && sector < {}", extent.first_sector + n);
    }
    if let Keep::SampledNotBy(Some(comm)) = keep {
        f += &format!(" && comm != \"{comm}\"");
    }
    f
}

/// Reads tracefs files where tracefs is not mounted, without mounting it for anyone
/// else: a thread of its own unshares its mount namespace and mounts tracefs there.
fn read_tracefs(files: &'static [&'static str]) -> io::Result<Vec<String>> {
    std::thread::spawn(move || {
        let dir = Path::new("/sys/kernel/tracing");
        if !dir.join("events").exists() {
            // SAFETY: unshare takes no pointers; CLONE_NEWNS with CLONE_FS (implied) only
            // affects this thread, which ends here.
            if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
                return Err(io::Error::last_os_error());
            }
            mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE)?;
            mount(Some(c"nodev"), c"/sys/kernel/tracing", Some(c"tracefs"), 0)?;
        }
        files.iter().map(|f| std::fs::read_to_string(dir.join(f))).collect()
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("the tracefs reader panicked")))
}

fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null.
    let rc = unsafe { libc::mount(ptr(source), target.as_ptr(), ptr(fstype), flags, std::ptr::null()) };
    if rc != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The CPUs in a kernel CPU list (`0-3,5`).
fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
            cpus.extend(a..=b);
        }
    }
    cpus
}

/// One CPU's ring buffer, shared by its submission and completion events.
struct Ring {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
}

// SAFETY: the mapping belongs to this Ring alone; the kernel writes it concurrently only
// through the head it publishes, which `read` loads with acquire ordering.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: &OwnedFd, cpu: u32) -> Result<Ring, TraceError> {
        let page = 4096;
        let len = page * (1 + RING_DATA_PAGES);
        // SAFETY: a fresh shared mapping of the perf fd, length (1 + 2^n) pages as perf wants.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(TraceError::Perf { what: "mmap of the perf ring", cpu, err: io::Error::last_os_error() });
        }
        Ok(Ring { base: base as *mut u8, len, data_offset: page, data_size: page * RING_DATA_PAGES })
    }

    fn control(&self, field: usize) -> &AtomicU64 {
        // SAFETY: data_head (1024) and data_tail (1032) are aligned u64s in the first page,
        // shared with the kernel, which is what AtomicU64 is for.
        unsafe { &*(self.base.add(field) as *const AtomicU64) }
    }

    /// Copies out every record the kernel has written since the last call.
    fn read(&mut self, out: &mut Vec<Vec<u8>>) {
        let head =
            self.control(std::mem::offset_of!(perf::bindings::perf_event_mmap_page, data_head)).load(Ordering::Acquire);
        let tail_cell = self.control(std::mem::offset_of!(perf::bindings::perf_event_mmap_page, data_tail));
        let mut tail = tail_cell.load(Ordering::Relaxed);
        while tail + 8 <= head {
            let header = self.copy(tail, 8);
            let size = u16::from_ne_bytes([header[6], header[7]]) as u64;
            if size < 8 || tail + size > head {
                break;
            }
            out.push(self.copy(tail, size as usize));
            tail += size;
        }
        tail_cell.store(head, Ordering::Release);
    }

    /// `len` bytes at ring position `at`, across the wrap.
    fn copy(&self, at: u64, len: usize) -> Vec<u8> {
        let start = (at % self.data_size as u64) as usize;
        let first = len.min(self.data_size - start);
        // SAFETY: both spans lie inside the data area of the live mapping.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) };
        let mut v = data[start..start + first].to_vec();
        v.extend_from_slice(&data[..len - first]);
        v
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`, which nothing references after.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// What the rings held since the last look.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Sampled {
    /// Latencies (submission to completion) of the sampled reads that completed, in µs.
    pub read_micros: Vec<u32>,
    /// Records the kernel dropped because a ring was full.
    pub lost: u64,
}

/// Submission and completion events of the tier's request queue, on every CPU, drained
/// by a thread of their own every [`DRAIN_EVERY`].
pub struct ReadLatency {
    drained: Arc<Mutex<Sampled>>,
    stop: Arc<AtomicBool>,
    drainer: Option<std::thread::JoinHandle<()>>,
}

/// How often the rings are read: every completion is traced, and a ring holds about
/// 1,800 of them, so at 9,000 tier reads a second per CPU before it drops any.
const DRAIN_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// At most this many timed reads wait for [`ReadLatency::take`] (1 MiB): an engine held
/// up for long by a stuck pass must not grow tierd with them.
const MAX_UNTAKEN: usize = 262_144;

/// Drops the oldest of `v` beyond `max`.
fn keep_newest(v: &mut Vec<u32>, max: usize) {
    if v.len() > max {
        v.drain(..v.len() - max);
    }
}

/// The rings and the submissions that wait for their completions.
struct Rings {
    rings: Vec<Ring>,
    _events: Vec<OwnedFd>,
    queued: EventFormat,
    complete: EventFormat,
    /// Submitted and not yet completed: sector → submission time (ns). One device: the
    /// filters keep the tier's queue alone.
    pending: HashMap<u64, u64>,
}

impl ReadLatency {
    /// Starts sampling the reads on `extent`, leaving out those `own_comm` submits.
    pub fn start(extent: &QueueExtent, own_comm: Option<&str>) -> Result<ReadLatency, TraceError> {
        let mut rings = Rings::open(extent, own_comm)?;
        let drained = Arc::new(Mutex::new(Sampled::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (out, done) = (drained.clone(), stop.clone());
        let drainer = std::thread::Builder::new()
            .name("read-trace".into())
            .spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(DRAIN_EVERY);
                    let got = rings.drain();
                    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                    out.read_micros.extend(got.read_micros);
                    keep_newest(&mut out.read_micros, MAX_UNTAKEN);
                    out.lost += got.lost;
                }
            })
            .map_err(|err| TraceError::Perf { what: "starting the ring reader", cpu: 0, err })?;
        Ok(ReadLatency { drained, stop, drainer: Some(drainer) })
    }

    /// The reads that completed since the last call.
    pub fn take(&mut self) -> Sampled {
        std::mem::take(&mut *self.drained.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for ReadLatency {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.drainer.take() {
            let _ = t.join();
        }
    }
}

impl Rings {
    fn open(extent: &QueueExtent, own_comm: Option<&str>) -> Result<Rings, TraceError> {
        let texts = read_tracefs(&[QUEUED_FORMAT, COMPLETE_FORMAT]).map_err(TraceError::Tracefs)?;
        let queued = parse_format("block_bio_queue", &texts[0])?;
        let complete = parse_format("block_rq_complete", &texts[1])?;
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").map_err(TraceError::Tracefs)?;
        let mut events = Vec::new();
        let mut rings = Vec::new();
        for cpu in parse_cpu_list(&online) {
            let first = open_event(queued.id, cpu, &filter(extent, Keep::SampledNotBy(own_comm)))?;
            let ring = Ring::map(&first, cpu)?;
            let second = open_event(complete.id, cpu, &filter(extent, Keep::All))?;
            // SAFETY: plain ioctls on perf fds this function opened on the same CPU.
            let rc = unsafe { perf::ioctls::SET_OUTPUT(second.as_raw_fd(), first.as_raw_fd()) };
            if rc != 0 {
                return Err(TraceError::Perf { what: "sharing the ring", cpu, err: io::Error::last_os_error() });
            }
            for fd in [&first, &second] {
                // SAFETY: as above.
                if unsafe { perf::ioctls::ENABLE(fd.as_raw_fd(), 0) } != 0 {
                    return Err(TraceError::Perf { what: "enabling the event", cpu, err: io::Error::last_os_error() });
                }
            }
            rings.push(ring);
            events.extend([first, second]);
        }
        Ok(Rings { rings, _events: events, queued, complete, pending: HashMap::new() })
    }

    /// The reads that completed since the last call.
    fn drain(&mut self) -> Sampled {
        let mut records = Vec::new();
        for r in &mut self.rings {
            r.read(&mut records);
        }
        let mut out = Sampled::default();
        let mut samples = Vec::new();
        for rec in &records {
            match parse_record(rec, &self.queued, &self.complete) {
                Some(Record::Sample(s)) => samples.push(s),
                Some(Record::Lost(n)) => out.lost += n,
                None => {}
            }
        }
        out.read_micros = pair_after_gap(&mut self.pending, samples, out.lost > 0);
        out
    }
}

/// [`pair`], where a `gap` (records the kernel dropped) means any submission waiting
/// may have completed unseen: none is paired across it, as a later read of its sector
/// would time it for seconds.
fn pair_after_gap(pending: &mut HashMap<u64, u64>, samples: Vec<Sample>, gap: bool) -> Vec<u32> {
    if gap {
        pending.clear();
    }
    let micros = pair(pending, samples);
    if gap {
        pending.clear();
    }
    micros
}

const QUEUED_FORMAT: &str = "events/block/block_bio_queue/format";
const COMPLETE_FORMAT: &str = "events/block/block_rq_complete/format";

/// Whether this kernel lets tierd time requests: the formats read and a submission event
/// opened (and closed at once) on CPU 0.
pub fn probe() -> Result<(), TraceError> {
    let texts = read_tracefs(&[QUEUED_FORMAT, COMPLETE_FORMAT]).map_err(TraceError::Tracefs)?;
    parse_format("block_rq_complete", &texts[1])?;
    let queued = parse_format("block_bio_queue", &texts[0])?;
    open_event(queued.id, 0, "dev == 0").map(drop)
}

/// Opens one tracepoint event on `cpu`, disabled, with its filter.
fn open_event(id: u64, cpu: u32, filter: &str) -> Result<OwnedFd, TraceError> {
    let mut attr = perf::bindings::perf_event_attr {
        type_: perf::bindings::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<perf::bindings::perf_event_attr>() as u32,
        config: id,
        sample_type: (perf::bindings::PERF_SAMPLE_TIME | perf::bindings::PERF_SAMPLE_RAW) as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    // SAFETY: attr is initialised; pid -1 with a CPU traces that CPU for every task.
    let fd = unsafe { perf::perf_event_open(&mut attr, -1, cpu as i32, -1, perf::bindings::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        return Err(TraceError::Perf { what: "perf_event_open", cpu, err: io::Error::last_os_error() });
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let text = std::ffi::CString::new(filter).map_err(|e| TraceError::Perf {
        what: "filter",
        cpu,
        err: io::Error::other(e),
    })?;
    // SAFETY: the filter is a NUL-terminated string the kernel copies during the call.
    if unsafe { perf::ioctls::SET_FILTER(fd.as_raw_fd(), text.as_ptr() as *mut _) } != 0 {
        return Err(TraceError::Perf { what: "setting the filter", cpu, err: io::Error::last_os_error() });
    }
    Ok(fd)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Queued,
    Complete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    kind: Kind,
    time_ns: u64,
    sector: u64,
    sectors: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    Sample(Sample),
    Lost(u64),
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// One ring record: a sample (header, u64 time, u32 raw size, raw) or a count of lost ones.
fn parse_record(rec: &[u8], queued: &EventFormat, complete: &EventFormat) -> Option<Record> {
    let kind = u32_at(rec, 0)?;
    if kind == perf::bindings::PERF_RECORD_LOST {
        return Some(Record::Lost(u64_at(rec, 16)?));
    }
    if kind != perf::bindings::PERF_RECORD_SAMPLE {
        return None;
    }
    let time_ns = u64_at(rec, 8)?;
    let raw_len = u32_at(rec, 16)? as usize;
    let raw = rec.get(20..20 + raw_len)?;
    let common_type = u16::from_ne_bytes(raw.get(0..2)?.try_into().ok()?) as u64;
    let (kind, f) = match common_type {
        t if t == queued.id => (Kind::Queued, queued),
        t if t == complete.id => (Kind::Complete, complete),
        _ => return None,
    };
    Some(Record::Sample(Sample {
        kind,
        time_ns,
        sector: u64_at(raw, f.sector.offset)?,
        sectors: u32_at(raw, f.nr_sector.offset)?,
    }))
}

/// The earliest submission a request of `sectors` from `sector` carries, taken out of
/// `pending` with every other sampled read merged into it.
fn take_earliest(pending: &mut HashMap<u64, u64>, sector: u64, sectors: u32) -> Option<u64> {
    let merged = (sector.next_multiple_of(SAMPLED_STRIDE)..sector + sectors as u64).step_by(SAMPLED_STRIDE as usize);
    std::iter::once(sector).chain(merged).filter_map(|at| pending.remove(&at)).min()
}

/// Pairs each completion with the earliest submission it carries (a request holds the
/// reads merged into it), in time order across CPUs; submissions still open wait in
/// `pending` for the next call.
fn pair(pending: &mut HashMap<u64, u64>, mut samples: Vec<Sample>) -> Vec<u32> {
    samples.sort_by_key(|s| s.time_ns);
    let mut micros = Vec::new();
    for s in &samples {
        match s.kind {
            Kind::Queued => {
                pending.insert(s.sector, s.time_ns);
            }
            Kind::Complete => {
                if let Some(at) = take_earliest(pending, s.sector, s.sectors) {
                    micros.push((s.time_ns.saturating_sub(at) / 1000).min(u32::MAX as u64) as u32);
                }
            }
        }
    }
    if let Some(last) = samples.last() {
        pending.retain(|_, at| last.time_ns.saturating_sub(*at) < PENDING_NS);
    }
    if pending.len() > MAX_PENDING {
        let mut times: Vec<u64> = pending.values().copied().collect();
        let half = *times.select_nth_unstable(MAX_PENDING / 2).1;
        pending.retain(|_, at| *at > half);
    }
    micros
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUED_6_18: &str = "name: block_bio_queue\nID: 2097\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
        \tfield:char rwbs[10];\toffset:28;\tsize:10;\tsigned:0;\n\
        \tfield:char comm[16];\toffset:38;\tsize:16;\tsigned:0;\n";

    #[test]
    fn a_format_gives_the_id_and_where_dev_and_sector_lie() {
        let f = parse_format("block_bio_queue", QUEUED_6_18).unwrap();
        let field = |offset, size| Field { offset, size };
        assert_eq!(f, EventFormat { id: 2097, dev: field(8, 4), sector: field(16, 8), nr_sector: field(24, 4) });
        // `nr_sector` must not be taken for `sector`.
        let moved = QUEUED_6_18
            .replace("sector_t sector;\toffset:16", "sector_t sector;\toffset:24")
            .replace("nr_sector;\toffset:24", "nr_sector;\toffset:16");
        let f = parse_format("block_bio_queue", &moved).unwrap();
        assert_eq!((f.sector.offset, f.nr_sector.offset), (24, 16));
        let e = parse_format("block_bio_queue", &QUEUED_6_18.replace("dev_t dev;", "dev_t device;")).unwrap_err();
        assert!(e.to_string().contains("no field dev"), "{e}");
    }

    #[test]
    fn the_filter_keeps_the_tiers_sampled_reads_and_leaves_tierds_own_out() {
        let whole = QueueExtent { dev: (7, 3), first_sector: 0, sectors: None };
        assert_eq!(filter(&whole, Keep::SampledNotBy(None)), "dev == 7340035 && rwbs ~ \"R*\" && !(sector & 56)");
        let part = QueueExtent { dev: (259, 0), first_sector: 2048, sectors: Some(4096) };
        assert_eq!(
            filter(&part, Keep::SampledNotBy(Some("tierd"))),
            "dev == 271581184 && rwbs ~ \"R*\" && !(sector & 56) && sector >= 2048 && sector < 6144 && comm != \"tierd\""
        );
        assert_eq!(
            filter(&part, Keep::All),
            "dev == 271581184 && rwbs ~ \"R*\" && sector >= 2048 && sector < 6144",
            "every completion, whatever sector its request starts at"
        );
    }

    #[test]
    fn a_read_merged_behind_an_unsampled_start_is_never_timed_by_a_later_read_of_its_sector() {
        use Kind::{Complete, Queued};
        let mut pending = HashMap::new();
        // A tenant's read at sector 64 merged behind one at 56 (not sampled, so its
        // submission is filtered out): the request starts at 56.
        pair(&mut pending, vec![sample(Queued, 1_000_100, 64)]);
        let done = Sample { kind: Complete, time_ns: 1_300_000, sector: 56, sectors: 16 };
        assert_eq!(pair(&mut pending, vec![done]), vec![299], "timed from the sampled read it carries");
        // Seconds later tierd reads sector 64 again (its submission is not traced).
        let again = pair(&mut pending, vec![sample(Complete, 9_000_000_000, 64)]);
        assert_eq!(again, Vec::<u32>::new(), "not a 9 s read");
    }

    #[test]
    fn reads_nobody_takes_stay_bounded_and_the_newest_are_kept() {
        let mut v: Vec<u32> = (0..10).collect();
        keep_newest(&mut v, 4);
        assert_eq!(v, vec![6, 7, 8, 9]);
        keep_newest(&mut v, 4);
        assert_eq!(v.len(), 4, "within the bound, nothing is dropped");
    }

    #[test]
    fn a_gap_in_the_records_leaves_nothing_to_pair_across_it() {
        use Kind::{Complete, Queued};
        let mut pending = HashMap::new();
        pair(&mut pending, vec![sample(Queued, 1_000_000, 64)]);
        // Its completion was among the records the kernel dropped.
        let after = pair_after_gap(&mut pending, vec![sample(Queued, 2_000_000, 128)], true);
        assert_eq!(after, Vec::<u32>::new());
        assert!(pending.is_empty(), "nothing that waited across the gap is trusted");
        let later = vec![sample(Complete, 5_000_000_000, 64), sample(Queued, 5_000_000_000, 192)];
        assert_eq!(pair_after_gap(&mut pending, later, false), Vec::<u32>::new());
        assert_eq!(pair(&mut pending, vec![sample(Complete, 5_000_400_000, 192)]), vec![400], "pairing goes on");
    }

    #[test]
    fn cpu_lists_expand() {
        assert_eq!(parse_cpu_list("0-3,5\n"), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
    }

    fn sample(kind: Kind, time_ns: u64, sector: u64) -> Sample {
        Sample { kind, time_ns, sector, sectors: 8 }
    }

    #[test]
    fn completions_pair_with_their_submissions_across_cpus_and_calls() {
        use Kind::{Complete, Queued};
        let mut pending = HashMap::new();
        // CPU 1's completion was read before CPU 0's submission: time order decides.
        let first = vec![sample(Complete, 900_000, 64), sample(Queued, 100_000, 64), sample(Queued, 950_000, 128)];
        assert_eq!(pair(&mut pending, first), vec![800]);
        assert_eq!(pair(&mut pending, vec![sample(Complete, 1_450_000, 128)]), vec![500]);
        // A completion with no submission waiting (tierd's own, or before the start) counts nothing.
        assert_eq!(pair(&mut pending, vec![sample(Complete, 2_000_000, 192)]), Vec::<u32>::new());
        // A submission whose completion was lost is forgotten.
        pair(&mut pending, vec![sample(Queued, 3_000_000, 256)]);
        pair(&mut pending, vec![sample(Queued, 3_000_000 + PENDING_NS, 512)]);
        assert_eq!(pending.len(), 1);
    }

    #[test]
    fn a_request_of_merged_reads_is_timed_from_the_first_and_takes_them_all() {
        use Kind::{Complete, Queued};
        let mut pending = HashMap::new();
        // Three sampled reads 32 KiB apart, a fourth beyond: the first two merged behind
        // a read at sector 0 that starts the request (256 sectors).
        let queued = [(2_000, 64), (1_000, 0), (3_000, 128), (4_000, 256)].map(|(t, at)| sample(Queued, t, at));
        assert_eq!(pair(&mut pending, queued.to_vec()), Vec::<u32>::new());
        let done = Sample { kind: Complete, time_ns: 1_001_000, sector: 0, sectors: 256 };
        assert_eq!(pair(&mut pending, vec![done]), vec![1_000]);
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![256], "the merged reads are not left waiting");
        // A flood of submissions that never complete stays bounded.
        let flood = (0..MAX_PENDING as u64 + 10).map(|i| sample(Queued, 5_000 + i, (i + 10) * 64)).collect();
        pair(&mut pending, flood);
        assert!(pending.len() <= MAX_PENDING / 2 + 10, "{}", pending.len());
        assert!(pending.contains_key(&((MAX_PENDING as u64 + 9) * 64)), "the newest are kept");
    }

    #[test]
    fn records_parse_by_the_events_format() {
        let f = parse_format("block_bio_queue", QUEUED_6_18).unwrap();
        let c = EventFormat { id: 2107, ..f };
        let mut raw = vec![0u8; 44];
        raw[0..2].copy_from_slice(&2107u16.to_ne_bytes());
        raw[8..12].copy_from_slice(&42u32.to_ne_bytes());
        raw[16..24].copy_from_slice(&4096u64.to_ne_bytes());
        raw[24..28].copy_from_slice(&16u32.to_ne_bytes());
        let mut rec = Vec::new();
        rec.extend_from_slice(&perf::bindings::PERF_RECORD_SAMPLE.to_ne_bytes());
        rec.extend_from_slice(&[0, 0, 0, 0]);
        rec.extend_from_slice(&77u64.to_ne_bytes());
        rec.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        rec.extend_from_slice(&raw);
        let want = Sample { kind: Kind::Complete, time_ns: 77, sector: 4096, sectors: 16 };
        assert_eq!(parse_record(&rec, &f, &c), Some(Record::Sample(want)));
        let mut lost = perf::bindings::PERF_RECORD_LOST.to_ne_bytes().to_vec();
        lost.extend_from_slice(&[0; 12]);
        lost.extend_from_slice(&9u64.to_ne_bytes());
        assert_eq!(parse_record(&lost, &f, &c), Some(Record::Lost(9)));
        assert_eq!(parse_record(&rec[..20], &f, &c), None, "a short record is skipped, not read past");
    }
}
