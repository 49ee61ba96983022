//! A private Redis (standalone, Redis Cluster or Sentinel: [`RedisKind`]) and N `switchboard`
//! nodes (`a`, `b`, `c`, …) sharing it, as one test's cluster. Dropping it kills every process it
//! started, by PID.

use std::fmt::Display;
use std::time::Duration;

use crate::eventually::eventually;

use crate::node::{Node, Place};
use crate::ports::free_port;
use crate::redis_backend::RedisBackend;
pub use crate::redis_backend::RedisKind;
use crate::redis_server::RedisServer;
use crate::temp::TempDir;

/// Node settings passed as `--set key=value` (values are TOML), the config file every node
/// reads (`--config`; the only way to give `[[upstreams]]` tables), and environment variables
/// set on every node process.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    settings: Vec<(String, String)>,
    env: Vec<(String, String)>,
    config: Option<std::path::PathBuf>,
    redis: RedisKind,
    replicas: Option<usize>,
    program: Option<std::path::PathBuf>,
}

impl ClusterOptions {
    /// No settings: the node's defaults.
    pub fn new() -> ClusterOptions {
        ClusterOptions::default()
    }

    /// Sets `key` to the TOML value `value` (e.g. `set("session.idle_ttl", "1500ms")`), replacing an
    /// earlier value of the same key.
    pub fn set(mut self, key: &str, value: impl Display) -> ClusterOptions {
        self.settings.retain(|(k, _)| k != key);
        self.settings.push((key.to_owned(), value.to_string()));
        self
    }

    /// Sets the environment variable `name` to `value` on every node process (e.g.
    /// `OTEL_BSP_SCHEDULE_DELAY`, read by the nodes' OpenTelemetry SDK), replacing an earlier
    /// value of the same variable. Not on this process: tests run as threads of one process,
    /// and its environment is every test's.
    pub fn env(mut self, name: &str, value: impl Display) -> ClusterOptions {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_owned(), value.to_string()));
        self
    }

    /// The nodes share a Redis of `kind` (default: one standalone server).
    pub fn redis(mut self, kind: RedisKind) -> ClusterOptions {
        self.redis = kind;
        self
    }

    /// Each Redis primary (Cluster or Sentinel) gets `replicas` replicas instead of the
    /// fixture's 1: with 2, a failover leaves the new primary a replica to confirm writes for
    /// `redis.min_replicas_acked = 1`.
    pub fn redis_replicas(mut self, replicas: usize) -> ClusterOptions {
        self.replicas = Some(replicas);
        self
    }

    /// Every node runs `program` (e.g. the previous release's, [`crate::previous::binary`])
    /// instead of this workspace's node binary.
    pub fn program(mut self, program: &std::path::Path) -> ClusterOptions {
        self.program = Some(program.to_owned());
        self
    }

    /// Every node reads `path` as its config file (`--config`).
    pub fn config_file(mut self, path: &std::path::Path) -> ClusterOptions {
        self.config = Some(path.to_owned());
        self
    }

    /// Fast failure detection: heartbeats every 300 ms, a node dead after `cluster.node_ttl` ms
    /// (`cluster.node_ttl`), resumed streams checking liveness every 300 ms.
    pub fn fast_liveness(self, node_ttl_ms: u64) -> ClusterOptions {
        self.set("cluster.heartbeat_interval", "300ms")
            .set("cluster.node_ttl", format!("{node_ttl_ms}ms"))
            .set("cluster.liveness_check_interval", "300ms")
    }

    /// Short idle expiry with a frequent reaper; busy sessions are touched every quarter TTL
    /// (the node requires `session.touch_interval < session.idle_ttl`); both arguments in ms.
    pub fn idle_expiry(self, idle_ttl_ms: u64, reaper_interval_ms: u64) -> ClusterOptions {
        self.set("session.idle_ttl", format!("{idle_ttl_ms}ms"))
            .set("cluster.reaper_interval", format!("{reaper_interval_ms}ms"))
            .set(
                "session.touch_interval",
                format!("{}ms", (idle_ttl_ms / 4).max(1)),
            )
    }
}

