//! Domain events: each logs through `tracing` and counts in one place, into the process's
//! metrics ([`switchboard_telemetry::metrics`]; `/metrics` renders them, `probes.rs`).

use switchboard_telemetry::metrics::{self, Counters};
use switchboard_telemetry::trace::logged_session;

/// The process's event counters.
fn counters() -> &'static Counters {
    &metrics::get().counters
}

/// A 2026-07-28 request was cancelled: its response stream closed before the answer.
pub fn stateless_cancelled(method: &str) {
    counters().stateless_cancelled.inc();
    tracing::info!(
        method,
        "stateless request cancelled: its response stream closed"
    );
}

/// A notification of a request answered as one JSON body went to the session's standalone
/// stream instead of the request's own (see [`crate::edge::header_checks`]).
pub fn notification_rerouted(sid: &str, method: &str) {
    counters().notifications_rerouted.inc();
    tracing::debug!(
        session = %logged_session(sid),
        method,
        "a JSON-only request's notification went to the standalone stream"
    );
}

/// A notification of a 2026-07-28 request had no stream to carry it and was dropped: `why` names
/// the case (the request answered as one JSON body, see [`crate::edge::header_checks`]; a task's
/// call after its `CreateTaskResult`; the request's stream already closed; an unsolicited
/// notification no `subscriptions/listen` stream carries).
pub fn notification_dropped(method: &str, why: &'static str) {
    counters().notifications_dropped.inc();
    tracing::debug!(method, why, "a 2026-07-28 notification was dropped");
}

/// A `subscriptions/listen` stream opened.
pub fn listener_opened() {
    metrics::get().listeners_open.inc();
}

/// A `subscriptions/listen` stream ended (its registration dropped).
pub fn listener_closed() {
    metrics::get().listeners_open.dec();
}

/// A listen stream's queue was full: the stream is ended.
pub fn listener_lagged(subscription: &str, queue: usize) {
    counters().listen_lagged.inc();
    tracing::warn!(
        subscription,
        queue,
        "listen stream too slow (queue full): ending it; the client re-listens"
    );
}

/// A `subscriptions/listen` whose agreed filter is empty ended right after its acknowledgement.
pub fn listen_empty() {
    tracing::debug!("subscriptions/listen agreed to nothing: acknowledged and ended at once");
}

/// `subscriptions/listen` refused at the per-node cap.
pub fn listen_refused(max: usize) {
    counters().listen_refused.inc();
    tracing::warn!(
        max,
        "stateless.max_listeners reached: subscriptions/listen refused with 503"
    );
}

/// A call became a task (it outlived `task_after`).
pub fn task_created(task: &str) {
    counters().tasks_created.inc();
    tracing::info!(task, "task created");
}

/// `tasks/cancel` stopped a task's call running on this node.
pub fn task_cancelled(task: &str) {
    counters().tasks_cancelled.inc();
    tracing::info!(task, "task call cancelled by tasks/cancel");
}

/// A task's call still running at `stateless.tasks.ttl` was cancelled on this node.
pub fn task_expired(task: &str) {
    counters().tasks_expired.inc();
    tracing::info!(task, "task call cancelled: the task reached its TTL");
}

/// A call that would have become a task was refused at `stateless.tasks.max_per_principal`.
pub fn task_refused_at_cap(max: usize) {
    counters().tasks_refused.inc();
    tracing::warn!(
        max,
        "stateless.tasks.max_per_principal reached: the call is cancelled and refused with 503"
    );
}

/// A task's call ended and its outcome is stored.
pub fn task_finished(task: &str, status: &str) {
    tracing::info!(task, status, "task finished");
}

/// A task was failed because the node running it died.
pub fn task_lost(task: &str, node: &str) {
    counters().tasks_lost.inc();
    tracing::warn!(task, node, "task failed: its node died");
}

/// `initialize` created a session.
pub fn session_created(sid: &str, revision: &str) {
    counters().sessions_created.inc();
    tracing::info!(session = %logged_session(sid), revision, "session created");
}

/// DELETE ended a session.
pub fn session_deleted(sid: &str) {
    counters().sessions_deleted.inc();
    tracing::info!(session = %logged_session(sid), "session deleted");
}

/// `initialize` refused at a session cap: `key` names it (`session.max_sessions`, answered 503,
/// or `session.max_sessions_per_principal`, 429) and `status` is the HTTP status sent.
pub fn session_refused(key: &str, status: u16) {
    counters().sessions_refused.inc();
    tracing::warn!(
        key,
        status,
        "session cap reached: initialize refused with {status}"
    );
}

/// A stream was resumed from `Last-Event-ID`.
pub fn stream_resumed(sid: &str, stream: &str, replayed: usize) {
    counters().streams_resumed.inc();
    tracing::info!(session = %logged_session(sid), stream, replayed, "stream resumed");
}

/// A `Last-Event-ID` could not be honoured.
pub fn replay_miss(sid: &str, reason: &str) {
    counters().replay_misses.inc();
    tracing::info!(session = %logged_session(sid), reason, "resumption refused");
}

/// A client response matched no waiting server request.
pub fn reply_unmatched(sid: &str, id: &str) {
    counters().replies_unmatched.inc();
    tracing::info!(
        session = %logged_session(sid),
        id,
        "client response matched no pending server request"
    );
}

/// A client's answer reached a node after the node that waited for it had stopped: the client
/// is told so (410, -32004).
pub fn reply_lost(sid: &str, id: &str, node: &str) {
    counters().replies_unmatched.inc();
    tracing::warn!(
        session = %logged_session(sid),
        id,
        waiter = node,
        "client response for a server request whose node stopped: the request was lost with it"
    );
}

/// A request passed every one of its rate limits.
pub fn rates_allowed(rates: &[switchboard_store::Rate]) {
    for rate in rates {
        metrics::get().rate_decision("allowed", &rate.name);
    }
}

/// A request was refused by the rate limit `limit`.
pub fn rate_limited(limit: &str) {
    metrics::get().rate_decision("limited", limit);
    tracing::debug!(limit, "request refused by a rate limit");
}

/// A request's rate limits could not be checked: the store failed.
pub fn rate_store_error(rates: &[switchboard_store::Rate]) {
    for rate in rates {
        metrics::get().rate_decision("store_error", &rate.name);
    }
}
