//! The bus's metrics: how often a node's subscriptions were restored, and what its mailboxes
//! delivered late, dropped at their deadline or lost (docs/redis.md, "What the bus guarantees").

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of [`BusMetrics::healed`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealLabels {
    /// What found the subscriptions missing: `disconnected` (the connection dropped),
    /// `unsubscribed` (Redis unsubscribed a channel by itself: its slot moved, or a failover
    /// demoted its server), `probe` (this node's probe through its inbox did not come back),
    /// `slot_map` (Redis Cluster's slot map changed).
    pub cause: &'static str,
}

/// The bus's counters (each rendered with the `_total` suffix).
#[derive(Debug, Default)]
pub struct BusMetrics {
    /// `switchboard_bus_subscriptions_healed_total{cause}`: times this node subscribed again
    /// because its subscriptions were, or may have been, lost.
    pub healed: Family<HealLabels, Counter>,
    /// `switchboard_bus_messages_redelivered_total`: messages this node took from a mailbox
    /// because their doorbell (pub/sub) never reached it.
    pub redelivered: Counter,
    /// `switchboard_bus_messages_expired_total`: messages that reached this node after their
    /// deadline and were dropped unread (their sender's wait had ended).
    pub expired: Counter,
    /// `switchboard_bus_messages_lost_total`: messages for this node gone from its mailbox
    /// before it read them (the mailbox's cap or TTL passed while it could not read).
    pub lost: Counter,
}

impl BusMetrics {
    pub(super) fn registered(r: &mut Registry) -> BusMetrics {
        let m = BusMetrics::default();
        r.register(
            "switchboard_bus_subscriptions_healed",
            "Times this node subscribed again because its bus subscriptions were or may have been lost, by cause (disconnected, unsubscribed, probe, slot_map)",
            m.healed.clone(),
        );
        r.register(
            "switchboard_bus_messages_redelivered",
            "Bus messages this node read from a mailbox because their pub/sub doorbell never reached it",
            m.redelivered.clone(),
        );
        r.register(
            "switchboard_bus_messages_expired",
            "Bus messages that reached this node after their deadline and were dropped unread",
            m.expired.clone(),
        );
        r.register(
            "switchboard_bus_messages_lost",
            "Bus messages for this node gone from its mailbox (cap or TTL) before it could read them",
            m.lost.clone(),
        );
        m
    }

    /// Counts one restoration of the subscriptions, for `cause` ([`HealLabels::cause`]).
    pub fn heal(&self, cause: &'static str) {
        self.healed.get_or_create(&HealLabels { cause }).inc();
    }
}
