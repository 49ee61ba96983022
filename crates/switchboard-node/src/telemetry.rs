//! Domain events: each logs through `tracing` and counts in one place. `/metrics` renders the
//! counters in the Prometheus text format, then each upstream's series ([`render_upstreams`]).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use switchboard_upstream::status::{State, UpstreamStatus};

macro_rules! counters {
    ($($name:ident => $metric:literal, $help:literal;)*) => {
        /// Process-wide counters of domain events.
        pub mod counter {
            use super::AtomicU64;
            $(#[doc = $help] pub static $name: AtomicU64 = AtomicU64::new(0);)*
        }
        /// `# HELP`/`# TYPE`/value lines for every counter.
        fn render_counters() -> String {
            let mut out = String::new();
            $(
                let _ = writeln!(out, "# HELP {} {}", $metric, $help);
                let _ = writeln!(out, "# TYPE {} counter", $metric);
                let _ = writeln!(out, "{} {}", $metric, counter::$name.load(Ordering::Relaxed));
            )*
            out
        }
    };
}

counters! {
    SESSIONS_CREATED => "switchboard_sessions_created_total", "Sessions created by initialize on this node.";
    SESSIONS_DELETED => "switchboard_sessions_deleted_total", "Sessions ended by DELETE on this node.";
    SESSIONS_REAPED => "switchboard_sessions_reaped_total", "Expired sessions cleaned up by this node's reaper passes.";
    SESSIONS_REFUSED => "switchboard_sessions_refused_total", "initialize refused because the session cap was reached.";
    STREAMS_RESUMED => "switchboard_streams_resumed_total", "Streams resumed with Last-Event-ID on this node.";
    STREAMS_TAKEN_OVER => "switchboard_streams_taken_over_total", "Local stream connections replaced by a newer connection.";
    STREAMS_LAGGED => "switchboard_streams_lagged_total", "Events that found a full connection queue (recovered from the event log).";
    REPLAY_MISSES => "switchboard_replay_misses_total", "Resumptions refused: unknown stream or trimmed log.";
    REQUESTS_ABORTED => "switchboard_requests_aborted_total", "Requests failed because the node running them died.";
    STATELESS_CANCELLED => "switchboard_stateless_cancelled_total", "2026-07-28 requests cancelled because their response stream closed.";
    TASKS_CREATED => "switchboard_tasks_created_total", "Tasks (tasks extension) created on this node.";
    TASKS_CANCELLED => "switchboard_tasks_cancelled_total", "Task calls running on this node stopped by tasks/cancel.";
    TASKS_LOST => "switchboard_tasks_lost_total", "Tasks this node failed because the node running them died.";
    REPLIES_UNMATCHED => "switchboard_replies_unmatched_total", "Client responses for which no server request was waiting.";
    LISTEN_LAGGED => "switchboard_listen_lagged_total", "subscriptions/listen streams ended because their queue was full (slow reader).";
    LISTEN_REFUSED => "switchboard_listen_refused_total", "subscriptions/listen refused at stateless.max_listeners.";
    NOTIFICATIONS_REROUTED => "switchboard_notifications_rerouted_total", "Notifications of requests answered as one JSON body (Accept without text/event-stream, or a batch) put on the session's standalone stream instead.";
    NOTIFICATIONS_DROPPED => "switchboard_notifications_dropped_total", "Notifications of 2026-07-28 requests answered as one JSON body (Accept without text/event-stream), which have no stream to carry them.";
}

/// Open `subscriptions/listen` streams on this node (a gauge).
static LISTENERS_OPEN: AtomicU64 = AtomicU64::new(0);

/// Every counter, then the gauges, in the Prometheus text format.
pub fn render() -> String {
    let mut out = render_counters();
    let open = LISTENERS_OPEN.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "# HELP switchboard_listeners_open Open subscriptions/listen streams on this node."
    );
    let _ = writeln!(out, "# TYPE switchboard_listeners_open gauge");
    let _ = writeln!(out, "switchboard_listeners_open {open}");
    out
}

