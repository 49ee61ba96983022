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
    /// The slot of a busy session's channel `sb:{<sid>}:bus` or of a node inbox
    /// `sb:inbox:{<node id>}` (in turn) moved by hand to another primary, under load. Needs
    /// `--redis cluster`.
    SlotMove,
    /// A graceful failover, nothing killed: `CLUSTER FAILOVER` sent to a replica (Cluster) or
    /// `SENTINEL FAILOVER` (Sentinel), awaited until the old primary replicates the new one.
    /// Needs `--redis sentinel|cluster`.
    GracefulFailover,
    /// A fourth shard added (a primary and its replica on free ports), slots rebalanced onto it
    /// under load, then resharded off and the shard removed again. Needs `--redis cluster`.
    ScaleOut,
    /// The nodes' pub/sub connections killed and their reconnection held off for
    /// `--restart-after` (`maxclients`). Needs `--redis standalone`.
    BusDrop,
    /// Redis with a small `maxmemory`, an evicting policy and non-expiring ballast: a node
    /// without `redis.allow_eviction` must refuse to start; the nodes run with it while each
    /// fault fills Redis to its limit for `--restart-after`. Needs `--redis standalone`.
    Eviction,
    /// A rolling upgrade: the nodes start as the previous release (`--previous-bin`), then, as in
    /// `rolling`, one at a time drains (SIGTERM) and starts again, as this build.
    Upgrade,
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
            Scenario::SlotMove => "slot-move",
            Scenario::GracefulFailover => "graceful-failover",
            Scenario::ScaleOut => "scale-out",
            Scenario::BusDrop => "bus-drop",
            Scenario::Eviction => "eviction",
            Scenario::Upgrade => "upgrade",
        }
    }

    /// The scenarios of issue 32 (the operations managed Redis performs, and a rolling
    /// upgrade): no node is stopped but by a drain, and the extended targets hold (see
    /// `report::Row::misses`).
    pub fn is_managed_op(self) -> bool {
        matches!(
            self,
            Scenario::SlotMove
                | Scenario::GracefulFailover
                | Scenario::ScaleOut
                | Scenario::BusDrop
                | Scenario::Eviction
                | Scenario::Upgrade
        )
    }

    /// The scenarios only named ones run (not part of `all`).
    const NAMED: [Scenario; 7] = [
        Scenario::PrimaryKill,
        Scenario::SlotMove,
        Scenario::GracefulFailover,
        Scenario::ScaleOut,
        Scenario::BusDrop,
        Scenario::Eviction,
        Scenario::Upgrade,
    ];

    /// The topologies it runs on (`None`: every one).
    fn needs(self) -> Option<&'static [RedisTopology]> {
        use RedisTopology::*;
        match self {
            Scenario::Kill9 | Scenario::Rolling | Scenario::Upgrade => None,
            Scenario::RedisRestart
            | Scenario::Partition
            | Scenario::BusDrop
            | Scenario::Eviction => Some(&[Standalone]),
            Scenario::PrimaryKill | Scenario::GracefulFailover => Some(&[Sentinel, Cluster]),
            Scenario::SlotMove | Scenario::ScaleOut => Some(&[Cluster]),
        }
    }

    fn parse(s: &str) -> Result<Vec<Scenario>, String> {
        if s == "all" {
            return Ok(Scenario::ALL.to_vec());
        }
        Scenario::ALL
            .into_iter()
            .chain(Scenario::NAMED)
            .find(|sc| sc.name() == s)
            .map(|sc| vec![sc])
            .ok_or_else(|| {
                format!(
                    "unknown scenario `{s}` (kill9, rolling, redis-restart, partition, \
                     primary-kill, slot-move, graceful-failover, scale-out, bus-drop, eviction, \
                     upgrade, all)"
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
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RedisTopology::Standalone => "standalone",
            RedisTopology::Sentinel => "sentinel",
            RedisTopology::Cluster => "cluster",
        }
    }

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
    /// The previous release's node binary (`--previous-bin`), which `upgrade` starts from.
    pub previous_bin: Option<PathBuf>,
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
    /// What each client does besides `notify` and `countdown` (`--workload`; default: `full`).
    pub workload: Workload,
    /// `eviction`: Redis's `maxmemory` in MiB (`--maxmemory-mb`, default 32).
    pub maxmemory_mb: u64,
    /// `eviction`: Redis's `maxmemory-policy` (`--eviction-policy`, default `volatile-ttl`).
    pub eviction_policy: String,
    /// `scale-out`: how many slots the new shard takes (`--scale-slots N`, resharded from every
    /// primary); `None` (the default, or 0): its even share (`--cluster rebalance`).
    pub scale_slots: Option<usize>,
}

/// What the clients do (`--workload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Only the event streams: one `notify` and one `countdown` at a time (issue 14).
    Events,
    /// Besides those, each round also a `sample` call answered through the balancer, every
    /// third `countdown` cancelled through the balancer, and a call of the session's stdio
    /// upstream (pinned to one node, so usually forwarded there).
    Full,
}

