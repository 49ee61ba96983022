//! [`EventLog`] over Redis.

use ::redis::{pipe, FromRedisValue, Value};
use async_trait::async_trait;
use switchboard_protocol::StreamId;

use super::scripts::*;
use super::{codec, upload, RedisStore};
use crate::error::StoreError;
use crate::model::*;
use crate::rules::{self, order};
use crate::traits::*;

/// How long the mark a confirmed log read writes lives (ms): it only has to reach the replicas.
const READ_MARK_TTL_MS: u64 = 1_000;

#[async_trait]
impl EventLog for RedisStore {
    /// With an append id of its own on Redis Cluster, whose client may send the script again
    /// after it ran. Elsewhere nothing sends it again (the standalone and Sentinel connections
    /// do not resend), and an append without an id costs Redis what it did before append ids:
    /// one with an id took 55 µs of Redis CPU against 35.6 µs (BENCHMARKS.md §13).
    async fn append(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
    ) -> StoreResult<Appended> {
        let id = if self.keys.sharded() {
            rules::new_append_id()
        } else {
            String::new()
        };
        self.append_with(sid, stream, data, end, &id).await
    }

    async fn append_once(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        append_id: &str,
    ) -> StoreResult<Appended> {
        self.append_with(sid, stream, data, end, append_id).await
    }

    /// Read-only: one atomic pipeline (`MULTI`), decided here by the same rules as the memory
    /// backend.
    async fn replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<Replay> {
        let p = self.log_reads(sid, stream, after, limit);
        let reads: LogReads = self.read_confirmed(sid, &p).await?;
        decide_replay(stream, after, reads)
    }

    /// The same `MULTI` as [`Self::replay`] with the stream's running entry (`HGET`) in it: one
    /// round trip, both read at one instant.
    async fn running_and_replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<(Option<RunningRequest>, Replay)> {
        let mut p = self.log_reads(sid, stream, after, limit);
        p.cmd("HGET").arg(self.session_keys(sid).run()).arg(stream);
        let reads: WithRunning = self.read_confirmed(sid, &p).await?;
        let (alive, registered, running, cut, log_exists, first, rest, run) = reads;
        let request = match run {
            Some(json) if alive == 1 => Some(parse_running(&json)?),
            _ => None,
        };
        let reads = (alive, registered, running, cut, log_exists, first, rest);
        Ok((request, decide_replay(stream, after, reads)?))
    }