/// The `switchboard_upstream_*` series of each upstream in `statuses`, in the Prometheus text
/// format: `switchboard_upstream_up` (1 when its state is `up` or `degraded`: it answers calls,
/// maybe not all of them; 0 when `down` or `unknown`),
/// `switchboard_upstream_state` (1 for its one state among `unknown`, `up`, `degraded`, `down`),
/// `switchboard_upstream_children` (stdio children running here), and the counters
/// `switchboard_upstream_calls_total`, `switchboard_upstream_call_errors_total` and
/// `switchboard_upstream_restarts_total`; every series labelled `upstream="NAME"`.
pub fn render_upstreams(statuses: &[UpstreamStatus]) -> String {
    type Value = fn(&UpstreamStatus) -> u64;
    let series: [(&str, &str, &str, Value); 5] = [
        ("switchboard_upstream_up", "gauge", "1 when the upstream answers calls as this node sees it (state up or degraded), else 0.", |s| u64::from(matches!(s.state, State::Up | State::Degraded))),
        ("switchboard_upstream_children", "gauge", "stdio children of the upstream running on this node.", |s| s.children.len() as u64),
        ("switchboard_upstream_calls_total", "counter", "Calls of clients to the upstream through this node.", |s| s.calls),
        ("switchboard_upstream_call_errors_total", "counter", "Calls to the upstream through this node answered with a JSON-RPC error (cancellations not counted).", |s| s.call_errors),
        ("switchboard_upstream_restarts_total", "counter", "stdio children of the upstream started on this node to replace one that exited or failed to start.", |s| s.restarts),
    ];
    let mut out = String::new();
    for (metric, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {metric} {help}");
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        for s in statuses {
            let name = label_value(&s.name);
            let _ = writeln!(out, "{metric}{{upstream=\"{name}\"}} {}", value(s));
        }
    }
    let metric = "switchboard_upstream_state";
    let _ = writeln!(out, "# HELP {metric} 1 for the upstream's state as this node sees it (unknown, up, degraded, down), 0 for the others.");
    let _ = writeln!(out, "# TYPE {metric} gauge");
    for s in statuses {
        let name = label_value(&s.name);
        for state in State::ALL {
            let on = u64::from(s.state == state);
            let _ = writeln!(
                out,
                "{metric}{{upstream=\"{name}\",state=\"{}\"}} {on}",
                state.as_str()
            );
        }
    }
    out
}

/// A label value escaped as the Prometheus text format requires (`\\`, `\"`, `\n`).
fn label_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A 2026-07-28 request was cancelled: its response stream closed before the answer.
pub fn stateless_cancelled(method: &str) {
    inc(&counter::STATELESS_CANCELLED);
    tracing::info!(
        method,
        "stateless request cancelled: its response stream closed"
    );
}

/// A notification of a request answered as one JSON body went to the session's standalone
/// stream instead of the request's own (see [`crate::edge::header_checks`]).
pub fn notification_rerouted(sid: &str, method: &str) {
    inc(&counter::NOTIFICATIONS_REROUTED);
    tracing::debug!(
        session = sid,
        method,
        "a JSON-only request's notification went to the standalone stream"
    );
}

/// A notification of a 2026-07-28 request answered as one JSON body was dropped: that revision
/// has no stream to carry it (see [`crate::edge::header_checks`]).
pub fn notification_dropped(method: &str) {
    inc(&counter::NOTIFICATIONS_DROPPED);
    tracing::debug!(
        method,
        "a JSON-only 2026-07-28 request's notification was dropped"
    );
}

/// A `subscriptions/listen` stream opened.
pub fn listener_opened() {
    inc(&LISTENERS_OPEN);
}

/// A `subscriptions/listen` stream ended (its registration dropped).
pub fn listener_closed() {
    LISTENERS_OPEN.fetch_sub(1, Ordering::Relaxed);
}

/// A listen stream's queue was full: the stream is ended.
pub fn listener_lagged(subscription: &str, queue: usize) {
    inc(&counter::LISTEN_LAGGED);
    tracing::warn!(
        subscription,
        queue,
        "listen stream too slow (queue full): ending it; the client re-listens"
    );
}

/// `subscriptions/listen` refused at the per-node cap.
pub fn listen_refused(max: usize) {
    inc(&counter::LISTEN_REFUSED);
    tracing::warn!(
        max,
        "stateless.max_listeners reached: subscriptions/listen refused with 503"
    );
}

/// A call became a task (it outlived `task_after`).
pub fn task_created(task: &str) {
    inc(&counter::TASKS_CREATED);
    tracing::info!(task, "task created");
}

/// `tasks/cancel` stopped a task's call running on this node.
pub fn task_cancelled(task: &str) {
    inc(&counter::TASKS_CANCELLED);
    tracing::info!(task, "task call cancelled by tasks/cancel");
}

