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
    _dir: TempDir,
}

impl RedisServer {
    /// Starts `redis-server` (from `PATH`, or `$REDIS_SERVER`) on 127.0.0.1 and a free port, with no
    /// persistence, and waits (at most 10 s) until it answers `PING`.
    pub fn start() -> RedisServer {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        for _attempt in 0..5 {
            let port = free_port();
            let dir = TempDir::new("sb-redis");
            let child = Command::new(&bin)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(["--dir", dir.path().to_str().expect("utf-8 temp dir")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {bin} (install redis-server): {e}"));
            let mut server = RedisServer {
                child,
                port,
                _dir: dir,
            };
            if server.wait_ready(Duration::from_secs(10)) {
                return server;
            }
            let _ = server.child.kill();
        }
        panic!("redis-server did not come up on any free port");
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
        let mut cursor = "0".to_owned();
        let mut keys = Vec::new();
        loop {
            let (next, batch): (String, Vec<String>) = self
                .query(&["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"])
                .unwrap_or_else(|e| panic!("SCAN on redis:{}: {e}", self.port));
            keys.extend(batch);
            if next == "0" {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        keys
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

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
