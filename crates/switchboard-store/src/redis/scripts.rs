//! The Lua scripts of the Redis backend (run with EVALSHA, loaded on demand).
//!
//! Every *session script* gets `KEYS[1..5]` = record, stream registry, running, in-flight, pending
//! (see [`super::keys::SessionKeys::core`]), `KEYS[6..7]` = a stream's log and trim marker when it
//! works on a stream, `ARGV[1]` = the `p:{sid}:` base and `ARGV[2]` = `idle_ttl` in ms; its own
//! arguments start at `ARGV[3]`. "The session exists" always means "the record hash exists".

use std::sync::LazyLock;

use parking_lot::Mutex;
use redis::Script;

use super::append_script::APPEND_EVENT;
use super::delivery::DELIVERY;
use crate::rules::{PRUNE_AT, PRUNE_EVERY};

/// Every script this process has built: what a pipeline that met `NOSCRIPT` loads before it runs
/// again ([`super::RedisStore`]'s `query_on`). A script is built (its `LazyLock` forced) before
/// its first invocation, so no pipeline can carry a script missing here, whichever module defines
/// it. (A fixed list of them had missed six, `ABORT_TO_STANDALONE` among them.)
static BUILT: Mutex<Vec<Script>> = Mutex::new(Vec::new());

/// Makes a script and records it in [`built`]: every script of this backend is made here.
pub(crate) fn script(code: &str) -> Script {
    let script = Script::new(code);
    BUILT.lock().push(script.clone());
    script
}

/// The scripts built so far in this process (see [`script`]).
pub(crate) fn built() -> Vec<Script> {
    BUILT.lock().clone()
}

/// Helpers shared by every session script.
const PRELUDE: &str = r#"
local base, ttl = ARGV[1], tonumber(ARGV[2])
local function alive() return redis.call('EXISTS', KEYS[1]) == 1 end
local function node_of(holder)
  local i = string.find(holder, '/', 1, true)
  if i then return string.sub(holder, 1, i - 1) end
  return holder
end
local function touch_core()
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
  -- The standalone stream's log lives as long as the session.
  redis.call('PEXPIRE', base .. 'log:get', ttl)
  redis.call('PEXPIRE', base .. 'trim:get', ttl)
  redis.call('PEXPIRE', base .. 'ids:get', ttl)
  redis.call('PEXPIRE', base .. 'bytes', ttl)
end
-- The hot path's touch: skipped while the record's expiry is still within 1/64 of the idle TTL
-- from now (so idle expiry is exact to that much), which spares seven PEXPIREs per request.
-- `rules::touch_due` is the same rule for the admission that runs without a script.
local function touch_due()
  if redis.call('PTTL', KEYS[1]) < ttl - math.floor(ttl / 64) then touch_core() end
end
-- Every change to the record bumps its version, so nodes may cache records (see `begin`).
local function changed() redis.call('HINCRBY', KEYS[1], 'ver', 1) end
-- The standalone stream is always known; a POST stream while registered and either running or
-- with a retained log.
local function known(stream)
  if stream == 'get' then return true end
  return redis.call('HEXISTS', KEYS[2], stream) == 1 and (redis.call('HEXISTS', KEYS[3], stream) == 1
    or redis.call('EXISTS', base .. 'log:' .. stream) == 1)
end
local function clear_session()
  for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
    redis.call('DEL', base .. 'log:' .. f, base .. 'trim:' .. f, base .. 'ids:' .. f)
  end
  redis.call('DEL', base .. 'log:get', base .. 'trim:get', base .. 'ids:get', base .. 'bytes', base .. 'mbox')
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
end
"#;

/// Builds a session script from the prelude(s) and a body.
fn session_script(with_append: bool, body: &str) -> Script {
    let append = if with_append { APPEND_EVENT } else { "" };
    script(&format!("{PRELUDE}{DELIVERY}{append}{body}"))
}