/// A task's call ended and its outcome is stored.
pub fn task_finished(task: &str, status: &str) {
    tracing::info!(task, status, "task finished");
}

/// A task was failed because the node running it died.
pub fn task_lost(task: &str, node: &str) {
    inc(&counter::TASKS_LOST);
    tracing::warn!(task, node, "task failed: its node died");
}

/// `initialize` created a session.
pub fn session_created(sid: &str, revision: &str) {
    inc(&counter::SESSIONS_CREATED);
    tracing::info!(session = sid, revision, "session created");
}

/// DELETE ended a session.
pub fn session_deleted(sid: &str) {
    inc(&counter::SESSIONS_DELETED);
    tracing::info!(session = sid, "session deleted");
}

/// The reaper cleaned up expired sessions.
pub fn sessions_reaped(n: usize) {
    if n > 0 {
        counter::SESSIONS_REAPED.fetch_add(n as u64, Ordering::Relaxed);
        tracing::info!(count = n, "expired sessions reaped");
    }
}

/// `initialize` refused at the session cap.
pub fn session_refused() {
    inc(&counter::SESSIONS_REFUSED);
    tracing::warn!("session cap reached: initialize refused with 503");
}

/// A stream was resumed from `Last-Event-ID`.
pub fn stream_resumed(sid: &str, stream: &str, replayed: usize) {
    inc(&counter::STREAMS_RESUMED);
    tracing::info!(session = sid, stream, replayed, "stream resumed");
}

/// A local connection lost its stream to a newer one.
pub fn stream_taken_over(sid: &str, stream: &str) {
    inc(&counter::STREAMS_TAKEN_OVER);
    tracing::debug!(session = sid, stream, "stream taken over");
}

/// A connection queue was full; the connection catches up from the log.
pub fn stream_lagged(sid: &str, stream: &str) {
    inc(&counter::STREAMS_LAGGED);
    tracing::debug!(
        session = sid,
        stream,
        "connection lagged; will re-read the event log"
    );
}

/// A `Last-Event-ID` could not be honoured.
pub fn replay_miss(sid: &str, reason: &str) {
    inc(&counter::REPLAY_MISSES);
    tracing::info!(session = sid, reason, "resumption refused");
}

/// A request was failed because its node died.
pub fn request_aborted(sid: &str, stream: &str, node: &str) {
    inc(&counter::REQUESTS_ABORTED);
    tracing::warn!(
        session = sid,
        stream,
        dead_node = node,
        "request failed: its node stopped"
    );
}

/// A client response matched no waiting server request.
pub fn reply_unmatched(sid: &str, id: &str) {
    inc(&counter::REPLIES_UNMATCHED);
    tracing::info!(
        session = sid,
        id,
        "client response matched no pending server request"
    );
}

#[cfg(test)]
mod tests {
    use switchboard_upstream::status::{State, UpstreamStatus};

    #[test]
    fn renders_each_upstream_with_escaped_labels() {
        let mut odd = UpstreamStatus::new("a\"b\\c\nd", "http");
        odd.state = State::Degraded;
        odd.calls = 3;
        let mut files = UpstreamStatus::new("files", "stdio");
        files.state = State::Up;
        files.restarts = 2;
        let mut gone = UpstreamStatus::new("gone", "http");
        gone.state = State::Down;
        let text = super::render_upstreams(&[odd, files, gone]);
        assert!(
            text.contains("switchboard_upstream_up{upstream=\"gone\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_upstream_up{upstream=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "degraded answers: {text}"
        );
        assert!(
            text.contains("switchboard_upstream_up{upstream=\"files\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_upstream_calls_total{upstream=\"a\\\"b\\\\c\\nd\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_upstream_restarts_total{upstream=\"files\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_upstream_state{upstream=\"files\",state=\"up\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_upstream_state{upstream=\"files\",state=\"down\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE switchboard_upstream_restarts_total counter\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE").count(),
            6,
            "one header per metric: {text}"
        );
    }

    #[test]
    fn renders_every_counter() {
        super::session_created("s", "2025-11-25");
        let text = super::render();
        assert!(text.contains("# TYPE switchboard_sessions_created_total counter"));
        assert!(
            text.contains("switchboard_replies_unmatched_total 0")
                || text.contains("switchboard_replies_unmatched_total")
        );
    }
}
