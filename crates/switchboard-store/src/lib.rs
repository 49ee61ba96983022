//! # switchboard-store
//!
//! All state that a second node would need to carry on a session lives behind the [`Store`] trait:
//! session records, per-stream event logs, stream holders, in-flight request routing, pending
//! server-to-client requests, node liveness, and the bus that carries live events and control
//! messages between nodes.
//!
//! Depends on `switchboard-protocol` (ids, error codes) and `switchboard-telemetry` (metrics,
//! trace spans, session ids in logs). Sits under the node: a POST calls
//! [`SessionStore::begin`] once (one pipelined round trip) before the upstream is called.
//!
//! Two backends implement it with the same behaviour, checked by one test suite (`tests/`):
//! - [`memory::MemoryStore`]: one process, no Redis; the embedded default.
//! - [`redis::RedisStore`]: the cluster; every key of a session carries the hash tag `{<sid>}`.
//!
//! Modules:
//! - [`model`]: records and messages (session record, event, bus message, outcomes).
//! - [`bus`]: the bus's settings ([`BusSettings`]) and where an answer went ([`Routed`]).
//! - [`traits`]: the store traits.
//! - [`memory`]: the in-process backend.
//! - [`redis`]: the Redis backend (keys, Lua scripts, pub/sub inbox).
//! - [`rate`]: rate limits (GCRA), checked in a request's admission.
//! - [`task`]: task records of the tasks extension ([`TaskStore`]).
//! - [`caps`]: the byte caps on the event log and the stand-in for an event over them.
//! - [`retry`]: writing through a store outage (a promotion, a restart): jittered attempts until
//!   the caller's deadline, one append id per event.
//! - [`rules`]: rules both backends share ([`INBOX_CAPACITY`], stream pruning, positions).
//! - [`eviction`]: Redis's `maxmemory-policy` checked at start and periodically, and heartbeats
//!   gone before their TTL: the rule the gateway node and library mode both apply.
//! - [`error`]: the one error type, [`StoreError`].
//! - [`observed`]: any store with every operation timed and traced ([`Observed`]).

pub mod bus;
pub mod caps;
pub mod error;
pub mod eviction;
pub mod memory;
pub mod model;
pub mod observed;
pub mod rate;
pub mod redis;
pub mod retry;
pub mod rules;
pub mod task;
pub mod traits;

pub use error::StoreError;

/// The format version of what this release writes to Redis: bus messages (field `_v`), session
/// and task records (field `fv`), and node heartbeats (the value of `p:node:<id>`). The releases
/// before wrote none (format 1). A node reads both and writes what both can read
/// (docs/redis.md, "What the bus guarantees", "Rolling upgrades").
pub const FORMAT: u32 = 2;
pub use memory::MemoryStore;
pub use model::*;
pub use observed::Observed;
pub use rate::{Rate, RateDecision};
pub use redis::RedisStore;
pub use rules::INBOX_CAPACITY;
pub use task::*;
pub use traits::*;
