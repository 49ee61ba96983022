//! What the [`crate::Bus`] API speaks in besides [`crate::BusMessage`]: its settings and where a
//! client's answer went.

use std::time::Duration;

/// How the bus keeps what one node tells another until it is delivered (Redis backend; the
/// memory store delivers within the process and keeps nothing). See docs/redis.md, "What the
/// bus guarantees".
#[derive(Clone, Debug, PartialEq)]
pub struct BusSettings {
    /// How long a message waits in its mailbox for its receiver (default 60 s): a message not
    /// taken within this (or within the shorter deadline its sender gave it) is dropped by the
    /// receiver and counted as expired; a mailbox no one writes to expires this long after its
    /// last message.
    pub message_ttl: Duration,
    /// Messages a mailbox keeps at most (default 10,000; `XADD … MAXLEN ~`, so Redis may keep a
    /// few more). A receiver that falls further behind loses the oldest, and counts them as lost.
    pub mailbox_len: u64,
    /// How often a node checks its own subscriptions (a probe through its inbox channel, a read
    /// of its mailboxes' tails, and in Redis Cluster the slot map; default 1 s). A subscription
    /// lost without a sign from Redis is found within two of these, and a message whose doorbell
    /// was lost is read from its mailbox within one.
    pub check_interval: Duration,
}

impl Default for BusSettings {
    fn default() -> BusSettings {
        BusSettings {
            message_ttl: Duration::from_secs(60),
            mailbox_len: 10_000,
            check_interval: Duration::from_secs(1),
        }
    }
}

/// Where [`crate::Bus::route_reply`] sent a client's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Routed {
    /// To the node waiting for it, which is alive: it takes the answer within the bus's
    /// deadline (docs/redis.md, "What the bus guarantees").
    Delivered,
    /// Nobody waits for it (never asked, answered already, given up, or the session is gone).
    NobodyWaits,
    /// The node that waited for it has stopped (its heartbeat lapsed): the request that asked
    /// was lost with it, and nobody will take the answer.
    WaiterStopped {
        /// That node.
        node: String,
    },
}
