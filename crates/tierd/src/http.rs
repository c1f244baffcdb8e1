//! The HTTP server, off by default (`tierd --http 127.0.0.1:PORT`): Prometheus text at
//! `/metrics`, the live dashboard at `/` with its chart library served from tierd
//! itself (hosts are often offline), and the JSON the dashboard reads. Read-only: it
//! changes nothing, so loopback is the default and anything else must be forced.

use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{Context, anyhow, bail};
use tiny_http::{Header, Method, Request, Response, Server};

use crate::board::Shared;
use crate::metrics;

const DASHBOARD: &str = include_str!("../assets/dashboard.html");
/// uPlot 1.6.32 (MIT, <https://github.com/leeoniya/uPlot>), vendored unchanged.
const UPLOT_JS: &str = include_str!("../assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uPlot.min.css");
/// A sample Grafana dashboard over `/metrics`, also served for convenience.
pub const GRAFANA: &str = include_str!("../assets/grafana-tierd.json");

/// Parses `--http`'s address; a non-loopback one only when `force` is set.
pub fn parse_address(s: &str, force: bool) -> anyhow::Result<SocketAddr> {
    let addr = s
        .to_socket_addrs()
        .with_context(|| format!("--http {s}: expected an address like 127.0.0.1:9464"))?
        .next()
        .ok_or_else(|| anyhow!("--http {s}: the address resolves to nothing"))?;
    if !addr.ip().is_loopback() && !force {
        bail!(
            "--http {s} is not a loopback address: the dashboard and metrics show every tenant's \
             memory to anyone who can reach it; use 127.0.0.1 (and an SSH tunnel or a proxy), or \
             pass --force-http"
        );
    }
    Ok(addr)
}

/// Binds the address (before the tier is set up, so a taken port fails early).
pub fn bind(addr: SocketAddr) -> anyhow::Result<Server> {
    Server::http(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))
}

/// Serves on a thread of its own; returns the bound address (so port 0 works).
pub fn spawn(server: Server, shared: Shared) -> anyhow::Result<SocketAddr> {
    let bound = server.server_addr().to_ip().ok_or_else(|| anyhow!("not an IP address"))?;
    std::thread::Builder::new().name("http".into()).spawn(move || {
        for req in server.incoming_requests() {
            serve(req, &shared);
        }
    })?;
    Ok(bound)
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("static header")
}

fn serve(req: Request, shared: &Shared) {
    let (status, ctype, body) = route(req.method(), req.url(), shared);
    let resp = Response::from_data(body)
        .with_status_code(status)
        .with_header(header("Content-Type", ctype))
        .with_header(header("Cache-Control", "no-store"));
    let _ = req.respond(resp);
}

/// What to answer: status code, content type, body.
fn route(method: &Method, url: &str, shared: &Shared) -> (u16, &'static str, Vec<u8>) {
    const JSON: &str = "application/json";
    if *method != Method::Get && *method != Method::Head {
        return (405, "text/plain", b"only GET\n".to_vec());
    }
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    match path {
        "/metrics" => (200, metrics::CONTENT_TYPE, metrics::render(&shared.status()).into_bytes()),
        "/" | "/index.html" => (200, "text/html; charset=utf-8", DASHBOARD.as_bytes().to_vec()),
        "/assets/uPlot.iife.min.js" => (200, "text/javascript", UPLOT_JS.as_bytes().to_vec()),
        "/assets/uPlot.min.css" => (200, "text/css", UPLOT_CSS.as_bytes().to_vec()),
        "/grafana-tierd.json" => (200, JSON, GRAFANA.as_bytes().to_vec()),
        "/api/status" => (200, JSON, serde_json::to_vec(&shared.status()).unwrap_or_default()),
        "/api/history" => {
            let since = query.split('&').find_map(|kv| kv.strip_prefix("since=")).and_then(|v| v.parse().ok());
            (200, JSON, serde_json::to_vec(&shared.history(since)).unwrap_or_default())
        }
        "/api/events" => (200, JSON, serde_json::to_vec(&shared.events(200)).unwrap_or_default()),
        _ => (404, "text/plain", format!("no page at {path}: try / or /metrics\n").into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_unless_forced() {
        assert_eq!(parse_address("127.0.0.1:9464", false).unwrap().port(), 9464);
        assert!(parse_address("[::1]:0", false).is_ok());
        let e = parse_address("0.0.0.0:9464", false).unwrap_err().to_string();
        assert!(e.contains("not a loopback address") && e.contains("--force-http"), "{e}");
        assert!(parse_address("0.0.0.0:9464", true).is_ok());
        assert!(parse_address("nonsense", false).unwrap_err().to_string().contains("expected an address"));
    }

    #[test]
    fn the_grafana_dashboard_is_json_over_our_metric_names() {
        let v: serde_json::Value = serde_json::from_str(GRAFANA).expect("valid JSON");
        let exprs: Vec<String> = v["panels"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t["expr"].as_str().map(String::from))
            .collect();
        assert!(exprs.len() >= 4, "{exprs:?}");
        // Every metric the dashboard asks for is one /metrics serves.
        let page = metrics::render(&metrics::tests::status());
        for e in &exprs {
            for name in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("tierd_"))
            {
                assert!(page.contains(&format!("# TYPE {name} ")), "{name} in {e} is not served");
            }
        }
    }
}
