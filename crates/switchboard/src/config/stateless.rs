//! `[stateless]`, `[stateless.mrtr]` and `[stateless.tasks]`: the 2026-07-28 (stateless) era's
//! limits, its multi round-trip requests and its tasks extension.

use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};

use super::mrtr::MrtrConfig;
use super::units::NonZeroDuration;

/// The stateless era (MCP 2026-07-28).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatelessConfig {
    /// `subscriptions/listen` streams one node serves at once; past it the request gets 503 with
    /// JSON-RPC -32003.
    pub max_listeners: NonZeroUsize,
    /// Notifications queued per `subscriptions/listen` stream; a stream whose queue is full (a
    /// slow reader) is ended with its closing result, never holding the others back.
    pub listen_queue: NonZeroUsize,
    /// Most requests running at once on one node in an upstream session of their own (upstreams
    /// with per-session state: a stdio child or an upstream `initialize` each, parked ones
    /// included); past it such a request gets 503 with -32003.
    pub max_ephemeral_sessions: NonZeroUsize,
    /// Multi round-trip requests.
    pub mrtr: MrtrConfig,
    /// The tasks extension.
    pub tasks: TasksConfig,
}

impl Default for StatelessConfig {
    fn default() -> Self {
        StatelessConfig {
            max_listeners: NonZeroUsize::new(10_000).expect("not zero"),
            listen_queue: NonZeroUsize::new(64).expect("not zero"),
            max_ephemeral_sessions: NonZeroUsize::new(256).expect("not zero"),
            mrtr: MrtrConfig::default(),
            tasks: TasksConfig::default(),
        }
    }
}

/// The tasks extension (`io.modelcontextprotocol/tasks`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksConfig {
    /// A `tools/call` from a client declaring the extension that has not finished within this
    /// time is answered with a task and runs on detached.
    pub after: NonZeroDuration,
    /// Lifetime of a task record from its creation (`ttlMs`); then `tasks/get` answers
    /// "unknown task".
    pub ttl: NonZeroDuration,
    /// Polling interval suggested in every task (`pollIntervalMs`).
    pub poll_interval: NonZeroDuration,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            after: NonZeroDuration::secs(1),
            ttl: NonZeroDuration::secs(3600),
            poll_interval: NonZeroDuration::secs(1),
        }
    }
}
