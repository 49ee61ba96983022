//! One `switchboard` node process: built once per test process, started on a free loopback port,
//! logged to a file, killed by PID.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// How long a node may take to answer `GET /healthz` with 200.
const READY_LIMIT: Duration = Duration::from_secs(20);

/// The binary [`binary`] returns, once chosen.
static BIN: OnceLock<PathBuf> = OnceLock::new();

/// Makes [`binary`] return `path` (a prebuilt node binary) instead of building one. `false` when
/// [`binary`] had already been chosen (then it stays as it was).
pub fn use_binary(path: PathBuf) -> bool {
    BIN.set(path).is_ok()
}

/// The `switchboard` binary, built on first use (`cargo build -p switchboard --bin switchboard`,
/// `--release` in release test builds). `$SWITCHBOARD_BIN` or [`use_binary`] skips the build.
pub fn binary() -> &'static Path {
    BIN.get_or_init(|| {
        if let Ok(path) = std::env::var("SWITCHBOARD_BIN") {
            return PathBuf::from(path);
        }
        crate::cargo_build::built(&["-p", "switchboard", "--bin", "switchboard"])
            .join("switchboard")
    })
}

/// Where a node process runs: the address it listens on, optionally the network namespace
/// (`ip netns`) it runs in, which build of the node it is, and environment variables of its own.
#[derive(Clone, Debug)]
pub struct Place {
    /// The listen host (default `127.0.0.1`).
    pub host: String,
    /// The network namespace, if not the test's own.
    pub netns: Option<String>,
    /// The node program; `None` (default): this workspace's ([`binary`]), else e.g. the
    /// previous release's ([`crate::previous::binary`]).
    pub program: Option<PathBuf>,
    /// Environment variables set on the node process (after the ones every node gets; a later
    /// one of the same name wins).
    pub env: Vec<(String, String)>,
}

impl Default for Place {
    fn default() -> Self {
        Place {
            host: "127.0.0.1".into(),
            netns: None,
            program: None,
            env: Vec::new(),
        }
    }
}

