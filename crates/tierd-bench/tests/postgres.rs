//! The PostgreSQL tenants' client against a real server (scripts/setup.sh installs
//! PostgreSQL): it initialises the database and turns pgbench's transaction log into
//! report lines, idle phases included.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tierd_bench::pg_load;

/// A PostgreSQL server of this test, stopped (SIGINT to its PID, then SIGKILL) and its
/// files removed when dropped.
struct Server {
    child: Child,
    dir: PathBuf,
    sock: PathBuf,
}

impl Server {
    fn start() -> Server {
        let dir = std::env::temp_dir().join(format!("tierd-pg-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (data, sock) = (dir.join("data"), dir.join("sock"));
        pg_load::initdb(&data, &sock).unwrap();
        let argv = pg_load::server_argv(&data, &sock, 16).unwrap();
        let child = Command::new(&argv[0]).args(&argv[1..]).stderr(Stdio::null()).spawn().unwrap();
        Server { child, dir, sock }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-INT").arg(self.child.id().to_string()).status();
        let end = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn the_client_initialises_the_database_and_reports_each_second_of_its_phases() {
    let server = Server::start();
    let work = server.dir.join("work");
    let out = Command::new(env!("CARGO_BIN_EXE_tierd-bench"))
        .args(["pg-client", "--scale", "1", "--phase", "active:2s,idle:1s,active:1s", "--json", "--host"])
        .arg(&server.sock)
        .arg("--work")
        .arg(&work)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let reports: Vec<serde_json::Value> =
        stdout.lines().filter(|l| l.starts_with("{\"t\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    let phases: Vec<&str> = reports.iter().map(|r| r["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["active", "active", "idle", "active"], "{stdout}");
    let t: Vec<f64> = reports.iter().map(|r| r["t"].as_f64().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[1] > w[0]) && (t[3] - 4.0).abs() < 0.5, "a clock over the phases: {t:?}");
    assert!(reports.iter().filter(|r| r["phase"] == "active").all(|r| r["ops"].as_u64().unwrap() > 0), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let sum: u64 = reports.iter().map(|r| r["ops"].as_u64().unwrap()).sum();
    assert_eq!(summary["transactions"].as_u64().unwrap(), sum, "every logged transaction is in a report");
    let left: Vec<String> =
        std::fs::read_dir(&work).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    assert_eq!(left, ["txn.sql"], "pgbench's transaction logs are removed once read");
}

#[test]
fn a_missing_socket_directory_is_an_error_at_once_that_says_where_it_looked() {
    let out = Command::new(env!("CARGO_BIN_EXE_tierd-bench"))
        .args(["pg-client", "--scale", "1", "--host", "/nonexistent/sock", "--phase", "active:1s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/sock") && err.contains("no such directory"), "{err}");
}
