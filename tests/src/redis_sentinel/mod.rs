//! A private Redis Sentinel group per test: one primary, one replica (`replicaof`; more with
//! [`SentinelOptions::replicas`]) and three
//! `redis-sentinel` processes (quorum 2) on free loopback ports, each process with its config
//! file in its own dir, killed by PID on drop. Any of the five can be killed and restarted
//! (same port, same dir and config) to watch promotions.
//!
//! Modules: [`config`] writes the config files; `wait` holds the waits (ready, promoted,
//! rejoined as a replica); [`switch`] is the graceful `SENTINEL FAILOVER`.

pub mod config;
pub mod switch;
mod wait;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::{FromRedisValue, RedisResult};

use crate::ports::free_ports;
use crate::redis_process::{
    commandstats_of, linked_primary_of, query_port, redis_sentinel_binary, redis_server_binary,
    scan_port, RedisProcess, PING_LIMIT,
};
use crate::temp::TempDir;
use config::{write_redis_conf, write_sentinel_conf};

/// How long a new group may take to be ready (see [`SentinelGroup::start_with`]).
pub const START_LIMIT: Duration = Duration::from_secs(30);

/// The settings of a [`SentinelGroup`].
#[derive(Clone, Debug)]
pub struct SentinelOptions {
    /// The name the sentinels monitor the primary under (default `switchboard`).
    pub master_name: String,
    /// `sentinel down-after-milliseconds` (default 3000): how long the primary may not answer
    /// before a sentinel deems it down; a promotion follows within about 1–2 s more. At 1000,
    /// two clean-clone CI runs on a busy 2-core machine saw two sentinels deem the just-promoted
    /// primary down about 1 s after `+switch-master` and fail over a second time, onto the old
    /// primary that the test had just restarted empty (so the group lost its data).
    pub down_after_ms: u64,
    /// `sentinel failover-timeout` in milliseconds (default 5000).
    pub failover_timeout_ms: u64,
    /// `requirepass` and `masterauth` of both data nodes, and `sentinel auth-pass` of the
    /// sentinels (default none).
    pub password: Option<String>,
    /// `requirepass` of the sentinels themselves, separate from [`Self::password`] (default
    /// none): a client of a sentinel must `AUTH` with it, else `NOAUTH`.
    pub sentinel_password: Option<String>,
    /// `appendonly yes` on the data nodes instead of `appendonly no` (default `false`).
    pub appendonly: bool,
    /// Replicas of the primary (default 1). With 2, a promotion still leaves the new primary a
    /// replica, which `redis.min_replicas_acked = 1` needs to go on confirming writes.
    pub replicas: usize,
}

impl Default for SentinelOptions {
    fn default() -> Self {
        SentinelOptions {
            master_name: "switchboard".into(),
            down_after_ms: 3000,
            failover_timeout_ms: 5000,
            password: None,
            sentinel_password: None,
            appendonly: false,
            replicas: 1,
        }
    }
}

/// One process of the group and, when the fixture killed it, when.
struct Member {
    process: RedisProcess,
    killed_at: Option<Instant>,
}

impl Member {
    fn new(process: RedisProcess) -> Member {
        Member {
            process,
            killed_at: None,
        }
    }
}

/// A running Sentinel group owned by one test.
pub struct SentinelGroup {
    data: Vec<Member>,
    sentinels: Vec<Member>,
    options: SentinelOptions,
    dir: TempDir,
}

impl SentinelGroup {
    /// [`SentinelGroup::start_with`] the default options (no passwords, no AOF, 1000 ms down
    /// after, 5000 ms failover timeout).
    pub fn start() -> SentinelGroup {
        SentinelGroup::start_with(SentinelOptions::default())
    }

    /// Starts the primary, then each replica (until its link is up, so the sentinels' first
    /// `INFO` of the primary lists it), then three sentinels watching the primary, and waits (at
    /// most [`START_LIMIT`]) until every sentinel reports the primary as `master` with its
    /// replicas and 2 other sentinels.
    ///
    /// Panics when `redis-server` or `redis-sentinel` is missing, when no set of free ports
    /// works after three tries, or when the wait fails (with the processes' logs).
    pub fn start_with(options: SentinelOptions) -> SentinelGroup {
        let server =
            redis_server_binary().expect("redis-server not found: apt-get install -y redis-server");
        let sentinel = redis_sentinel_binary()
            .expect("redis-sentinel not found: apt-get install -y redis-sentinel");
        for _attempt in 0..3 {
            let ports = free_ports(4 + options.replicas);
            let (data, sentinels) = ports.split_at(1 + options.replicas);
            let mut group = SentinelGroup {
                data: Vec::new(),
                sentinels: Vec::new(),
                options: options.clone(),
                dir: TempDir::new("sb-redis-sentinel"),
            };
            if group.start_data(&server, data[0], &data[1..])
                && group.start_sentinels(&sentinel, data[0], sentinels)
            {
                group.wait_ready(START_LIMIT);
                return group;
            }
            eprintln!("the Sentinel group did not come up:\n{}", group.logs());
        }
        panic!("the Sentinel group did not come up on any set of free ports");
    }

