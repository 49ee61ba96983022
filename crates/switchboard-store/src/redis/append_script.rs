//! The Lua of the append path, shared by the scripts that append an event (`APPEND`, `ABORT`,
//! `ABORT_TO_STANDALONE` of the `scripts` module, after its prelude): the count and byte caps of
//! the event log (`max_events_per_stream`, `max_stream_log_bytes`, `max_session_log_bytes`), the
//! session's ordered log positions, append ids, and delivery of the event to its holder's node.
//!
//! Append ids (`EventLog::append_once`) make an append safe to send again. A script that ran
//! may still look failed to its caller: the Redis Cluster client resends a command whose
//! connection dropped before the reply came (`RetryMethod::Reconnect`, redis 1.8.1
//! `cluster_handling/async_connection/request.rs`), e.g. a primary killed while its client waited
//! in the `WAIT` after the script, and the node retries a final response that `WAIT` did not
//! confirm. Each sending then logged the event again, under a new position, and a client that
//! resumed saw it twice (the chaos suite's Cluster `primary-kill`). The log entry keeps its id
//! (field `k`) and `p:{sid}:ids:<stream>` maps the id to the position; an append whose id is
//! there stores nothing and answers that position. An id is forgotten with its event (trimmed,
//! or the log gone), and a replica holds both as the primary did.

