//! The operations managed Redis performs on a running deployment (issue 32), one per fault:
//! a slot moved between Cluster primaries (`slot-move`), a graceful failover (`graceful-failover`),
//! a shard added and removed again (`scale-out`), the nodes' pub/sub connections dropped and held
//! off (`bus-drop`). Nothing here stops a switchboard node. Each fault's problems go to `notes`
//! (they miss the target), what it measured to `facts`.

use std::time::{Duration, Instant};

use switchboard_tests::bus_drop;
use switchboard_tests::cluster::Cluster;
use switchboard_tests::redis_backend::RedisBackend;
use switchboard_tests::redis_cluster::reshape::SlotMove;
use switchboard_tests::redis_cluster::RedisCluster;

use crate::primary::{caught, say};

/// How long a graceful failover may take, promotion and demotion of the old primary included
/// (Sentinel demotes it a few seconds after the switch).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// What the faults of one scenario noted and measured.
#[derive(Default)]
pub struct Outcome {
    /// Problems of the schedule: each misses the target.
    pub notes: Vec<String>,
    /// What the schedule measured (durations, counts), printed after the table.
    pub facts: Vec<String>,
}

/// The channels whose slots `slot-move` and `scale-out` move: each busy session's
/// `sb:{<sid>}:bus` (the sessions in Redis; every key of the session shares its slot) and each
/// node inbox `sb:inbox:{<node id>}` (the ids of the `sb:node:*` heartbeat keys; the node's
/// mailbox shares its slot).
fn busy_channels(cluster: &Cluster) -> (Vec<String>, Vec<String>) {
    let sessions = cluster
        .session_ids_in_redis()
        .into_iter()
        .map(|sid| format!("sb:{{{sid}}}:bus"))
        .collect();
    let inboxes = cluster
        .backend()
        .keys_matching("sb:node:*")
        .into_iter()
        .filter_map(|k| {
            k.strip_prefix("sb:node:")
                .map(|id| format!("sb:inbox:{{{id}}}"))
        })
        .collect();
    (sessions, inboxes)
}

/// `slot-move`, fault `round`: even rounds move the slot of a busy session's channel, odd rounds
/// the slot of a node inbox (each in turn, see [`busy_channels`]), to the next primary after
/// its owner.
pub fn slot_move(cluster: &Cluster, round: usize, out: &mut Outcome) {
    let (sessions, inboxes) = busy_channels(cluster);
    let pool = if round.is_multiple_of(2) {
        &sessions
    } else {
        &inboxes
    };
    let Some(channel) = pick(pool, round / 2) else {
        out.notes
            .push(format!("slot-move round {round}: no busy channel in Redis"));
        return;
    };
    let RedisBackend::Cluster(redis) = cluster.backend() else {
        out.notes.push("slot-move needs Redis Cluster".into());
        return;
    };
    let to = |from| next_primary(redis, from);
    if let Err(e) = move_channel(redis, channel, to, out) {
        out.notes
            .push(format!("slot-move round {round} ({channel}): {e}"));
    }
}

/// Moves the slot of `channel` from its owner to `to(owner)` (nothing when that is the
/// owner), noting what it did in `out.facts`.
fn move_channel(
    redis: &RedisCluster,
    channel: &str,
    to: impl Fn(u16) -> u16,
    out: &mut Outcome,
) -> Result<(), String> {
    let moved = caught(|| {
        let slot = redis.keyslot(channel);
        let to = to(redis.slot_owner(slot));
        if to == redis.slot_owner(slot) {
            return None;
        }
        let started = Instant::now();
        let moved = redis.move_slot(slot, to);
        let took = started.elapsed();
        // The next move (or redis-cli) needs every node to know this one.
        redis.wait_slot_agreed(&moved);
        Some((moved, took))
    });
    if let Some((moved, took)) = moved? {
        let SlotMove {
            slot,
            from,
            to,
            keys,
            ..
        } = moved;
        let ms = took.as_millis();
        say(format!(
            "slot {slot} of {channel} moved :{from} -> :{to}, {keys} keys, {ms} ms"
        ));
        out.facts.push(format!(
            "slot {slot} ({channel}) :{from} -> :{to}: {keys} keys in {ms} ms"
        ));
    }
    Ok(())
}

/// The element `i` of `items`, cyclically; `None` when empty.
fn pick(items: &[String], i: usize) -> Option<&String> {
    (!items.is_empty()).then(|| &items[i % items.len()])
}

/// The primary after `port` in the sorted list of primaries (cyclically).
fn next_primary(redis: &RedisCluster, port: u16) -> u16 {
    let primaries = redis.primaries();
    let at = primaries.iter().position(|&p| p == port).unwrap_or(0);
    primaries[(at + 1) % primaries.len()]
}

