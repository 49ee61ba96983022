//! Replicas of switchboard-rmcp's example servers as real processes (issue 18, library mode):
//! `replicated` (the conformance server with its sessions in a shared Redis) and `plain` (the
//! same handler on rmcp's own `LocalSessionManager`, sessions in process memory). Both are
//! built once per test process (a nested `cargo build -p switchboard-rmcp --example replicated
//! --example plain`, `--release` in release test builds, into `$CARGO_TARGET_DIR`), started on
//! free loopback ports with their output in a temp dir, and killed by PID on drop.
//!
//! [`Replicas`] is one test's set: N replicas (`a`, `b`, `c`, …) on a private `redis-server`,
//! or N plain servers sharing nothing. It also reads what a session left in that Redis: its keys
//! and the event log of one stream, to hold what clients saw against what was logged.

use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::streams::StreamRangeReply;
use serde_json::Value;

use crate::cluster::node_name;
use crate::ports::free_port;
use crate::redis_server::RedisServer;
use crate::temp::TempDir;

/// How long a replica may take to accept connections (it connects to Redis first).
const READY_LIMIT: Duration = Duration::from_secs(20);
/// The examples' Redis key prefix (their default).
pub const KEY_PREFIX: &str = "sb";

/// The directory holding both example binaries, built on first use. `$SWITCHBOARD_RMCP_EXAMPLES`
/// (a directory with `replicated` and `plain` in it) skips the build.
pub fn examples_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(dir) = std::env::var("SWITCHBOARD_RMCP_EXAMPLES") {
            return PathBuf::from(dir);
        }
        crate::cargo_build::built(&[
            "-p",
            "switchboard-rmcp",
            "--example",
            "replicated",
            "--example",
            "plain",
        ])
        .join("examples")
    })
}

/// Settings of the `replicated` example (its command line).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--idle-ttl-secs`: how long an abandoned session lives (default: the example's 30 min).
    pub idle_ttl_secs: Option<u64>,
}

/// One example server process.
pub struct Replica {
    name: String,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Replica {
    /// Starts example `example` with `args` plus `--listen 127.0.0.1:<free port>`, and waits
    /// until it accepts connections; a port taken meanwhile (the process exits) is retried on
    /// another.
    fn start(example: &str, name: &str, args: &[String], dir: &Path) -> Replica {
        let bin = examples_dir().join(example);
        let log = dir.join(format!("{example}-{name}.log"));
        for _attempt in 0..3 {
            let port = free_port();
            let out = File::create(&log).expect("replica log file");
            let child = Command::new(&bin)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(args)
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("clone log file"))
                .stderr(out)
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
            let mut replica = Replica {
                name: name.to_owned(),
                port,
                child: Some(child),
                log: log.clone(),
            };
            if replica.wait_ready() {
                return replica;
            }
            replica.kill9();
        }
        panic!(
            "{example} {name} did not listen on any of 3 free ports:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Waits until the port accepts TCP connections: `false` when the process exited first or
    /// [`READY_LIMIT`] passed. The examples bind only once their store is connected.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + READY_LIMIT;
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                return false;
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Its name (`a`, `b`, …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGKILL to the process (by PID) and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last `lines` lines of its output.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::node::file_tail(&self.log, lines)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "----- replica {} ({}) log tail -----\n{}",
                self.name,
                self.log.display(),
                self.log_tail(40)
            );
        }
    }
}

/// One event of a stream's log in Redis, as a client would see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    /// The SSE event id the replicas give it: `<stream>_<position>`.
    pub id: String,
    /// The message.
    pub message: Value,
    /// Whether it is the stream's last event (its request's answer).
    pub end: bool,
}

/// One test's replicas, and the private Redis they share (none for plain servers).
pub struct Replicas {
    replicas: Vec<Replica>,
    redis: Option<RedisServer>,
    _dir: TempDir,
}

impl Replicas {
    /// `n` replicas of the `replicated` example (`a`, `b`, …, `--node-id rmcp-a`, …, which the
    /// crate makes unique to the process: `rmcp-a.<4 hex digits>`) on a fresh
    /// private Redis.
    pub fn replicated(n: usize, options: &Options) -> Replicas {
        let redis = RedisServer::start();
        let dir = TempDir::new("sb-rmcp");
        let replicas = (0..n)
            .map(|i| {
                let name = node_name(i);
                let mut args = vec![
                    "--redis-url".to_owned(),
                    redis.url(),
                    "--node-id".to_owned(),
                    format!("rmcp-{name}"),
                ];
                if let Some(secs) = options.idle_ttl_secs {
                    args.extend(["--idle-ttl-secs".to_owned(), secs.to_string()]);
                }
                Replica::start("replicated", &name, &args, dir.path())
            })
            .collect();
        Replicas {
            replicas,
            redis: Some(redis),
            _dir: dir,
        }
    }

