//! The processes of one scenario, all through the harness: a Redis, the nodes (`a`, `b`, …) with
//! fast liveness settings, and HAProxy round robin in front (health checks every 100 ms, a TCP
//! connect or `GET /readyz`, and redispatch). Dropping the rig stops every process by PID. The fault schedules run here, on a
//! blocking thread: sleeping between faults is their schedule.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use switchboard_tests::balancer::{Balancer, BalancerOptions};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::netns::{self, Netns};
use switchboard_tests::redis_backend::{RedisBackend, RedisKind};
use switchboard_tests::redis_server::{Persistence, RedisServer};
use switchboard_tests::temp::TempDir;
use switchboard_tests::upstreams::{config_file_toml, stdio_fixture, Upstream};

use crate::args::{Args, RedisTopology, Scenario, Workload};
use crate::ops::{self, Outcome};
use crate::pressure::{self, Ballast};

/// How long a SIGTERMed node may take to drain and exit (its calls last well under a second).
const EXIT_LIMIT: Duration = Duration::from_secs(40);

/// How long a server-to-client request (the `sample` tool's) waits for its answer: well inside
/// the client's call limit, so a lost answer shows as a call left waiting for it.
const CLIENT_REQUEST_TIMEOUT: &str = "10s";

/// `session.max_events_per_stream`: a 60 s run logs a few thousand events per standalone
/// stream, and the end-of-run check replays them all (the default 1000 would trim them).
const MAX_EVENTS_PER_STREAM: u64 = 100_000;

/// `timeout_ms` of the node-bound upstream `fx`: a forwarded call lost shows as -32005.
const FORWARD_TIMEOUT_MS: u64 = 10_000;

/// A running scenario's processes. Fields drop in order: HAProxy, the cluster, then the
/// partition's namespace (once no node runs in it), then the nodes' config file.
pub struct Rig {
    balancer: Balancer,
    cluster: Cluster,
    netns: Option<Netns>,
    /// When each promotion after a `primary-kill` fault was seen (recovery is measured from it).
    promotions: Vec<Instant>,
    /// The `eviction` scenario's ballast writer.
    ballast: Option<Ballast>,
    /// What the schedule noted (misses) and measured.
    pub outcome: Outcome,
    _config: TempDir,
}

/// The nodes' config file: the demo server (tools unprefixed: `notify`, `countdown`, `sample`)
/// and, with the full workload, the stdio fixture as `fx` (one child per session, node-bound:
/// `fx__slow`).
fn upstream_config(workload: Workload) -> TempDir {
    let dir = TempDir::new("sb-chaos-config");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let mut upstreams = vec![Upstream::demo("demo").prefix("")];
    if workload == Workload::Full {
        upstreams.push(
            Upstream::stdio("fx", &python, &[fixture.as_str()])
                .set("timeout_ms", FORWARD_TIMEOUT_MS),
        );
    }
    let path = dir.path().join("switchboard.toml");
    std::fs::write(&path, config_file_toml(&upstreams)).expect("write switchboard.toml");
    dir
}

/// The faults injected so far: when each began (the clients' recovery is measured from it).
pub type FaultLog = Mutex<Vec<Instant>>;

/// Starts the Redis of `topology` (AOF only for a standalone server); Sentinel and Cluster
/// primaries get `replicas` replicas each.
fn start_redis(topology: RedisTopology, persistence: Persistence, replicas: usize) -> RedisBackend {
    match topology {
        RedisTopology::Standalone => RedisBackend::Standalone(RedisServer::start_with(persistence)),
        RedisTopology::Sentinel => RedisBackend::start_with_replicas(RedisKind::Sentinel, replicas),
        RedisTopology::Cluster => RedisBackend::start_with_replicas(RedisKind::Cluster, replicas),
    }
}

