//! What managed Redis does to a running cluster without killing anything (case C36): one hash
//! slot moved between primaries by hand, as resharding moves each slot (`SETSLOT IMPORTING` on
//! the target, `MIGRATING` on the source, `MIGRATE` of its keys, `SETSLOT NODE` on every
//! primary), and a graceful `CLUSTER FAILOVER` sent to a replica, with bounded waits.
//!
//! Written on branch `chaos` for the chaos suite while the same helpers were planned on branch
//! `cases`: the names (`keyslot`, `slot_owner`, `move_slot`, `failover_gracefully`) are the
//! ones to keep when the two meet.

use std::time::{Duration, Instant};

use super::RedisCluster;
use crate::eventually::eventually_ok;
use crate::redis_process::{is_primary, linked_primary_of};

/// Keys moved per `MIGRATE`.
const MIGRATE_BATCH: usize = 100;

/// `MIGRATE`'s own timeout, in ms.
const MIGRATE_TIMEOUT_MS: &str = "5000";

/// How many rounds of `GETKEYSINSLOT` + `MIGRATE` a move may take (keys keep arriving while
/// clients write; new keys land on the target once the source is `MIGRATING`).
const MIGRATE_ROUNDS: usize = 1000;

impl RedisCluster {
    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of a running node). Panics when none
    /// answers.
    pub fn keyslot(&self, key: &str) -> u16 {
        self.up_ports()
            .into_iter()
            .find_map(|p| self.query_port::<i64>(p, &["CLUSTER", "KEYSLOT", key]).ok())
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or_else(|| panic!("no running node answers CLUSTER KEYSLOT {key}"))
    }

    /// The node id (`CLUSTER MYID`) of the node on `port`. Panics when it does not answer.
    pub fn node_id(&self, port: u16) -> String {
        self.query_port(port, &["CLUSTER", "MYID"])
            .unwrap_or_else(|e| panic!("CLUSTER MYID on redis:{port}: {e}"))
    }

    /// The port of the primary serving `slot`, as `CLUSTER SLOTS` of a running node says.
    /// Panics when no node answers or none lists the slot.
    pub fn slot_owner(&self, slot: u16) -> u16 {
        self.up_ports()
            .into_iter()
            .find_map(|p| {
                let ranges: Vec<redis::Value> = self.query_port(p, &["CLUSTER", "SLOTS"]).ok()?;
                owner_in(&ranges, slot)
            })
            .unwrap_or_else(|| panic!("no node names the owner of slot {slot}"))
    }

    /// Moves `slot` to the primary on `to`, under whatever load the cluster carries: `CLUSTER
    /// SETSLOT <slot> IMPORTING <source id>` on `to`, `MIGRATING <to id>` on the source,
    /// `GETKEYSINSLOT` and `MIGRATE … KEYS …` until the source holds none of its keys, then
    /// `SETSLOT <slot> NODE <to id>` on `to`, on the source and on every other primary (the order
    /// the Redis Cluster specification gives). Returns how many keys moved and how long it took.
    /// Does nothing when `to` already serves it.
    ///
    /// # Errors
    /// A command failed (with the node and the reply), or keys kept coming for
    /// [`MIGRATE_ROUNDS`] rounds.
    pub fn move_slot(&self, slot: u16, to: u16) -> Result<(usize, Duration), String> {
        let started = Instant::now();
        let from = self.slot_owner(slot);
        if from == to {
            return Ok((0, started.elapsed()));
        }
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let s = slot.to_string();
        self.admin(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id])?;
        self.admin(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id])?;
        let moved = self.migrate_keys(slot, from, to)?;
        self.admin(to, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id])?;
        self.admin(from, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id])?;
        for other in self.primaries() {
            if other != from && other != to {
                self.admin(other, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id])?;
            }
        }
        Ok((moved, started.elapsed()))
    }

    fn migrate_keys(&self, slot: u16, from: u16, to: u16) -> Result<usize, String> {
        let (s, batch) = (slot.to_string(), MIGRATE_BATCH.to_string());
        let mut moved = 0;
        for _ in 0..MIGRATE_ROUNDS {
            let keys: Vec<String> = self
                .query_port(from, &["CLUSTER", "GETKEYSINSLOT", &s, &batch])
                .map_err(|e| format!("GETKEYSINSLOT {slot} on redis:{from}: {e}"))?;
            if keys.is_empty() {
                return Ok(moved);
            }
            let port = to.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", MIGRATE_TIMEOUT_MS];
            if let Some(password) = self.password() {
                args.extend(["AUTH", password]);
            }
            args.push("KEYS");
            args.extend(keys.iter().map(String::as_str));
            // NOKEY: every key of the batch expired or was deleted meanwhile.
            match self.query_port::<String>(from, &args) {
                Ok(_) => moved += keys.len(),
                Err(e) if e.to_string().contains("NOKEY") => {}
                Err(e) => return Err(format!("MIGRATE of slot {slot} on redis:{from}: {e}")),
            }
        }
        Err(format!(
            "slot {slot}: keys still on redis:{from} after {MIGRATE_ROUNDS} rounds"
        ))
    }

    fn admin(&self, port: u16, args: &[&str]) -> Result<(), String> {
        self.query_port::<()>(port, args)
            .map_err(|e| format!("{} on redis:{port}: {e}", args.join(" ")))
    }

    /// A graceful failover of the shard whose primary is on `primary`: `CLUSTER FAILOVER` (no
    /// `FORCE`: the replica catches up with its paused primary first, so no acknowledged write
    /// is lost) sent to its first replica, then a wait (at most `limit`) until that replica
    /// answers `ROLE` as `master`, the old primary replicates it with its link up, and every
    /// running node says `cluster_state:ok`. Nothing is killed. Returns the new primary's port
    /// and how long it took from the command.
    ///
    /// Panics when `primary` has no replica, the command is refused, or at the limit.
    pub fn failover_gracefully(&self, primary: u16, limit: Duration) -> (u16, Duration) {
        let started = Instant::now();
        let replica = *self
            .replicas_of(primary)
            .iter()
            .find(|&&p| self.is_up(p))
            .unwrap_or_else(|| panic!("redis:{primary} has no running replica"));
        self.admin(replica, &["CLUSTER", "FAILOVER"])
            .unwrap_or_else(|e| panic!("{e}"));
        let what = format!("redis:{replica} promoted in place of redis:{primary}");
        eventually_ok(&what, limit, || {
            if !is_primary(replica, self.password()) {
                return Err(format!("redis:{replica} is no primary yet"));
            }
            let linked = linked_primary_of(primary, self.password());
            if linked != Some(replica) {
                return Err(format!("redis:{primary} replicates {linked:?}"));
            }
            self.check_states_ok()
        });
        (replica, started.elapsed())
    }
}

/// The port `CLUSTER SLOTS` (`ranges`) names first for `slot`.
fn owner_in(ranges: &[redis::Value], slot: u16) -> Option<u16> {
    ranges.iter().find_map(|range| {
        let redis::Value::Array(items) = range else {
            return None;
        };
        let int = |v: &redis::Value| match v {
            redis::Value::Int(n) => Some(*n),
            _ => None,
        };
        let (start, end) = (int(items.first()?)?, int(items.get(1)?)?);
        if !(start..=end).contains(&i64::from(slot)) {
            return None;
        }
        let redis::Value::Array(node) = items.get(2)? else {
            return None;
        };
        int(node.get(1)?).and_then(|p| u16::try_from(p).ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn range(start: i64, end: i64, port: i64) -> Value {
        let node = Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::Int(port),
        ]);
        Value::Array(vec![Value::Int(start), Value::Int(end), node])
    }

    #[test]
    fn finds_the_owner_of_a_slot() {
        let ranges = [range(0, 5460, 7000), range(5461, 10922, 7001)];
        assert_eq!(owner_in(&ranges, 0), Some(7000));
        assert_eq!(owner_in(&ranges, 5461), Some(7001));
        assert_eq!(owner_in(&ranges, 16000), None);
    }
}
