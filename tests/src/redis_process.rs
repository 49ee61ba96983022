//! What the Redis topologies ([`crate::redis_cluster`], [`crate::redis_sentinel`]) share: the
//! binaries (`redis-server`, `redis-cli`, `redis-sentinel`), one Redis or Sentinel process that
//! can be killed by PID and started again with the same arguments, and bounded one-shot queries
//! of a port (with `AUTH` first when a password is given).

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::{FromRedisValue, RedisResult};

use crate::daemon::find_binary;

/// How long one query may take to connect, and then to write or read.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a started process may take to answer `PING`.
pub const PING_LIMIT: Duration = Duration::from_secs(10);

/// `redis-server`: `$REDIS_SERVER`, else on `PATH`, else `/usr/sbin`; `None` when none runs.
pub fn redis_server_binary() -> Option<String> {
    find_binary("REDIS_SERVER", "redis-server", "--version")
}

/// `redis-cli` (`$REDIS_CLI` first), found like [`redis_server_binary`].
pub fn redis_cli_binary() -> Option<String> {
    find_binary("REDIS_CLI", "redis-cli", "--version")
}

/// `redis-sentinel` (`$REDIS_SENTINEL` first; Debian package `redis-sentinel`), found like
/// [`redis_server_binary`].
pub fn redis_sentinel_binary() -> Option<String> {
    find_binary("REDIS_SENTINEL", "redis-sentinel", "--version")
}

/// One `redis-server` or `redis-sentinel` process of a topology, on 127.0.0.1:`port`, with its
/// own directory (its files, and its output appended to `server.log` across restarts). Killed
/// with SIGKILL by PID on [`RedisProcess::kill`] and on drop.
pub struct RedisProcess {
    bin: String,
    args: Vec<String>,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisProcess {
    /// Spawns `bin args…` (stdin closed, output to `<dir>/server.log`) for a process that will
    /// listen on `port`. Does not wait: see [`RedisProcess::wait_ping`].
    pub fn spawn(bin: &str, args: Vec<String>, port: u16, dir: &Path) -> RedisProcess {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut process = RedisProcess {
            bin: bin.to_owned(),
            args,
            port,
            dir: dir.to_owned(),
            child: None,
        };
        process.start();
        process
    }

    /// Starts the process again with the same binary, arguments, port and directory (no-op
    /// when it runs).
    pub fn start(&mut self) {
        if self.is_running() {
            return;
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("open {}: {e}", self.log_path().display()));
        let child = Command::new(&self.bin)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin));
        self.child = Some(child);
    }

    /// Kills the process with SIGKILL (by its PID) and reaps it; no-op when it is down.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the process was started and has not exited (or been killed).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// Polls `PING` (every 20 ms, at most `limit`) until it answers `PONG`; `false` when the
    /// process exits first or time runs out.
    pub fn wait_ping(&mut self, password: Option<&str>, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if !self.is_running() {
                return false;
            }
            if query_port::<String>(self.port, password, &["PING"]).is_ok_and(|r| r == "PONG") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory (`--dir`, config files, `server.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/server.log`.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Everything it printed so far, over all its starts.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends one command (`args[0]` is its name) to 127.0.0.1:`port` on a fresh connection, after
/// `AUTH <password>` when `password` is given, and converts the reply to `T`. Connecting,
/// writing and reading each time out after [`QUERY_TIMEOUT`].
///
/// # Errors
/// The connection failed or timed out, `AUTH` or the command was refused (`NOAUTH`, `MOVED`,
/// …), or the reply does not convert to `T`.
pub fn query_port<T: FromRedisValue>(
    port: u16,
    password: Option<&str>,
    args: &[&str],
) -> RedisResult<T> {
    let (name, rest) = args.split_first().expect("a command name");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut conn = client.get_connection_with_timeout(QUERY_TIMEOUT)?;
    conn.set_read_timeout(Some(QUERY_TIMEOUT))?;
    conn.set_write_timeout(Some(QUERY_TIMEOUT))?;
    if let Some(password) = password {
        redis::cmd("AUTH").arg(password).query::<()>(&mut conn)?;
    }
    redis::cmd(name).arg(rest).query(&mut conn)
}

/// Every key matching the glob `pattern` on 127.0.0.1:`port`, via `SCAN` (never `KEYS`),
/// sorted and without repeats. Panics when a `SCAN` fails.
pub fn scan_port(port: u16, password: Option<&str>, pattern: &str) -> Vec<String> {
    let mut cursor = "0".to_owned();
    let mut keys = Vec::new();
    loop {
        let (next, batch): (String, Vec<String>) = query_port(
            port,
            password,
            &["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"],
        )
        .unwrap_or_else(|e| panic!("SCAN on redis:{port}: {e}"));
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

/// The value of `field` in an `INFO` (or `CLUSTER INFO`) reply: the text after `field:` on its
/// line, without the line end.
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim_end)
}

/// `calls` per command in an `INFO commandstats` reply: `cmdstat_set:calls=3,usec=…` gives
/// `"set" → 3`; subcommands keep Redis's spelling (`"client|setname"`).
pub fn parse_commandstats(info: &str) -> BTreeMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .trim_end()
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// `INFO commandstats` of 127.0.0.1:`port`, parsed by [`parse_commandstats`]. Panics when the
/// query fails.
pub fn commandstats_of(port: u16, password: Option<&str>) -> BTreeMap<String, u64> {
    let info: String = query_port(port, password, &["INFO", "commandstats"])
        .unwrap_or_else(|e| panic!("INFO commandstats on redis:{port}: {e}"));
    parse_commandstats(&info)
}

/// Whether 127.0.0.1:`port` is a replica whose link to its primary is up: `Some(primary
/// port)` when `INFO replication` says `role:slave` and `master_link_status:up`.
pub fn linked_primary_of(port: u16, password: Option<&str>) -> Option<u16> {
    let info: String = query_port(port, password, &["INFO", "replication"]).ok()?;
    let linked = info_field(&info, "role") == Some("slave")
        && info_field(&info, "master_link_status") == Some("up");
    linked
        .then(|| info_field(&info, "master_port")?.parse().ok())
        .flatten()
}

/// The first element of `ROLE` on 127.0.0.1:`port`: `"master"`, `"slave"` or `"sentinel"`.
///
/// # Errors
/// The query failed, or the reply is no array starting with a string.
pub fn role_of(port: u16, password: Option<&str>) -> RedisResult<String> {
    let reply: Vec<redis::Value> = query_port(port, password, &["ROLE"])?;
    let first = reply.into_iter().next().ok_or_else(|| {
        redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "empty ROLE reply"))
    })?;
    Ok(redis::from_redis_value(first)?)
}

/// Whether 127.0.0.1:`port` answers `ROLE` as `master`.
pub fn is_primary(port: u16, password: Option<&str>) -> bool {
    role_of(port, password).is_ok_and(|role| role == "master")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_and_commandstats_parse() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_assigned"), Some("16384"));
        assert_eq!(info_field(info, "cluster"), None);
        let stats = "# Commandstats\r\n\
            cmdstat_set:calls=10,usec=40,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_client|setname:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n";
        let parsed = parse_commandstats(stats);
        assert_eq!(parsed.get("set"), Some(&10));
        assert_eq!(parsed.get("client|setname"), Some(&2));
        assert_eq!(parsed.len(), 2);
    }
}
