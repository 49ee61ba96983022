//! [`SessionStore`] over Redis.

use ::redis::{cmd, pipe, ScriptInvocation, Value};
use async_trait::async_trait;

use super::scripts::*;
use super::{codec, RedisStore};
use crate::error::StoreError;
use crate::model::*;
use crate::rules;
use crate::traits::*;

/// How long a reaper pass may hold the lock before another node may take over (a pass releases
/// it as soon as it is done).
const REAPER_LOCK_MS: u64 = 30_000;

#[async_trait]
impl SessionStore for RedisStore {
    /// Two round trips: a reservation in the session index (atomic cap check), then the record.
    async fn create_session(&self, record: &SessionRecord) -> StoreResult<CreateOutcome> {
        let idle = self.idle_ms();
        let mut reserve = RESERVE.prepare_invoke();
        reserve
            .key(self.keys.sessions())
            .arg(self.config.max_sessions)
            .arg(&record.id)
            .arg(rules::now_ms() + idle)
            .arg(2 * idle);
        if self.invoke::<i64>(&reserve).await? == 0 {
            return Ok(CreateOutcome::AtCapacity);
        }
        let key = self.session_keys(&record.id).record();
        let mut p = pipe();
        p.atomic()
            .cmd("DEL")
            .arg(&key)
            .ignore()
            .cmd("HSET")
            .arg(&key)
            .arg(codec::record_fields(record)?)
            .arg("ver")
            .arg(1)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(idle)
            .ignore();
        self.query::<()>(&p).await?;
        Ok(CreateOutcome::Created)
    }

    async fn begin(
        &self,
        sid: &str,
        inflight: Option<&InflightRequest>,
    ) -> StoreResult<BeginOutcome> {
        let sk = self.session_keys(sid);
        let cached = self.records.get(sid);
        let mut inv = self.session_call(&BEGIN, &sk, None);
        inv.arg(cached.as_ref().map_or("", |(v, _)| v.as_str()));
        if let Some(req) = inflight {
            inv.arg(&req.request_key)
                .arg(&req.stream)
                .arg(&req.node)
                .arg(&req.holder)
                .arg(self.config.max_inflight_per_session);
        }
        let reply: Value = self.invoke(&inv).await?;
        let (status, running, record) = match codec::array(&reply)? {
            [status] if codec::int(status)? == 0 => {
                self.records.forget(sid);
                return Ok(BeginOutcome::Missing);
            }
            [status, running, record, version] => {
                let record = match (codec::array(record)?.is_empty(), cached) {
                    (true, Some((_, cached))) => cached,
                    _ => {
                        let record = codec::record_from_hash(sid, record)?;
                        self.records.put(sid, &codec::string(version)?, &record);
                        record
                    }
                };
                (codec::int(status)?, running, record)
            }
            other => {
                return Err(StoreError::Corrupt(format!(
                    "begin reply of {} items",
                    other.len()
                )))
            }
        };
        match status {
            1 => Ok(BeginOutcome::Ready(record)),
            3 => Ok(BeginOutcome::Busy(record)),
            _ => {
                let running = codec::string(running)?;
                let node = running
                    .split_once('\n')
                    .map_or(running.as_str(), |(n, _)| n)
                    .to_owned();
                Ok(BeginOutcome::DuplicateId { record, node })
            }
        }
    }

    async fn check(&self, sid: &str, request_key: &str) -> StoreResult<BeginOutcome> {
        let probe = InflightRequest {
            request_key: request_key.to_owned(),
            stream: String::new(),
            node: String::new(),
            holder: String::new(),
        };
        self.begin(sid, Some(&probe)).await
    }

