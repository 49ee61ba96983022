//! [`Bus`] over Redis: mailboxes with pub/sub doorbells, pending replies and cancellation
//! routing.
//!
//! What one node tells another is posted to a mailbox (a capped, expiring STREAM) and its
//! doorbell rung (pub/sub, carrying the message) in one script, so a receiver whose subscription
//! lapsed reads what it missed from the mailbox when it notices (docs/redis.md, "What the bus
//! guarantees"). Modules:
//! - `wire`: the message format (version, id, deadline) and the ids a node has taken;
//! - `intake`: a node's cursors over its mailboxes; each message taken once, in order;
//! - `probe`: the self-check of a subscription;
//! - `classic`: the inbox in standalone and Sentinel mode (its own pub/sub connection);
//! - `sharded`: the inbox in Redis Cluster (sharded pub/sub on the cluster connection).

pub(crate) mod classic;
mod intake;
mod probe;
pub(crate) mod sharded;
pub(crate) mod wire;

use std::sync::atomic::Ordering;
use std::sync::LazyLock;
use std::time::Duration;

use ::redis::{cmd, Script};
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use super::scripts::*;
use super::{Inbox, RedisStore};
use crate::model::*;
use crate::rules;
use crate::traits::*;

/// A post to a node's or the broadcast mailbox (`KEYS[1]`). ARGV: doorbell channel, publish
/// command (`PUBLISH`, `SPUBLISH` in Redis Cluster, where the channel shares the mailbox's
/// slot), mailbox cap, mailbox TTL (ms), message JSON. Returns the message's mailbox id.
static POST: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '0-*', 'm', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call(ARGV[2], ARGV[1], '{"_q":"' .. id .. '",' .. string.sub(ARGV[5], 2))
return id
"#,
    )
});

/// How long a node goes on trying to post one message through an outage: about a Redis
/// promotion's length (2–5 s measured, docs/redis.md "Failover").
pub const POST_PATIENCE: Duration = Duration::from_secs(5);

#[async_trait]
impl Bus for RedisStore {
    /// Subscribes to `p:inbox:<node>` and `p:all` before returning (Redis Cluster: the sharded
    /// `p:inbox:{<node>}` and `p:{all}`; session channels follow as the node takes part), and
    /// starts reading the node's mailbox `p:mbox:<node>` and the broadcast mailbox `p:mbox:all`
    /// (Redis Cluster: `p:mbox:{<node>}`, `p:mbox:{all}`) after their current end.
    async fn subscribe(&self) -> StoreResult<mpsc::Receiver<BusMessage>> {
        self.take_inbox()?;
        let started = match &self.inbox {
            Inbox::Classic(source) => {
                classic::start(
                    source.clone(),
                    self.conn.clone(),
                    &self.keys,
                    &self.config.node_id,
                    &self.config.bus,
                )
                .await
            }
            Inbox::Sharded(sharded) => sharded.start().await,
        };
        if started.is_err() {
            self.subscribed.store(false, Ordering::SeqCst);
        }
        started
    }

    /// One script: posted to the node's mailbox, doorbell on its inbox channel.
    async fn send_within(&self, node: &str, msg: &BusMessage, within: Duration) -> StoreResult<()> {
        let mailbox = self.keys.mailbox(node);
        self.post(&mailbox, &self.keys.inbox(node), msg, within)
            .await
    }

    /// One script: posted to the broadcast mailbox, doorbell on `p:all` (Redis Cluster:
    /// `p:{all}`, one shard carries it).
    async fn broadcast(&self, msg: &BusMessage) -> StoreResult<()> {
        let mailbox = self.keys.broadcast_mailbox();
        self.post(&mailbox, &self.keys.all(), msg, self.config.bus.message_ttl)
            .await
    }

