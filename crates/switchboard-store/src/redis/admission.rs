//! The admission of a request on a cached session record without a script (see
//! [`RedisStore::admit_cached`]).

use std::time::Instant;

use ::redis::{pipe, Value};

use super::scripts::TOUCH;
use super::session::running_node;
use super::{codec, RedisStore};
use crate::error::StoreError;
use crate::model::*;
use crate::rules;
use crate::traits::StoreResult;

/// What [`RedisStore::admit_cached`] decided, before the cached record is attached.
pub(super) enum Admission {
    Ready,
    Busy,
    DuplicateId(String),
}

impl Admission {
    pub(super) fn with(self, record: SessionRecord) -> BeginOutcome {
        match self {
            Admission::Ready => BeginOutcome::Ready(record),
            Admission::Busy => BeginOutcome::Busy(record),
            Admission::DuplicateId(node) => BeginOutcome::DuplicateId { record, node },
        }
    }
}

impl RedisStore {
    /// `begin` for a session whose record this node has cached at `version`, when nothing is to
    /// be registered (a notification, or a request checked by `check`): one `MULTI`/`EXEC` of
    /// plain reads (the record's `ver` and `PTTL`, and for a request `HGET` of its key in the
    /// in-flight hash and that hash's `HLEN`) in place of the `BEGIN` script, whose Lua cost Redis
    /// ~10 µs per call for the same reads (BENCHMARKS.md §4). The same atomic snapshot and the
    /// same one round trip. `begin` only comes here while this node expects no touch to be due;
    /// when one is due all the same (another node's look, clock drift), the touch is a second
    /// round trip, and either way the record's remaining time sets the next expected touch.
    ///
    /// Returns `None` when the cached version is not current or the record is gone: the caller
    /// then runs the script, which reads the record whole or reports the session missing (a
    /// second round trip, once per change another node makes to the record; this node forgets
    /// its cached record when it changes the record itself, so its next `begin` is the script).
    pub(super) async fn admit_cached(
        &self,
        sid: &str,
        sk: &super::keys::SessionKeys,
        version: &str,
        request_key: Option<&str>,
    ) -> StoreResult<Option<Admission>> {
        let record_key = sk.record();
        let mut p = pipe();
        p.atomic()
            .cmd("HGET")
            .arg(&record_key)
            .arg("ver")
            .cmd("PTTL")
            .arg(&record_key);
        if let Some(key) = request_key {
            let inf = sk.inf();
            p.cmd("HGET").arg(&inf).arg(key).cmd("HLEN").arg(&inf);
        }
        let reply: Vec<Value> = self.query(&p).await?;
        let (current, pttl, running, in_flight) = match reply.as_slice() {
            [current, pttl] => (current, pttl, &Value::Nil, 0),
            [current, pttl, running, len] => (current, pttl, running, codec::int(len)?),
            other => {
                return Err(StoreError::Corrupt(format!(
                    "admission reply of {} items",
                    other.len()
                )))
            }
        };
        if matches!(current, Value::Nil) || codec::string(current)? != version {
            return Ok(None);
        }
        let (pttl, ttl) = (codec::int(pttl)?, self.idle_ms());
        if rules::touch_due(pttl, ttl) {
            let inv = self.session_call(&TOUCH, sk, None);
            if self.invoke::<i64>(&inv).await? == 0 {
                return Ok(None);
            }
            self.records
                .expect_touch(sid, Instant::now() + rules::touch_window(ttl));
        } else {
            let due_in = rules::until_touch_due(pttl, ttl);
            self.records.expect_touch(sid, Instant::now() + due_in);
        }
        Ok(Some(match running {
            Value::Nil if in_flight as u64 >= self.config.max_inflight_per_session => {
                Admission::Busy
            }
            Value::Nil => Admission::Ready,
            running => Admission::DuplicateId(running_node(&codec::string(running)?)),
        }))
    }
}
