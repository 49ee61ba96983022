//! [`SessionStore`] over Redis.

use std::time::Instant;

use ::redis::{cmd, pipe, Value};
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
    /// Standalone and Sentinel: one script, the reservation in the session index (atomic cap
    /// check) and the record. Redis Cluster (the index lives in a slot of its own): two round
    /// trips, the reservation, then the record. A third, `WAIT`, with `min_replicas_acked` above
    /// 0. The new record is cached at its version (1), so the session's next admission on this
    /// node (`notifications/initialized`, usually) reads only the version.
    async fn create_session(&self, record: &SessionRecord) -> StoreResult<CreateOutcome> {
        let idle = self.idle_ms();
        let key = self.session_keys(&record.id).record();
        let per_principal = self.config.max_sessions_per_principal;
        let principal_key =
            (per_principal > 0).then(|| self.keys.principal_sessions(&record.principal));
        let fields = codec::record_fields(record)?;
        let sharded = self.keys.sharded();
        let mut reserve = if sharded {
            RESERVE.prepare_invoke()
        } else {
            CREATE.prepare_invoke()
        };
        reserve.key(self.keys.sessions());
        if !sharded {
            reserve.key(&key);
        }
        if let Some(owned) = &principal_key {
            reserve.key(owned);
        }
        reserve
            .arg(self.config.max_sessions)
            .arg(&record.id)
            .arg(rules::now_ms() + idle)
            .arg(2 * idle)
            .arg(per_principal);
        if !sharded {
            reserve.arg(idle).arg(&fields).arg("ver").arg(1);
        }
        let wanted = self.replicas_wanted();
        // The record and its `WAIT` on one connection (`WAIT` counts that client's writes), one
        // of those kept for waiting writes; `WAIT` follows the record's slot (it has no key).
        let conn = if wanted == 0 {
            &self.conn
        } else {
            self.durable_conn()
        };
        let reserved = if sharded || wanted == 0 {
            self.invoke::<i64>(&reserve).await?
        } else {
            let mut p = pipe();
            p.invoke_script(&reserve);
            self.query_on::<(i64,)>(conn, &p).await?.0
        };
        match reserved {
            0 => return Ok(CreateOutcome::AtCapacity),
            2 => return Ok(CreateOutcome::PrincipalAtCapacity),
            _ => {}
        }
        if sharded {
            let mut p = pipe();
            p.atomic()
                .cmd("DEL")
                .arg(&key)
                .ignore()
                .cmd("HSET")
                .arg(&key)
                .arg(&fields)
                .arg("ver")
                .arg(1)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(idle)
                .ignore();
            self.query_on::<()>(conn, &p).await?;
        }
        if wanted > 0 {
            let mut wait = pipe();
            wait.cmd("EXISTS")
                .arg(&key)
                .ignore()
                .cmd("WAIT")
                .arg(wanted)
                .arg(rules::millis(self.config.replicas_ack_timeout));
            let (acked,): (u32,) = self.query_on(conn, &wait).await?;
            if acked < wanted {
                // The client never learns this session's id: it must not hold a place under
                // `session.max_sessions` until it idles out.
                if let Err(e) = self.delete_session(&record.id).await {
                    tracing::warn!(error = %e, session = %switchboard_telemetry::trace::logged_session(&record.id), "could not remove a session whose creation was not confirmed by replicas");
                }
                return Err(self.short_of_replicas(acked, wanted));
            }
        }
        let touch_due_at = Instant::now() + rules::touch_window(idle);
        self.records.put(&record.id, "1", record, touch_due_at);
        Ok(CreateOutcome::Created)
    }

    async fn begin(
        &self,
        sid: &str,
        inflight: Option<&InflightRequest>,
    ) -> StoreResult<BeginOutcome> {
        self.begin_script(sid, inflight, &[]).await
    }

    /// Standalone and Sentinel: the rates go into the `BEGIN` script (their keys in `KEYS`), so
    /// a rated request is one script, never the cached transaction. Redis Cluster: ignored (see
    /// [`SessionStore::folds_rates`]).
    async fn check(
        &self,
        sid: &str,
        request_key: &str,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        let probe = InflightRequest {
            request_key: request_key.to_owned(),
            stream: String::new(),
            node: String::new(),
            holder: String::new(),
        };
        let rates = if self.folds_rates() { rates } else { &[] };
        self.begin_script(sid, Some(&probe), rates).await
    }

    /// One `BEGIN` script: the checks, then the rates, then the registration.
    async fn begin_rated(
        &self,
        sid: &str,
        inflight: &InflightRequest,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        let rates = if self.folds_rates() { rates } else { &[] };
        self.begin_script(sid, Some(inflight), rates).await
    }

    fn folds_rates(&self) -> bool {
        !self.keys.sharded()
    }

    async fn take_rates(&self, rates: &[crate::Rate]) -> StoreResult<crate::RateDecision> {
        self.take_rates_now(rates).await
    }

    async fn register(&self, sid: &str, inflight: &InflightRequest) -> StoreResult<bool> {
        let fresh = self.interest(sid).await?;
        let mut inv = self.session_call(&REGISTER, &self.session_keys(sid), None);
        inv.arg(&inflight.request_key)
            .arg(&inflight.stream)
            .arg(&inflight.node)
            .arg(&inflight.holder);
        let registered = self.invoke::<i64>(&inv).await? == 1;
        if fresh && !registered {
            self.lose_interest(sid);
        }
        Ok(registered)
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
        self.interest(sid).await?;
        let inv = self.session_call(&TOUCH, &self.session_keys(sid), None);
        let alive = self.invoke::<i64>(&inv).await? == 1;
        if !alive {
            self.lose_interest(sid);
        }
        Ok(alive)
    }

    async fn exists(&self, sid: &str) -> StoreResult<bool> {
        let mut conn = self.conn.clone();
        let n: i64 = cmd("EXISTS")
            .arg(self.session_keys(sid).record())
            .query_async(&mut conn)
            .await?;
        Ok(n == 1)
    }

    /// `HMGET <record> ct own` per session, sent together (`ct` is in every record: its absence
    /// means the session is gone).
    async fn owners_of(
        &self,
        sids: &[String],
    ) -> StoreResult<Vec<Option<std::collections::BTreeMap<String, String>>>> {
        let reads = sids.iter().map(|sid| {
            let mut conn = self.conn.clone();
            let key = self.session_keys(sid).record();
            async move {
                cmd("HMGET")
                    .arg(key)
                    .arg("ct")
                    .arg("own")
                    .query_async::<(Option<String>, Option<String>)>(&mut conn)
                    .await
            }
        });
        let replies = futures::future::try_join_all(reads).await?;
        replies
            .into_iter()
            .map(|(created, owners)| match (created, owners) {
                (None, _) => Ok(None),
                (Some(_), None) => Ok(Some(Default::default())),
                (Some(_), Some(json)) => Ok(Some(serde_json::from_str(&json)?)),
            })
            .collect()
    }

    async fn update(&self, sid: &str, update: SessionUpdate) -> StoreResult<bool> {
        let (kind, a, b) = update_args(&update)?;
        let mut inv = self.session_call(&UPDATE, &self.session_keys(sid), None);
        inv.arg(kind).arg(a).arg(b);
        // The next `begin` reads the changed record in its own round trip (see `admit_cached`).
        self.records.forget(sid);
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    /// One `BEGIN_UPDATE` script, sending the cached record's version: when it is current the
    /// update is applied to the cached copy (no record crosses the wire) and the copy is kept at
    /// the new version, so the session's next admission is the cached transaction.
    async fn begin_update(
        &self,
        sid: &str,
        principal: &str,
        update: SessionUpdate,
    ) -> StoreResult<BeginOutcome> {
        let cached = self.records.get(sid);
        let (kind, a, b) = update_args(&update)?;
        let mut inv = self.session_call(&BEGIN_UPDATE, &self.session_keys(sid), None);
        inv.arg(cached.as_ref().map_or("", |c| c.version.as_str()))
            .arg(principal)
            .arg(kind)
            .arg(a)
            .arg(b);
        let now = Instant::now();
        let reply: Value = self.invoke(&inv).await?;
        let (applied, record, version) = match codec::array(&reply)? {
            [status] if codec::int(status)? == 0 => {
                self.records.forget(sid);
                return Ok(BeginOutcome::Missing);
            }
            [applied, record, version] => (codec::int(applied)? == 1, record, version),
            other => {
                return Err(StoreError::Corrupt(format!(
                    "begin_update reply of {} items",
                    other.len()
                )))
            }
        };
        let record = match (codec::array(record)?.is_empty(), cached) {
            (true, Some(cached)) => {
                let mut record = cached.record;
                if applied {
                    record.apply(update);
                }
                record
            }
            _ => codec::record_from_hash(sid, record)?,
        };
        let touch_due_at = now + rules::touch_window(self.idle_ms());
        self.records
            .put(sid, &codec::string(version)?, &record, touch_due_at);
        Ok(BeginOutcome::Ready(record))
    }

    async fn swap_upstream_sessions(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> StoreResult<UpstreamSwap> {
        // An empty value never names a session (the upstream crate stores `"<id>|<revision>"`),
        // so `''` stands for "absent".
        let mut inv = self.session_call(&SWAP_UPSTREAM, &self.session_keys(sid), None);
        inv.arg(upstream)
            .arg(expected.unwrap_or(""))
            .arg(serde_json::to_string(&entries)?);
        self.records.forget(sid);
        let reply: Vec<::redis::Value> = self.invoke(&inv).await?;
        let code = match reply.first() {
            Some(::redis::Value::Int(n)) => *n,
            _ => return Err(StoreError::Corrupt("swap_upstream_sessions reply".into())),
        };
        Ok(match code {
            0 => UpstreamSwap::Missing,
            1 => UpstreamSwap::Swapped,
            _ => {
                let raw: String = match reply.get(1) {
                    Some(v) => ::redis::from_redis_value(v.clone())
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    None => "{}".into(),
                };
                UpstreamSwap::Changed(serde_json::from_str(&raw)?)
            }
        })
    }

    async fn claim_owner(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
    ) -> StoreResult<OwnerClaim> {
        let fresh = self.interest(sid).await?;
        let mut inv = self.session_call(&CLAIM_OWNER, &self.session_keys(sid), None);
        inv.arg(upstream)
            .arg(&self.config.node_id)
            .arg(expected.unwrap_or(""));
        self.records.forget(sid);
        let reply: Vec<::redis::Value> = self.invoke(&inv).await?;
        let code = match reply.first() {
            Some(::redis::Value::Int(n)) => *n,
            _ => return Err(StoreError::Corrupt("claim_owner reply".into())),
        };
        if fresh && code != 1 {
            self.lose_interest(sid);
        }
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

    /// The session's keys go in one script (one slot); the index entry is removed by a separate
    /// command sent with it (it lives in another slot in a cluster).
    async fn delete_session(&self, sid: &str) -> StoreResult<bool> {
        self.records.forget(sid);
        let inv = self.terminating_call(&DELETE, sid)?;
        let mut conn = self.conn.clone();
        let mut unindex = cmd("ZREM");
        unindex.arg(self.keys.sessions()).arg(sid);
        let (existed, _) = futures::try_join!(self.invoke::<i64>(&inv), async {
            Ok(unindex.query_async::<i64>(&mut conn).await?)
        })?;
        if existed == 1 {
            self.announce_ended(&[sid.to_owned()]).await;
        }
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
    /// one script per id (sent together; each runs in its session's slot), one pipeline fixing
    /// the index.
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

/// The `kind, a, b` arguments of the `UPDATE` and `BEGIN_UPDATE` scripts for `update`.
fn update_args(update: &SessionUpdate) -> StoreResult<(&'static str, &str, String)> {
    Ok(match update {
        SessionUpdate::Initialized => ("ready", "", String::new()),
        SessionUpdate::Initialize { revision, params } => {
            ("init", revision.as_str(), serde_json::to_string(params)?)
        }
        SessionUpdate::LogLevel(level) => ("lvl", level.as_str(), String::new()),
        SessionUpdate::Subscription {
            uri,
            subscribed,
            upstream,
        } => (
            if *subscribed { "sub" } else { "unsub" },
            uri.as_str(),
            upstream.clone().unwrap_or_default(),
        ),
        SessionUpdate::UpstreamSession {
            upstream,
            session_id: Some(id),
        } => ("ups", upstream.as_str(), id.clone()),
        SessionUpdate::UpstreamSession {
            upstream,
            session_id: None,
        } => ("unups", upstream.as_str(), String::new()),
    })
}

/// The node of an in-flight entry (`<node>\n<stream>`).
pub(super) fn running_node(entry: &str) -> String {
    entry.split_once('\n').map_or(entry, |(n, _)| n).to_owned()
}

impl RedisStore {
    /// `begin` (and `check`, with a request and `rates`) in one round trip: the cached
    /// transaction when nothing is registered, no rate is checked and no touch is due, else the
    /// `BEGIN` script.
    async fn begin_script(
        &self,
        sid: &str,
        inflight: Option<&InflightRequest>,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        let sk = self.session_keys(sid);
        let registers = inflight.is_some_and(|req| !req.stream.is_empty());
        // A session id nobody has must not leave a subscription behind (`fresh`).
        let fresh = registers && self.interest(sid).await?;
        let now = Instant::now();
        // Without a touch due, a cached record is admitted by `admit_cached` (no script); with
        // one due (by this node's last look at the record's expiry, e.g. for a session used less
        // often than once per 1/64 of the idle TTL) the script does it in the same round trip.
        let cached = match self.records.get(sid) {
            Some(cached) if !registers && rates.is_empty() && now < cached.touch_due_at => {
                let request_key = inflight.map(|req| req.request_key.as_str());
                match self
                    .admit_cached(sid, &sk, &cached.version, request_key)
                    .await?
                {
                    Some(admission) => return Ok(admission.with(cached.record)),
                    None => Some(cached),
                }
            }
            other => other,
        };
        let mut inv = self.session_call(&BEGIN, &sk, None);
        inv.arg(cached.as_ref().map_or("", |c| c.version.as_str()));
        if let Some(req) = inflight {
            inv.arg(&req.request_key)
                .arg(&req.stream)
                .arg(&req.node)
                .arg(&req.holder)
                .arg(self.config.max_inflight_per_session);
            self.rate_args(&mut inv, rates);
        }
        let reply: Value = self.invoke(&inv).await?;
        let (status, running, record) = match codec::array(&reply)? {
            [status] if codec::int(status)? == 0 => {
                self.records.forget(sid);
                if fresh {
                    self.lose_interest(sid);
                }
                return Ok(BeginOutcome::Missing);
            }
            [status, running, record, version] => {
                // The script touched the session if it was due, so the next touch falls due
                // within 1/64 of the idle TTL.
                let touch_due_at = now + rules::touch_window(self.idle_ms());
                let record = match (codec::array(record)?.is_empty(), cached) {
                    (true, Some(cached)) => {
                        self.records.expect_touch(sid, touch_due_at);
                        cached.record
                    }
                    _ => {
                        let record = codec::record_from_hash(sid, record)?;
                        let version = codec::string(version)?;
                        self.records.put(sid, &version, &record, touch_due_at);
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
            4 => super::rates::limited(record, running, rates),
            _ => Ok(BeginOutcome::DuplicateId {
                record,
                node: running_node(&codec::string(running)?),
            }),
        }
    }
}
