//! A helper server of one test run from a Debian package (HAProxy, dnsmasq): a child process in
//! the foreground on a free 127.0.0.1 port, with its files and its output (`<name>.log`) in a
//! temp dir of its own, ready once the port accepts TCP connections, killed by PID on drop.

use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;
use crate::temp::TempDir;

/// How long a daemon may take to accept connections on its port.
pub const READY_LIMIT: Duration = Duration::from_secs(10);

/// The binary of a Debian package: `$<env>`, else `name` on `PATH`, else `/usr/sbin/<name>`
/// (not on a non-root `PATH`); the first whose `<version_flag>` succeeds. `None` when none runs.
pub fn find_binary(env: &str, name: &str, version_flag: &str) -> Option<String> {
    let candidates = [
        std::env::var(env).ok(),
        Some(name.to_owned()),
        Some(format!("/usr/sbin/{name}")),
    ];
    candidates.into_iter().flatten().find(|bin| {
        Command::new(bin)
            .arg(version_flag)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A running daemon.
pub struct Daemon {
    name: &'static str,
    child: Option<Child>,
    port: u16,
    dir: TempDir,
}

impl Daemon {
    /// Starts `bin` with the arguments `args` gives for a free port and the daemon's temp dir
    /// (where it may write its files first), stdin closed, stdout and stderr to `<name>.log`,
    /// and waits until it accepts connections (at most [`READY_LIMIT`]). Three free ports are
    /// tried; then it panics naming `name`.
    pub fn start(
        name: &'static str,
        bin: &str,
        mut args: impl FnMut(u16, &Path) -> Vec<String>,
    ) -> Daemon {
        for _attempt in 0..3 {
            let dir = TempDir::new(&format!("sb-{name}"));
            let port = free_port();
            let args = args(port, dir.path());
            let log = File::create(dir.path().join(format!("{name}.log")))
                .unwrap_or_else(|e| panic!("{name} log: {e}"));
            let child = Command::new(bin)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("clone log"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
            let mut daemon = Daemon {
                name,
                child: Some(child),
                port,
                dir,
            };
            if daemon.wait_ready() {
                return daemon;
            }
            daemon.kill();
            eprintln!("{name} did not come up on {port}:\n{}", daemon.log());
        }
        panic!("{name} did not come up on any free port");
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("the daemon runs")
    }

    /// A path in its temp dir.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// Its own output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path(&format!("{}.log", self.name))).unwrap_or_default()
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + READY_LIMIT;
        while Instant::now() < deadline {
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited {
                return false;
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}
