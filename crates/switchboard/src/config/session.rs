//! `[session]`: the lifetime and limits of a session-era (2025-11-25 and earlier) session and of
//! the requests in it.

use std::num::{NonZeroU64, NonZeroUsize};

use serde::{Deserialize, Serialize};

use super::owners::{count, count64, node, positive, size, store};
use super::units::{NonZeroDuration, Size};

/// Sessions and the requests in them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// A session with nothing in flight and no open stream ends this long after its last request
    /// finished; later requests on it get 404.
    pub idle_ttl: NonZeroDuration,
    /// How often this node pushes back the expiry of sessions with an open stream or a running
    /// call here; must be below `idle_ttl`.
    pub touch_interval: NonZeroDuration,
    /// Cluster-wide cap on live sessions; past it `initialize` gets 503 with `Retry-After`.
    pub max_sessions: NonZeroU64,
    /// Live sessions one principal may hold (0: no cap); past it `initialize` gets 429 with
    /// `Retry-After` and JSON-RPC -32003. With authorization off every session's principal is
    /// `anonymous`, so the cap then acts on all sessions together.
    pub max_sessions_per_principal: u64,
    /// Events kept per stream log; older ones are trimmed and a resume from before the oldest
    /// kept event cannot be replayed.
    pub max_events_per_stream: NonZeroU64,
    /// Bytes of event data kept per stream log (beside the count cap); older events are
    /// trimmed exactly as by `max_events_per_stream`. At least `max_event_bytes`.
    pub max_stream_log_bytes: Size,
    /// Bytes of event data kept in all of one session's stream logs together; past it the
    /// session's oldest events, whichever stream holds them, are trimmed (a resume from before
    /// them gets the trimmed-log error). At least `max_stream_log_bytes`.
    pub max_session_log_bytes: Size,
    /// The largest event kept in a log as it is. A larger one (an answer within the upstream's
    /// relay limit) is delivered live only; the log keeps a stand-in, so a resume that needs it
    /// gets a JSON-RPC error -32012 with the request's id (a notification: a warning message)
    /// instead of a silent gap.
    pub max_event_bytes: Size,
    /// Requests one session may have in flight at once; past it a request gets JSON-RPC -32003
    /// (retry when one has finished). Bounds a session's live streams and logs.
    pub max_inflight: NonZeroU64,
    /// How long a server-to-client request waits for the client's answer; then the upstream gets
    /// a JSON-RPC error.
    pub client_request_timeout: NonZeroDuration,
    /// Resource subscriptions one session may record; `resources/subscribe` past it gets
    /// JSON-RPC -32602. Also the most URIs one `subscriptions/listen` may name.
    pub max_subscriptions: NonZeroUsize,
    /// Longest resource URI accepted for a subscription (session or `subscriptions/listen`);
    /// longer gets -32602.
    pub max_uri: Size,
    /// Longest `_meta.progressToken` accepted, in bytes of its JSON text; longer gets -32602
    /// (every progress notification echoes it into the event log).
    pub max_progress_token: Size,
    /// Largest `initialize` params accepted, in bytes of their JSON text; larger gets -32602
    /// (they are kept in the session record for the session's life).
    pub max_initialize_params: Size,
}

impl Default for SessionConfig {
    /// The node's and the store's defaults ([`super::owners`]).
    fn default() -> Self {
        let (node, store) = (node(), store());
        SessionConfig {
            idle_ttl: positive(store.idle_ttl),
            touch_interval: positive(node.session_touch_interval),
            max_sessions: count64(store.max_sessions),
            max_sessions_per_principal: store.max_sessions_per_principal,
            max_events_per_stream: count64(store.max_events_per_stream),
            max_stream_log_bytes: Size::bytes(store.max_stream_log_bytes),
            max_session_log_bytes: Size::bytes(store.max_session_log_bytes),
            max_event_bytes: Size::bytes(store.max_event_bytes),
            max_inflight: count64(store.max_inflight_per_session),
            client_request_timeout: positive(node.client_request_timeout),
            max_subscriptions: count(node.max_subscriptions),
            max_uri: size(node.max_uri_bytes),
            max_progress_token: size(node.max_progress_token_bytes),
            max_initialize_params: size(node.max_initialize_params_bytes),
        }
    }
}