    async fn register_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        let fresh = self.interest(sid).await?;
        let mut inv = self.session_call(&REGISTER_PENDING, &self.session_keys(sid), None);
        inv.arg(request_key).arg(&self.config.node_id);
        // With `min_replicas_acked`, only once the replicas hold it: a registration the old
        // primary alone held made the client's answer find nobody waiting (202, never
        // delivered).
        if self.invoke_durably::<i64>(&inv).await? == 0 && fresh {
            self.lose_interest(sid);
        }
        Ok(())
    }

    async fn forget_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        cmd("HDEL")
            .arg(self.session_keys(sid).pend())
            .arg(request_key)
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    /// One script (with `min_replicas_acked`, and its `WAIT`); when it was posted to another
    /// node, one `EXISTS` of that node's heartbeat.
    async fn route_reply(
        &self,
        sid: &str,
        request_key: &str,
        message: &Value,
    ) -> StoreResult<Routed> {
        let msg = BusMessage::Reply {
            sid: sid.to_owned(),
            request_key: request_key.to_owned(),
            message: message.clone(),
            trace: switchboard_telemetry::trace::current(),
        };
        let mut inv = self.session_call(&ROUTE_REPLY, &self.session_keys(sid), None);
        inv.arg(request_key)
            .arg(self.route())
            .arg(self.letter(&msg, self.config.bus.message_ttl)?);
        let node: String = self.invoke_durably(&inv).await?;
        if node.is_empty() {
            return Ok(Routed::NobodyWaits);
        }
        if node == self.config.node_id || self.is_alive(&node).await? {
            return Ok(Routed::Delivered);
        }
        Ok(Routed::WaiterStopped { node })
    }

    async fn route_cancel(
        &self,
        sid: &str,
        request_key: &str,
        reason: Option<&str>,
    ) -> StoreResult<bool> {
        let msg = BusMessage::Cancel {
            sid: sid.to_owned(),
            request_key: request_key.to_owned(),
            reason: reason.map(str::to_owned),
        };
        let mut inv = self.session_call(&ROUTE_CANCEL, &self.session_keys(sid), None);
        inv.arg(request_key)
            .arg(self.route())
            .arg(self.letter(&msg, self.config.bus.message_ttl)?);
        Ok(self.invoke_durably::<i64>(&inv).await? == 1)
    }
}

impl RedisStore {
    /// The publish command of node and broadcast channels.
    fn publish(&self) -> &'static str {
        if self.keys.sharded() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        }
    }

    /// The route of the session scripts' messages ([`super::keys::Keys::route`]).
    pub(super) fn route(&self) -> String {
        self.keys.route(&self.config.bus)
    }

    /// `msg` in the bus's wire format, to be dropped unread `within` from now (at most
    /// `bus.message_ttl`: the mailbox keeps it no longer).
    pub(super) fn letter(&self, msg: &BusMessage, within: Duration) -> StoreResult<String> {
        let within = within.min(self.config.bus.message_ttl);
        wire::encode(msg, rules::now_ms() + rules::millis(within))
    }

    /// Posts `msg` to `mailbox` and rings `channel` ([`POST`]). Through an outage (a
    /// promotion, a dropped connection) the post is tried again, for up to [`POST_PATIENCE`]
    /// (less when `within` is shorter), with the same message: a post that looked failed but
    /// ran leaves two copies with one id, which the receiver takes once. With
    /// `min_replicas_acked`, a post counts once that many replicas hold it, as an event append
    /// does (a message the old primary alone held was lost with it: a sampling answer accepted
    /// with 202 and never delivered, `graceful-failover --redis sentinel`).
    async fn post(
        &self,
        mailbox: &str,
        channel: &str,
        msg: &BusMessage,
        within: Duration,
    ) -> StoreResult<()> {
        let mut inv = POST.prepare_invoke();
        inv.key(mailbox)
            .arg(channel)
            .arg(self.publish())
            .arg(self.config.bus.mailbox_len.max(1))
            .arg(rules::millis(self.config.bus.message_ttl))
            .arg(self.letter(msg, within)?);
        let deadline = tokio::time::Instant::now() + within.min(POST_PATIENCE);
        let mut backoff = crate::retry::Backoff::until(deadline);
        loop {
            match self.invoke_durably::<String>(&inv).await {
                Ok(_) => return Ok(()),
                Err(e) if crate::retry::retryable(&e) => match backoff.failed() {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }
}
