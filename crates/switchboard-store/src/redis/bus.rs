//! [`Bus`] over Redis: inbox channels, pending replies and cancellation routing.

use std::sync::atomic::Ordering;

use ::redis::cmd;
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use super::scripts::*;
use super::{pubsub, RedisStore};
use crate::model::*;
use crate::traits::*;

#[async_trait]
impl Bus for RedisStore {
    /// Subscribes to `p:inbox:<node>` and `p:all` before returning.
    async fn subscribe(&self) -> StoreResult<mpsc::Receiver<BusMessage>> {
        self.take_inbox()?;
        let channels = vec![self.keys.inbox(&self.config.node_id), self.keys.all()];
        let started = pubsub::start(self.client.clone(), channels).await;
        if started.is_err() {
            self.subscribed.store(false, Ordering::SeqCst);
        }
        started
    }

    async fn send_to(&self, node: &str, msg: &BusMessage) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        cmd("PUBLISH")
            .arg(self.keys.inbox(node))
            .arg(Self::encode(msg)?)
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    /// PUBLISH on `p:all`, the channel every node's inbox subscribes to.
    async fn broadcast(&self, msg: &BusMessage) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        cmd("PUBLISH")
            .arg(self.keys.all())
            .arg(Self::encode(msg)?)
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    async fn register_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        let mut inv = self.session_call(&REGISTER_PENDING, &self.session_keys(sid), None);
        inv.arg(request_key).arg(&self.config.node_id);
        self.invoke::<i64>(&inv).await?;
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
        };
        let mut inv = self.session_call(&ROUTE_REPLY, &self.session_keys(sid), None);
        inv.arg(request_key)
            .arg(self.keys.inbox_prefix())
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
            .arg(self.keys.inbox_prefix())
            .arg(Self::encode(&msg)?);
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }
}
