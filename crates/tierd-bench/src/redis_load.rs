//! The client of a Redis tenant: loads a keyspace into a `redis-server` and drives it
//! with a Zipf-skewed GET/SET mix, reporting like the workload generator (the same JSON
//! lines), so the suite measures Redis tenants as it measures its own.
//!
//! Key `key:{i}` holds `value_size` bytes derived from `i`, and a SET writes the same
//! bytes again: every GET is checked, so a value that tiering lost or corrupted fails
//! the run. The hot keys are a fixed scatter of the keyspace — spread over the server's
//! memory, as real hot keys are, not packed into a few pages — accessed Zipf(0.99)
//! within the hot set; a `sweep` phase reads the whole keyspace at random.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::workload::{Meter, Phase, PhaseKind, Zipf, emit, scatter_stride};

/// Keys per pipelined batch while loading.
const LOAD_BATCH: u64 = 1000;

#[derive(Debug, Clone)]
pub struct Settings {
    /// The server's Unix socket.
    pub socket: PathBuf,
    pub keys: u64,
    pub value_size: usize,
    /// Keys in the hot set.
    pub hot_keys: u64,
    /// Fraction of operations that are SETs (the rest are GETs).
    pub set_ratio: f64,
    pub phases: Vec<Phase>,
    pub report: Duration,
    pub json: bool,
    pub seed: u64,
    /// Skip loading (the keyspace is already there).
    pub no_load: bool,
}

/// The final summary line.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub summary: bool,
    pub load_secs: f64,
    pub active_ops: u64,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// GETs whose value was checked (a missing or wrong one ends the run).
    pub verified: u64,
}

fn key(i: u64) -> String {
    format!("key:{i}")
}

/// The value of key `i`: its index, then bytes of a mix of it.
fn value(i: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    buf.extend_from_slice(&i.to_le_bytes());
    while buf.len() < size {
        z = (z ^ (z >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        buf.extend_from_slice(&z.to_le_bytes());
    }
    buf.truncate(size);
}

/// Connects to the server, waiting up to `wait` for it to come up.
fn connect(socket: &std::path::Path, wait: Duration) -> anyhow::Result<redis::Connection> {
    let client = redis::Client::open(format!("redis+unix://{}", socket.display()))?;
    let end = Instant::now() + wait;
    loop {
        match client.get_connection() {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > end => {
                bail!("redis-server at {} did not answer within {wait:?}: {e}", socket.display())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Loads the keyspace with pipelined SETs; returns the seconds it took.
fn load(con: &mut redis::Connection, s: &Settings, stop: &AtomicBool) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut buf = Vec::with_capacity(s.value_size);
    let mut next_note = started + Duration::from_secs(10);
    for first in (0..s.keys).step_by(LOAD_BATCH as usize) {
        if stop.load(Ordering::Relaxed) {
            bail!("stopped while loading");
        }
        let mut pipe = redis::pipe();
        for i in first..(first + LOAD_BATCH).min(s.keys) {
            value(i, s.value_size, &mut buf);
            pipe.cmd("SET").arg(key(i)).arg(&buf[..]).ignore();
        }
        pipe.query::<()>(con).context("loading the keyspace")?;
        if Instant::now() > next_note {
            eprintln!("loading: {first} of {} keys", s.keys);
            next_note += Duration::from_secs(10);
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Loads (unless told not to) and runs the phases; returns the summary, or an error on
/// a missing or corrupted value.
pub fn run(s: &Settings, stop: Arc<AtomicBool>) -> anyhow::Result<Summary> {
    if s.keys == 0 || s.hot_keys == 0 || s.hot_keys > s.keys {
        bail!("the hot set ({} keys) must be 1 to {} keys (the keyspace)", s.hot_keys, s.keys);
    }
    if s.value_size < 8 {
        bail!("values must be at least 8 bytes (they start with their key's index)");
    }
    let mut con = connect(&s.socket, Duration::from_secs(30))?;
    let load_secs = if s.no_load { 0.0 } else { load(&mut con, s, &stop)? };
    if !s.json {
        println!("loaded {} keys of {} bytes in {load_secs:.1}s", s.keys, s.value_size);
    }

    let hot = s.hot_keys as usize;
    let zipf = Zipf::new(hot);
    let stride = scatter_stride(s.keys as usize) as u64;
    let mut rng = fastrand::Rng::with_seed(s.seed ^ 0x5EED);
    let mut meter = Meter::new(s.report)?;
    let mut verified = 0u64;
    let mut expected = Vec::with_capacity(s.value_size);

    for phase in &s.phases {
        let end = Instant::now() + phase.duration;
        let phase_start = Instant::now();
        while Instant::now() < end && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if let Some(r) = meter.report_due(now, phase.kind) {
                emit(s.json, &r);
            }
            if phase.kind == PhaseKind::Idle {
                std::thread::sleep(meter.idle_nap(now, end));
                continue;
            }
            let i = match phase.kind {
                PhaseKind::Sweep => rng.u64(0..s.keys),
                _ => (zipf.sample(rng.f64()) as u64 * stride) % s.keys,
            };
            value(i, s.value_size, &mut expected);
            let a = Instant::now();
            if rng.f64() < s.set_ratio {
                redis::cmd("SET").arg(key(i)).arg(&expected[..]).query::<()>(&mut con).context("SET")?;
            } else {
                let got: Option<Vec<u8>> = redis::cmd("GET").arg(key(i)).query(&mut con).context("GET")?;
                match got {
                    Some(v) if v == expected => verified += 1,
                    Some(_) => bail!("corrupt value: key {} does not hold what was set", key(i)),
                    None => bail!("lost value: key {} is missing", key(i)),
                }
            }
            meter.record(phase.kind, a.elapsed().as_nanos() as u64);
        }
        meter.phase_done(phase.kind, phase_start);
    }
    Ok(Summary {
        summary: true,
        load_secs,
        active_ops: meter.active_ops(),
        ops_per_sec: meter.ops_per_sec(),
        p50_us: meter.quantile_us(0.5),
        p99_us: meter.quantile_us(0.99),
        p999_us: meter.quantile_us(0.999),
        verified,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carry_their_key_and_differ_between_keys() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        value(7, 100, &mut a);
        value(8, 100, &mut b);
        assert_eq!(a.len(), 100);
        assert_eq!(u64::from_le_bytes(a[..8].try_into().unwrap()), 7);
        assert_ne!(a[8..], b[8..]);
        let mut again = Vec::new();
        value(7, 100, &mut again);
        assert_eq!(a, again, "a value is a function of its key");
    }
}
