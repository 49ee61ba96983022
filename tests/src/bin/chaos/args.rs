//! The command line: scenarios, cluster size, load, fault schedule, where the node binary and the
//! table come from and go.

use std::path::PathBuf;
use std::time::Duration;

/// One fault pattern the suite injects while the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// SIGKILL of a random node every `--fault-every`, restarted after `--restart-after`.
    Kill9,
    /// SIGTERM of one node at a time (it drains and exits), restarted on its port; the next node
    /// goes once the previous one is ready again, `--fault-every` apart.
    Rolling,
    /// Redis (AOF on, `appendfsync always`) killed with SIGKILL every `--fault-every`, restarted
    /// on the same port and directory after `--restart-after`.
    RedisRestart,
    /// The last node runs in its own network namespace; its link to Redis is cut for
    /// `--partition-secs` every `--fault-every`, then restored (root only).
    Partition,
    /// A Redis primary (Sentinel: the group's; Cluster: the one serving a client session's
    /// slot, sessions in turn) killed with SIGKILL every `--fault-every`; the schedule waits for
    /// the promotion, restarts the killed process (it rejoins as a replica) and waits until it
    /// replicates again. Needs `--redis sentinel|cluster`.
    PrimaryKill,
}

impl Scenario {
    /// Every scenario `--scenario all` runs, in table order (all of them on a standalone Redis;
    /// `primary-kill` needs Sentinel or Cluster, so it runs only when named).
    pub const ALL: [Scenario; 4] = [
        Scenario::Kill9,
        Scenario::Rolling,
        Scenario::RedisRestart,
        Scenario::Partition,
    ];

    /// The name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Kill9 => "kill9",
            Scenario::Rolling => "rolling",
            Scenario::RedisRestart => "redis-restart",
            Scenario::Partition => "partition",
            Scenario::PrimaryKill => "primary-kill",
        }
    }

    fn parse(s: &str) -> Result<Vec<Scenario>, String> {
        if s == "all" {
            return Ok(Scenario::ALL.to_vec());
        }
        Scenario::ALL
            .into_iter()
            .chain([Scenario::PrimaryKill])
            .find(|sc| sc.name() == s)
            .map(|sc| vec![sc])
            .ok_or_else(|| {
                format!(
                    "unknown scenario `{s}` (kill9, rolling, redis-restart, partition, \
                     primary-kill, all)"
                )
            })
    }
}

/// Which Redis deployment the nodes run against (`--redis`). `kill9` and `rolling` run on every
/// topology; `redis-restart` and `partition` need `standalone`; `primary-kill` needs `sentinel`
/// or `cluster`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisTopology {
    /// One `redis-server` on loopback (`redis.mode = "standalone"`, the default).
    Standalone,
    /// The harness's Sentinel group: a primary, a replica, three sentinels
    /// (`redis.mode = "sentinel"`).
    Sentinel,
    /// The harness's Redis Cluster: 3 primaries with a replica each (`redis.mode = "cluster"`).
    Cluster,
}

impl RedisTopology {
    fn parse(s: &str) -> Result<RedisTopology, String> {
        match s {
            "standalone" => Ok(RedisTopology::Standalone),
            "sentinel" => Ok(RedisTopology::Sentinel),
            "cluster" => Ok(RedisTopology::Cluster),
            other => Err(format!(
                "unknown --redis `{other}` (standalone, sentinel, cluster)"
            )),
        }
    }
}

/// The parsed command line.
#[derive(Clone, Debug)]
pub struct Args {
    /// The scenarios to run, one table row each.
    pub scenarios: Vec<Scenario>,
    /// Number of nodes (at least 2).
    pub nodes: usize,
    /// Number of concurrent clients (sessions).
    pub clients: usize,
    /// How long the clients run per scenario.
    pub duration: Duration,
    /// Time between two faults.
    pub fault_every: Duration,
    /// How long a killed process stays down (kill9, redis-restart).
    pub restart_after: Duration,
    /// How long the partition lasts.
    pub partition: Duration,
    /// `cluster.node_ttl` of every node, in ms.
    pub node_ttl_ms: u64,
    /// The Redis topology.
    pub redis: RedisTopology,
    /// A prebuilt `switchboard` binary (default: the harness builds one).
    pub switchboard_bin: Option<PathBuf>,
    /// Where to write the markdown table too.
    pub out: Option<PathBuf>,
    /// Where to copy the node logs of each scenario (`<dir>/<scenario>/node-<id>.log`).
    pub logs: Option<PathBuf>,
    /// HAProxy's health check: `None` a TCP connect, `Some(path)` `GET <path>` (`--lb-health
    /// readyz`: `/readyz`).
    pub lb_health: Option<String>,
    /// Exit 1 when a scenario misses its targets.
    pub check: bool,
    /// Seed of the victim choice.
    pub seed: u64,
    /// `redis.min_replicas_acked` of every node (`--min-replicas-acked`, default 0: off). Above
    /// 0 each Redis primary gets 2 replicas, so a promoted one still has a replica to confirm
    /// writes.
    pub min_replicas_acked: u64,
}

