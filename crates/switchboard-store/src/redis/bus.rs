//! [`Bus`] over Redis: inbox channels, pending replies and cancellation routing.

use std::sync::atomic::Ordering;

use ::redis::cmd;
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use super::scripts::*;
use super::{pubsub, Inbox, RedisStore};
use crate::model::*;
use crate::traits::*;

#[async_trait]
impl Bus for RedisStore {
    /// Subscribes to `p:inbox:<node>` and `p:all` before returning (Redis Cluster: the sharded
    /// `p:inbox:{<node>}` and `p:{all}`; session channels follow as the node takes part).
    async fn subscribe(&self) -> StoreResult<mpsc::Receiver<BusMessage>> {
        self.take_inbox()?;
        let started = match &self.inbox {
            Inbox::Classic(source) => {
                let channels = vec![self.keys.inbox(&self.config.node_id), self.keys.all()];
                pubsub::start(source.clone(), channels).await
            }
            Inbox::Sharded(sharded) => sharded.start().await,
        };
        if started.is_err() {
            self.subscribed.store(false, Ordering::SeqCst);
        }
        started
    }

    /// `PUBLISH` (Redis Cluster: `SPUBLISH`) on the node's inbox channel.
    async fn send_to(&self, node: &str, msg: &BusMessage) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        cmd(self.publish())
            .arg(self.keys.inbox(node))
            .arg(Self::encode(msg)?)
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    /// `PUBLISH` on `p:all` (Redis Cluster: `SPUBLISH` on `p:{all}`, carried by one shard), the
    /// channel every node's inbox subscribes to.
    async fn broadcast(&self, msg: &BusMessage) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        cmd(self.publish())
            .arg(self.keys.all())
            .arg(Self::encode(msg)?)
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    async fn register_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        let fresh = self.interest(sid).await?;
        let mut inv = self.session_call(&REGISTER_PENDING, &self.session_keys(sid), None);
        inv.arg(request_key).arg(&self.config.node_id);
        if self.invoke::<i64>(&inv).await? == 0 && fresh {
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

    async fn route_reply(
        &self,
        sid: &str,
        request_key: &str,
        message: &Value,
    ) -> StoreResult<bool> {
        let msg = BusMessage::Reply {
            sid: sid.to_owned(),
            request_key: request_key.to_owned(),
            message: message.clone(),
            trace: switchboard_telemetry::trace::current(),
        };
        let mut inv = self.session_call(&ROUTE_REPLY, &self.session_keys(sid), None);
        inv.arg(request_key)
            .arg(self.keys.node_route())
            .arg(Self::encode(&msg)?);
        Ok(self.invoke::<i64>(&inv).await? == 1)
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
            .arg(self.keys.node_route())
            .arg(Self::encode(&msg)?);
        Ok(self.invoke::<i64>(&inv).await? == 1)
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
}
