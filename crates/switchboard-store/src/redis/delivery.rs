//! How the session scripts deliver what they say to other nodes: the Lua functions `ring` (a
//! live event's doorbell) and `deliver` (a control message, kept in a mailbox until taken),
//! part of every session script (`scripts::session_script`).

/// The Lua of `ring` and `deliver`; it needs the session scripts' prelude (`base`).
pub(crate) const DELIVERY: &str = r#"
-- Routes (`Keys::route`): '-' (deliver nothing), or '<mailbox len> <message ttl ms> <p>', <p>
-- being the key prefix and its colon in standalone and Sentinel, '' in Cluster.
local function route_parts(route)
  return string.match(route, '^(%d+) (%d+) (.*)$')
end
-- A live event for a stream's holder on `node`: its doorbell only (the event log is its durable
-- copy: a node whose subscription lapsed catches up from the log). Standalone and Sentinel:
-- PUBLISHed on the node's inbox channel. Cluster: on the session's sharded channel `p:{sid}:bus`
-- (same slot as the script's keys), as `<node>\n<json>`; see the `bus` module.
local function ring(route, node, msg)
  if route == '-' then return end
  local _, _, p = route_parts(route)
  if p ~= '' then
    redis.call('PUBLISH', p .. 'inbox:' .. node, msg)
  else
    redis.call('SPUBLISH', base .. 'bus', node .. '\n' .. msg)
  end
end
-- A control message to `node` ('': every node), kept until its receiver takes it: appended to a
-- mailbox (a STREAM with ids `0-<n>`, capped, expiring), then its doorbell rung with the
-- message and its mailbox id `_q` spliced in front (`msg` is a JSON object). Standalone and
-- Sentinel: the node's mailbox `p:mbox:<node>` (every node: `p:mbox:all`), doorbell on
-- `p:inbox:<node>` (`p:all`). Cluster, where a script stays in its slot: the session's mailbox
-- `p:{sid}:mbox` with the receiver in field `to` (`*`: every node), doorbell on the session's
-- channel as `<node>\n<json>`.
local function deliver(route, node, msg)
  if route == '-' then return end
  local len, life, p = route_parts(route)
  local box, id
  if p ~= '' then
    box = p .. 'mbox:' .. (node == '' and 'all' or node)
    id = redis.call('XADD', box, 'MAXLEN', '~', len, '0-*', 'm', msg)
  else
    box = base .. 'mbox'
    id = redis.call('XADD', box, 'MAXLEN', '~', len, '0-*', 'to', node == '' and '*' or node, 'm', msg)
  end
  redis.call('PEXPIRE', box, life)
  local rung = '{"_q":"' .. id .. '",' .. string.sub(msg, 2)
  if p ~= '' then
    redis.call('PUBLISH', node == '' and (p .. 'all') or (p .. 'inbox:' .. node), rung)
  else
    redis.call('SPUBLISH', base .. 'bus', (node == '' and '*' or node) .. '\n' .. rung)
  end
end
"#;