/// Prunes the stream registry of streams that are neither running nor logged, now and then (see
/// `rules::should_prune`), then registers a request in flight (request key, stream, node,
/// holder). The in-flight entry is only set when the id is free: `begin` has checked it, and a
/// late `register` that races a duplicate admitted on another node leaves that one's entry.
fn register_request() -> String {
    format!(
        r#"
local function register_request(key, stream, node, holder)
  local n = redis.call('HLEN', KEYS[2])
  if n >= {PRUNE_AT} and n % {PRUNE_EVERY} == 0 then
    for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
      if not known(f) then
        redis.call('HDEL', KEYS[2], f)
        redis.call('DEL', base .. 'trim:' .. f, base .. 'ids:' .. f)
      end
    end
  end
  redis.call('HSETNX', KEYS[4], key, node .. '\n' .. stream)
  redis.call('HSET', KEYS[3], stream, cjson.encode({{node = node, request_key = key}}))
  redis.call('HSET', KEYS[2], stream, holder)
  -- The hashes may have just been created: they expire with the session (`begin` may skip its
  -- full touch).
  for i = 2, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
"#
    )
}

/// `begin`. ARGV: the record version the caller has cached (`''`: none), then request_key,
/// stream, node, holder, max in flight (all absent for a plain load; an empty stream checks the
/// request without registering it: `SessionStore::check`). Returns `{0}` (missing), or
/// `{status, running, record, version}` with status 1 (ready), 2 (duplicate; `running` is
/// `'<node>\n<stream>'`) or 3 (too many in flight); `record` is the flat hash, or empty when the
/// cached version is current. A registration that finds its own in-flight entry (same id, node
/// and stream) was sent again after it ran: ready, nothing taken or written again.
pub(crate) static BEGIN: LazyLock<Script> = LazyLock::new(|| {
    let body = r#"
pcall(redis.replicate_commands)
local ver = redis.call('HGET', KEYS[1], 'ver')
if not ver then
  if not alive() then return {0} end
  ver = ''
end
local rec = {}
if ver == '' or ver ~= ARGV[3] then rec = redis.call('HGETALL', KEYS[1]) end
local key, stream, node, holder = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if key then
  local cur = redis.call('HGET', KEYS[4], key)
  if cur then
    touch_due()
    -- Its own entry (a stream id is one request's): this registration sent again, admitted.
    if stream ~= '' and cur == node .. '\n' .. stream then return {1, '', rec, ver} end
    return {2, cur, rec, ver}
  end
  if redis.call('HLEN', KEYS[4]) >= tonumber(ARGV[8]) then
    touch_due()
    return {3, '', rec, ver}
  end
  local limited = take_rates(6, 9)
  if limited then
    touch_due()
    return {4, limited[1] .. ' ' .. limited[2], rec, ver}
  end
  if stream ~= '' then register_request(key, stream, node, holder) end
end
touch_due()
return {1, '', rec, ver}
"#;
    session_script(false, &format!("{}{GCRA}{body}", register_request()))
});

/// `take_rates(first, at)`: the rate limits of [`crate::rate`] (GCRA) on the Redis server's clock
/// (`TIME`, in ms with µs precision). The rate keys are `KEYS[first..]`, one per limit, each a
/// STRING holding the limit's TAT in ms that expires when it stops mattering (at the TAT);
/// `ARGV[at]` is the number of limits `n` (absent: 0), then per limit its emission interval and
/// tolerance in ms. All pass (every TAT moves) or none moves: returns `nil`, or
/// `{index, wait in whole ms}` of the refusing limit with the longest wait.
const GCRA: &str = r#"
local function take_rates(first, at)
  local n = tonumber(ARGV[at] or '0')
  if n == 0 then return nil end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  local tats, worst, wait = {}, 0, 0
  for i = 1, n do
    local interval, tau = tonumber(ARGV[at + 2 * i - 1]), tonumber(ARGV[at + 2 * i])
    local tat = tonumber(redis.call('GET', KEYS[first + i - 1]) or '0')
    if tat < now then tat = now end
    if tat - now > tau then
      if tat - now - tau > wait then worst, wait = i, tat - now - tau end
    end
    tats[i] = tat + interval
  end
  if worst > 0 then return {worst, math.max(1, math.ceil(wait))} end
  for i = 1, n do
    local ttl = math.max(1, math.ceil(tats[i] - now))
    redis.call('SET', KEYS[first + i - 1], string.format('%.3f', tats[i]), 'PX', ttl)
  end
  return nil
end
"#;

/// `take_rates` on its own: `KEYS` are the rate keys, `ARGV` as `take_rates(1, 1)` reads it.
/// Returns `{0}` when every limit passed, else `{index, wait ms}`.
///
/// With a take id (Redis Cluster, whose client may send a command again: see `rates`), its key
/// follows the rate keys and its lifetime in ms follows the limits' arguments: a take that passed
/// leaves that key behind, and a sending that finds it there takes nothing and answers `{0}`. A
/// refused take moved nothing and leaves nothing; a sending of it again decides anew.
pub(crate) static RATES: LazyLock<Script> = LazyLock::new(|| {
    let body = r#"
local n = tonumber(ARGV[1])
local once = KEYS[n + 1]
if once and redis.call('EXISTS', once) == 1 then return {0} end
local limited = take_rates(1, 1)
if limited then return limited end
if once then redis.call('SET', once, '', 'PX', ARGV[2 * n + 2]) end
return {0}
"#;
    script(&format!("pcall(redis.replicate_commands)\n{GCRA}{body}"))
});

/// `register`: a request admitted by `check` outlived the quick-answer window. ARGV: request_key,
/// stream, node, holder. Returns 1, or 0 when the session is gone.
pub(crate) static REGISTER: LazyLock<Script> = LazyLock::new(|| {
    let body = r#"
if not alive() then return 0 end
register_request(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
touch_core()
return 1
"#;
    session_script(false, &format!("{}{body}", register_request()))
});

/// `finish`. ARGV: request_key, json stream (optional).
pub(crate) static FINISH: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
redis.call('HDEL', KEYS[4], ARGV[3])
local stream = ARGV[4]
if stream then
  redis.call('HDEL', KEYS[3], stream)
  redis.call('HDEL', KEYS[2], stream)
  redis.call('DEL', base .. 'log:' .. stream, base .. 'trim:' .. stream, base .. 'ids:' .. stream)
end
if alive() then touch_core() end
return 1
"#,
    )
});

