//! Who serves what, changed without a node dying (case C36): one slot moved by hand from its
//! owner to another primary, and a graceful `CLUSTER FAILOVER`; and what a test asks about them:
//! a key's slot, the primary serving a slot, a node's id, a shard channel's subscribers.
//!
//! Both changes keep every connection up: Redis tells a moved slot's shard-channel subscribers
//! with an unsolicited `sunsubscribe` push (redis/redis#12558), which is what the case checks
//! the nodes notice.

use std::time::{Duration, Instant};

use redis::Value;

use super::RedisCluster;
use crate::eventually::eventually_ok;
use crate::redis_process::{linked_primary_of, role_of};

/// How many keys one `MIGRATE` carries (`CLUSTER GETKEYSINSLOT … 1000`, as the case says).
const MIGRATE_BATCH: usize = 1000;

/// At most this many `MIGRATE` batches per slot move (a session's slot holds a few dozen keys).
const MIGRATE_ROUNDS: usize = 100;

/// How long every running node may take to agree on a moved slot's new owner (gossip).
const AGREE_LIMIT: Duration = Duration::from_secs(10);

/// What [`RedisCluster::move_slot`] did.
#[derive(Clone, Debug)]
pub struct SlotMove {
    /// The slot.
    pub slot: u16,
    /// The port of the primary that served it.
    pub from: u16,
    /// The port of the primary that serves it now.
    pub to: u16,
    /// The keys migrated.
    pub keys: usize,
    /// When `CLUSTER SETSLOT … NODE` reached the old owner (which unsubscribes the slot's
    /// shard channels there at that moment).
    pub assigned_at: Instant,
}

/// What [`RedisCluster::graceful_failover`] saw.
#[derive(Clone, Debug)]
pub struct Handover {
    /// The primary that handed over (a replica now).
    pub old: u16,
    /// Its replica, the primary now.
    pub new: u16,
    /// When both roles were first seen swapped (within one 50 ms poll of the switch).
    pub swapped_at: Instant,
    /// From `CLUSTER FAILOVER` to then.
    pub took: Duration,
}

impl RedisCluster {
    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of the first running node that
    /// answers). Panics when none does.
    pub fn keyslot(&self, key: &str) -> u16 {
        let slot: i64 = self
            .up_ports()
            .into_iter()
            .find_map(|p| self.query_port(p, &["CLUSTER", "KEYSLOT", key]).ok())
            .unwrap_or_else(|| panic!("no running node answers CLUSTER KEYSLOT {key}"));
        u16::try_from(slot).expect("a slot is below 16384")
    }

    /// The 40-hex id of the node on `port` (`CLUSTER MYID`). Panics when it does not answer.
    pub fn node_id(&self, port: u16) -> String {
        self.query_port(port, &["CLUSTER", "MYID"])
            .unwrap_or_else(|e| panic!("CLUSTER MYID on redis:{port}: {e}"))
    }

    /// The port of the primary serving `slot` as the node on `port` sees it (`CLUSTER SLOTS`).
    ///
    /// # Errors
    /// The node does not answer, or its map has no range holding `slot`, as text.
    pub fn slot_owner_seen_by(&self, port: u16, slot: u16) -> Result<u16, String> {
        let ranges: Vec<Value> = self
            .query_port(port, &["CLUSTER", "SLOTS"])
            .map_err(|e| format!("CLUSTER SLOTS on redis:{port}: {e}"))?;
        ranges
            .iter()
            .find_map(|range| range_owner(range, slot))
            .ok_or_else(|| format!("redis:{port} maps slot {slot} to no primary"))
    }

