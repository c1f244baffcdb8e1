//! The API server: a Unix socket readable by root only, one thread per connection.
//! Status, events and history never wait on a pass ([`crate::board`]); every other
//! request runs against the engine under its lock. The socket's mode is the first
//! guard; the peer's credentials (`SO_PEERCRED`) the second, should the mode be widened.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use anyhow::{Context, bail};

use crate::api::{Request, Response};
use crate::board::Shared;
use crate::engine::Engine;

/// The largest request line: the biggest real one (a `run` with a long argv) is a few KiB.
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;
/// How long a client may take to send its request line.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Binds the socket, refusing to steal it from a live tierd.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!("another tierd is already serving {}; stop it or pick another --socket", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale socket {}", path.display()))?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let l = UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Serves requests until the process ends.
pub fn serve(listener: UnixListener, shared: Shared) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || handle(conn, &shared));
    }
}

fn handle(conn: UnixStream, shared: &Shared) {
    let resp = match read_request(&conn) {
        Ok(req) => answer(shared, req),
        Err(why) => Response::err(why),
    };
    let mut out = serde_json::to_string(&resp).unwrap_or_else(|_| r#"{"ok":false,"error":"unserializable"}"#.into());
    out.push('\n');
    let _ = (&conn).write_all(out.as_bytes());
}

/// Reads one request from a root peer; what is wrong with it otherwise, for the reply.
fn read_request(conn: &UnixStream) -> Result<Request, String> {
    match tierd_sys::process::peer_uid(conn) {
        Ok(0) => {}
        Ok(uid) => return Err(format!("refused: tierd's API serves root only (the caller is uid {uid})")),
        Err(e) => return Err(format!("refused: the caller's credentials cannot be read: {e}")),
    }
    let _ = conn.set_read_timeout(Some(READ_TIMEOUT));
    let mut line = String::new();
    let mut reader = BufReader::new(conn.take(MAX_REQUEST_BYTES + 1));
    reader.read_line(&mut line).map_err(|e| format!("bad request: {e}"))?;
    if line.len() as u64 > MAX_REQUEST_BYTES {
        return Err(format!("bad request: longer than {MAX_REQUEST_BYTES} bytes"));
    }
    serde_json::from_str::<Request>(&line).map_err(|e| format!("bad request: {e}"))
}

/// Answers one request: a reader from the board when a pass holds the engine, the
/// rest on the engine, the status posted after them for readers to see their effect.
pub fn answer(shared: &Shared, req: Request) -> Response {
    match req {
        Request::Status => Response::ok(shared.status()),
        Request::Events => Response::ok(shared.events(200)),
        Request::History { since } => Response::ok(shared.history(since)),
        req => {
            let (doing, changes) = (format!("a `{}` request", req.op()), req.changes());
            let run = |e: &mut Engine| {
                let resp = dispatch(e, req);
                e.post_status();
                resp
            };
            if changes { shared.request(doing, run) } else { shared.work(doing, run) }
        }
    }
}

/// Runs one request on the engine.
fn dispatch(e: &mut Engine, req: Request) -> Response {
    let r: anyhow::Result<serde_json::Value> = (|| {
        Ok(match req {
            Request::Status | Request::Events | Request::History { .. } => {
                unreachable!("readers are answered by `answer`, from the board when the engine is busy")
            }
            Request::Run { spec, argv, cwd } => {
                let name = spec.name.to_string();
                let pid = e.run(spec, argv, cwd)?;
                serde_json::json!({ "name": name, "pid": pid })
            }
            Request::Attach { spec, pid } => {
                let name = spec.name.to_string();
                e.attach(spec, pid)?;
                serde_json::json!({ "name": name, "pid": pid })
            }
            Request::Adopt { spec, cgroup } => {
                let name = spec.name.to_string();
                serde_json::json!({ "name": name, "pids": e.adopt(spec, &cgroup)? })
            }
            Request::Release { name } => serde_json::json!({ "cgroup": e.release(&name)? }),
            Request::Detach { name } => serde_json::json!({ "pids": e.detach(&name)? }),
            Request::Remove { name } => {
                e.remove(&name)?;
                serde_json::json!({})
            }
            Request::Stop { name, signal } => serde_json::json!({ "pids": e.stop(&name, signal)? }),
            Request::Demote { name, bytes } => serde_json::to_value(e.demote(&name, bytes)?)?,
            Request::Prefetch { name, bytes } => serde_json::to_value(e.prefetch(&name, bytes)?)?,
            Request::Collapse { name } => serde_json::to_value(e.collapse(&name)?)?,
            Request::Explain { name } => serde_json::to_value(e.explain(&name)?)?,
            Request::Regions { name } => serde_json::to_value(e.regions(&name)?)?,
            Request::Curve { name } => serde_json::to_value(e.curve(&name)?)?,
            Request::WhatIf { budget, add } => serde_json::to_value(e.what_if(budget, &add)?)?,
            Request::DrainTier => serde_json::to_value(e.drain_tier()?)?,
        })
    })();
    match r {
        Ok(v) => Response::ok(v),
        Err(err) => Response::err(format!("{err:#}")),
    }
}