/// `forget_in_flight`. ARGV: request_key, `<node>\n<stream>` as listed. Removes the in-flight
/// entry only if it still has that value (a request sent again with the same id since has another
/// stream). Returns 1 when removed, else 0.
pub(crate) static FORGET: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if redis.call('HGET', KEYS[4], ARGV[3]) == ARGV[4] then
  redis.call('HDEL', KEYS[4], ARGV[3])
  return 1
end
return 0
"#,
    )
});

/// `touch`. Returns 1, or 0 when the session is gone.
pub(crate) static TOUCH: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        "if not alive() then return 0 end\ntouch_core()\nreturn 1\n",
    )
});

/// `claim_owner`. ARGV: upstream name, this node, expected owner (`""`: none).
/// Returns `{0}` (session gone), `{1}` (claimed) or `{2, current owner}`.
pub(crate) static CLAIM_OWNER: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if not alive() then return {0} end
local name, me, expected = ARGV[3], ARGV[4], ARGV[5]
local own = cjson.decode(redis.call('HGET', KEYS[1], 'own') or '{}')
local current = own[name] or ''
if current ~= expected then return {2, current} end
own[name] = me
redis.call('HSET', KEYS[1], 'own', cjson.encode(own))
changed()
return {1}
"#,
    )
});

/// `swap_upstream_sessions`. ARGV: upstream, expected (`''`: absent), a JSON array of
/// `[name, value]` pairs (`value` null removes `name`). Returns `{1}` when applied, `{2, ups}`
/// (the map's JSON) when the entry was not as expected, `{0}` when the session is gone. A swap
/// that sets `upstream`'s entry and finds every one of its entries stored as it gives them (it
/// ran, and was sent again) is applied: `{1}`, nothing written.
pub(crate) static SWAP_UPSTREAM: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if not alive() then return {0} end
local name, expected = ARGV[3], ARGV[4]
local raw = redis.call('HGET', KEYS[1], 'ups') or '{}'
local ups = cjson.decode(raw)
local entries = cjson.decode(ARGV[5])
if (ups[name] or '') ~= expected then
  -- This swap sent again after it ran: every entry, `name`'s among them, stored as given.
  local again = false
  for _, p in ipairs(entries) do
    if ups[p[1]] ~= (p[2] ~= cjson.null and p[2] or nil) then return {2, raw} end
    again = again or p[1] == name
  end
  return again and {1} or {2, raw}
