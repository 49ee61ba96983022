//! The reaper's pass over the session index, and the terminating script call it shares with
//! `DELETE` (both broadcast `Terminated` to every node: in standalone and Sentinel from the
//! script, in Redis Cluster, where a script cannot post outside its session's slot, right after
//! it, [`RedisStore::announce_ended`]).

use ::redis::{cmd, pipe, ScriptInvocation};

use super::scripts::*;
use super::RedisStore;
use crate::model::*;
use crate::rules;
use crate::traits::*;

impl RedisStore {
    /// A `DELETE`/`REAP_ONE` invocation for `sid` (it broadcasts `Terminated`, except in Redis
    /// Cluster: [`RedisStore::announce_ended`]).
    pub(super) fn terminating_call(
        &self,
        script: &'static ::redis::Script,
        sid: &str,
    ) -> StoreResult<ScriptInvocation<'static>> {
        let terminated = BusMessage::Terminated {
            sid: sid.to_owned(),
        };
        let terminated = self.letter(&terminated, self.config.bus.message_ttl)?;
        let mut inv = self.session_call(script, &self.session_keys(sid), None);
        let route = if self.keys.sharded() {
            "-".to_owned()
        } else {
            self.route()
        };
        inv.arg(route).arg(terminated);
        Ok(inv)
    }

    /// Redis Cluster: broadcasts `Terminated` for each of `sids` (ended by a terminating
    /// script), through the broadcast mailbox, so that every node taking part in them hears it
    /// even if its subscription lapses meanwhile. (A session's own mailbox would outlive the
    /// session it was for.) Elsewhere the scripts did it. A broadcast that cannot be posted is
    /// logged, not returned: the session is gone all the same, and each node that held
    /// something of it finds that out at its next keep-alive (`session.touch_interval`).
    pub(super) async fn announce_ended(&self, sids: &[String]) {
        if !self.keys.sharded() {
            return;
        }
        let posts = sids.iter().map(|sid| {
            self.broadcast_owned(BusMessage::Terminated {
                sid: sid.to_owned(),
            })
        });
        if let Err(e) = futures::future::try_join_all(posts).await {
            tracing::warn!(error = %e, sessions = sids.len(), "could not tell every node that sessions ended; they find out at their next keep-alive");
        }
    }

    async fn broadcast_owned(&self, msg: BusMessage) -> StoreResult<()> {
        self.broadcast(&msg).await
    }

    pub(super) async fn reap_locked(&self, limit: usize) -> StoreResult<Vec<String>> {
        let now = rules::now_ms();
        let index = self.keys.sessions();
        let mut conn = self.conn.clone();
        let due: Vec<String> = cmd("ZRANGEBYSCORE")
            .arg(&index)
            .arg("-inf")
            .arg(now)
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut conn)
            .await?;
        if due.is_empty() {
            cmd("PEXPIRE")
                .arg(&index)
                .arg(2 * self.idle_ms())
                .query_async::<i64>(&mut conn)
                .await?;
            return Ok(Vec::new());
        }
        let calls = due
            .iter()
            .map(|sid| self.terminating_call(&REAP_ONE, sid))
            .collect::<StoreResult<Vec<_>>>()?;
        let ttls: Vec<i64> =
            futures::future::try_join_all(calls.iter().map(|inv| self.invoke::<i64>(inv))).await?;
        let mut fix = pipe();
        let mut reaped = Vec::new();
        for (sid, pttl) in due.into_iter().zip(ttls) {
            if pttl == -2 {
                fix.cmd("ZREM").arg(&index).arg(&sid).ignore();
                reaped.push(sid);
            } else {
                let left = if pttl >= 0 {
                    pttl as u64
                } else {
                    self.idle_ms()
                };
                fix.cmd("ZADD")
                    .arg(&index)
                    .arg("XX")
                    .arg(now + left)
                    .arg(&sid)
                    .ignore();
            }
        }
        fix.cmd("PEXPIRE")
            .arg(&index)
            .arg(2 * self.idle_ms())
            .ignore();
        self.query::<()>(&fix).await?;
        self.announce_ended(&reaped).await;
        Ok(reaped)
    }
}