/// A running node process.
pub struct Node {
    id: String,
    place: Place,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Node {
    /// Spawns `switchboard serve` (not yet waited for; see [`Node::wait_ready`]) with no config
    /// file.
    pub fn spawn(
        id: &str,
        redis_url: Option<&str>,
        settings: &[(String, String)],
        log_dir: &Path,
    ) -> Node {
        Node::spawn_with_config(id, redis_url, settings, log_dir, None)
    }

    /// [`Node::spawn`] reading `config` (`--config`) when given. The node never inherits a
    /// `SWITCHBOARD_CONFIG` of this process, so concurrent tests cannot leak config files into
    /// each other's nodes.
    pub fn spawn_with_config(
        id: &str,
        redis_url: Option<&str>,
        settings: &[(String, String)],
        log_dir: &Path,
        config: Option<&Path>,
    ) -> Node {
        Node::spawn_on(free_port(), id, redis_url, settings, log_dir, config)
    }

    /// [`Node::spawn_with_config`] listening on `port` (e.g. the port of a node that exited, to
    /// start it again where its clients and balancer expect it). Its log goes on in the same file
    /// (`<log_dir>/node-<id>.log`).
    pub fn spawn_on(
        port: u16,
        id: &str,
        redis_url: Option<&str>,
        settings: &[(String, String)],
        log_dir: &Path,
        config: Option<&Path>,
    ) -> Node {
        Node::spawn_placed(
            &Place::default(),
            port,
            id,
            redis_url,
            settings,
            log_dir,
            config,
        )
    }

    /// [`Node::spawn_on`] listening on `place.host` (and reached there by [`Node::url`] and the
    /// readiness check), inside the network namespace `place.netns` when given (run through
    /// `ip netns exec`, which execs the node: the PID is still the node's).
    pub fn spawn_placed(
        place: &Place,
        port: u16,
        id: &str,
        redis_url: Option<&str>,
        settings: &[(String, String)],
        log_dir: &Path,
        config: Option<&Path>,
    ) -> Node {
        let log = log_dir.join(format!("node-{id}.log"));
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .expect("node log file");
        let err = out.try_clone().expect("clone log file");
        let program = place.program.as_deref().unwrap_or_else(|| binary());
        let mut cmd = match &place.netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns]).arg(program);
                cmd
            }
            None => Command::new(program),
        };
        cmd.arg("serve")
            .args([
                "--listen",
                &format!("{}:{port}", place.host),
                "--node-id",
                id,
            ])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if let Some(url) = redis_url {
            cmd.args(["--redis-url", url]);
        }
        cmd.env_remove("SWITCHBOARD_CONFIG");
        if let Some(path) = config {
            cmd.arg("--config").arg(path);
        }
        for (k, v) in settings {
            cmd.args(["--set", &format!("{k}={v}")]);
        }
        cmd.env("NO_COLOR", "1");
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        for (name, value) in &place.env {
            cmd.env(name, value);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        Node {
            id: id.to_owned(),
            place: place.clone(),
            port,
            child: Some(child),
            log,
        }
    }

    /// Waits until `GET /healthz` answers 200. `false` when the process exited first or
    /// [`READY_LIMIT`] passed.
    pub fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + READY_LIMIT;
        while Instant::now() < deadline {
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited {
                return false;
            }
            if self.healthz_status() == Some(200) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// The status of `GET /healthz`, by a raw HTTP/1.1 request; `None` when it cannot connect.
    pub fn healthz_status(&self) -> Option<u16> {
        self.get_status("/healthz")
    }

    /// The status of `GET <path>` (e.g. `/readyz`), by a raw HTTP/1.1 request with a 2 s read
    /// timeout; `None` when it cannot connect or no status line arrives.
    pub fn get_status(&self, path: &str) -> Option<u16> {
        let mut s = TcpStream::connect((self.place.host.as_str(), self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n\r\n",
            self.place.host, self.port
        );
        s.write_all(req.as_bytes()).ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }

    /// The node id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://<host>:<port>/mcp` (the host is 127.0.0.1 unless placed elsewhere).
    pub fn url(&self) -> String {
        format!("http://{}:{}/mcp", self.place.host, self.port)
    }

    /// `http://<host>:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}:{}", self.place.host, self.port)
    }

    /// Where it runs.
    pub fn place(&self) -> &Place {
        &self.place
    }

    /// The address it listens on, `<host>:<port>`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.place.host, self.port)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGKILL to the process and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM (a graceful drain) by PID; the child is reaped on drop or by
    /// [`Node::wait_exit`].
    pub fn terminate(&self) {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }

    /// Sends SIGSTOP by PID: the process stalls (no heartbeat, no answers) until
    /// [`Node::resume`], as a node in a long GC pause or a frozen VM would. A stopped node still
    /// dies on drop (SIGKILL).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Sends SIGCONT by PID after [`Node::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .expect("run kill");
            assert!(status.success(), "kill {signal} {pid}");
        }
    }

    /// Waits (at most `limit`) for the process to exit; its exit code, or `None` if it is still
    /// running then (or was killed by a signal).
    pub fn wait_exit(&mut self, limit: std::time::Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return status.code();
                }
            } else {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    /// Whether the process exited on its own (reaping it); `false` while it runs and after
    /// [`Node::kill9`].
    pub fn has_exited(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(_))) => {
                self.child = None;
                true
            }
            _ => false,
        }
    }

    /// The last `lines` lines of the node's log.
    pub fn log_tail(&self, lines: usize) -> String {
        file_tail(&self.log, lines)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "----- node {} log (tail, {}) -----\n{}",
                self.id,
                self.log.display(),
                self.log_tail(60)
            );
        }
    }
}

/// The last `lines` lines of the file at `path` (empty when it cannot be read): a process's log
/// for a failed test's output.
pub fn file_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