    async fn register(&self, sid: &str, inflight: &InflightRequest) -> StoreResult<bool> {
        let mut inv = self.session_call(&REGISTER, &self.session_keys(sid), None);
        inv.arg(&inflight.request_key)
            .arg(&inflight.stream)
            .arg(&inflight.node)
            .arg(&inflight.holder);
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    async fn finish(
        &self,
        sid: &str,
        request_key: &str,
        json_stream: Option<&str>,
    ) -> StoreResult<()> {
        let sk = self.session_keys(sid);
        let mut inv = self.session_call(&FINISH, &sk, None);
        inv.arg(request_key);
        if let Some(stream) = json_stream {
            inv.arg(stream);
        }
        self.invoke::<i64>(&inv).await?;
        Ok(())
    }

    async fn in_flight(&self, sid: &str) -> StoreResult<Vec<InflightEntry>> {
        let mut conn = self.conn.clone();
        let entries: Vec<(String, String)> = cmd("HGETALL")
            .arg(self.session_keys(sid).inf())
            .query_async(&mut conn)
            .await?;
        entries
            .into_iter()
            .map(|(request_key, value)| {
                let (node, stream) = value.split_once('\n').ok_or_else(|| {
                    StoreError::Corrupt(format!("in-flight entry without a stream: {value:?}"))
                })?;
                Ok(InflightEntry {
                    request_key,
                    node: node.to_owned(),
                    stream: stream.to_owned(),
                })
            })
            .collect()
    }

    async fn forget_in_flight(&self, sid: &str, entry: &InflightEntry) -> StoreResult<bool> {
        let mut inv = self.session_call(&FORGET, &self.session_keys(sid), None);
        inv.arg(&entry.request_key)
            .arg(format!("{}\n{}", entry.node, entry.stream));
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    async fn touch(&self, sid: &str) -> StoreResult<bool> {
        let inv = self.session_call(&TOUCH, &self.session_keys(sid), None);
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    async fn exists(&self, sid: &str) -> StoreResult<bool> {
        let mut conn = self.conn.clone();
        let n: i64 = cmd("EXISTS")
            .arg(self.session_keys(sid).record())
            .query_async(&mut conn)
            .await?;
        Ok(n == 1)
    }

    async fn update(&self, sid: &str, update: SessionUpdate) -> StoreResult<bool> {
        let (kind, a, b) = match update {
            SessionUpdate::Initialized => ("ready", String::new(), String::new()),
            SessionUpdate::Initialize { revision, params } => {
                ("init", revision, serde_json::to_string(&params)?)
            }
            SessionUpdate::LogLevel(level) => ("lvl", level, String::new()),
            SessionUpdate::Subscription { uri, subscribed } => {
                (if subscribed { "sub" } else { "unsub" }, uri, String::new())
            }
            SessionUpdate::UpstreamSession {
                upstream,
                session_id: Some(id),
            } => ("ups", upstream, id),
            SessionUpdate::UpstreamSession {
                upstream,
                session_id: None,
            } => ("unups", upstream, String::new()),
        };
        let mut inv = self.session_call(&UPDATE, &self.session_keys(sid), None);
        inv.arg(kind).arg(a).arg(b);
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    async fn claim_owner(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
    ) -> StoreResult<OwnerClaim> {
        let mut inv = self.session_call(&CLAIM_OWNER, &self.session_keys(sid), None);
        inv.arg(upstream)
            .arg(&self.config.node_id)
            .arg(expected.unwrap_or(""));
        let reply: Vec<::redis::Value> = self.invoke(&inv).await?;
        let code = match reply.first() {
            Some(::redis::Value::Int(n)) => *n,
            _ => return Err(StoreError::Corrupt("claim_owner reply".into())),
        };
        Ok(match code {
            0 => OwnerClaim::Missing,
            1 => OwnerClaim::Claimed,
            _ => {
                let current = match reply.get(1) {
                    Some(v) => ::redis::from_redis_value::<String>(v.clone())
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    None => String::new(),
                };
                OwnerClaim::Held(current)
            }
        })
    }

    /// One pipeline: the session's keys go in one script (one slot); the index entry is removed
    /// by a separate command in the same pipeline (it lives in another slot in a cluster).
    async fn delete_session(&self, sid: &str) -> StoreResult<bool> {
        self.records.forget(sid);
        let inv = self.terminating_call(&DELETE, sid)?;
        let mut p = pipe();
        p.invoke_script(&inv)
            .cmd("ZREM")
            .arg(self.keys.sessions())
            .arg(sid)
            .ignore();
        let (existed,): (i64,) = self.query(&p).await?;
        Ok(existed == 1)
    }

    async fn count_sessions(&self) -> StoreResult<u64> {
        let mut conn = self.conn.clone();
        Ok(cmd("ZCARD")
            .arg(self.keys.sessions())
            .query_async(&mut conn)
            .await?)
    }

    /// Takes the reaper lock, then needs three more round trips whatever `limit` is: the due ids,
    /// one pipelined script per id, one pipeline fixing the index.
    async fn reap(&self, limit: usize) -> StoreResult<Vec<String>> {
        let token = format!("{}/{:016x}", self.config.node_id, rand::random::<u64>());
        let lock = self.keys.reaper();
        let mut conn = self.conn.clone();
        let got: Value = cmd("SET")
            .arg(&lock)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(REAPER_LOCK_MS)
            .query_async(&mut conn)
            .await?;
        if matches!(got, Value::Nil) {
            return Ok(Vec::new());
        }
        let result = self.reap_locked(limit).await;
        let mut unlock = UNLOCK.prepare_invoke();
        unlock.key(&lock).arg(&token);
        if let Err(e) = self.invoke::<i64>(&unlock).await {
            tracing::warn!(error = %e, "cannot release the reaper lock; it lapses by itself");
        }
        result
    }
}

impl RedisStore {
    /// A `DELETE`/`REAP_ONE` invocation for `sid` (it broadcasts `Terminated`).
    fn terminating_call(
        &self,
        script: &'static ::redis::Script,
        sid: &str,
    ) -> StoreResult<ScriptInvocation<'static>> {
        let terminated = Self::encode(&BusMessage::Terminated {
            sid: sid.to_owned(),
        })?;
        let mut inv = self.session_call(script, &self.session_keys(sid), None);
        inv.arg(self.keys.all()).arg(terminated);
        Ok(inv)
    }

    async fn reap_locked(&self, limit: usize) -> StoreResult<Vec<String>> {
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
        let mut p = pipe();
        for inv in &calls {
            p.invoke_script(inv);
        }
        let ttls: Vec<i64> = self.query(&p).await?;
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
        Ok(reaped)
    }
}