    /// Starts the primary and its replicas; `true` once all answer `PING` and every replica's
    /// link is up (at most 10 s each), `false` when one exits or does not answer (a port taken).
    fn start_data(&mut self, server: &str, primary: u16, replicas: &[u16]) -> bool {
        let members =
            std::iter::once((primary, None)).chain(replicas.iter().map(|&r| (r, Some(primary))));
        for (port, of) in members {
            let dir = self.dir.path().join(format!("redis-{port}"));
            let conf = write_redis_conf(&dir, port, of, &self.options);
            let args = vec![conf.display().to_string()];
            let mut process = RedisProcess::spawn(server, args, port, &dir);
            let up = process.wait_ping(self.password(), PING_LIMIT);
            self.data.push(Member::new(process));
            if !up {
                return false;
            }
        }
        replicas.iter().all(|&replica| {
            let deadline = Instant::now() + PING_LIMIT;
            while Instant::now() < deadline {
                if self.linked_primary_of(replica) == Some(primary) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        })
    }

    /// Starts a sentinel on each of `ports` watching `primary`; `true` once all answer `PING`.
    fn start_sentinels(&mut self, bin: &str, primary: u16, ports: &[u16]) -> bool {
        for &port in ports {
            let dir = self.dir.path().join(format!("sentinel-{port}"));
            let conf = write_sentinel_conf(&dir, port, primary, &self.options);
            let args = vec![conf.display().to_string()];
            let mut process = RedisProcess::spawn(bin, args, port, &dir);
            let up = process.wait_ping(self.sentinel_password(), PING_LIMIT);
            self.sentinels.push(Member::new(process));
            if !up {
                return false;
            }
        }
        true
    }

    /// `redis://127.0.0.1:<port>/` of each sentinel (passwords not included, see
    /// [`Self::sentinel_password`]).
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinel_ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// The sentinels' ports, in start order.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|m| m.process.port()).collect()
    }

    /// The data nodes' ports: the first primary, then the first replicas (whatever their
    /// roles are now).
    pub fn data_ports(&self) -> Vec<u16> {
        self.data.iter().map(|m| m.process.port()).collect()
    }

    /// The name the sentinels monitor the primary under.
    pub fn master_name(&self) -> &str {
        &self.options.master_name
    }

    /// The data nodes' password (`requirepass`, `masterauth`, `sentinel auth-pass`), if set.
    pub fn password(&self) -> Option<&str> {
        self.options.password.as_deref()
    }

    /// The sentinels' own `requirepass`, if set.
    pub fn sentinel_password(&self) -> Option<&str> {
        self.options.sentinel_password.as_deref()
    }

    /// The options it was started with.
    pub fn options(&self) -> &SentinelOptions {
        &self.options
    }