    /// The port of the primary serving `slot`, as the first running node with
    /// `cluster_state:ok` sees it. Panics when none answers.
    pub fn slot_owner(&self, slot: u16) -> u16 {
        let ok = |p: &u16| {
            self.query_port::<String>(*p, &["CLUSTER", "INFO"])
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        };
        let port = self
            .up_ports()
            .into_iter()
            .find(ok)
            .expect("no running node says cluster_state:ok");
        self.slot_owner_seen_by(port, slot)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Moves `slot` from its owner to the primary on `to`, as an operator resharding by hand
    /// does (case C36 step 3): on `to` `CLUSTER SETSLOT <slot> IMPORTING <owner id>`, on the
    /// owner `CLUSTER SETSLOT <slot> MIGRATING <to id>`, then `CLUSTER GETKEYSINSLOT <slot> 1000`
    /// and `MIGRATE 127.0.0.1 <to> "" 0 5000 [AUTH <pw>] KEYS …` until the slot is empty on the
    /// owner, then `CLUSTER SETSLOT <slot> NODE <to id>` on every primary (`to` first, then the
    /// owner, as the Redis manual orders it). Returns once the last primary took that; the
    /// replicas learn it by gossip ([`Self::wait_slot_agreed`]).
    ///
    /// Panics when `to` already serves the slot, a command fails, or the slot does not empty
    /// within 100 batches.
    pub fn move_slot(&self, slot: u16, to: u16) -> SlotMove {
        let from = self.slot_owner(slot);
        assert_ne!(from, to, "redis:{to} already serves slot {slot}");
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let s = slot.to_string();
        self.admin(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
        self.admin(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
        let keys = self.migrate_keys(slot, from, to);
        let mut order = vec![to, from];
        order.extend(
            self.primaries()
                .into_iter()
                .filter(|p| ![to, from].contains(p)),
        );
        let mut assigned_at = Instant::now();
        for port in order {
            if port == from {
                assigned_at = Instant::now();
            }
            self.admin(port, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        }
        SlotMove {
            slot,
            from,
            to,
            keys,
            assigned_at,
        }
    }

    /// Waits (at most 10 s) until every running node names the new owner of the slot `moved`
    /// moved in `CLUSTER SLOTS`; returns the time since it was assigned. Panics at the limit.
    pub fn wait_slot_agreed(&self, moved: &SlotMove) -> Duration {
        let (slot, to) = (moved.slot, moved.to);
        let what = format!("every running node to name redis:{to} as the owner of slot {slot}");
        eventually_ok(&what, AGREE_LIMIT, || {
            for port in self.up_ports() {
                let owner = self.slot_owner_seen_by(port, slot)?;
                if owner != to {
                    return Err(format!("redis:{port} names redis:{owner}"));
                }
            }
            Ok(())
        });
        moved.assigned_at.elapsed()
    }

    /// `MIGRATE`s the keys of `slot` from the node on `from` to the one on `to`, in batches of
    /// [`MIGRATE_BATCH`], until `from` holds none; returns how many moved.
    fn migrate_keys(&self, slot: u16, from: u16, to: u16) -> usize {
        let (s, batch, dest) = (slot.to_string(), MIGRATE_BATCH.to_string(), to.to_string());
        let mut moved = 0;
        for _ in 0..MIGRATE_ROUNDS {
            let keys: Vec<String> = self
                .query_port(from, &["CLUSTER", "GETKEYSINSLOT", &s, &batch])
                .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT {slot} on redis:{from}: {e}"));
            if keys.is_empty() {
                return moved;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", dest.as_str(), "", "0", "5000"];
            if let Some(password) = self.password() {
                args.extend(["AUTH", password]);
            }
            args.push("KEYS");
            args.extend(keys.iter().map(String::as_str));
            // NOKEY when the keys expired meanwhile: the next round sees the slot empty.
            let _: Value = self
                .query_port(from, &args)
                .unwrap_or_else(|e| panic!("MIGRATE from redis:{from} to redis:{to}: {e}"));
            moved += keys.len();
        }
        panic!("slot {slot} on redis:{from} did not empty in {MIGRATE_ROUNDS} MIGRATE batches");
    }

    /// A graceful failover of the primary on `primary`: `CLUSTER FAILOVER` sent to its first
    /// linked replica (nothing dies: the primary hands over its slots and becomes a replica).
    /// Waits (at most `limit` in all) until that replica answers `ROLE` as `master` and the old
    /// primary as `slave`, then until every running node says `cluster_state:ok`. Panics when
    /// the primary has no linked replica, the command fails, or at the limit.
    pub fn graceful_failover(&self, primary: u16, limit: Duration) -> Handover {
        let replica = self
            .replicas_of(primary)
            .into_iter()
            .find(|&r| self.is_up(r) && linked_primary_of(r, self.password()) == Some(primary))
            .unwrap_or_else(|| panic!("redis:{primary} has no linked replica to hand over to"));
        let started = Instant::now();
        self.admin(replica, &["CLUSTER", "FAILOVER"]);
        let what = format!("redis:{replica} to take over from redis:{primary}");
        eventually_ok(&what, limit, || {
            let role = |port| role_of(port, self.password());
            match (role(replica), role(primary)) {
                (Ok(new), Ok(old)) if new == "master" && old == "slave" => Ok(()),
                roles => Err(format!("roles (new, old): {roles:?}")),
            }
        });
        let swapped_at = Instant::now();
        let left = limit.saturating_sub(started.elapsed());
        eventually_ok("cluster_state:ok everywhere", left, || {
            self.check_states_ok()
        });
        Handover {
            old: primary,
            new: replica,
            swapped_at,
            took: swapped_at - started,
        }
    }

    /// Subscribers of shard channel `channel` on the node on `port` (`PUBSUB SHARDNUMSUB`; a
    /// node counts only its own clients).
    ///
    /// # Errors
    /// The node does not answer, as text.
    pub fn shard_numsub(&self, port: u16, channel: &str) -> Result<i64, String> {
        let (_, n): (String, i64) = self
            .query_port(port, &["PUBSUB", "SHARDNUMSUB", channel])
            .map_err(|e| format!("PUBSUB SHARDNUMSUB on redis:{port}: {e}"))?;
        Ok(n)
    }

    /// One administrative command on `port` whose reply is `OK`; panics otherwise.
    fn admin(&self, port: u16, args: &[&str]) {
        self.query_port::<()>(port, args)
            .unwrap_or_else(|e| panic!("{} on redis:{port}: {e}", args.join(" ")));
    }
}

/// The primary's port of one `CLUSTER SLOTS` entry (`[start, end, [ip, port, id, …], …]`) when
/// its range holds `slot`.
fn range_owner(range: &Value, slot: u16) -> Option<u16> {
    let Value::Array(items) = range else {
        return None;
    };
    let int = |v: &Value| match v {
        Value::Int(n) => Some(*n),
        _ => None,
    };
    let (start, end) = (int(items.first()?)?, int(items.get(1)?)?);
    if !(start..=end).contains(&i64::from(slot)) {
        return None;
    }
    let Value::Array(primary) = items.get(2)? else {
        return None;
    };
    u16::try_from(int(primary.get(1)?)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn finds_the_primary_of_a_slot_in_a_slots_entry() {
        let entry = Value::Array(vec![
            Value::Int(5461),
            Value::Int(10922),
            Value::Array(vec![bulk("127.0.0.1"), Value::Int(7001), bulk("abc")]),
            Value::Array(vec![bulk("127.0.0.1"), Value::Int(7004), bulk("def")]),
        ]);
        assert_eq!(range_owner(&entry, 5461), Some(7001));
        assert_eq!(range_owner(&entry, 10922), Some(7001));
        assert_eq!(range_owner(&entry, 10923), None);
        assert_eq!(range_owner(&Value::Nil, 1), None);
    }
}
