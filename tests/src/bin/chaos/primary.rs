//! The `primary-kill` fault: a Redis primary killed with SIGKILL under Sentinel or Cluster, its
//! replica's promotion awaited, the killed process restarted and awaited until it replicates the
//! new primary (so the next fault again finds a primary with all its replicas).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use switchboard_tests::cluster::Cluster;
use switchboard_tests::redis_backend::RedisBackend;
use switchboard_tests::redis_cluster::RedisCluster;
use switchboard_tests::redis_sentinel::SentinelGroup;

/// How long a promotion may take after the kill (the fixtures' failovers take about 2-3 s).
const PROMOTION_LIMIT: Duration = Duration::from_secs(20);

/// How long the restarted former primary may take to replicate the new one (Sentinel needs
/// about 8-11 s to turn it into a replica; Cluster about 1-2 s).
const REJOIN_LIMIT: Duration = Duration::from_secs(40);

/// Kills the primary of fault `round` and waits for its replacement and its rejoining. Sentinel:
/// the group's primary. Cluster: the primary serving the session key `sb:{<sid>}:s` of the
/// `round`-th session in Redis (sessions in turn; a primary in turn when none is there yet).
/// Returns when the promotion was seen (also when the rejoining then failed), or `None`; the
/// problems go to `notes`.
pub fn kill_primary(
    cluster: &mut Cluster,
    round: usize,
    notes: &mut Vec<String>,
) -> Option<Instant> {
    let sessions = cluster.session_ids_in_redis();
    let (promoted, rejoined) = match cluster.backend_mut() {
        RedisBackend::Sentinel(group) => sentinel_round(group),
        RedisBackend::Cluster(redis) => cluster_round(redis, &sessions, round),
        RedisBackend::Standalone(_) => {
            (Err("primary-kill needs Sentinel or Cluster".into()), Ok(()))
        }
    };
    for e in [promoted.as_ref().err(), rejoined.as_ref().err()]
        .into_iter()
        .flatten()
    {
        notes.push(format!("primary-kill round {round}: {e}"));
    }
    promoted.ok()
}

/// One Sentinel fault: the promotion (when it was seen), then the rejoining. The sentinels may
/// name a second replica shortly after the first promotion (see `switchboard-store`'s
/// `sentinel.rs`), so the rejoining waits for whichever primary they name, asking up to 3 times.
fn sentinel_round(group: &mut SentinelGroup) -> (Result<Instant, String>, Result<(), String>) {
    let promoted = caught(|| {
        let old = group.primary_port();
        say(format!("kill -9 redis primary :{old} (sentinel)"));
        let killed_at = Instant::now();
        group.kill(old);
        let (new, took) = group.wait_promotion(old, PROMOTION_LIMIT);
        say(format!(
            "redis :{new} promoted {} ms after the kill",
            took.as_millis()
        ));
        group.restart(old);
        say(format!(
            "redis :{old} restarted (empty; a primary until the sentinels demote it)"
        ));
        (old, killed_at + took)
    });
    let Ok((old, at)) = promoted else {
        return (promoted.map(|(_, at)| at), Ok(()));
    };
    let mut rejoined = Err(String::new());
    for _ in 0..3 {
        rejoined = caught(|| {
            let new = group.primary_port();
            let took = group.wait_replica_of(old, new, REJOIN_LIMIT / 3);
            say(format!(
                "redis :{old} a replica of :{new} after {} ms",
                took.as_millis()
            ));
        });
        if rejoined.is_ok() {
            break;
        }
    }
    (Ok(at), rejoined)
}

/// One Cluster fault: the promotion (when it was seen), then the rejoining.
fn cluster_round(
    redis: &mut RedisCluster,
    sessions: &[String],
    round: usize,
) -> (Result<Instant, String>, Result<(), String>) {
    let promoted = caught(|| {
        let old = match sessions.get(round % sessions.len().max(1)) {
            Some(sid) => redis.primary_serving(&format!("sb:{{{sid}}}:s")),
            None => {
                let primaries = redis.primaries();
                primaries[round % primaries.len()]
            }
        };
        say(format!("kill -9 redis primary :{old} (cluster)"));
        let killed_at = Instant::now();
        redis.kill(old);
        let (new, took) = redis.wait_failover(old, PROMOTION_LIMIT);
        say(format!(
            "redis :{new} promoted {} ms after the kill",
            took.as_millis()
        ));
        redis.restart(old);
        say(format!("redis :{old} restarted"));
        (old, killed_at + took)
    });
    let Ok((old, at)) = promoted else {
        return (promoted.map(|(_, at)| at), Ok(()));
    };
    let rejoined = caught(|| {
        let (_, took) = redis.wait_rejoined(old, REJOIN_LIMIT);
        say(format!(
            "redis :{old} a replica again after {} ms",
            took.as_millis()
        ));
    });
    (Ok(at), rejoined)
}

/// Runs `f`, turning a panic of the fixtures (a wait that hit its limit) into its message.
pub fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic".to_owned())
    })
}

/// Prints `msg` on stderr with the wall-clock time (seconds since the Unix epoch, ms), to line
/// the schedule up with the node logs.
pub fn say(msg: String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    eprintln!("chaos: {}.{:03} {msg}", now.as_secs(), now.subsec_millis());
}