/// A running cluster. Fields drop in order: nodes, then Redis, then the log directory.
pub struct Cluster {
    nodes: Vec<Node>,
    redis: RedisBackend,
    options: ClusterOptions,
    logs: TempDir,
}

impl Cluster {
    /// Starts a Redis and `n` nodes and waits until every node answers `GET /healthz` with 200.
    /// A node that exits before it is ready (e.g. its port was taken) is started again on
    /// another port, at most three times.
    pub fn start(n: usize, options: ClusterOptions) -> Cluster {
        let redis = RedisBackend::start_with_replicas(options.redis, options.replicas.unwrap_or(1));
        Cluster::start_on(redis, n, options)
    }

    /// [`Cluster::start`] on a Redis the caller started (e.g. a standalone server with AOF
    /// persistence, see [`RedisServer::start_with`]); `options`' own Redis kind is not used.
    pub fn start_on(redis: RedisBackend, n: usize, mut options: ClusterOptions) -> Cluster {
        for (key, value) in redis.node_settings() {
            options = options.set(&key, value);
        }
        let logs = TempDir::new("sb-nodes");
        let url = redis.url();
        let place = Place {
            program: options.program.clone(),
            env: options.env.clone(),
            ..Place::default()
        };
        let spawn = |i: usize| {
            Node::spawn_placed(
                &place,
                free_port(),
                &node_name(i),
                url.as_deref(),
                &options.settings,
                logs.path(),
                options.config.as_deref(),
            )
        };
        let mut nodes: Vec<Node> = (0..n).map(spawn).collect();
        for (i, node) in nodes.iter_mut().enumerate() {
            let mut attempt = 1;
            while !node.wait_ready() {
                assert!(
                    attempt < 3,
                    "node {} never became ready:\n{}",
                    node.id(),
                    node.log_tail(40)
                );
                node.kill9();
                *node = spawn(i);
                attempt += 1;
            }
        }
        Cluster {
            nodes,
            redis,
            options,
            logs,
        }
    }

    /// Starts node `i` again, after it exited (or was stopped with [`Cluster::kill9`]): same id,
    /// port, settings and config file, its log appended to the same file; waits until it answers
    /// `GET /healthz` with 200. A new process, so it runs under a new `<id>.<suffix>` node id.
    /// Panics when the old process still runs or the new one never becomes ready.
    pub fn restart(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        assert!(node.pid().is_none(), "node {} still runs", node.id());
        let place = Place {
            program: self.options.program.clone(),
            env: self.options.env.clone(),
            ..node.place().clone()
        };
        let mut fresh = Node::spawn_placed(
            &place,
            node.port(),
            node.id(),
            self.redis.url().as_deref(),
            &self.options.settings,
            self.logs.path(),
            self.options.config.as_deref(),
        );
        assert!(
            fresh.wait_ready(),
            "node {} never became ready again:\n{}",
            fresh.id(),
            fresh.log_tail(40)
        );
        *node = fresh;
    }

    /// The nodes started from now on ([`Cluster::restart`]) run `program` (`None`: this
    /// workspace's node binary): how a rolling upgrade replaces one node after another.
    pub fn set_program_for_new_nodes(&mut self, program: Option<&std::path::Path>) {
        self.options.program = program.map(ToOwned::to_owned);
    }

    /// Sets `key` to `value` for the nodes started from now on ([`Cluster::restart`],
    /// [`Cluster::add_node`]), like [`ClusterOptions::set`]; running nodes keep theirs.
    pub fn set_for_new_nodes(&mut self, key: &str, value: impl Display) {
        self.options = std::mem::take(&mut self.options).set(key, value);
    }

