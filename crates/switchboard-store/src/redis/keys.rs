//! Redis key and channel names.
//!
//! With prefix `p` (default `sb`) and session id `sid`:
//! - `p:{sid}:s` HASH, the session record (fields `rev`, `init`, `ready`, `lvl`, `subs`, `subv`,
//!   `prn`, `ups`, `own`, `ct`, `fv`);
//! - `p:{sid}:st` HASH, stream registry: stream id → holder token (`""` when released);
//! - `p:{sid}:run` HASH, stream id → `{"node","request_key"}` of the request still running;
//! - `p:{sid}:inf` HASH, client request id key → `<node>\n<stream>`;
//! - `p:{sid}:pend` HASH, server-issued request id key → node waiting for the answer;
//! - `p:{sid}:log:<stream>` STREAM, the event log (fields `d` data, `e` `"1"` on the final event,
//!   `k` the append id, see `append_script`);
//! - `p:{sid}:trim:<stream>` STRING, position of the newest event trimmed from that log (exists
//!   only once the log hit its cap; expires with the log);
//! - `p:{sid}:ids:<stream>` HASH, append id → position, of the events that log retains (expires
//!   with the log);
//! - `p:sessions` ZSET (sid → ms of last known expiry), `p:node:<id>` liveness, `p:reaper` lock,
//!   `p:secret:<name>` agreed secrets;
//! - `p:rl:{<tag>}:<key>` STRING, a rate limit's TAT in ms (see [`Keys::rate`]);
//! - `p:task:{<task id>}` HASH, a task of the tasks extension (fields `prn` principal, `node`,
//!   `st` status, `msg` status message, `ct`/`up` created/updated ISO 8601, `ttl`, `poll` in ms,
//!   `out` result or error JSON); expires `ttl` ms after creation;
//! - `p:task:{<task id>}:expired` STRING, an expired task's tombstone (its principal), kept for
//!   the grace period the node that ended the task gives it;
//! - `p:taskslots:{<principal>}` ZSET, the principal's running tasks (task id → ms when the slot
//!   frees itself), expiring with its last slot;
//! - mailboxes (STREAMs, see the `bus` module): `p:mbox:<node>` one per node, `p:mbox:all`
//!   (broadcast); in Redis Cluster `p:mbox:{<node>}`, `p:mbox:{all}` and `p:{sid}:mbox` one per
//!   session;
//! - channels (the mailboxes' doorbells) `p:inbox:<node>` (one per node) and `p:all`
//!   (broadcast); in Redis Cluster they are sharded channels `p:inbox:{<node>}` and `p:{all}`,
//!   and session scripts ring on the session's sharded channel `p:{sid}:bus` instead.
//!
//! The `{sid}` hash tag puts every key of a session in one Redis Cluster slot, so one Lua script
//! can touch them all (scripts build `log:`/`trim:`/`ids:` names from the `p:{sid}:` base they
//! get).

/// Names of the global keys and channels.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
    /// Redis Cluster: channels are sharded and carry hash tags.
    sharded: bool,
}

impl Keys {
    /// Names under `prefix`; `sharded` for Redis Cluster.
    pub fn new(prefix: &str, sharded: bool) -> Keys {
        Keys {
            prefix: prefix.to_owned(),
            sharded,
        }
    }

    /// Whether channels are sharded (Redis Cluster).
    pub fn sharded(&self) -> bool {
        self.sharded
    }

    /// The sharded channel of one session (Redis Cluster only): the session scripts' messages.
    pub fn session_channel(&self, sid: &str) -> String {
        [self.prefix.as_str(), ":{", sid, "}:bus"].concat()
    }

