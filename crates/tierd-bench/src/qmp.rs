//! A minimal QMP client (QEMU's JSON control protocol over a Unix socket): enough to
//! drive a live migration and read its statistics. One command at a time; events
//! QEMU sends in between are skipped.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects (retrying while QEMU creates the socket) and leaves capabilities
    /// negotiation mode.
    pub fn connect(path: &Path, timeout: Duration) -> anyhow::Result<Qmp> {
        let end = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= end => {
                    return Err(e).with_context(|| format!("QMP socket {}", path.display()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut q = Qmp { reader: BufReader::new(stream.try_clone()?), writer: stream };
        let greeting = q.read()?;
        if greeting.get("QMP").is_none() {
            bail!("not a QMP greeting: {greeting}");
        }
        q.execute("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    fn read(&mut self) -> anyhow::Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("QMP connection closed");
        }
        Ok(serde_json::from_str(&line)?)
    }

    /// Runs `command` with `arguments`; returns its `return` value.
    pub fn execute(&mut self, command: &str, arguments: Value) -> anyhow::Result<Value> {
        let msg = json!({ "execute": command, "arguments": arguments });
        writeln!(self.writer, "{msg}")?;
        loop {
            let v = self.read()?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                bail!("QMP {command}: {}", e["desc"].as_str().unwrap_or("error"));
            }
            // An asynchronous event: not ours.
        }
    }
}
