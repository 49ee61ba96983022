//! `[stateless]`, `[stateless.mrtr]` and `[stateless.tasks]`: the 2026-07-28 (stateless) era's
//! limits, its multi round-trip requests and its tasks extension.

use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};

use switchboard_node::mrtr::MrtrSettings;

use super::owners::{count, node, positive};
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
    /// Multi round-trip requests: the node's own settings struct
    /// ([`switchboard_node::mrtr::MrtrSettings`]).
    pub mrtr: MrtrSettings,
    /// The tasks extension.
    pub tasks: TasksConfig,
}

impl Default for StatelessConfig {
    /// The node's defaults ([`super::owners`]).
    fn default() -> Self {
        let node = node();
        StatelessConfig {
            max_listeners: count(node.max_listeners),
            listen_queue: count(node.listen_queue),
            max_ephemeral_sessions: count(node.max_ephemeral_sessions),
            mrtr: node.mrtr,
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
    /// Lifetime of a task from its creation (`ttlMs`); then its call is cancelled if it still
    /// runs, and `tasks/*` answer -32602 with `data.reason = "expired"` for `expired_grace`.
    pub ttl: NonZeroDuration,
    /// How long an expired task is told apart from an unknown id.
    pub expired_grace: NonZeroDuration,
    /// Most tasks one principal has running at once, cluster-wide; past it a call that would
    /// become a task is refused with 503 and -32003.
    pub max_per_principal: NonZeroUsize,
    /// Polling interval suggested in every task (`pollIntervalMs`).
    pub poll_interval: NonZeroDuration,
}

impl Default for TasksConfig {
    /// The node's defaults ([`super::owners`]).
    fn default() -> Self {
        let node = node();
        TasksConfig {
            after: positive(node.task_after),
            ttl: positive(node.task_ttl),
            expired_grace: positive(node.task_expired_grace),
            max_per_principal: count(node.max_tasks_per_principal),
            poll_interval: positive(node.task_poll_interval),
        }
    }
}