const USAGE: &str = "usage: chaos [--scenario kill9|rolling|redis-restart|partition|primary-kill|slot-move|\
graceful-failover|scale-out|bus-drop|eviction|upgrade|all] [--previous-bin PATH] \
[--nodes 3] [--clients 8] [--duration-secs 60] [--fault-every-ms 4000] [--restart-after-ms 1000] \
[--partition-secs 10] \
[--node-ttl-ms 1500] [--redis standalone|sentinel|cluster] [--switchboard-bin PATH] [--out FILE] [--logs DIR] \
[--lb-health tcp|readyz] [--min-replicas-acked N] [--workload events|full] [--maxmemory-mb 32] \
[--eviction-policy volatile-ttl] [--scale-slots N] [--check] [--seed N]";

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
            previous_bin: None,
            out: None,
            logs: None,
            lb_health: None,
            check: false,
            seed: 1,
            min_replicas_acked: 0,
            workload: Workload::Full,
            maxmemory_mb: 32,
            eviction_policy: "volatile-ttl".into(),
            scale_slots: None,
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
        for scenario in &a.scenarios {
            if let Some(topologies) = scenario.needs() {
                if !topologies.contains(&a.redis) {
                    let names: Vec<&str> = topologies.iter().map(|t| t.name()).collect();
                    return Err(format!(
                        "{} needs --redis {}",
                        scenario.name(),
                        names.join(" or ")
                    ));
                }
            }
        }
        if a.min_replicas_acked > 0 && a.redis == RedisTopology::Standalone {
            return Err("--min-replicas-acked needs --redis sentinel or cluster".into());
        }
        if a.scenarios.contains(&Scenario::Upgrade) && a.previous_bin.is_none() {
            return Err(
                "--scenario upgrade needs --previous-bin (the release to roll from)".into(),
            );
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
            "--previous-bin" => self.previous_bin = Some(PathBuf::from(value)),
            "--out" => self.out = Some(PathBuf::from(value)),
            "--logs" => self.logs = Some(PathBuf::from(value)),
            "--seed" => self.seed = num(value)?,
            "--min-replicas-acked" => self.min_replicas_acked = num(value)?,
            "--maxmemory-mb" => self.maxmemory_mb = num(value)?,
            "--eviction-policy" => self.eviction_policy = value.to_owned(),
            "--scale-slots" => {
                self.scale_slots = Some(num(value)? as usize).filter(|&n| n > 0);
            }
            "--workload" => {
                self.workload = match value {
                    "events" => Workload::Events,
                    "full" => Workload::Full,
                    other => return Err(format!("--workload {other}: events or full")),
                }
            }
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

    #[test]
    fn the_managed_redis_operations_run_where_they_can() {
        assert!(parse("--scenario slot-move").is_err());
        assert!(parse("--scenario slot-move --redis cluster").is_ok());
        assert!(parse("--scenario scale-out --redis sentinel").is_err());
        assert!(parse("--scenario graceful-failover --redis sentinel").is_ok());
        assert!(parse("--scenario graceful-failover --redis cluster").is_ok());
        assert!(parse("--scenario bus-drop").is_ok());
        assert!(parse("--scenario eviction --redis cluster").is_err());
        let a = parse("--scenario eviction --maxmemory-mb 16 --workload events").unwrap();
        assert_eq!((a.maxmemory_mb, a.workload), (16, Workload::Events));
        assert!(Scenario::Eviction.is_managed_op() && !Scenario::Kill9.is_managed_op());
    }
}