/// `end_request(stream)` clears a stream's running entry and its request's in-flight entry (when
/// that is still this stream's). `append_event` appends an event to the log in `KEYS[6]` (trim
/// marker `KEYS[7]`): trims the oldest events to `maxlen` events and `smax` bytes, and the
/// session's oldest to `tmax` bytes, recording each log's newest trimmed position; stores `stored`
/// (the stand-in for an event over `max_event_bytes`, or `data` itself) with its append id `aid`
/// (`''`: none); registers the stream, ends the request on the final event, and publishes the
/// event to the holder's node when that is not `me` or the stream is the standalone one (see
/// `rules::delivers_event`). An event whose id the log holds already is not stored again: its
/// position is answered, and the event delivered again (a connection skips a position it wrote).
pub(super) const APPEND_EVENT: &str = r#"
pcall(redis.replicate_commands)
local function end_request(stream)
  local run = redis.call('HGET', KEYS[3], stream)
  if run then
    local key = cjson.decode(run).request_key
    local inf = redis.call('HGET', KEYS[4], key)
    if inf and string.sub(inf, -(#stream + 1)) == '\n' .. stream then
      redis.call('HDEL', KEYS[4], key)
    end
    redis.call('HDEL', KEYS[3], stream)
  end
end
-- Byte accounting (`max_stream_log_bytes`, `max_session_log_bytes`): the hash `bytes` holds each
-- logged stream's retained bytes, under `#` their sum and under `@` the session's last log
-- position. A stream whose log expired still counts until `reconcile` drops it (run when the
-- session's sum matters).
local bk = base .. 'bytes'
local function count_bytes(stream, n)
  redis.call('HINCRBY', bk, stream, n)
  redis.call('HINCRBY', bk, '#', n)
end
local function forget_bytes(stream)
  local n = tonumber(redis.call('HGET', bk, stream) or '0')
  if n ~= 0 then count_bytes(stream, -n) end
  redis.call('HDEL', bk, stream)
end
local function reconcile()
  for _, f in ipairs(redis.call('HKEYS', bk)) do
    if f ~= '#' and f ~= '@' and redis.call('EXISTS', base .. 'log:' .. f) == 0 then
      forget_bytes(f)
    end
  end
  return tonumber(redis.call('HGET', bk, '#') or '0')
end
-- Trims the oldest event of `stream`'s log, recording its position (the trim marker lives as
-- long as its log) and forgetting its append id; returns its bytes, or nil when the log is empty.
local function pop_oldest(stream)
  local log = base .. 'log:' .. stream
  local old = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)[1]
  if not old then return nil end
  redis.call('XDEL', log, old[1])
  if old[2][5] == 'k' then redis.call('HDEL', base .. 'ids:' .. stream, old[2][6]) end
  local ms = redis.call('PTTL', log)
  redis.call('SET', base .. 'trim:' .. stream, old[1], 'PX', ms > 0 and ms or ttl)
  local n = #old[2][2]
  count_bytes(stream, -n)
  return n
end
-- Makes room for `size` more bytes in the session: trims its oldest events, whichever stream
-- holds them (stream positions are times, so the smallest first position is the oldest).
local function trim_session(size, cap)
  local total = tonumber(redis.call('HGET', bk, '#') or '0')
  if total + size <= cap then return end
  total = reconcile()
  while total + size > cap do
    local best, best_ms, best_seq
    for _, f in ipairs(redis.call('HKEYS', bk)) do
      if f ~= '#' and f ~= '@' then
        local first = redis.call('XRANGE', base .. 'log:' .. f, '-', '+', 'COUNT', 1)[1]
        if first then
          local ms, seq = string.match(first[1], '^(%d+)-(%d+)$')
          ms, seq = tonumber(ms), tonumber(seq)
          if not best or ms < best_ms or (ms == best_ms and seq < best_seq) then
            best, best_ms, best_seq = f, ms, seq
          end
        end
      end
    end
    if not best then return end
    total = total - pop_oldest(best)
  end
end
-- The next log position of the session: the server's time in ms, or the last position's ms with
-- the next sequence number when that is not earlier. Positions are ordered across the session's
-- streams (as the memory store's), which `trim_session` needs: XADD's own `*` ids are ordered per
-- stream only (two streams get the same `<ms>-0`).
local function next_position()
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local pos = string.format('%d-0', ms)
  local last = redis.call('HGET', bk, '@')
  if last then
    local lms, lseq = string.match(last, '^(%d+)-(%d+)$')
    if ms <= tonumber(lms) then pos = string.format('%d-%d', tonumber(lms), tonumber(lseq) + 1) end
  end
  redis.call('HSET', bk, '@', pos)
  return pos
end
-- `stored` is what the log keeps ('': `data` itself; else the stand-in for an event over
-- `max_event_bytes`, see `caps`); `data` is what is delivered live.
local function append_event(stream, data, fin, maxlen, me, sid, inbox, stored, smax, tmax, aid)
  local log, trim, ids = KEYS[6], KEYS[7], base .. 'ids:' .. stream
  local pos = aid ~= '' and redis.call('HGET', ids, aid)
  if not pos then
    if stored == '' then stored = data end
    local size = #stored
    if redis.call('EXISTS', log) == 0 then forget_bytes(stream) end
    local n = redis.call('XLEN', log)
    local kept = tonumber(redis.call('HGET', bk, stream) or '0')
    while n > 0 and (n >= maxlen or kept + size > smax) do
      kept = kept - pop_oldest(stream)
      n = n - 1
    end
    trim_session(size, tmax)
    redis.call('PEXPIRE', trim, ttl)
    count_bytes(stream, size)
    redis.call('PEXPIRE', bk, ttl)
    local e = fin and '1' or '0'
    if aid == '' then
      pos = redis.call('XADD', log, next_position(), 'd', stored, 'e', e)
    else
      pos = redis.call('XADD', log, next_position(), 'd', stored, 'e', e, 'k', aid)
      redis.call('HSET', ids, aid, pos)
      redis.call('PEXPIRE', ids, ttl)
    end
    redis.call('PEXPIRE', log, ttl)
    redis.call('HSETNX', KEYS[2], stream, '')
    redis.call('PEXPIRE', KEYS[2], ttl)
    if fin then end_request(stream) end
  end
  local holder = redis.call('HGET', KEYS[2], stream) or ''
  if holder ~= '' and (stream == 'get' or node_of(holder) ~= me) then
    local msg = {t = 'event', sid = sid, stream = stream, holder = holder, position = pos, data = data}
    msg['end'] = fin
    ring(inbox, node_of(holder), string.sub(cjson.encode(msg), 1, -2) .. ',"_v":2}')
  end
  return {pos, holder}
end
"#;