    /// Starts one more node (the next name) at `place` with the cluster's settings and
    /// environment variables (then `place.env`'s), listening on `port`, reaching Redis at
    /// `redis_url` (e.g. through a link of `place.netns`); waits until it is ready and returns its
    /// index. Panics when it never becomes ready. ([`Cluster::restart`] of it starts it at the
    /// same place but with the cluster's own Redis URL.)
    pub fn add_node(&mut self, place: &Place, port: u16, redis_url: &str) -> usize {
        let i = self.nodes.len();
        let place = Place {
            env: [self.options.env.as_slice(), place.env.as_slice()].concat(),
            ..place.clone()
        };
        let mut node = Node::spawn_placed(
            &place,
            port,
            &node_name(i),
            Some(redis_url),
            &self.options.settings,
            self.logs.path(),
            self.options.config.as_deref(),
        );
        assert!(
            node.wait_ready(),
            "node {} never became ready:\n{}",
            node.id(),
            node.log_tail(40)
        );
        self.nodes.push(node);
        i
    }

    /// Node `i` (0 = `a`).
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The MCP endpoint of node `i`.
    pub fn url(&self, i: usize) -> String {
        self.nodes[i].url()
    }

    /// The MCP endpoints of every node, in order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `i`, mutable (to terminate it and wait for its exit).
    pub fn node_mut(&mut self, i: usize) -> &mut Node {
        &mut self.nodes[i]
    }

    /// Sends `kill -9` to node `i`.
    pub fn kill9(&mut self, i: usize) {
        self.nodes[i].kill9();
    }

    /// The cluster's Redis, when it is one standalone server (panics otherwise).
    pub fn redis(&self) -> &RedisServer {
        self.redis.server()
    }

    /// The cluster's Redis, whatever its kind.
    pub fn backend(&self) -> &RedisBackend {
        &self.redis
    }

    /// The cluster's Redis, to kill and restart its servers.
    pub fn backend_mut(&mut self) -> &mut RedisBackend {
        &mut self.redis
    }

    /// The directory holding every node's log (`node-<id>.log`).
    pub fn log_dir(&self) -> &std::path::Path {
        self.logs.path()
    }

    /// Every Redis key except the reaper's short-lived lock (`sb:reaper`, held only while a
    /// pass runs) and the nodes' bus mailboxes (`sb:mbox:<node>`, `sb:mbox:all`: a node's
    /// or every node's, not a session's; each expires `bus.message_ttl` after its last message),
    /// sorted: what "the keys of the cluster" means when comparing over time.
    pub fn durable_keys(&self) -> Vec<String> {
        let mut keys = self.redis.all_keys();
        keys.retain(|k| !is_transient(k));
        keys
    }