end
for _, pair in ipairs(entries) do
  if pair[2] == cjson.null then ups[pair[1]] = nil else ups[pair[1]] = pair[2] end
end
redis.call('HSET', KEYS[1], 'ups', next(ups) == nil and '{}' or cjson.encode(ups))
changed()
return {1}
"#,
    )
});

/// `apply_update(kind, a, b)`: one change to the record (`SessionRecord::apply` in Rust), its
/// version bumped. Kinds: `ready`, `init`, `lvl`, `sub`, `unsub`, `ups`, `unups` (`sub`'s `b`:
/// the upstream that accepted it, `''` for none, kept in `subv`).
const APPLY_UPDATE: &str = r#"
local function apply_update(kind, a, b)
  if kind == 'ready' then
    redis.call('HSET', KEYS[1], 'ready', '1')
  elseif kind == 'init' then
    redis.call('HSET', KEYS[1], 'rev', a, 'init', b)
  elseif kind == 'lvl' then
    redis.call('HSET', KEYS[1], 'lvl', a)
  elseif kind == 'sub' or kind == 'unsub' then
    local out, found = {}, false
    for _, u in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'subs') or '[]')) do
      if u == a then found = true end
      if u ~= a or kind == 'sub' then table.insert(out, u) end
    end
    if kind == 'sub' and not found then table.insert(out, a) end
    redis.call('HSET', KEYS[1], 'subs', #out == 0 and '[]' or cjson.encode(out))
    local via = cjson.decode(redis.call('HGET', KEYS[1], 'subv') or '{}')
    if kind == 'sub' and b ~= '' then via[a] = b else via[a] = nil end
    if next(via) == nil then redis.call('HDEL', KEYS[1], 'subv')
    else redis.call('HSET', KEYS[1], 'subv', cjson.encode(via)) end
  elseif kind == 'ups' or kind == 'unups' then
    local ups = cjson.decode(redis.call('HGET', KEYS[1], 'ups') or '{}')
    if kind == 'ups' then ups[a] = b else ups[a] = nil end
    redis.call('HSET', KEYS[1], 'ups', next(ups) == nil and '{}' or cjson.encode(ups))
  end
  changed()
end
"#;

/// `update`. ARGV: kind (see [`APPLY_UPDATE`]), a, b.
pub(crate) static UPDATE: LazyLock<Script> = LazyLock::new(|| {
    let body = r#"
if not alive() then return 0 end
apply_update(ARGV[3], ARGV[4], ARGV[5])
return 1
"#;
    session_script(false, &format!("{APPLY_UPDATE}{body}"))
});

/// `begin_update`: `begin`'s plain load (and touch when due) with an update applied when the
/// record's principal is `ARGV[4]`. ARGV: the record version the caller has cached (`''`: none),
/// principal, then kind, a, b as [`UPDATE`]. Returns `{0}` (missing), or `{applied, record,
/// version}`: `applied` 1 when the update was made, `record` the flat hash after it (empty when
/// the cached version was current before it: the caller applies the update to its copy), and
/// `version` the record's version now.
pub(crate) static BEGIN_UPDATE: LazyLock<Script> = LazyLock::new(|| {
    let body = r#"
local ver = redis.call('HGET', KEYS[1], 'ver')
if not ver then
  if not alive() then return {0} end
  ver = ''
end
local applied = 0
if redis.call('HGET', KEYS[1], 'prn') == ARGV[4] then
  apply_update(ARGV[5], ARGV[6], ARGV[7])
  applied = 1
end
local rec = {}
if ver == '' or ver ~= ARGV[3] then rec = redis.call('HGETALL', KEYS[1]) end
touch_due()
return {applied, rec, redis.call('HGET', KEYS[1], 'ver') or ''}
"#;
    session_script(false, &format!("{APPLY_UPDATE}{body}"))
});

/// `delete_session`. ARGV: route, `Terminated` JSON. Returns 1 if it existed.
pub(crate) static DELETE: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
local existed = alive()
clear_session()
if existed then deliver(ARGV[3], '', ARGV[4]) end
return existed and 1 or 0
"#,
    )
});

