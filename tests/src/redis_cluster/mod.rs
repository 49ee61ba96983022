//! A private Redis Cluster per test: N primaries with R replicas each (3 × 1 by default), every
//! node a `redis-server --cluster-enabled yes` on a free loopback port `P` whose cluster bus
//! port `P + 10000` is free too, created with `redis-cli --cluster create`, killed by PID on
//! drop. Nodes can be killed and restarted (same port, same `nodes.conf`) to watch failovers.
//!
//! Modules: [`nodes`] parses `CLUSTER NODES`; `health` holds the waits (healthy, failed over,
//! rejoined); [`reshape`] moves a slot by hand and fails a shard over gracefully (case C36);
//! `scale` adds a shard (a primary and its replicas) and removes it again (the chaos suite's
//! `scale-out`).

mod health;
pub mod nodes;
pub mod reshape;
mod scale;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use redis::{FromRedisValue, RedisResult};

use crate::peers::run_bounded;
use crate::ports::free_ports_with_offset;
use crate::redis_process::{
    commandstats_of, query_port, redis_cli_binary, redis_server_binary, scan_port, RedisProcess,
    PING_LIMIT,
};
use crate::temp::TempDir;
use nodes::{parse_nodes, NodeLine};

/// Redis Cluster's fixed distance from a node's client port to its cluster bus port.
pub const BUS_OFFSET: u16 = 10000;

/// How long `redis-cli --cluster create` may take.
const CREATE_LIMIT: Duration = Duration::from_secs(60);

/// How long a new cluster may take to be healthy (see [`RedisCluster::start_with`]).
pub const START_LIMIT: Duration = Duration::from_secs(30);

/// The shape and settings of a [`RedisCluster`].
#[derive(Clone, Debug)]
pub struct RedisClusterOptions {
    /// Primaries (default 3; `redis-cli --cluster create` needs at least 3).
    pub primaries: usize,
    /// Replicas of each primary (default 1).
    pub replicas_per_primary: usize,
    /// `cluster-node-timeout` in milliseconds (default 1000): how long a node may be unreachable
    /// before it is flagged failing; a failover starts after about this plus 0.5–1 s.
    pub node_timeout_ms: u64,
    /// `requirepass` and `masterauth` of every node (default none).
    pub password: Option<String>,
    /// `appendonly yes` (in each node's own dir) instead of `appendonly no` (default `false`).
    pub appendonly: bool,
}

impl Default for RedisClusterOptions {
    fn default() -> Self {
        RedisClusterOptions {
            primaries: 3,
            replicas_per_primary: 1,
            node_timeout_ms: 1000,
            password: None,
            appendonly: false,
        }
    }
}

impl RedisClusterOptions {
    /// Every node: primaries × (1 + replicas per primary).
    pub fn node_count(&self) -> usize {
        self.primaries * (1 + self.replicas_per_primary)
    }
}

/// One node: its process, and what [`RedisCluster::kill`] saw when it killed it.
struct Node {
    process: RedisProcess,
    killed: Option<Killed>,
}

/// A node killed by the fixture: when, and which replicas it had then (the failover candidates).
struct Killed {
    at: Instant,
    replicas: Vec<u16>,
}

/// A running Redis Cluster owned by one test.
pub struct RedisCluster {
    nodes: Vec<Node>,
    options: RedisClusterOptions,
    _dir: TempDir,
}

impl RedisCluster {
    /// [`RedisCluster::start_with`] the default options: 3 primaries, 1 replica each, node
    /// timeout 1000 ms, no password, no AOF.
    pub fn start() -> RedisCluster {
        RedisCluster::start_with(RedisClusterOptions::default())
    }

    /// Starts `options.node_count()` nodes on free ports (client port ≤ 55535 with its bus port
    /// free), creates the cluster with `redis-cli --cluster create … --cluster-replicas R
    /// --cluster-yes`, and waits (at most [`START_LIMIT`]) until every node says
    /// `cluster_state:ok`, all 16384 slots assigned, every node known, and every replica has
    /// `master_link_status:up`.
    ///
    /// Panics when `redis-server` or `redis-cli` is missing, when no set of free ports works
    /// after three tries (a node exits, e.g. because another process took its bus port), or when
    /// creation or the wait fails (with the nodes' logs).
    pub fn start_with(options: RedisClusterOptions) -> RedisCluster {
        assert!(options.primaries >= 3, "Redis Cluster needs 3 primaries");
        let server =
            redis_server_binary().expect("redis-server not found: apt-get install -y redis-server");
        let cli = redis_cli_binary().expect("redis-cli not found: apt-get install -y redis-tools");
        for _attempt in 0..3 {
            let dir = TempDir::new("sb-redis-cluster");
            let ports = free_ports_with_offset(options.node_count(), BUS_OFFSET);
            let mut nodes: Vec<Node> = ports
                .iter()
                .map(|&port| {
                    let node_dir = dir.path().join(format!("node-{port}"));
                    let args = node_args(port, &node_dir.display().to_string(), &options);
                    Node {
                        process: RedisProcess::spawn(&server, args, port, &node_dir),
                        killed: None,
                    }
                })
                .collect();
            let password = options.password.clone();
            let down: Vec<u16> = nodes
                .iter_mut()
                .filter_map(|n| {
                    let up = n.process.wait_ping(password.as_deref(), PING_LIMIT);
                    (!up).then(|| n.process.port())
                })
                .collect();
            let cluster = RedisCluster {
                nodes,
                options: options.clone(),
                _dir: dir,
            };
            if !down.is_empty() {
                eprintln!(
                    "cluster nodes {down:?} did not come up:\n{}",
                    cluster.logs()
                );
                continue;
            }
            cluster.create(&cli);
            cluster.wait_healthy(START_LIMIT);
            return cluster;
        }
        panic!("the Redis Cluster did not come up on any set of free ports");
    }