impl Rig {
    /// Starts the processes for `scenario` and waits until every node and HAProxy answer.
    /// redis-restart runs Redis with AOF (`appendfsync always`).
    pub fn start(args: &Args, scenario: Scenario) -> Result<Rig, String> {
        let persistence = if scenario == Scenario::RedisRestart {
            Persistence::AofAlways
        } else {
            Persistence::None
        };
        // With min_replicas_acked a promoted primary must keep a replica to confirm writes.
        let replicas = if args.min_replicas_acked > 0 { 2 } else { 1 };
        let mut outcome = Outcome::default();
        let redis = if scenario == Scenario::Eviction {
            let redis = pressure::start_redis(args);
            pressure::check_refusal(&redis, args, &mut outcome);
            RedisBackend::Standalone(redis)
        } else {
            start_redis(args.redis, persistence, replicas)
        };
        let config = upstream_config(args.workload);
        let mut options = ClusterOptions::new()
            .fast_liveness(args.node_ttl_ms)
            .set("session.client_request_timeout", CLIENT_REQUEST_TIMEOUT)
            // The end-of-run log check replays each standalone stream from its start.
            .set("session.max_events_per_stream", MAX_EVENTS_PER_STREAM)
            .config_file(&config.path().join("switchboard.toml"));
        if args.min_replicas_acked > 0 {
            options = options.set("redis.min_replicas_acked", args.min_replicas_acked);
        }
        if scenario == Scenario::Eviction && pressure::evicting(args) {
            options = options.set("redis.allow_eviction", true);
        }
        if let (Scenario::Upgrade, Some(previous)) = (scenario, &args.previous_bin) {
            options = options.program(previous);
        }
        let (cluster, netns) = if scenario == Scenario::Partition {
            let netns = Netns::create(netns::CHAOS)?;
            let mut cluster = Cluster::start_on(redis, args.nodes - 1, options);
            netns.add_node(&mut cluster)?;
            (cluster, Some(netns))
        } else {
            (Cluster::start_on(redis, args.nodes, options), None)
        };
        // An upgrade starts every node as the previous release; each restart is this build.
        let mut cluster = cluster;
        cluster.set_program_for_new_nodes(None);
        let backends: Vec<String> = (0..cluster.len()).map(|i| cluster.node(i).addr()).collect();
        let lb = BalancerOptions {
            redispatch: true,
            health_path: args.lb_health.clone(),
            ..BalancerOptions::default()
        };
        let balancer = Balancer::start_with(&backends, &lb);
        let ballast = if scenario == Scenario::Eviction {
            let redis = cluster.redis();
            Some(Ballast::fill(redis, args, cluster.len())?)
        } else {
            None
        };
        Ok(Rig {
            balancer,
            cluster,
            netns,
            promotions: Vec::new(),
            ballast,
            outcome,
            _config: config,
        })
    }

    /// When each promotion after a `primary-kill` fault was seen, in order.
    pub fn promotions(&self) -> &[Instant] {
        &self.promotions
    }

    /// The balancer's MCP endpoint, where every client goes.
    pub fn url(&self) -> String {
        self.balancer.url()
    }

    /// Copies every node log into `dir` (created).
    pub fn keep_logs(&self, dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for entry in std::fs::read_dir(self.cluster.log_dir())? {
            let entry = entry?;
            std::fs::copy(entry.path(), dir.join(entry.file_name()))?;
        }
        Ok(())
    }

    /// Runs the fault schedule of `scenario` until `until`, logging each fault's start in
    /// `faults`; the schedule's own problems and measurements go to [`Rig::outcome`].
    pub fn inject(&mut self, args: &Args, scenario: Scenario, until: Instant, faults: &FaultLog) {
        let mut rng = args.seed.max(1);
        let mut round = 0;
        // Each fault must be over (the process back) before the clients stop.
        let lasts = match scenario {
            Scenario::Partition => args.partition,
            // The promotion (about 2-3 s) and time for calls after it; the rejoin wait may run
            // past the end of the run (the clients then just run longer).
            Scenario::PrimaryKill => Duration::from_secs(5),
            Scenario::GracefulFailover => Duration::from_secs(5),
            // Adding, rebalancing, resharding off and removing a shard.
            Scenario::ScaleOut => Duration::from_secs(12),
            Scenario::SlotMove => Duration::from_secs(1),
            _ => args.restart_after,
        };
        let room = lasts + Duration::from_secs(3);
        loop {
            std::thread::sleep(args.fault_every);
            if Instant::now() + room >= until {
                break;
            }
            faults.lock().expect("fault log").push(Instant::now());
            self.fault(args, scenario, round, &mut rng);
            round += 1;
        }
        if let Some(ballast) = &mut self.ballast {
            ballast.clear(&mut self.outcome);
        }
    }

