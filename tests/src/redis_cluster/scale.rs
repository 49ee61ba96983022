//! Scaling a running cluster out and back in, as a managed service's scale-out does: a new shard
//! (a primary and its replicas on free loopback ports) added with `redis-cli --cluster
//! add-node` and given its share of the slots with `--cluster rebalance
//! --cluster-use-empty-masters`; then its slots moved off with `--cluster reshard` and its nodes
//! removed with `--cluster del-node` and stopped.

use std::process::Command;
use std::time::{Duration, Instant};

use super::{node_args, Node, RedisCluster, BUS_OFFSET};
use crate::peers::run_bounded;
use crate::ports::free_ports_with_offset;
use crate::redis_process::{redis_cli_binary, redis_server_binary, RedisProcess, PING_LIMIT};

/// How long one `redis-cli --cluster` command may take (a rebalance moves thousands of slots).
const CLI_LIMIT: Duration = Duration::from_secs(120);

/// How long the cluster may take to agree on its new shape after a command.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

impl RedisCluster {
    /// Starts a new primary and [`super::RedisClusterOptions::replicas_per_primary`] replicas
    /// on free ports, adds them to the cluster (`--cluster add-node`, the replicas with
    /// `--cluster-slave --cluster-master-id`), waits until the cluster knows them, and gives the
    /// new primary slots: its even share (`--cluster rebalance --cluster-use-empty-masters`)
    /// when `slots` is `None`, else `slots` of them taken from every primary (`--cluster
    /// reshard --cluster-from all`); then waits until it is healthy again. Returns the new
    /// primary's port and how long moving the slots took.
    ///
    /// Panics when a process does not come up, a command fails, or a wait hits its limit.
    pub fn add_shard(&mut self, slots: Option<usize>) -> (u16, Duration) {
        let server = redis_server_binary().expect("redis-server");
        let ports = free_ports_with_offset(1 + self.options.replicas_per_primary, BUS_OFFSET);
        let mut processes: Vec<RedisProcess> = ports
            .iter()
            .map(|&port| {
                let dir = self._dir.path().join(format!("node-{port}"));
                let args = node_args(port, &dir.display().to_string(), &self.options);
                let mut process = RedisProcess::spawn(&server, args, port, &dir);
                assert!(
                    process.wait_ping(self.password(), PING_LIMIT),
                    "redis:{port} did not come up:\n{}",
                    process.log_text()
                );
                process
            })
            .collect();
        let seed = self.seed_address(&ports);
        let primary = ports[0];
        // Each joins the nodes' list once added, so the waits ask only nodes of the cluster.
        self.join(processes.remove(0));
        self.cli(&["add-node", &format!("127.0.0.1:{primary}"), &seed]);
        let primary_id = self.wait_known(primary);
        for (process, &replica) in processes.into_iter().zip(&ports[1..]) {
            self.join(process);
            self.cli(&[
                "add-node",
                &format!("127.0.0.1:{replica}"),
                &seed,
                "--cluster-slave",
                "--cluster-master-id",
                &primary_id,
            ]);
        }
        self.options.primaries += 1;
        self.wait_shape(primary);
        let started = Instant::now();
        match slots {
            None => self.cli(&["rebalance", &seed, "--cluster-use-empty-masters"]),
            Some(n) => self.cli(&[
                "reshard",
                &seed,
                "--cluster-from",
                "all",
                "--cluster-to",
                &primary_id,
                "--cluster-slots",
                &n.to_string(),
                "--cluster-yes",
            ]),
        }
        let took = started.elapsed();
        self.wait_slots_agreed();
        self.wait_healthy(SETTLE_LIMIT);
        (primary, took)
    }

    /// Moves every slot off the primary on `port` (`--cluster reshard`, its slots spread evenly
    /// over the other primaries), removes its replicas and then it (`--cluster del-node`), stops
    /// their processes, and waits until the cluster is healthy without them. Returns how long
    /// the reshard took.
    ///
    /// Panics when a command fails or a wait hits its limit.
    pub fn remove_shard(&mut self, port: u16) -> Duration {
        let id = self.node_id(port);
        let replicas = self.replicas_of(port);
        let seed = self.seed_address(&[port]);
        let others: Vec<u16> = self
            .primaries()
            .into_iter()
            .filter(|&p| p != port)
            .collect();
        let started = Instant::now();
        for (i, &other) in others.iter().enumerate() {
            // redis-cli refuses to reshard while the nodes disagree (gossip after a move).
            self.wait_slots_agreed();
            let owned = self.slots_of(port);
            let count = owned / (others.len() - i);
            if count == 0 {
                continue;
            }
            let to = self.node_id(other);
            let count = count.to_string();
            self.cli(&[
                "reshard",
                &seed,
                "--cluster-from",
                &id,
                "--cluster-to",
                &to,
                "--cluster-slots",
                &count,
                "--cluster-yes",
            ]);
        }
        let took = started.elapsed();
        assert_eq!(self.slots_of(port), 0, "redis:{port} still serves slots");
        self.wait_slots_agreed();
        for removed in replicas.iter().chain([&port]) {
            let removed_id = self.node_id(*removed);
            self.cli(&["del-node", &seed, &removed_id]);
            self.nodes.retain(|n| n.process.port() != *removed);
        }
        self.options.primaries -= 1;
        self.wait_healthy(SETTLE_LIMIT);
        took
    }

    fn join(&mut self, process: RedisProcess) {
        self.nodes.push(Node {
            process,
            killed: None,
        });
    }

