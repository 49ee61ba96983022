//! A private `redis-server` on a free loopback port, killed (by PID) when dropped.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;
use crate::resp::{read_reply, Reply};
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
            if self
                .command(&["PING"])
                .map(|r| r.contains("PONG"))
                .unwrap_or(false)
            {
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

    /// Sends one command in RESP and returns the first reply line (enough for PING, DBSIZE, etc.).
    pub fn command(&self, args: &[&str]) -> std::io::Result<String> {
        let mut line = String::new();
        self.send(args)?.read_line(&mut line)?;
        Ok(line.trim_end().to_owned())
    }

    /// Sends one command and parses the whole reply (arrays included).
    pub fn query(&self, args: &[&str]) -> std::io::Result<Reply> {
        read_reply(&mut self.send(args)?)
    }

    /// Every key matching the glob `pattern`, via `SCAN` (never `KEYS`), sorted.
    pub fn keys_matching(&self, pattern: &str) -> Vec<String> {
        let mut cursor = "0".to_owned();
        let mut keys = Vec::new();
        loop {
            let reply = self
                .query(&["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"])
                .unwrap_or_else(|e| panic!("SCAN on redis:{}: {e}", self.port));
            let parts = reply
                .as_array()
                .unwrap_or_else(|| panic!("SCAN reply not an array: {reply:?}"));
            let next = parts.first().and_then(Reply::as_str).expect("SCAN cursor");
            let batch = parts.get(1).and_then(Reply::as_array).expect("SCAN keys");
            keys.extend(batch.iter().filter_map(|k| k.as_str().map(str::to_owned)));
            if next == "0" {
                break;
            }
            cursor = next.to_owned();
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
        let reply = self.query(&["DBSIZE"]).expect("DBSIZE");
        reply
            .as_int()
            .unwrap_or_else(|| panic!("DBSIZE reply: {reply:?}"))
    }

    fn send(&self, args: &[&str]) -> std::io::Result<BufReader<TcpStream>> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{}\r\n", a.len(), a));
        }
        s.write_all(req.as_bytes())?;
        Ok(BufReader::new(s))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