    /// What the session scripts get as the route of their messages (`ring` and `deliver` in the
    /// `scripts` module): `<mailbox_len> <message_ttl ms> <p>`, where `<p>` is the key prefix
    /// and its colon (`sb:`) in standalone and Sentinel (mailboxes `p:mbox:<node>` and
    /// `p:mbox:all`, doorbells on `p:inbox:<node>` and `p:all`), and empty in Redis Cluster
    /// (the session's mailbox `p:{sid}:mbox`, doorbells on its channel `p:{sid}:bus`).
    pub fn route(&self, bus: &crate::model::BusSettings) -> String {
        let ttl = crate::rules::millis(bus.message_ttl);
        let p = if self.sharded {
            ""
        } else {
            self.prefix.as_str()
        };
        let colon = if self.sharded { "" } else { ":" };
        format!("{} {ttl} {p}{colon}", bus.mailbox_len.max(1))
    }

    /// A node's mailbox (STREAM of `m` = message JSON, ids `0-<n>`): what other nodes and the
    /// session scripts post to it ([`crate::Bus`]): `p:mbox:<node>`; in Redis Cluster
    /// `p:mbox:{<node>}`, in its inbox channel's slot, so a post and its doorbell are one script.
    pub fn mailbox(&self, node: &str) -> String {
        if self.sharded {
            [self.prefix.as_str(), ":mbox:{", node, "}"].concat()
        } else {
            [self.prefix.as_str(), ":mbox:", node].concat()
        }
    }

    /// The broadcast mailbox (STREAM, as [`Keys::mailbox`]): messages to every node, `p:mbox:all`
    /// (Redis Cluster: `p:mbox:{all}`, the broadcast channel's slot).
    pub fn broadcast_mailbox(&self) -> String {
        self.mailbox("all")
    }

    /// The mailbox of a session in Redis Cluster (STREAM of `to` = node or `*`, `m` = message
    /// JSON): what the session scripts post for the nodes taking part in it.
    pub fn session_mailbox(&self, sid: &str) -> String {
        [self.prefix.as_str(), ":{", sid, "}:mbox"].concat()
    }

    /// The keys of one session.
    pub fn session(&self, sid: &str) -> SessionKeys {
        SessionKeys {
            base: [self.prefix.as_str(), ":{", sid, "}:"].concat(),
        }
    }

    /// The state of one rate limit ([`crate::rate::Rate`]): `p:rl:{<tag>}:<key>`, a STRING holding
    /// its TAT in ms on the Redis server's clock, expiring at that TAT. The limits of one tag (a
    /// principal's own and its per-tool ones) share a Redis Cluster slot.
    pub fn rate(&self, rate: &crate::rate::Rate) -> String {
        [self.prefix.as_str(), ":rl:{", &rate.tag, "}:", &rate.key].concat()
    }

    /// A take id of the limits of `tag` (Redis Cluster only, see the `rates` module):
    /// `p:rlt:{<tag>}:<id>`, an empty STRING that lives [`super::RESEND_WINDOW`], in the slot of
    /// the tag's limits.
    pub fn rate_take(&self, tag: &str, id: &str) -> String {
        [self.prefix.as_str(), ":rlt:{", tag, "}:", id].concat()
    }

    /// The session index (ZSET).
    pub fn sessions(&self) -> String {
        format!("{}:sessions", self.prefix)
    }

    /// The sessions of one principal (ZSET, scored as the session index), for
    /// `max_sessions_per_principal`: hash-tagged with the session index's name, so it lives in
    /// the index's slot and one script reads both.
    pub fn principal_sessions(&self, principal: &str) -> String {
        format!("{{{}:sessions}}:principal:{principal}", self.prefix)
    }

    /// A node's liveness key.
    pub fn node(&self, node: &str) -> String {
        format!("{}:node:{node}", self.prefix)
    }

