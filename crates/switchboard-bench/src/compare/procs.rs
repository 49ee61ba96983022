//! The processes `compare` starts: baselines, Switchboard nodes and a private Redis, each on a
//! free loopback port, logged to a file, optionally pinned to one core with `taskset`, and
//! killed by PID when [`Procs`] is dropped (at the end, on error and on Ctrl-C).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::IntoConnectionInfo;

/// How long a started server may take to become ready.
pub const READY_LIMIT: Duration = Duration::from_secs(30);

/// A free loopback port: bound to port 0, read, released.
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// `true` when `program` can be run (`program --version` or `-V` exits, whatever its status).
pub fn can_run(program: &Path) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// One started process.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

/// Every process started for a comparison; dropping it kills them all (SIGKILL by PID) and
/// reaps them.
pub struct Procs {
    dir: PathBuf,
    /// Core the servers are pinned to (`taskset -c N`), if pinning is on.
    pin: Option<usize>,
    procs: Vec<Proc>,
}

impl Procs {
    /// Logs go to `dir` (created); servers are pinned to core `pin` when it is `Some`.
    pub fn new(dir: PathBuf, pin: Option<usize>) -> Result<Procs, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Procs {
            dir,
            pin,
            procs: Vec::new(),
        })
    }

    /// The directory holding the logs (and config files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts `program args` (under `taskset -c N` when pinning), stdout and stderr to
    /// `<dir>/<name>.log`; returns its index for [`Procs::log_tail`].
    pub fn spawn(&mut self, name: &str, program: &Path, args: &[String]) -> Result<usize, String> {
        let log = self.dir.join(format!("{name}.log"));
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = match self.pin {
            Some(core) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &core.to_string()]).arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("NO_COLOR", "1");
        let child = cmd
            .spawn()
            .map_err(|e| format!("start {name} ({}): {e}", program.display()))?;
        self.procs.push(Proc {
            name: name.to_owned(),
            child,
            log,
        });
        Ok(self.procs.len() - 1)
    }

    /// The PID of process `i` (under `taskset`, the program's own: taskset execs it).
    pub fn pid(&self, i: usize) -> u32 {
        self.procs[i].child.id()
    }

    /// The last `lines` lines of process `i`'s log.
    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.procs[i].log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until `ready` returns `true`, failing when process `i` exits or [`READY_LIMIT`]
    /// passes (the error carries the tail of its log).
    pub fn wait_ready(&mut self, i: usize, mut ready: impl FnMut() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + READY_LIMIT;
        loop {
            if let Ok(Some(status)) = self.procs[i].child.try_wait() {
                return Err(format!(
                    "{} exited ({status}) before it was ready; its log:\n{}",
                    self.procs[i].name,
                    self.log_tail(i, 30)
                ));
            }
            if ready() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} not ready within {READY_LIMIT:?}; its log:\n{}",
                    self.procs[i].name,
                    self.log_tail(i, 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.child.kill();
        }
        for p in &mut self.procs {
            let _ = p.child.wait();
        }
    }
}

/// One raw HTTP/1.1 `GET path` to `addr`; its status, or `None` when it cannot connect.
pub fn http_get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// `true` when a TCP connection to `addr` succeeds.
pub fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

/// Runs `cmd` once on a fresh connection (the `redis` crate's synchronous client, RESP2) to the
/// Redis at `addr` and returns its reply as `T`, e.g. `PONG`, a script's SHA or a count.
/// Connecting (with its setup) may take 1 s, the reply 5 s; the connection sends no
/// `CLIENT SETINFO` first, so Redis sees only `cmd`.
pub fn redis_query<T: redis::FromRedisValue>(
    addr: SocketAddr,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    let err = |e: redis::RedisError| format!("redis {addr}: {e}");
    let info = redis::ConnectionAddr::Tcp(addr.ip().to_string(), addr.port())
        .into_connection_info()
        .map_err(err)?
        .set_redis_settings(redis::RedisConnectionInfo::default().set_skip_set_lib_name());
    let client = redis::Client::open(info).map_err(err)?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .map_err(err)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(err)?;
    cmd.query(&mut conn).map_err(err)
}
