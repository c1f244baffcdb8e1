//! Starting tenants inside their cgroup, and the file and signal calls that need `unsafe`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};

/// Spawns `cmd` so that the child joins the cgroup whose `cgroup.procs` is `procs_file`
/// and starts a new session *before* `exec`: every byte the tenant allocates is charged
/// to its cgroup, and a Ctrl-C aimed at tierd's terminal does not reach it.
pub fn spawn_in_cgroup(cmd: &mut Command, procs_file: &Path) -> io::Result<Child> {
    let procs = CString::new(procs_file.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in cgroup path"))?;
    // SAFETY: the closure runs in the forked child before exec. It only makes
    // async-signal-safe syscalls (setsid, open, write, close) on memory prepared before
    // the fork (`procs`) or on its own stack; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // "0" names the writing process itself.
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            let err = io::Error::last_os_error();
            libc::close(fd);
            if n != 1 {
                return Err(err);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// The exit code a shell reports for a process ended by `SIGBUS`: what the kernel sends
/// a process whose page could not be read back from swap.
pub const EXIT_BY_SIGBUS: i32 = 128 + libc::SIGBUS;

/// Keeps this process's memory in DRAM from now on, each page locked as it is first
/// touched (`mlockall` with `MCL_ONFAULT`): tierd's own pages on the tier it manages
/// would stall it under pressure, and end it with SIGBUS if that device failed.
/// Neither a forked child nor an exec'd program inherits the lock.
pub fn lock_own_memory() -> io::Result<()> {
    // SAFETY: mlockall takes flags only and touches no memory of ours.
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Sends `signal` to `pid`.
pub fn kill(pid: u32, signal: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    let r = unsafe { libc::kill(pid as libc::pid_t, signal) };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Restores the default SIGPIPE action, so a CLI piped into `head` or `grep -q` ends
/// quietly like other Unix tools instead of failing on a broken pipe.
pub fn default_sigpipe() {
    // SAFETY: resetting a signal disposition to SIG_DFL installs no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Creates `path` with `size` bytes really allocated (swap refuses files with holes).
pub fn allocate_file(path: &Path, size: u64) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    let r = preallocate(&f, size).or_else(|e| match e.raw_os_error() {
        // A file system without fallocate (ext2, ext3 without extents): written out in
        // zeros, as swapon's manual says to make a swap file.
        Some(libc::EOPNOTSUPP) => write_zeros(&f, size),
        _ => Err(e),
    });
    if r.is_err() {
        drop(f);
        let _ = std::fs::remove_file(path);
    }
    r
}

fn preallocate(f: &std::fs::File, size: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on an fd we own, mode 0, a non-negative range.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, size as libc::off_t) };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn write_zeros(mut f: &std::fs::File, size: u64) -> io::Result<()> {
    use std::io::Write;
    let chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    // Blocks allocated on disk before swapon maps them.
    f.sync_all()
}

/// Free bytes (as root sees them) on the filesystem holding `dir`.
pub fn free_space(dir: &Path) -> io::Result<u64> {
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in path"))?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value for it.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `s` is a valid out-pointer for the call.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s.f_bfree as u64 * s.f_frsize as u64)
}

/// CPU clock ticks per second (`_SC_CLK_TCK`), for `/proc/PID/stat` times.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf takes an integer and returns one.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// CPU time (user + system) the calling thread has used, in seconds: what a piece of
/// work costs, without the time it waited for a CPU (wall time counted that too, and
/// on a host whose cores the tenants keep busy that was most of it).
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r == 0 { ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9 } else { 0.0 }
}

/// The user ID of the process at the other end of a connected Unix socket (`SO_PEERCRED`:
/// the kernel's record of who connected, which the peer cannot forge).
pub fn peer_uid(socket: &impl std::os::fd::AsRawFd) -> io::Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a valid, writable ucred and `len` its size; the kernel writes at
    // most `len` bytes and the fd is borrowed for the call.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_counts_work_and_not_sleep() {
        let t0 = thread_cpu_secs();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = thread_cpu_secs() - t0;
        let t1 = thread_cpu_secs();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 50 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spun = thread_cpu_secs() - t1;
        assert!(t0 > 0.0);
        assert!(slept < 0.02, "sleeping used {slept} s of CPU");
        assert!(spun > slept, "spinning for 50 ms used {spun} s of CPU, sleeping {slept} s");
    }

    #[test]
    fn zeros_written_out_leave_no_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let f = std::fs::File::create(&p).unwrap();
        write_zeros(&f, (3 << 20) + 4096).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.len(), (3 << 20) + 4096);
        assert!(meta.blocks() * 512 >= meta.len(), "every byte is allocated: {} blocks", meta.blocks());
    }

    #[test]
    fn allocates_a_file_without_holes() {
        use std::os::unix::fs::MetadataExt;
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        allocate_file(&p, 1 << 20).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.len(), 1 << 20);
        assert!(m.blocks() * 512 >= 1 << 20);
        assert!(allocate_file(&p, 1 << 20).is_err(), "never overwrites");
        assert!(free_space(t.path()).unwrap() > 0);
    }

    #[test]
    fn spawn_fails_cleanly_on_a_bad_cgroup() {
        let mut cmd = Command::new("true");
        let e = spawn_in_cgroup(&mut cmd, Path::new("/nonexistent/cgroup.procs")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn spawn_joins_the_given_procs_file() {
        // A plain file stands in for cgroup.procs: the child writes "0" to it.
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("cgroup.procs");
        std::fs::write(&p, "").unwrap();
        let mut child = spawn_in_cgroup(&mut Command::new("true"), &p).unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "0");
    }

    #[test]
    fn the_peer_of_a_socket_is_who_connected() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: getuid has no arguments and cannot fail.
        let me = unsafe { libc::getuid() };
        assert_eq!(peer_uid(&a).unwrap(), me);
    }
}