    /// The durable keys once every node's liveness key (`sb:node:<id>.<suffix>`: a node runs as
    /// its configured id plus a per-process suffix) is present: the state of an idle cluster, to
    /// compare against after a test's sessions are gone.
    pub async fn baseline_keys(&self) -> Vec<String> {
        let expected: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("sb:node:{}.", n.id()))
            .collect();
        eventually(
            "every node's liveness key",
            Duration::from_secs(10),
            || async {
                let keys = self.durable_keys();
                let all = expected
                    .iter()
                    .all(|p| keys.iter().any(|k| k.starts_with(p.as_str())));
                all.then_some(keys)
            },
        )
        .await
    }

    /// The durable keys that are not in `baseline`, plus a note when `DBSIZE` disagrees with
    /// the key scan (so nothing hides from `SCAN`).
    pub fn keys_beyond(&self, baseline: &[String]) -> Vec<String> {
        // DBSIZE, SCAN, DBSIZE: when both counts agree, the scan saw a stable key set (the
        // reaper lock may come and go in between; then try again).
        for _ in 0..5 {
            let before = self.redis.dbsize();
            let all = self.redis.all_keys();
            if self.redis.dbsize() != before {
                continue;
            }
            let mut extra: Vec<String> = all
                .iter()
                .filter(|k| !is_transient(k) && !baseline.contains(k))
                .cloned()
                .collect();
            if before != all.len() as i64 {
                extra.push(format!("<DBSIZE {before} but SCAN saw {} keys>", all.len()));
            }
            return extra;
        }
        vec!["<the key count never held still for one scan>".to_owned()]
    }

    /// Every Redis key of session `sid` (keys carrying the hash tag `{<sid>}`).
    pub fn session_keys(&self, sid: &str) -> Vec<String> {
        self.redis.keys_matching(&format!("*{{{sid}}}*"))
    }

    /// The nodes (`<id>.<suffix>`, one entry per request) running requests of session `sid`:
    /// the node named in each value (`<node>\n<stream>`) of its in-flight hash `sb:{sid}:inf`.
    pub fn in_flight_nodes(&self, sid: &str) -> Vec<String> {
        let key = format!("sb:{{{sid}}}:inf");
        let values: Vec<String> = self
            .redis
            .query(&["HVALS", &key])
            .unwrap_or_else(|e| panic!("HVALS {key}: {e}"));
        values
            .iter()
            .map(|v| v.split('\n').next().unwrap_or_default().to_owned())
            .collect()
    }

    /// The node (`<id>.<suffix>`) running the request with JSON-RPC id `id` of session `sid`, once
    /// it is registered in flight (field: the id as JSON text, e.g. `7` or `"a"`).
    pub fn in_flight_node(&self, sid: &str, id: &serde_json::Value) -> Option<String> {
        let key = format!("sb:{{{sid}}}:inf");
        let value: Option<String> = self
            .redis
            .query(&["HGET", &key, &id.to_string()])
            .unwrap_or_else(|e| panic!("HGET {key}: {e}"));
        value.map(|v| v.split('\n').next().unwrap_or_default().to_owned())
    }

    /// Whether node `i`'s liveness key (`sb:node:<id>.<suffix>`) is in Redis: false once its
    /// heartbeats stopped for `cluster.node_ttl`, which is when the other nodes take it for dead.
    pub fn liveness_key_present(&self, i: usize) -> bool {
        let pattern = format!("sb:node:{}.*", self.nodes[i].id());
        !self.redis.keys_matching(&pattern).is_empty()
    }

    /// Waits (at most 15 s) until the event log of the stream named in `event_id`
    /// (`<stream>_<position>`, the position a Redis stream entry id) of session `sid` holds an
    /// event after that position: something happened on the stream since `event_id`.
    pub async fn log_grows_past(&self, sid: &str, event_id: &str) {
        let (stream, position) = event_id
            .rsplit_once('_')
            .unwrap_or_else(|| panic!("not an event id: {event_id}"));
        let key = format!("sb:{{{sid}}}:log:{stream}");
        let after = format!("({position}");
        eventually(
            &format!("an event after {event_id} in {key}"),
            Duration::from_secs(15),
            || async {
                let newer: Vec<redis::Value> = self
                    .redis
                    .query(&["XRANGE", &key, &after, "+", "COUNT", "1"])
                    .unwrap_or_else(|e| panic!("XRANGE {key}: {e}"));
                (!newer.is_empty()).then_some(())
            },
        )
        .await;
    }

    /// The distinct hash tags (session ids) of the per-session keys, sorted.
    pub fn session_ids_in_redis(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .all_session_keys()
            .iter()
            .filter_map(|k| {
                k.split_once('{')
                    .and_then(|(_, rest)| rest.split_once('}'))
                    .map(|(id, _)| id.to_owned())
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Every Redis key carrying some hash tag, i.e. every per-session key (the nodes' bus
    /// mailboxes carry one in Redis Cluster too, and are left out).
    pub fn all_session_keys(&self) -> Vec<String> {
        let mut keys = self.redis.keys_matching("*{*}*");
        keys.retain(|k| !is_transient(k));
        keys
    }
}

/// `a`, `b`, `c`, … `z`, then `n26`, `n27`, ….
pub fn node_name(i: usize) -> String {
    match u8::try_from(i) {
        Ok(b) if b < 26 => ((b'a' + b) as char).to_string(),
        _ => format!("n{i}"),
    }
}

/// The keys [`Cluster::durable_keys`] leaves out: the reaper's lock and the nodes' mailboxes.
fn is_transient(key: &str) -> bool {
    key == "sb:reaper" || key.starts_with("sb:mbox:")
}