    /// The current primary's port, as the first running sentinel that answers names it
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`). Panics when none answers.
    pub fn primary_port(&self) -> u16 {
        self.running_sentinels()
            .into_iter()
            .find_map(|s| self.primary_named_by(s).ok())
            .expect("no running sentinel names the primary")
    }

    /// The first data node that is not [`Self::primary_port`] (up or down).
    pub fn replica_port(&self) -> u16 {
        let primary = self.primary_port();
        self.data_ports()
            .into_iter()
            .find(|&p| p != primary)
            .expect("two data nodes")
    }

    /// The primary the sentinel on `sentinel` names.
    ///
    /// # Errors
    /// It does not answer, or its answer is no `[ip, port]`.
    pub fn primary_named_by(&self, sentinel: u16) -> RedisResult<u16> {
        let name = self.options.master_name.as_str();
        let addr: Vec<String> =
            self.query_port(sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])?;
        addr.get(1).and_then(|p| p.parse().ok()).ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "no [ip, port] from GET-MASTER-ADDR-BY-NAME",
                format!("{addr:?}"),
            ))
        })
    }

    /// Whether the process on `port` runs (was not killed through [`Self::kill`] since its
    /// last start). Panics for a port that is not one of the group's.
    pub fn is_up(&self, port: u16) -> bool {
        self.member(port).killed_at.is_none()
    }

    /// The ports of the running sentinels.
    pub fn running_sentinels(&self) -> Vec<u16> {
        self.sentinels
            .iter()
            .filter(|m| m.killed_at.is_none())
            .map(|m| m.process.port())
            .collect()
    }

    /// Sends one command straight to `port` on a fresh connection with 5 s timeouts, after
    /// `AUTH` with the password of that kind of process: [`Self::sentinel_password`] for a
    /// sentinel, [`Self::password`] for a data node.
    ///
    /// # Errors
    /// As [`crate::redis_process::query_port`].
    pub fn query_port<T: FromRedisValue>(&self, port: u16, args: &[&str]) -> RedisResult<T> {
        let sentinel = self.sentinels.iter().any(|m| m.process.port() == port);
        let password = if sentinel {
            self.sentinel_password()
        } else {
            self.password()
        };
        query_port(port, password, args)
    }

    /// Kills the process on `port` (a data node or a sentinel) with SIGKILL by PID, and
    /// remembers it is down and when. Panics for an unknown port or one already down.
    pub fn kill(&mut self, port: u16) {
        assert!(self.is_up(port), "{port} is already down");
        let member = self.member_mut(port);
        member.process.kill();
        member.killed_at = Some(Instant::now());
    }

    /// Starts the killed process on `port` again from its own config file (same port, same
    /// dir) and waits until it answers `PING` (10 s). A former primary comes back as a primary
    /// (with what it persisted: nothing without `appendonly`) until the sentinels turn it into
    /// a replica of the new one, which they do about 8–11 s after they see it again (see
    /// [`Self::wait_replica_of`]); meanwhile a client that reaches it directly can write there.
    /// Panics when it is not down or does not come up.
    pub fn restart(&mut self, port: u16) {
        assert!(!self.is_up(port), "{port} runs; kill it first");
        let sentinel = self.sentinels.iter().any(|m| m.process.port() == port);
        let password = if sentinel {
            self.options.sentinel_password.clone()
        } else {
            self.options.password.clone()
        };
        let member = self.member_mut(port);
        member.process.start();
        member.killed_at = None;
        if !member.process.wait_ping(password.as_deref(), PING_LIMIT) {
            panic!("{port} did not come back:\n{}", member.process.log_text());
        }
    }

    /// Every key matching the glob `pattern` on the current primary, by `SCAN`, sorted.
    pub fn keys_matching(&self, pattern: &str) -> Vec<String> {
        scan_port(self.primary_port(), self.password(), pattern)
    }

    /// Calls per command (`INFO commandstats`, lower-case names like `"set"`) of the current
    /// primary. Panics when it does not answer.
    pub fn commandstats(&self) -> BTreeMap<String, u64> {
        commandstats_of(self.primary_port(), self.password())
    }

    /// `DBSIZE` of the current primary. Panics when it does not answer.
    pub fn dbsize(&self) -> i64 {
        let port = self.primary_port();
        self.query_port(port, &["DBSIZE"])
            .unwrap_or_else(|e| panic!("DBSIZE on redis:{port}: {e}"))
    }

    /// `FLUSHALL` on the current primary (its replica follows). Panics when it fails.
    pub fn flushall(&self) {
        let port = self.primary_port();
        self.query_port::<()>(port, &["FLUSHALL"])
            .unwrap_or_else(|e| panic!("FLUSHALL on redis:{port}: {e}"));
    }

    /// The port of the primary the data node on `port` replicates with its link up, if it is
    /// such a replica now.
    pub fn linked_primary_of(&self, port: u16) -> Option<u16> {
        linked_primary_of(port, self.password())
    }

    /// Everything the process on `port` printed, over all its starts.
    pub fn log_of(&self, port: u16) -> String {
        self.member(port).process.log_text()
    }

    /// The last 40 lines of every process's log, one section per process.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (kind, member) in self
            .data
            .iter()
            .map(|m| ("redis", m))
            .chain(self.sentinels.iter().map(|m| ("sentinel", m)))
        {
            let text = member.process.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            out.push_str(&format!(
                "--- {kind}:{} ---\n{tail}\n",
                member.process.port()
            ));
        }
        out
    }

    fn member(&self, port: u16) -> &Member {
        self.data
            .iter()
            .chain(&self.sentinels)
            .find(|m| m.process.port() == port)
            .unwrap_or_else(|| panic!("{port} is not a port of this Sentinel group"))
    }

    fn member_mut(&mut self, port: u16) -> &mut Member {
        self.data
            .iter_mut()
            .chain(&mut self.sentinels)
            .find(|m| m.process.port() == port)
            .unwrap_or_else(|| panic!("{port} is not a port of this Sentinel group"))
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- Sentinel group logs -----\n{}", self.logs());
        }
    }
}