    fn create(&self, cli: &str) {
        let mut cmd = Command::new(cli);
        cmd.arg("--cluster").arg("create");
        cmd.args(self.ports().iter().map(|p| format!("127.0.0.1:{p}")));
        cmd.arg("--cluster-replicas")
            .arg(self.options.replicas_per_primary.to_string())
            .arg("--cluster-yes");
        if let Some(password) = &self.options.password {
            cmd.args(["-a", password, "--no-auth-warning"]);
        }
        let out = run_bounded(&mut cmd, CREATE_LIMIT, "redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed ({}):\n{}\n{}\n{}",
            out.status,
            out.stdout,
            out.stderr,
            self.logs()
        );
    }

    /// `redis://127.0.0.1:<port>/` of every node (primaries and replicas, in [`Self::ports`]
    /// order): seeds for a cluster client. The password, if any, is not in them (see
    /// [`Self::password`]).
    pub fn seed_urls(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// Every node's client port, in start order (whatever its role now, up or down).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.process.port()).collect()
    }

    /// The nodes' `requirepass`/`masterauth`, if set.
    pub fn password(&self) -> Option<&str> {
        self.options.password.as_deref()
    }

    /// The options it was started with.
    pub fn options(&self) -> &RedisClusterOptions {
        &self.options
    }

    /// Whether the node on `port` runs (was not killed through [`Self::kill`] since its last
    /// start). Panics for a port that is not a node of this cluster.
    pub fn is_up(&self, port: u16) -> bool {
        self.node(port).killed.is_none()
    }

