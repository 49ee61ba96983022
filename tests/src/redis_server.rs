//! A private `redis-server` on a free loopback port, killed (by PID) when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::{FromRedisValue, RedisResult};

use crate::ports::free_port;
use crate::temp::TempDir;

/// A running `redis-server` owned by one test.
pub struct RedisServer {
    child: Child,
    port: u16,
    persistence: Persistence,
    /// Arguments of its own after the harness's (`--maxmemory-policy volatile-ttl`).
    extra: Vec<String>,
    dir: TempDir,
}

/// How a [`RedisServer`] keeps its data across a restart ([`RedisServer::restart`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Persistence {
    /// `--save '' --appendonly no`: a restart starts empty.
    #[default]
    None,
    /// `--appendonly yes --appendfsync always`: every write is fsynced to the AOF before Redis
    /// answers it, so a restart (even after SIGKILL) keeps every acknowledged write.
    AofAlways,
    /// `--appendonly yes --appendfsync everysec`: a SIGKILL can lose about the last second.
    AofEverySec,
}

impl Persistence {
    fn args(self) -> &'static [&'static str] {
        match self {
            Persistence::None => &["--save", "", "--appendonly", "no"],
            Persistence::AofAlways => &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
            Persistence::AofEverySec => &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
            ],
        }
    }
}

impl RedisServer {
    /// Starts `redis-server` (from `PATH`, or `$REDIS_SERVER`) on 127.0.0.1 and a free port, with no
    /// persistence, and waits (at most 10 s) until it answers `PING`.
    pub fn start() -> RedisServer {
        RedisServer::start_with(Persistence::None)
    }

    /// [`RedisServer::start`] keeping its data as `persistence` says, in its own temp dir.
    pub fn start_with(persistence: Persistence) -> RedisServer {
        RedisServer::start_with_args(persistence, &[])
    }

    /// [`RedisServer::start_with`] passing `extra` to `redis-server` after the harness's own
    /// arguments, e.g. `["--maxmemory-policy", "volatile-ttl"]` or `["--rename-command",
    /// "CONFIG", ""]` (kept for [`RedisServer::restart`]).
    pub fn start_with_args(persistence: Persistence, extra: &[&str]) -> RedisServer {
        let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        for _attempt in 0..5 {
            let port = free_port();
            let dir = TempDir::new("sb-redis");
            let child = spawn_redis(port, persistence, &extra, &dir);
            let mut server = RedisServer {
                child,
                port,
                persistence,
                extra: extra.clone(),
                dir,
            };
            if server.wait_ready(Duration::from_secs(10)) {
                return server;
            }
            let _ = server.child.kill();
        }
        panic!("redis-server did not come up on any free port");
    }

    /// Sends SIGKILL to the process and reaps it (no shutdown save, no AOF rewrite).
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again (after [`RedisServer::kill9`]) on the same port, in the same
    /// directory, with the same persistence, and waits (at most 10 s) until it answers `PING`
    /// (with AOF, once the file is loaded). `false` when it did not come up.
    pub fn restart(&mut self) -> bool {
        self.kill9();
        self.child = spawn_redis(self.port, self.persistence, &self.extra, &self.dir);
        self.wait_ready(Duration::from_secs(10))
    }

    /// The persistence it runs with.
    pub fn persistence(&self) -> Persistence {
        self.persistence
    }

    fn wait_ready(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if self.query::<String>(&["PING"]).is_ok_and(|r| r == "PONG") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sends one command (`args[0]` is its name) on a fresh connection (connect and read timeouts
    /// 5 s) and converts the reply to `T`, e.g. `String` for `INFO`, `Option<String>` for `HGET`,
    /// `i64` for `DBSIZE`, `()` for `FLUSHALL`.
    ///
    /// # Errors
    /// The connection failed or timed out, Redis answered with an error, or the reply does not
    /// convert to `T`.
    pub fn query<T: FromRedisValue>(&self, args: &[&str]) -> RedisResult<T> {
        let (name, rest) = args.split_first().expect("a command name");
        let mut conn =
            redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(5))?;
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        conn.set_write_timeout(Some(Duration::from_secs(5)))?;
        redis::cmd(name).arg(rest).query(&mut conn)
    }

    /// Every key matching the glob `pattern`, via `SCAN` (never `KEYS`), sorted.
    pub fn keys_matching(&self, pattern: &str) -> Vec<String> {
        crate::redis_process::scan_port(self.port, None, pattern)
    }

    /// Every key in the database, sorted.
    pub fn all_keys(&self) -> Vec<String> {
        self.keys_matching("*")
    }

    /// `DBSIZE`.
    pub fn dbsize(&self) -> i64 {
        self.query(&["DBSIZE"])
            .unwrap_or_else(|e| panic!("DBSIZE on redis:{}: {e}", self.port))
    }
}

/// Spawns `redis-server` on 127.0.0.1:`port` with its files in `dir`, then `extra`.
fn spawn_redis(port: u16, persistence: Persistence, extra: &[String], dir: &TempDir) -> Child {
    let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    Command::new(&bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(persistence.args())
        .args(["--dir", dir.path().to_str().expect("utf-8 temp dir")])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin} (install redis-server): {e}"))
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
