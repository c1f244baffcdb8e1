//! The Redis tenants' client against a real redis-server (installed by
//! scripts/setup.sh): it loads, reports like the workload generator, and catches a
//! value that was lost or changed.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A redis-server of this test on a Unix socket, killed (by PID) when dropped.
struct Server {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Server {
    fn start(tag: &str) -> Server {
        let dir = std::env::temp_dir().join(format!("tierd-redis-test-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/setup.sh installs it)");
        let end = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < end, "redis-server did not open {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, dir, socket }
    }

    fn connection(&self) -> redis::Connection {
        redis::Client::open(format!("redis+unix://{}", self.socket.display())).unwrap().get_connection().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn client(server: &Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierd-bench"))
        .arg("redis-client")
        .arg("--socket")
        .arg(&server.socket)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_client_loads_the_keyspace_and_reports_checked_operations() {
    let server = Server::start("load");
    let out = client(
        &server,
        &["--keys", "2000", "--value-size", "200", "--phase", "active:2s", "--report", "500ms", "--json"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let reports: Vec<serde_json::Value> =
        stdout.lines().filter(|l| l.starts_with("{\"t\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(reports.len() >= 3, "a report every 500 ms over 2 s: {stdout}");
    assert!(reports.iter().all(|r| r["phase"] == "active" && r["ops_per_sec"].as_f64().unwrap() > 0.0), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(summary["verified"].as_u64().unwrap() > 100, "GETs are checked: {summary}");
    let mut con = server.connection();
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, 2000, "every key was loaded");
    let v: Vec<u8> = redis::cmd("GET").arg("key:1999").query(&mut con).unwrap();
    assert_eq!(v.len(), 200);
}

#[test]
fn a_changed_or_lost_value_fails_the_client_and_names_the_key() {
    let server = Server::start("corrupt");
    let load = client(&server, &["--keys", "10", "--hot-keys", "10", "--phase", "active:0s", "--json"]);
    assert!(load.status.success(), "{}", String::from_utf8_lossy(&load.stderr));
    let mut con = server.connection();
    redis::cmd("SET").arg("key:3").arg("not what was set").query::<()>(&mut con).unwrap();
    let run = ["--keys", "10", "--hot-keys", "10", "--set-ratio", "0", "--phase", "active:5s", "--no-load"];
    let out = client(&server, &run);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("corrupt value: key key:3"), "{err}");

    redis::cmd("DEL").arg("key:3").query::<()>(&mut con).unwrap();
    let out = client(&server, &run);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lost value: key key:3 is missing"), "{err}");
}
