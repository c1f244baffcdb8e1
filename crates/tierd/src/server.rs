//! The API server: a Unix socket readable by root only, one thread per connection,
//! each request run against the engine under its lock.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};

use crate::api::{Request, Response};
use crate::engine::Engine;

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
pub fn serve(listener: UnixListener, engine: Arc<Mutex<Engine>>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || handle(conn, &engine));
    }
}

fn handle(conn: UnixStream, engine: &Mutex<Engine>) {
    let mut line = String::new();
    if BufReader::new(&conn).read_line(&mut line).is_err() {
        return;
    }
    let resp = match serde_json::from_str::<Request>(&line) {
        Ok(req) => {
            let mut e = engine.lock().unwrap_or_else(|p| p.into_inner());
            dispatch(&mut e, req)
        }
        Err(e) => Response::err(format!("bad request: {e}")),
    };
    let mut out = serde_json::to_string(&resp).unwrap_or_else(|_| r#"{"ok":false,"error":"unserializable"}"#.into());
    out.push('\n');
    let _ = (&conn).write_all(out.as_bytes());
}

/// Runs one request.
pub fn dispatch(e: &mut Engine, req: Request) -> Response {
    let r: anyhow::Result<serde_json::Value> = (|| {
        Ok(match req {
            Request::Status => serde_json::to_value(e.status())?,
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
            Request::Events => serde_json::to_value(e.events.recent(200))?,
            Request::History { since } => serde_json::to_value(e.history.since(since))?,
        })
    })();
    match r {
        Ok(v) => Response::ok(v),
        Err(err) => Response::err(format!("{err:#}")),
    }
}