/// One session of a reaper pass. ARGV: route, `Terminated` JSON. Returns the record's
/// PTTL when it is still alive, else clears everything, broadcasts `Terminated` and returns -2.
pub(crate) static REAP_ONE: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if alive() then return redis.call('PTTL', KEYS[1]) end
clear_session()
deliver(ARGV[3], '', ARGV[4])
return -2
"#,
    )
});

/// `append`. ARGV: stream, data, end (`1`/`0`), maxlen, me, sid, route, stored form,
/// `max_stream_log_bytes`, `max_session_log_bytes`, append id (see `append_script`), the key
/// holding the data when it was uploaded (`''`: the data is ARGV[4]) and its length
/// (`super::upload`). Returns `{position, holder}`, nil when the session is gone, or -1 when
/// the upload is not whole (nothing stored).
pub(crate) static APPEND: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        true,
        r#"
if not alive() then return false end
local data = ARGV[4]
if ARGV[14] ~= '' then
  data = redis.call('GET', ARGV[14]) or ''
  redis.call('DEL', ARGV[14])
  if #data ~= tonumber(ARGV[15]) then return -1 end
end
return append_event(ARGV[3], data, ARGV[5] == '1', tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9],
  ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13])
"#,
    )
});

/// `abort_running`. ARGV: stream, data, node, maxlen, me, sid, route, and the cap
/// arguments of [`APPEND`]. Returns `{position, holder}`, or nil when the request is not running
/// on `node`. No append id: sent again after it ran, it finds the request over and stores
/// nothing (also [`ABORT_TO_STANDALONE`]).
pub(crate) static ABORT: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        true,
        r#"
if not alive() then return false end
local run = redis.call('HGET', KEYS[3], ARGV[3])
if not run or cjson.decode(run).node ~= ARGV[5] then return false end
return append_event(ARGV[3], ARGV[4], true, tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9],
  ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), '')
"#,
    )
});

/// `abort_running` for a request answered on the standalone stream (`KEYS[6]` = the standalone
/// log). ARGV as [`ABORT`]. Clears the request's running, in-flight (when still its own) and
/// stream entries and appends `data` to the standalone stream. Returns `{position, holder}`, or
/// nil when the request is not running on `node`.
pub(crate) static ABORT_TO_STANDALONE: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        true,
        r#"
if not alive() then return false end
local stream = ARGV[3]
local run = redis.call('HGET', KEYS[3], stream)
if not run or cjson.decode(run).node ~= ARGV[5] then return false end
end_request(stream)
redis.call('HDEL', KEYS[2], stream)
return append_event('get', ARGV[4], false, tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9],
  ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), '')
"#,
    )
});

/// `claim` (`KEYS[6]` = the stream's log). ARGV: stream, holder, me, sid, route.
/// Returns `{previous holder or '', newest log position or ''}`, or nil when the session is gone
/// or the stream is not known (see `known`).
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if not alive() then return false end
local stream, holder, me = ARGV[3], ARGV[4], ARGV[5]
if not known(stream) then return false end
local prev = redis.call('HGET', KEYS[2], stream) or ''
redis.call('HSET', KEYS[2], stream, holder)
redis.call('PEXPIRE', KEYS[2], ttl)
if prev ~= '' and prev ~= holder and node_of(prev) ~= me then
  local msg = cjson.encode({t = 'takeover', sid = ARGV[6], stream = stream, holder = prev})
  deliver(ARGV[7], node_of(prev), '{"_v":2,' .. string.sub(msg, 2))
end
local last = redis.call('XREVRANGE', KEYS[6], '+', '-', 'COUNT', 1)
return {prev, last[1] and last[1][1] or ''}
"#,
    )
});