    /// How many slots the node on `port` serves, as it says itself (`CLUSTER NODES`, its
    /// `myself` line).
    pub fn slots_of(&self, port: u16) -> usize {
        let reply: String = self
            .query_port(port, &["CLUSTER", "NODES"])
            .unwrap_or_else(|e| panic!("CLUSTER NODES on redis:{port}: {e}"));
        reply
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .nth(2)
                    .is_some_and(|f| f.contains("myself"))
            })
            .map(|l| l.split_whitespace().skip(8).map(slot_count).sum())
            .unwrap_or(0)
    }

    /// Waits (at most [`SETTLE_LIMIT`]) until every running node's `CLUSTER SLOTS` names the
    /// same primary for every range (gossip spreads a slot's new owner to the replicas).
    pub fn wait_slots_agreed(&self) {
        crate::eventually::eventually_ok("every node to agree on the slots", SETTLE_LIMIT, || {
            let mut maps = Vec::new();
            for p in self.up_ports() {
                let slots: Vec<redis::Value> = self
                    .query_port(p, &["CLUSTER", "SLOTS"])
                    .map_err(|e| format!("CLUSTER SLOTS on redis:{p}: {e}"))?;
                maps.push((p, slot_map(&slots)));
            }
            match maps.iter().find(|(_, m)| *m != maps[0].1) {
                Some((p, _)) => Err(format!("redis:{p} and redis:{} disagree", maps[0].0)),
                None => Ok(()),
            }
        });
    }

    /// `127.0.0.1:<port>` of a running primary not in `except`: the node `redis-cli` talks to.
    fn seed_address(&self, except: &[u16]) -> String {
        let seed = self
            .primaries()
            .into_iter()
            .find(|p| !except.contains(p))
            .expect("a running primary");
        format!("127.0.0.1:{seed}")
    }

    /// Waits until every running node lists the node on `port`; returns its id.
    fn wait_known(&self, port: u16) -> String {
        let id = self.node_id(port);
        crate::eventually::eventually_ok(
            &format!("every node to know redis:{port}"),
            SETTLE_LIMIT,
            || {
                for p in self.up_ports() {
                    let seen = self.nodes_seen_by(p).map_err(|e| e.to_string())?;
                    if !seen.iter().any(|n| n.id == id && !n.has_flag("handshake")) {
                        return Err(format!("redis:{p} does not know it yet"));
                    }
                }
                Ok(())
            },
        );
        id
    }

    /// Waits until every running node knows every other and says `cluster_state:ok` (the new,
    /// still empty primary serves no slot yet, so the full health check waits for the
    /// rebalance).
    fn wait_shape(&self, primary: u16) {
        let total = self.options.node_count().to_string();
        crate::eventually::eventually_ok(
            &format!("the cluster to take in redis:{primary}'s shard"),
            SETTLE_LIMIT,
            || {
                self.check_states_ok()?;
                for p in self.up_ports() {
                    let info: String = self
                        .query_port(p, &["CLUSTER", "INFO"])
                        .map_err(|e| e.to_string())?;
                    let known = crate::redis_process::info_field(&info, "cluster_known_nodes");
                    if known != Some(total.as_str()) {
                        return Err(format!("redis:{p} knows {known:?} nodes"));
                    }
                }
                Ok(())
            },
        );
    }

    /// Runs `redis-cli --cluster <args…>` (with the cluster's password), bounded by
    /// [`CLI_LIMIT`]; panics with its output when it fails.
    fn cli(&self, args: &[&str]) {
        let cli = redis_cli_binary().expect("redis-cli");
        let mut cmd = Command::new(cli);
        cmd.arg("--cluster").args(args);
        if let Some(password) = self.password() {
            cmd.args(["-a", password, "--no-auth-warning"]);
        }
        let what = format!("redis-cli --cluster {}", args.join(" "));
        let out = run_bounded(&mut cmd, CLI_LIMIT, &what);
        assert!(
            out.status.success(),
            "{what} failed ({}):\n{}\n{}",
            out.status,
            out.stdout,
            out.stderr
        );
    }
}

/// A `CLUSTER SLOTS` reply as sorted `(start, end, primary port)` ranges.
fn slot_map(reply: &[redis::Value]) -> Vec<(i64, i64, i64)> {
    let int = |v: Option<&redis::Value>| match v {
        Some(redis::Value::Int(n)) => *n,
        _ => -1,
    };
    let mut ranges: Vec<(i64, i64, i64)> = reply
        .iter()
        .filter_map(|range| match range {
            redis::Value::Array(items) => {
                let port = match items.get(2) {
                    Some(redis::Value::Array(node)) => int(node.get(1)),
                    _ => -1,
                };
                Some((int(items.first()), int(items.get(1)), port))
            }
            _ => None,
        })
        .collect();
    ranges.sort_unstable();
    ranges
}

/// Slots in one `CLUSTER NODES` slot field: `5` is one, `0-5460` is 5461, an importing or
/// migrating marker (`[5-<-id]`) none.
fn slot_count(field: &str) -> usize {
    if field.starts_with('[') {
        return 0;
    }
    match field.split_once('-') {
        Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
            (Ok(a), Ok(b)) if b >= a => b - a + 1,
            _ => 0,
        },
        None => usize::from(field.parse::<usize>().is_ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::slot_count;

    #[test]
    fn counts_slots_of_a_nodes_line() {
        assert_eq!(slot_count("0-5460"), 5461);
        assert_eq!(slot_count("7"), 1);
        assert_eq!(slot_count("[7->-abc]"), 0);
    }
}
