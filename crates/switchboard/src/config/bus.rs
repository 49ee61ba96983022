//! `[bus]`: how what one node tells another is kept until it is delivered (the store's
//! [`switchboard_store::BusSettings`]; docs/redis.md, "What the bus guarantees").

use serde::{Deserialize, Serialize};

use super::owners::{count64, positive, store};
use super::units::NonZeroDuration;

/// The bus's mailboxes and the self-check of a node's subscriptions (Redis backend).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BusConfig {
    /// How long a message waits for its receiver: one not taken within this (or within its own
    /// shorter deadline) is dropped by the receiver and counted
    /// (`switchboard_bus_messages_expired_total`); a mailbox nobody writes to expires this long
    /// after its last message.
    pub message_ttl: NonZeroDuration,
    /// Messages one mailbox keeps at most (`XADD … MAXLEN ~`): a receiver further behind loses
    /// the oldest (`switchboard_bus_messages_lost_total`).
    pub mailbox_len: std::num::NonZeroU64,
    /// How often a node checks its own subscriptions (a probe through its inbox channel, its
    /// mailboxes' ends, and in Redis Cluster the slot map): a subscription lost without a sign
    /// from Redis is found within two of these, a message whose doorbell was lost read within
    /// one. Each check costs Redis three small commands per node (four in Cluster).
    pub check_interval: NonZeroDuration,
}

impl Default for BusConfig {
    /// The store's defaults ([`super::owners`]).
    fn default() -> Self {
        let bus = store().bus;
        BusConfig {
            message_ttl: positive(bus.message_ttl),
            mailbox_len: count64(bus.mailbox_len),
            check_interval: positive(bus.check_interval),
        }
    }
}

impl BusConfig {
    /// The store's settings.
    pub fn settings(&self) -> switchboard_store::BusSettings {
        switchboard_store::BusSettings {
            message_ttl: self.message_ttl.get(),
            mailbox_len: self.mailbox_len.get(),
            check_interval: self.check_interval.get(),
        }
    }
}