/// `release`. ARGV: stream, holder.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if redis.call('HGET', KEYS[2], ARGV[3]) == ARGV[4] then
  redis.call('HSET', KEYS[2], ARGV[3], '')
end
return 1
"#,
    )
});

/// `register_pending`. ARGV: request_key, node.
pub(crate) static REGISTER_PENDING: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if not alive() then return 0 end
redis.call('HSET', KEYS[5], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[5], ttl)
return 1
"#,
    )
});

/// `route_reply`. ARGV: request_key, route, `Reply` JSON. Returns the node it was posted to,
/// or `''` when nobody waits for it.
pub(crate) static ROUTE_REPLY: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if not alive() then return '' end
local node = redis.call('HGET', KEYS[5], ARGV[3])
if not node then return '' end
redis.call('HDEL', KEYS[5], ARGV[3])
deliver(ARGV[4], node, ARGV[5])
return node
"#,
    )
});

/// `route_cancel`. ARGV: request_key, route, `Cancel` JSON. Returns 1 when delivered.
pub(crate) static ROUTE_CANCEL: LazyLock<Script> = LazyLock::new(|| {
    session_script(
        false,
        r#"
if not alive() then return 0 end
local inf = redis.call('HGET', KEYS[4], ARGV[3])
if not inf then return 0 end
local node = string.match(inf, '^(.*)\n') or inf
deliver(ARGV[4], node, ARGV[5])
return 1
"#,
    )
});

/// `reserve(index, owned)`: the session-cap reservation on the index `index` and, when
/// `max_sessions_per_principal` is on, the principal's sessions `owned`. ARGV: max, sid, score,
/// index TTL (ms), the principal cap (0: none). Returns 1 when the session may be stored (it is
/// then in the index and its principal's set), 0 at the global cap, 2 at the principal's. The
/// principal's set is pruned of sessions gone from the index (deleted or reaped) only when it
/// looks full.
const RESERVE_FN: &str = r#"
local function reserve(index, owned)
  local cap = tonumber(ARGV[5] or '0')
  if not redis.call('ZSCORE', index, ARGV[2]) then
    if redis.call('ZCARD', index) >= tonumber(ARGV[1]) then return 0 end
    if cap > 0 and redis.call('ZCARD', owned) >= cap then
      for _, m in ipairs(redis.call('ZRANGE', owned, 0, -1)) do
        if not redis.call('ZSCORE', index, m) then redis.call('ZREM', owned, m) end
      end
      if redis.call('ZCARD', owned) >= cap then return 2 end
    end
  end
  redis.call('ZADD', index, ARGV[3], ARGV[2])
  redis.call('PEXPIRE', index, ARGV[4])
  if cap > 0 then
    redis.call('ZADD', owned, ARGV[3], ARGV[2])
    redis.call('PEXPIRE', owned, ARGV[4])
  end
  return 1
end
"#;

/// Session-cap reservation on its own (Redis Cluster, where the index has a slot of its own: the
/// record is written after it). KEYS: index, and the principal's sessions when
/// `max_sessions_per_principal` is on. ARGV and reply as [`RESERVE_FN`].
pub(crate) static RESERVE: LazyLock<Script> =
    LazyLock::new(|| script(&format!("{RESERVE_FN}return reserve(KEYS[1], KEYS[2])\n")));

/// `create_session` in one script (standalone and Sentinel: one server holds every key): the
/// reservation, then, when it passed, the record written fresh with its TTL. KEYS: index,
/// record, and the principal's sessions when `max_sessions_per_principal` is on. ARGV: those of
/// [`RESERVE_FN`], then the idle TTL (ms), then the record's field/value pairs (its version
/// among them). Returns what the reservation returned.
pub(crate) static CREATE: LazyLock<Script> = LazyLock::new(|| {
    let body = r#"
local reserved = reserve(KEYS[1], KEYS[3])
if reserved ~= 1 then return reserved end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 7))
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 1
"#;
    script(&format!("{RESERVE_FN}{body}"))
});

/// Compare-and-delete of a lock. KEYS: lock. ARGV: token.
pub(crate) static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    script(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end\nreturn 1\n",
    )
});