    /// `n` servers of the `plain` example: the same handler on rmcp's in-memory sessions, no
    /// Redis, nothing shared.
    pub fn plain(n: usize) -> Replicas {
        let dir = TempDir::new("sb-rmcp-plain");
        let replicas = (0..n)
            .map(|i| Replica::start("plain", &node_name(i), &[], dir.path()))
            .collect();
        Replicas {
            replicas,
            redis: None,
            _dir: dir,
        }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    /// Replica `i`.
    pub fn replica(&self, i: usize) -> &Replica {
        &self.replicas[i]
    }

    /// Replica `i`, to kill it.
    pub fn replica_mut(&mut self, i: usize) -> &mut Replica {
        &mut self.replicas[i]
    }

    /// The `/mcp` URL of replica `i`.
    pub fn url(&self, i: usize) -> String {
        self.replicas[i].url()
    }

    /// Every replica's `/mcp` URL, in order.
    pub fn urls(&self) -> Vec<String> {
        self.replicas.iter().map(Replica::url).collect()
    }

    /// Every replica's port, in order (for a balancer).
    pub fn ports(&self) -> Vec<u16> {
        self.replicas.iter().map(Replica::port).collect()
    }

    /// The shared Redis; panics for plain servers.
    pub fn redis(&self) -> &RedisServer {
        self.redis.as_ref().expect("plain servers share no Redis")
    }

    /// What session `sid` still holds in Redis: every key with its hash tag (found by `SCAN`),
    /// plus `sb:sessions[<sid>]` when the session index still has it.
    pub fn session_keys(&self, sid: &str) -> Vec<String> {
        let redis = self.redis();
        let mut keys = redis.keys_matching(&format!("*{{{sid}}}*"));
        let index = format!("{KEY_PREFIX}:sessions");
        let indexed: Option<String> = redis
            .query(&["ZSCORE", &index, sid])
            .unwrap_or_else(|e| panic!("ZSCORE {index}: {e}"));
        if indexed.is_some() {
            keys.push(format!("{index}[{sid}]"));
        }
        keys
    }

    /// The event log of the stream that `event_id` (`<stream>_<position>`) names, in session
    /// `sid`: every event still in Redis, oldest first (empty once the log is gone).
    pub fn logged(&self, sid: &str, event_id: &str) -> Vec<Logged> {
        let (stream, _) = event_id
            .split_once('_')
            .unwrap_or_else(|| panic!("not an event id: {event_id}"));
        let key = format!("{KEY_PREFIX}:{{{sid}}}:log:{stream}");
        let reply: StreamRangeReply = self
            .redis()
            .query(&["XRANGE", &key, "-", "+"])
            .unwrap_or_else(|e| panic!("XRANGE {key}: {e}"));
        reply
            .ids
            .iter()
            .map(|entry| {
                let data: String = entry
                    .get("d")
                    .unwrap_or_else(|| panic!("{key} {} has no data", entry.id));
                let end: Option<String> = entry.get("e");
                Logged {
                    id: format!("{stream}_{}", entry.id),
                    message: serde_json::from_str(&data)
                        .unwrap_or_else(|e| panic!("{key} {}: {e}: {data}", entry.id)),
                    end: end.as_deref() == Some("1"),
                }
            })
            .collect()
    }
}

/// Whether two JSON values are the same message: numbers compare by value (`0` and `0.0` are
/// one number: rmcp writes progress as a float, a JavaScript client re-prints it as an integer).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Asserts that `seen` (the events a client received over all its connections to one stream, in
/// order) is exactly the stream's log `logged`: the same ids and messages, in order, none twice,
/// the last one the stream's end (its request's answer) and the only end.
pub fn assert_seen_is_logged(seen: &[Logged], logged: &[Logged]) {
    let ids = |events: &[Logged]| events.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    let mut unique = ids(seen);
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        seen.len(),
        "an event arrived twice: {seen:#?}"
    );
    assert_eq!(ids(seen), ids(logged), "event ids seen vs. logged");
    for (s, l) in seen.iter().zip(logged) {
        assert!(
            same_json(&s.message, &l.message),
            "event {} differs from its log entry:\nseen:   {}\nlogged: {}",
            s.id,
            s.message,
            l.message
        );
    }
    let last = logged.last().expect("a logged event");
    assert!(last.end, "the log ends with the request's end: {logged:#?}");
    let ends = logged.iter().filter(|e| e.end).count();
    assert_eq!(ends, 1, "one end event: {logged:#?}");
}