    /// Injects fault `round` of `scenario`.
    fn fault(&mut self, args: &Args, scenario: Scenario, round: usize, rng: &mut u64) {
        let out = &mut self.outcome;
        match scenario {
            Scenario::Kill9 => self.kill9(next(rng) as usize % self.cluster.len(), args),
            Scenario::Rolling | Scenario::Upgrade => self.roll(round % self.cluster.len()),
            Scenario::RedisRestart => self.restart_redis(args),
            Scenario::Partition => self.partition(args),
            Scenario::PrimaryKill => {
                let promoted =
                    crate::primary::kill_primary(&mut self.cluster, round, &mut out.notes);
                self.promotions.extend(promoted);
            }
            Scenario::SlotMove => ops::slot_move(&self.cluster, round, out),
            Scenario::GracefulFailover => ops::graceful_failover(&mut self.cluster, round, out),
            Scenario::ScaleOut => ops::scale_out(&mut self.cluster, args.scale_slots, round, out),
            Scenario::BusDrop => ops::bus_drop(&self.cluster, args.restart_after, out),
            Scenario::Eviction => match &mut self.ballast {
                Some(ballast) => ballast.pressure(args.restart_after, out),
                None => out.notes.push("eviction without ballast".into()),
            },
        }
    }

    fn kill9(&mut self, victim: usize, args: &Args) {
        eprintln!("chaos: kill -9 node {}", self.cluster.node(victim).id());
        self.cluster.kill9(victim);
        std::thread::sleep(args.restart_after);
        self.cluster.restart(victim);
    }

    fn roll(&mut self, victim: usize) {
        let notes = &mut self.outcome.notes;
        let id = self.cluster.node(victim).id().to_owned();
        eprintln!("chaos: SIGTERM node {id}");
        self.cluster.node(victim).terminate();
        let code = self.cluster.node_mut(victim).wait_exit(EXIT_LIMIT);
        if code != Some(0) {
            notes.push(format!("node {id} exited with {code:?} after SIGTERM"));
            self.cluster.kill9(victim);
        }
        self.cluster.restart(victim);
    }

    fn restart_redis(&mut self, args: &Args) {
        eprintln!("chaos: kill -9 redis");
        let notes = &mut self.outcome.notes;
        let RedisBackend::Standalone(redis) = self.cluster.backend_mut() else {
            notes.push("redis-restart needs a standalone Redis".into());
            return;
        };
        redis.kill9();
        std::thread::sleep(args.restart_after);
        if !redis.restart() {
            notes.push("redis did not come back within 10 s".into());
        }
    }
}

impl Rig {
    /// Cuts the last node's Redis link for `--partition-secs`, checking that the node says it is
    /// not ready (`/readyz` 503) within `cluster.node_ttl` + 2 s of the cut, then restores it and
    /// waits (at most 10 s) until the node is ready again.
    fn partition(&mut self, args: &Args) {
        let notes = &mut self.outcome.notes;
        let Some(netns) = &self.netns else { return };
        let last = self.cluster.len() - 1;
        let node = self.cluster.node(last);
        eprintln!("chaos: cutting node {} off Redis", node.id());
        let cut_at = Instant::now();
        if let Err(e) = netns.set_redis_link(false) {
            notes.push(e);
            return;
        }
        let unready_by = cut_at + Duration::from_millis(args.node_ttl_ms) + Duration::from_secs(2);
        let unready = wait_status(node, 503, unready_by);
        if !unready {
            notes.push(format!("node {} still ready after the cut", node.id()));
        }
        std::thread::sleep((cut_at + args.partition).saturating_duration_since(Instant::now()));
        if let Err(e) = netns.set_redis_link(true) {
            notes.push(e);
        }
        eprintln!("chaos: node {} back on Redis", node.id());
        if !wait_status(node, 200, Instant::now() + Duration::from_secs(10)) {
            notes.push(format!(
                "node {} not ready 10 s after the link came back",
                node.id()
            ));
        }
    }
}

/// Polls `GET /readyz` of `node` every 100 ms until it answers `status` or `deadline` passes.
fn wait_status(node: &switchboard_tests::node::Node, status: u16, deadline: Instant) -> bool {
    while Instant::now() < deadline {
        if node.get_status("/readyz") == Some(status) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// xorshift64: the victim choice, reproducible from `--seed`.
fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}