/// `graceful-failover`, fault `round`. Cluster: `CLUSTER FAILOVER` sent to a replica of the
/// primary serving the session key `sb:{<sid>}:s` of the `round`-th session (a primary in turn
/// when none is there yet). Sentinel: `SENTINEL FAILOVER`. Each waits until the old primary
/// replicates the new one.
pub fn graceful_failover(cluster: &mut Cluster, round: usize, out: &mut Outcome) {
    let sessions = cluster.session_ids_in_redis();
    let done = match cluster.backend_mut() {
        RedisBackend::Cluster(redis) => caught(|| {
            let primary = match pick(&sessions, round) {
                Some(sid) => redis.primary_serving(&format!("sb:{{{sid}}}:s")),
                None => {
                    let primaries = redis.primaries();
                    primaries[round % primaries.len()]
                }
            };
            let handover = redis.graceful_failover(primary, FAILOVER_LIMIT);
            (handover.old, handover.new, handover.took)
        }),
        RedisBackend::Sentinel(group) => caught(|| {
            let switch = group.graceful_failover(FAILOVER_LIMIT);
            // The sentinels demote the old primary a few seconds after the switch; the next
            // failover needs it as a replica.
            group.wait_replica_of(switch.old, switch.new, FAILOVER_LIMIT);
            (switch.old, switch.new, switch.took)
        }),
        RedisBackend::Standalone(_) => Err("graceful-failover needs Sentinel or Cluster".into()),
    };
    match done {
        Ok((old, new, took)) => {
            let ms = took.as_millis();
            say(format!(
                "redis :{new} took over from :{old} gracefully in {ms} ms"
            ));
            out.facts.push(format!(
                ":{old} -> :{new}: promoted {ms} ms after the command"
            ));
        }
        Err(e) => out
            .notes
            .push(format!("graceful-failover round {round}: {e}")),
    }
}

/// `scale-out`: a fourth shard added and given slots (`slots`: that many, resharded from every
/// primary; `None`: its even share, rebalanced), the slots of every busy channel moved onto it
/// too (so each fault moves every session's and inbox's slot), then its slots resharded off
/// and the shard removed again.
pub fn scale_out(cluster: &mut Cluster, slots: Option<usize>, round: usize, out: &mut Outcome) {
    let (sessions, inboxes) = busy_channels(cluster);
    let RedisBackend::Cluster(redis) = cluster.backend_mut() else {
        out.notes.push("scale-out needs Redis Cluster".into());
        return;
    };
    let (port, rebalance) = match caught(|| redis.add_shard(slots)) {
        Ok(added) => added,
        Err(e) => {
            out.notes.push(format!("scale-out round {round}: add: {e}"));
            return;
        }
    };
    say(format!(
        "shard :{port} added, {} ms to give it slots",
        rebalance.as_millis()
    ));
    let mut facts = Outcome::default();
    for channel in sessions.iter().chain(&inboxes) {
        if let Err(e) = move_channel(redis, channel, |_| port, &mut facts) {
            out.notes.push(format!(
                "scale-out round {round}: {channel} onto :{port}: {e}"
            ));
        }
    }
    match caught(|| redis.remove_shard(port)) {
        Ok(reshard) => {
            say(format!(
                "shard :{port} resharded off in {} ms and removed",
                reshard.as_millis()
            ));
            out.facts.push(format!(
                "shard :{port}: {} ms to give it slots, {} busy slots moved onto it, {} ms to \
                 reshard them all off, removed",
                rebalance.as_millis(),
                facts.facts.len(),
                reshard.as_millis()
            ));
        }
        Err(e) => out
            .notes
            .push(format!("scale-out round {round}: remove :{port}: {e}")),
    }
}

/// `bus-drop`: every pub/sub connection of the standalone Redis killed and new connections
/// refused for `hold` (`maxclients`, see `switchboard_tests::bus_drop`), then let in again.
pub fn bus_drop(cluster: &Cluster, hold: Duration, out: &mut Outcome) {
    let RedisBackend::Standalone(redis) = cluster.backend() else {
        out.notes.push("bus-drop needs a standalone Redis".into());
        return;
    };
    let port = redis.port();
    match caught(|| bus_drop::hold_off(port, None)) {
        Ok((held, killed)) => {
            say(format!("{killed} pub/sub connections killed, held off"));
            std::thread::sleep(hold);
            held.release();
            if killed < cluster.len() as i64 {
                out.notes.push(format!(
                    "bus-drop killed {killed} pub/sub connections, fewer than the {} nodes",
                    cluster.len()
                ));
            }
            out.facts
                .push(format!("{killed} pub/sub connections killed"));
        }
        Err(e) => out.notes.push(format!("bus-drop: {e}")),
    }
}