    /// The ports of the nodes that run.
    pub fn up_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.killed.is_none())
            .map(|n| n.process.port())
            .collect()
    }

    /// The current primaries, sorted: nodes that run and that `CLUSTER NODES` (asked of the
    /// first running node with `cluster_state:ok`, else the first that answers) flags `master`,
    /// not failing, serving slots. Empty when no node answers.
    pub fn primaries(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .view()
            .iter()
            .filter(|n| n.is_healthy_primary() && n.has_slots && self.is_known_up(n.port))
            .map(|n| n.port)
            .collect();
        ports.sort_unstable();
        ports
    }

    /// The port of the current primary ([`Self::primaries`]) serving the slot of `key`
    /// (`CLUSTER KEYSLOT`, asked of a running node): the one primary that answers `EXISTS key`
    /// itself instead of with `MOVED`. Panics when none does.
    pub fn primary_serving(&self, key: &str) -> u16 {
        let slot: i64 = self
            .up_ports()
            .into_iter()
            .find_map(|p| self.query_port(p, &["CLUSTER", "KEYSLOT", key]).ok())
            .expect("no running node answers CLUSTER KEYSLOT");
        self.primaries()
            .into_iter()
            .find(|&p| self.query_port::<i64>(p, &["EXISTS", key]).is_ok())
            .unwrap_or_else(|| panic!("no primary serves slot {slot} ({key})"))
    }

    /// The ports `CLUSTER NODES` (same view as [`Self::primaries`]) lists as replicas of the
    /// node on `port`, sorted, including replicas that are down.
    pub fn replicas_of(&self, port: u16) -> Vec<u16> {
        let view = self.view();
        let Some(id) = view.iter().find(|n| n.port == port).map(|n| n.id.clone()) else {
            return Vec::new();
        };
        let mut ports: Vec<u16> = view
            .iter()
            .filter(|n| n.has_flag("slave") && n.primary_id.as_deref() == Some(id.as_str()))
            .map(|n| n.port)
            .collect();
        ports.sort_unstable();
        ports
    }

    /// One node's parsed `CLUSTER NODES` (its own view of the cluster).
    ///
    /// # Errors
    /// The node does not answer (see [`Self::query_port`]).
    pub fn nodes_seen_by(&self, port: u16) -> RedisResult<Vec<NodeLine>> {
        let reply: String = self.query_port(port, &["CLUSTER", "NODES"])?;
        Ok(parse_nodes(&reply))
    }

    fn view(&self) -> Vec<NodeLine> {
        let up = self.up_ports();
        let ok = up.iter().find(|&&p| {
            self.query_port::<String>(p, &["CLUSTER", "INFO"])
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        });
        ok.into_iter()
            .chain(up.iter())
            .find_map(|&p| self.nodes_seen_by(p).ok())
            .unwrap_or_default()
    }

    /// Sends one command straight to the node on `port` (after `AUTH` when the cluster has a
    /// password), on a fresh connection with 5 s timeouts; no redirects are followed (a key of
    /// another node's slot answers `MOVED`).
    ///
    /// # Errors
    /// As [`crate::redis_process::query_port`].
    pub fn query_port<T: FromRedisValue>(&self, port: u16, args: &[&str]) -> RedisResult<T> {
        query_port(port, self.password(), args)
    }

    /// Kills the node on `port` with SIGKILL (by PID) and remembers it is down, when, and which
    /// replicas it had just before (for [`Self::wait_failover`]). Panics for an unknown port or
    /// a node already down.
    pub fn kill(&mut self, port: u16) {
        assert!(self.is_up(port), "redis:{port} is already down");
        let replicas = self.replicas_of(port);
        let node = self.node_mut(port);
        node.process.kill();
        node.killed = Some(Killed {
            at: Instant::now(),
            replicas,
        });
    }

    /// Starts the killed node on `port` again: same port, arguments, dir and `nodes.conf`, so it
    /// rejoins the cluster (a former primary whose slots moved becomes a replica of the node now
    /// serving them; see [`Self::wait_rejoined`]). Waits until it answers `PING` (10 s).
    /// Panics when it is not down or does not come up.
    pub fn restart(&mut self, port: u16) {
        assert!(!self.is_up(port), "redis:{port} runs; kill it first");
        let password = self.options.password.clone();
        let node = self.node_mut(port);
        node.process.start();
        node.killed = None;
        if !node.process.wait_ping(password.as_deref(), PING_LIMIT) {
            panic!(
                "redis:{port} did not come back:\n{}",
                node.process.log_text()
            );
        }
    }

    /// Every key matching the glob `pattern` on every current primary ([`Self::primaries`]), by
    /// `SCAN` (never `KEYS`), merged and sorted.
    pub fn keys_matching(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .primaries()
            .into_iter()
            .flat_map(|p| self.keys_on(p, pattern))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The keys matching `pattern` on the one node on `port` (primary or replica), by `SCAN`,
    /// sorted. Panics when `SCAN` fails.
    pub fn keys_on(&self, port: u16, pattern: &str) -> Vec<String> {
        scan_port(port, self.password(), pattern)
    }

    /// Calls per command (`INFO commandstats`, lower-case names like `"set"`,
    /// `"cluster|slots"`) summed over the current primaries. Commands a replica applies from
    /// its primary's stream are not counted. Panics when a primary does not answer.
    pub fn commandstats(&self) -> BTreeMap<String, u64> {
        let mut sums = BTreeMap::new();
        for port in self.primaries() {
            for (command, calls) in commandstats_of(port, self.password()) {
                *sums.entry(command).or_insert(0) += calls;
            }
        }
        sums
    }

    /// `DBSIZE` summed over the current primaries (the keys of the whole cluster). Panics when a
    /// primary does not answer.
    pub fn dbsize(&self) -> i64 {
        self.primaries()
            .into_iter()
            .map(|p| {
                self.query_port::<i64>(p, &["DBSIZE"])
                    .unwrap_or_else(|e| panic!("DBSIZE on redis:{p}: {e}"))
            })
            .sum()
    }

    /// `FLUSHALL` on every current primary (their replicas follow). Panics when one fails.
    pub fn flushall(&self) {
        for port in self.primaries() {
            self.query_port::<()>(port, &["FLUSHALL"])
                .unwrap_or_else(|e| panic!("FLUSHALL on redis:{port}: {e}"));
        }
    }

    /// Everything the node on `port` printed, over all its starts.
    pub fn log_of(&self, port: u16) -> String {
        self.node(port).process.log_text()
    }

    /// The last 15 lines of every node's log, one section per node.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let text = node.process.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            out.push_str(&format!("--- redis:{} ---\n{tail}\n", node.process.port()));
        }
        out
    }

    fn is_known_up(&self, port: u16) -> bool {
        self.nodes
            .iter()
            .any(|n| n.process.port() == port && n.killed.is_none())
    }

    fn node(&self, port: u16) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.process.port() == port)
            .unwrap_or_else(|| panic!("redis:{port} is not a node of this cluster"))
    }

    fn node_mut(&mut self, port: u16) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.process.port() == port)
            .unwrap_or_else(|| panic!("redis:{port} is not a node of this cluster"))
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- Redis Cluster logs -----\n{}", self.logs());
        }
    }
}

/// The `redis-server` arguments of the node on `port` with its own `dir`. Besides the options:
/// `repl-diskless-sync-delay 0`, because the default 5 s delays each replica's first full sync,
/// and a replica that never synced refuses to fail over ("Disconnected from master for longer
/// than allowed").
fn node_args(port: u16, dir: &str, options: &RedisClusterOptions) -> Vec<String> {
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        &format!("{dir}/nodes.conf"),
        "--cluster-node-timeout",
        &options.node_timeout_ms.to_string(),
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        if options.appendonly { "yes" } else { "no" },
        "--repl-diskless-sync-delay",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(password) = &options.password {
        args.extend(["--requirepass", password, "--masterauth", password].map(String::from));
    }
    args
}
