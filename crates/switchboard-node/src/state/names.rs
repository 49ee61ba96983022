//! The names of what runs on this node alone in the 2026-07-28 era: a request's ephemeral
//! session and a task's call. Neither is a session of the store, so the node's sweeps (which
//! end what the store no longer knows) must leave them alone ([`is_local_only`]).

/// The prefix of the ephemeral session ids of 2026-07-28 requests: never in the store.
pub const EPHEMERAL_PREFIX: &str = "stateless-";

/// The prefix of the session names of running tasks in the node's call registry (the
/// stateless tasks' `calls_key`): not sessions of the store either.
pub const TASK_PREFIX: &str = "task:";

/// Whether `sid` names the ephemeral session of a 2026-07-28 request.
pub fn is_ephemeral(sid: &str) -> bool {
    sid.starts_with(EPHEMERAL_PREFIX)
}

/// Whether `sid`, a session name of the node's call registry or an upstream's held sessions,
/// names something of this node alone (a 2026-07-28 request's ephemeral session, a task's call)
/// rather than a session of the store.
pub fn is_local_only(sid: &str) -> bool {
    is_ephemeral(sid) || sid.starts_with(TASK_PREFIX)
}