    async fn claim(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<Claim> {
        let fresh = self.interest(sid).await?;
        let mut inv = self.session_call(&CLAIM, &self.session_keys(sid), Some(stream));
        inv.arg(stream)
            .arg(holder)
            .arg(&self.config.node_id)
            .arg(sid)
            .arg(self.route());
        let reply: Value = self.invoke(&inv).await?;
        match codec::array(&reply)? {
            [] => {
                if fresh {
                    self.lose_interest(sid);
                }
                Ok(Claim::Unknown)
            }
            [prev, last] => Ok(Claim::Claimed {
                previous: rules::some_holder(codec::string(prev)?),
                last_position: rules::some_holder(codec::string(last)?),
            }),
            other => Err(StoreError::Corrupt(format!(
                "claim reply of {} items",
                other.len()
            ))),
        }
    }

    async fn release(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<()> {
        let mut inv = self.session_call(&RELEASE, &self.session_keys(sid), None);
        inv.arg(stream).arg(holder);
        self.invoke::<i64>(&inv).await?;
        Ok(())
    }

    async fn running(&self, sid: &str, stream: &str) -> StoreResult<Option<RunningRequest>> {
        let sk = self.session_keys(sid);
        let mut p = pipe();
        p.atomic()
            .cmd("EXISTS")
            .arg(sk.record())
            .cmd("HGET")
            .arg(sk.run())
            .arg(stream);
        let (alive, run): (i64, Option<String>) = self.query(&p).await?;
        match run {
            Some(json) if alive == 1 => parse_running(&json).map(Some),
            _ => Ok(None),
        }
    }

    async fn abort_running(
        &self,
        sid: &str,
        stream: &str,
        node: &str,
        data: &str,
    ) -> StoreResult<Option<Appended>> {
        let sk = self.session_keys(sid);
        let mut inv = if StreamId::is_standalone_answered(stream) {
            self.session_call(&ABORT_TO_STANDALONE, &sk, Some(StreamId::STANDALONE))
        } else {
            self.session_call(&ABORT, &sk, Some(stream))
        };
        inv.arg(stream)
            .arg(data)
            .arg(node)
            .arg(rules::max_events(&self.config))
            .arg(&self.config.node_id)
            .arg(sid)
            .arg(self.event_route());
        self.cap_args(&mut inv, data);
        let reply: Value = self.invoke_durably(&inv).await?;
        let appended = codec::appended(&reply)?;
        if let Some(appended) = &appended {
            let (stream, end) = if StreamId::is_standalone_answered(stream) {
                (StreamId::STANDALONE, false)
            } else {
                (stream, true)
            };
            self.deliver_confirmed(sid, stream, data, end, appended)
                .await?;
        }
        Ok(appended)
    }
}

/// What [`RedisStore::log_reads`] reads: the session record's and the stream's existence, its
/// running entry's, its trim position, its log's existence, the log's first entry and the page.
type LogReads = (i64, i64, i64, Option<String>, i64, Value, Value);

/// [`LogReads`] and the stream's running entry (`HGET`).
type WithRunning = (
    i64,
    i64,
    i64,
    Option<String>,
    i64,
    Value,
    Value,
    Option<String>,
);

/// [`EventLog::replay`]'s answer from its reads.
fn decide_replay(stream: &str, after: &str, reads: LogReads) -> StoreResult<Replay> {
    let (alive, registered, running, cut, log_exists, first, rest) = reads;
    let (ms, seq) = order(after);
    let standalone = rules::is_standalone(stream);
    let known = standalone || (registered == 1 && (running == 1 || log_exists == 1));
    if alive == 0 || !known {
        return Ok(Replay::UnknownStream);
    }
    if log_exists == 0 {
        let empty = standalone || rules::is_start(after);
        return Ok(if empty {
            Replay::Events(Vec::new())
        } else {
            Replay::UnknownStream
        });
    }
    if let Some(cut) = cut.filter(|cut| order(cut) > (ms, seq)) {
        // A log emptied by `max_session_log_bytes` names its trim position.
        let first = codec::entries(first)?.into_iter().next();
        return Ok(Replay::Truncated {
            oldest: first.map_or(cut, |e| e.position),
        });
    }
    Ok(Replay::Events(codec::entries(rest)?))
}

impl RedisStore {
    /// The reads of a replay page after `after` (see [`LogReads`]), in one `MULTI`.
    fn log_reads(&self, sid: &str, stream: &str, after: &str, limit: usize) -> ::redis::Pipeline {
        let sk = self.session_keys(sid);
        let log = sk.log(stream);
        let (ms, seq) = order(after);
        let start = match seq.checked_add(1) {
            Some(next) => format!("{ms}-{next}"),
            None => format!("{}-0", ms.saturating_add(1)),
        };
        let mut p = pipe();
        p.atomic()
            .cmd("EXISTS")
            .arg(sk.record())
            .cmd("HEXISTS")
            .arg(sk.streams())
            .arg(stream)
            .cmd("HEXISTS")
            .arg(sk.run())
            .arg(stream)
            .cmd("GET")
            .arg(sk.trim(stream))
            .cmd("EXISTS")
            .arg(&log)
            .cmd("XRANGE")
            .arg(&log)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .cmd("XRANGE")
            .arg(&log)
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(limit.max(1));
        p
    }

    /// Runs the log reads `p` ([`Self::log_reads`]) and, with `min_replicas_acked`, a `WAIT` on
    /// the same connection after them: a log is read on the primary, which holds entries its
    /// replicas may never get (an append whose `WAIT` failed; writes the old primary took after
    /// a `SENTINEL FAILOVER` promoted its replica). Sent to a client and then lost with that
    /// primary, such an event was "received live, gone from the log" and came again under
    /// another position (the chaos suite's `graceful-failover --redis sentinel`, 2026-12-07).
    /// Fewer confirmations: [`StoreError::NotReplicated`] (the reader tries again later).
    async fn read_confirmed<T: FromRedisValue>(
        &self,
        sid: &str,
        reads: &::redis::Pipeline,
    ) -> StoreResult<T> {
        let wanted = self.replicas_wanted();
        if wanted == 0 {
            return self.query(reads).await;
        }
        // The reads in a `MULTI` of their own, a write of this connection (so that `WAIT`
        // covers every entry read), then `WAIT`: one pipeline, which follows the session's slot.
        let mut p = pipe();
        p.cmd("MULTI").ignore();
        for cmd in reads.cmd_iter() {
            p.add_command(cmd.clone()).ignore();
        }
        p.cmd("SET")
            .arg(self.session_keys(sid).read_mark())
            .arg(1)
            .arg("PX")
            .arg(READ_MARK_TTL_MS)
            .ignore()
            .cmd("EXEC")
            .cmd("WAIT")
            .arg(wanted)
            .arg(rules::millis(self.config.replicas_ack_timeout));
        let (exec, acked): (Vec<Value>, u32) = self.query_on(self.durable_conn(), &p).await?;
        if acked < wanted {
            return Err(self.short_of_replicas(acked, wanted));
        }
        // EXEC's replies: the reads', then the mark's.
        let reads = exec.len().saturating_sub(1);
        let mut exec = exec;
        exec.truncate(reads);
        T::from_redis_value(Value::Array(exec))
            .map_err(|e| StoreError::Corrupt(format!("a confirmed log read: {e}")))
    }

    /// The route the append scripts get for the event they write: the usual one, or `-` (the
    /// script delivers nothing) with `min_replicas_acked`, where [`Self::deliver_confirmed`]
    /// publishes it after the `WAIT`, so no node shows a client an event the replicas do not
    /// hold yet.
    fn event_route(&self) -> String {
        if self.config.min_replicas_acked > 0 {
            "-".to_owned()
        } else {
            self.route()
        }
    }

    /// The append scripts' last arguments: what the log keeps (`''`: `data` itself; else its
    /// stand-in, [`crate::caps::stored_form`]), `max_stream_log_bytes`, `max_session_log_bytes`.
    fn cap_args(&self, inv: &mut ::redis::ScriptInvocation<'_>, data: &str) {
        let stored = crate::caps::stored_form(data, &self.config).unwrap_or_default();
        inv.arg(stored)
            .arg(self.config.max_stream_log_bytes.max(1))
            .arg(self.config.max_session_log_bytes.max(1));
    }

    /// With `min_replicas_acked`: publishes the event the script stored (and the replicas
    /// confirmed) to its holder's node, as the script does otherwise (same rule,
    /// [`rules::delivers_event`]; Cluster: on the session's channel). One more command, only then.
    async fn deliver_confirmed(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        appended: &Appended,
    ) -> StoreResult<()> {
        let Some(holder) = appended.holder.as_deref() else {
            return Ok(());
        };
        if self.config.min_replicas_acked == 0
            || !rules::delivers_event(holder, stream, &self.config.node_id)
        {
            return Ok(());
        }
        let node = holder_node(holder);
        let json = serde_json::to_string(&BusMessage::Event(BusEvent {
            sid: sid.to_owned(),
            stream: stream.to_owned(),
            holder: holder.to_owned(),
            position: appended.position.clone(),
            data: data.to_owned(),
            end,
            verify: false,
        }))?;
        let mut conn = self.conn.clone();
        let publish = if self.keys.sharded() {
            ::redis::cmd("SPUBLISH")
                .arg(self.keys.session_channel(sid))
                .arg(format!("{node}\n{json}"))
                .clone()
        } else {
            ::redis::cmd("PUBLISH")
                .arg(self.keys.inbox(node))
                .arg(json)
                .clone()
        };
        publish.query_async::<i64>(&mut conn).await?;
        Ok(())
    }
}

/// The `{"node","request_key"}` JSON of a running entry.
fn parse_running(json: &str) -> StoreResult<RunningRequest> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    let field = |name: &str| {
        v.get(name)
            .and_then(|f| f.as_str())
            .map(str::to_owned)
            .ok_or_else(|| StoreError::Corrupt(format!("running entry without {name}: {json}")))
    };
    Ok(RunningRequest {
        node: field("node")?,
        request_key: field("request_key")?,
    })
}

impl RedisStore {
    /// One `APPEND` script; `append_id` empty: no id (nothing is looked up or remembered).
    /// Data over [`upload::UPLOAD_OVER`] is uploaded first ([`upload`]), again when the script
    /// finds the upload lost.
    async fn append_with(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        append_id: &str,
    ) -> StoreResult<Appended> {
        let sk = self.session_keys(sid);
        let large = data.len() > upload::UPLOAD_OVER;
        for _ in 0..upload::ATTEMPTS {
            let uploaded = if large {
                self.upload(&sk, data).await?
            } else {
                String::new()
            };
            let mut inv = self.session_call(&APPEND, &sk, Some(stream));
            inv.arg(stream)
                .arg(if large { "" } else { data })
                .arg(if end { "1" } else { "0" })
                .arg(rules::max_events(&self.config))
                .arg(&self.config.node_id)
                .arg(sid)
                .arg(self.event_route());
            self.cap_args(&mut inv, data);
            inv.arg(append_id).arg(&uploaded).arg(data.len());
            let reply: Value = self.invoke_durably(&inv).await?;
            if upload::lost(&reply) {
                tracing::warn!(
                    bytes = data.len(),
                    "a large event's upload was gone when its append ran; uploading it again"
                );
                continue;
            }
            let appended = codec::appended(&reply)?.unwrap_or_else(Appended::not_stored);
            self.deliver_confirmed(sid, stream, data, end, &appended)
                .await?;
            return Ok(appended);
        }
        Err(upload::kept_losing())
    }
}
