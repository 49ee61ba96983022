//! [`TaskStore`] over Redis: one hash per task with a PX expiry; creation and status changes are
//! Lua scripts, so "terminal never changes" holds however many nodes race.

use std::collections::HashMap;
use std::sync::LazyLock;

use ::redis::Script;
use async_trait::async_trait;

use super::RedisStore;
use crate::error::StoreError;
use crate::task::*;
use crate::traits::*;

/// Creates a task unless its key exists. KEYS[1] the task; ARGV: principal, node, status,
/// created, updated, ttl ms, poll ms, message (`''`: none), format ([`crate::FORMAT`]).
/// Returns 1, or 0 when it existed.
static CREATE: LazyLock<Script> = LazyLock::new(|| {
    super::scripts::script(
        r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'prn', ARGV[1], 'node', ARGV[2], 'st', ARGV[3], 'ct', ARGV[4],
  'up', ARGV[5], 'ttl', ARGV[6], 'poll', ARGV[7], 'fv', ARGV[9])
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'msg', ARGV[8]) end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
"#,
    )
});

/// Changes a task that is not terminal. KEYS[1] the task; ARGV: status, updated, message and
/// outcome (`''`: keep). Returns `{}` (missing), or `{'changed'|'terminal', field, value, …}`.
/// HSET keeps the key's expiry.
static SETTLE: LazyLock<Script> = LazyLock::new(|| {
    super::scripts::script(
        r#"
local st = redis.call('HGET', KEYS[1], 'st')
if not st then return {} end
local verdict = 'terminal'
if st ~= 'completed' and st ~= 'failed' and st ~= 'cancelled' then
  verdict = 'changed'
  redis.call('HSET', KEYS[1], 'st', ARGV[1], 'up', ARGV[2])
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'msg', ARGV[3])
  else redis.call('HDEL', KEYS[1], 'msg') end
  if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'out', ARGV[4]) end
end
local all = redis.call('HGETALL', KEYS[1])
table.insert(all, 1, verdict)
return all
"#,
    )
});

/// Ends a task at its TTL. KEYS[1] the task, KEYS[2] its tombstone (same slot); ARGV:
/// principal, grace ms.
static EXPIRE: LazyLock<Script> = LazyLock::new(|| {
    super::scripts::script(
        r#"
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
"#,
    )
});

/// Takes a running-task slot. KEYS[1] the principal's slots; ARGV: task id, max, ttl ms.
/// Slots past their time are dropped first. Returns 1, or 0 at the cap.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    super::scripts::script(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
"#,
    )
});

#[async_trait]
impl TaskStore for RedisStore {
    async fn expire_task(&self, task_id: &str, principal: &str, grace_ms: u64) -> StoreResult<()> {
        let mut inv = EXPIRE.prepare_invoke();
        inv.key(self.keys.task(task_id))
            .key(self.keys.task_expired(task_id))
            .arg(principal)
            .arg(grace_ms.max(1));
        self.invoke::<i64>(&inv).await.map(|_| ())
    }

    async fn expired_task(&self, task_id: &str) -> StoreResult<Option<String>> {
        let mut conn = self.conn.clone();
        Ok(::redis::cmd("GET")
            .arg(self.keys.task_expired(task_id))
            .query_async(&mut conn)
            .await?)
    }

    async fn claim_task_slot(
        &self,
        principal: &str,
        task_id: &str,
        max: u64,
        ttl_ms: u64,
    ) -> StoreResult<bool> {
        let mut inv = CLAIM.prepare_invoke();
        inv.key(self.keys.task_slots(principal))
            .arg(task_id)
            .arg(max)
            .arg(ttl_ms.max(1));
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    async fn release_task_slot(&self, principal: &str, task_id: &str) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        let _: i64 = ::redis::cmd("ZREM")
            .arg(self.keys.task_slots(principal))
            .arg(task_id)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    async fn create_task(&self, r: &TaskRecord) -> StoreResult<bool> {
        let mut inv = CREATE.prepare_invoke();
        inv.key(self.keys.task(&r.task_id))
            .arg(&r.principal)
            .arg(&r.node)
            .arg(r.status.as_str())
            .arg(&r.created_at)
            .arg(&r.last_updated_at)
            .arg(r.ttl_ms.max(1))
            .arg(r.poll_interval_ms)
            .arg(r.status_message.as_deref().unwrap_or(""))
            .arg(crate::FORMAT);
        Ok(self.invoke::<i64>(&inv).await? == 1)
    }

    async fn get_task(&self, task_id: &str) -> StoreResult<Option<TaskRecord>> {
        let mut conn = self.conn.clone();
        let fields: HashMap<String, String> = ::redis::cmd("HGETALL")
            .arg(self.keys.task(task_id))
            .query_async(&mut conn)
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        decode(task_id, &fields).map(Some)
    }

    async fn settle_task(&self, task_id: &str, change: &TaskChange) -> StoreResult<Settled> {
        let mut inv = SETTLE.prepare_invoke();
        inv.key(self.keys.task(task_id))
            .arg(change.status.as_str())
            .arg(&change.at)
            .arg(change.message.as_deref().unwrap_or(""))
            .arg(change.outcome.as_deref().unwrap_or(""));
        let reply: Vec<String> = self.invoke(&inv).await?;
        let Some((verdict, flat)) = reply.split_first() else {
            return Ok(Settled::Missing);
        };
        let fields: HashMap<String, String> = flat
            .chunks_exact(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect();
        let record = decode(task_id, &fields)?;
        Ok(match verdict.as_str() {
            "changed" => Settled::Changed(record),
            _ => Settled::AlreadyTerminal(record),
        })
    }
}

/// A task record from its hash fields.
fn decode(task_id: &str, f: &HashMap<String, String>) -> StoreResult<TaskRecord> {
    let text = |k: &str| {
        f.get(k)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt(format!("task {task_id}: no field {k}")))
    };
    let number = |k: &str| {
        text(k)?
            .parse::<u64>()
            .map_err(|e| StoreError::Corrupt(format!("task {task_id}: field {k}: {e}")))
    };
    let st = text("st")?;
    let status = TaskStatus::parse(&st)
        .ok_or_else(|| StoreError::Corrupt(format!("task {task_id}: status {st:?}")))?;
    Ok(TaskRecord {
        task_id: task_id.to_owned(),
        principal: text("prn")?,
        node: text("node")?,
        status,
        status_message: f.get("msg").cloned(),
        created_at: text("ct")?,
        last_updated_at: text("up")?,
        ttl_ms: number("ttl")?,
        poll_interval_ms: number("poll")?,
        outcome: f.get("out").cloned(),
    })
}