const USAGE: &str = "usage: chaos [--scenario kill9|rolling|redis-restart|partition|primary-kill|all] \
[--nodes 3] [--clients 8] [--duration-secs 60] [--fault-every-ms 4000] [--restart-after-ms 1000] \
[--partition-secs 10] \
[--node-ttl-ms 1500] [--redis standalone|sentinel|cluster] [--switchboard-bin PATH] [--out FILE] [--logs DIR] \
[--lb-health tcp|readyz] [--min-replicas-acked N] [--check] [--seed N]";

impl Args {
    /// Parses `std::env::args()`; prints the usage and exits 2 on a bad argument.
    pub fn from_env() -> Args {
        match Args::parse(std::env::args().skip(1)) {
            Ok(args) => args,
            Err(e) => {
                eprintln!("chaos: {e}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }

    /// Parses the arguments after the program name.
    pub fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            scenarios: vec![Scenario::Kill9],
            nodes: 3,
            clients: 8,
            duration: Duration::from_secs(60),
            fault_every: Duration::from_millis(4000),
            restart_after: Duration::from_millis(1000),
            partition: Duration::from_secs(10),
            node_ttl_ms: 1500,
            redis: RedisTopology::Standalone,
            switchboard_bin: None,
            out: None,
            logs: None,
            lb_health: None,
            check: false,
            seed: 1,
            min_replicas_acked: 0,
        };
        while let Some(flag) = it.next() {
            if flag == "--check" {
                a.check = true;
                continue;
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            a.set(&flag, &value)?;
        }
        if a.nodes < 2 || a.clients == 0 {
            return Err("--nodes must be at least 2 and --clients at least 1".into());
        }
        let needs_standalone = a
            .scenarios
            .iter()
            .any(|s| matches!(s, Scenario::RedisRestart | Scenario::Partition));
        if needs_standalone && a.redis != RedisTopology::Standalone {
            return Err("redis-restart and partition need --redis standalone".into());
        }
        let primary_kill = a.scenarios.contains(&Scenario::PrimaryKill);
        if primary_kill && a.redis == RedisTopology::Standalone {
            return Err("primary-kill needs --redis sentinel or cluster".into());
        }
        if a.min_replicas_acked > 0 && a.redis == RedisTopology::Standalone {
            return Err("--min-replicas-acked needs --redis sentinel or cluster".into());
        }
        Ok(a)
    }

    fn set(&mut self, flag: &str, value: &str) -> Result<(), String> {
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag {
            "--scenario" => self.scenarios = Scenario::parse(value)?,
            "--nodes" => self.nodes = num(value)? as usize,
            "--clients" => self.clients = num(value)? as usize,
            "--duration-secs" => self.duration = Duration::from_secs(num(value)?),
            "--fault-every-ms" => self.fault_every = Duration::from_millis(num(value)?),
            "--restart-after-ms" => self.restart_after = Duration::from_millis(num(value)?),
            "--partition-secs" => self.partition = Duration::from_secs(num(value)?),
            "--node-ttl-ms" => self.node_ttl_ms = num(value)?,
            "--redis" => self.redis = RedisTopology::parse(value)?,
            "--switchboard-bin" => self.switchboard_bin = Some(PathBuf::from(value)),
            "--out" => self.out = Some(PathBuf::from(value)),
            "--logs" => self.logs = Some(PathBuf::from(value)),
            "--seed" => self.seed = num(value)?,
            "--min-replicas-acked" => self.min_replicas_acked = num(value)?,
            "--lb-health" => {
                self.lb_health = match value {
                    "tcp" => None,
                    "readyz" => Some("/readyz".into()),
                    other => return Err(format!("--lb-health {other}: tcp or readyz")),
                }
            }
            other => return Err(format!("unknown flag {other}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        Args::parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn parses_the_documented_command() {
        let a = parse("--scenario kill9 --nodes 3 --clients 8 --duration-secs 60 --check").unwrap();
        assert_eq!(a.scenarios, vec![Scenario::Kill9]);
        assert_eq!((a.nodes, a.clients), (3, 8));
        assert_eq!(a.duration, Duration::from_secs(60));
        assert!(a.check);
        assert_eq!(a.lb_health, None);
        let a = parse("--lb-health readyz").unwrap();
        assert_eq!(a.lb_health.as_deref(), Some("/readyz"));
        assert_eq!(parse("--scenario all").unwrap().scenarios.len(), 4);
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        assert!(parse("--scenario nope").is_err());
        assert!(parse("--redis sentinels").is_err());
        assert_eq!(
            parse("--redis cluster").unwrap().redis,
            RedisTopology::Cluster
        );
        assert!(parse("--nodes 1").is_err());
        assert!(parse("--clients").is_err());
        assert!(parse("--scenario primary-kill").is_err());
        assert!(parse("--min-replicas-acked 1").is_err());
    }

    #[test]
    fn primary_kill_runs_on_sentinel_and_cluster() {
        let a = parse("--scenario primary-kill --redis sentinel --min-replicas-acked 1").unwrap();
        assert_eq!(a.scenarios, vec![Scenario::PrimaryKill]);
        assert_eq!(a.min_replicas_acked, 1);
        let a = parse("--scenario primary-kill --redis cluster").unwrap();
        assert_eq!((a.redis, a.min_replicas_acked), (RedisTopology::Cluster, 0));
    }
}