    /// The node roster (ZSET: node id → ms of its last heartbeat; see the `liveness` module).
    pub fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
    }

    /// A task's record.
    pub fn task(&self, task_id: &str) -> String {
        format!("{}:task:{{{task_id}}}", self.prefix)
    }

    /// An expired task's tombstone (STRING: its principal), in the record's slot.
    pub fn task_expired(&self, task_id: &str) -> String {
        format!("{}:task:{{{task_id}}}:expired", self.prefix)
    }

    /// The running-task slots of a principal (ZSET: task id → ms when the slot frees itself).
    pub fn task_slots(&self, principal: &str) -> String {
        format!("{}:taskslots:{{{principal}}}", self.prefix)
    }

    /// The reaper lock.
    pub fn reaper(&self) -> String {
        format!("{}:reaper", self.prefix)
    }

    /// A node's inbox channel.
    pub fn inbox(&self, node: &str) -> String {
        if self.sharded {
            format!("{}:inbox:{{{node}}}", self.prefix)
        } else {
            format!("{}:inbox:{node}", self.prefix)
        }
    }

    /// An agreed secret (STRING, no expiry; [`crate::Secrets`]).
    pub fn secret(&self, name: &str) -> String {
        format!("{}:secret:{name}", self.prefix)
    }

    /// The broadcast channel.
    pub fn all(&self) -> String {
        if self.sharded {
            format!("{}:{{all}}", self.prefix)
        } else {
            format!("{}:all", self.prefix)
        }
    }
}

/// Keys of one session (all share the hash tag `{sid}`). They are built for every request, by
/// `concat` (one allocation of the right size), which costs a fraction of `format!`.
#[derive(Clone, Debug)]
pub(crate) struct SessionKeys {
    /// `p:{sid}:`, the common start of every key.
    pub base: String,
}

impl SessionKeys {
    /// The five fixed keys, in the order every session script expects them as `KEYS[1..5]`:
    /// record, stream registry, running, in-flight, pending.
    pub fn core(&self) -> [String; 5] {
        ["s", "st", "run", "inf", "pend"].map(|k| [self.base.as_str(), k].concat())
    }

    /// The record hash.
    pub fn record(&self) -> String {
        [self.base.as_str(), "s"].concat()
    }

    /// The running-request hash.
    pub fn run(&self) -> String {
        [self.base.as_str(), "run"].concat()
    }

    /// The in-flight request hash.
    pub fn inf(&self) -> String {
        [self.base.as_str(), "inf"].concat()
    }

    /// The stream registry hash.
    pub fn streams(&self) -> String {
        [self.base.as_str(), "st"].concat()
    }

    /// The pending-request hash.
    pub fn pend(&self) -> String {
        [self.base.as_str(), "pend"].concat()
    }

    /// A stream's event log.
    pub fn log(&self, stream: &str) -> String {
        [self.base.as_str(), "log:", stream].concat()
    }

    /// A stream's trim marker.
    pub fn trim(&self, stream: &str) -> String {
        [self.base.as_str(), "trim:", stream].concat()
    }

    /// The short-lived key a log read writes with `min_replicas_acked`, so that its `WAIT`
    /// covers every entry it read (`RedisStore::confirm_read`).
    pub fn read_mark(&self) -> String {
        [self.base.as_str(), "rd"].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_keys_share_the_hash_tag() {
        let k = Keys::new("sb", false).session("abc");
        assert_eq!(k.core()[0], "sb:{abc}:s");
        assert_eq!(k.log("get"), "sb:{abc}:log:get");
        assert!(k.core().iter().all(|key| key.contains("{abc}")));
        assert_eq!(Keys::new("sb", false).inbox("n1"), "sb:inbox:n1");
        let sharded = Keys::new("sb", true);
        assert_eq!(sharded.inbox("n1"), "sb:inbox:{n1}");
        assert_eq!(sharded.all(), "sb:{all}");
        assert_eq!(sharded.session_channel("abc"), "sb:{abc}:bus");
        assert_eq!(sharded.session_mailbox("abc"), "sb:{abc}:mbox");
        let bus = crate::model::BusSettings::default();
        assert_eq!(sharded.route(&bus), "10000 60000 ");
        assert_eq!(Keys::new("sb", false).route(&bus), "10000 60000 sb:");
        assert_eq!(sharded.mailbox("n1"), "sb:mbox:{n1}");
        assert_eq!(sharded.broadcast_mailbox(), "sb:mbox:{all}");
        assert_eq!(Keys::new("sb", false).mailbox("n1"), "sb:mbox:n1");
        assert_eq!(Keys::new("sb", false).broadcast_mailbox(), "sb:mbox:all");
    }
}
