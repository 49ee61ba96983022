//! The flat keys of the config before it had sections, and where each one lives now. The loader
//! answers an old key with its new place instead of "unknown key".

/// Old flat key → its dotted path in the tree. Keys whose unit moved into the value (`_ms`,
/// `_secs`, `_bytes`) now take a duration (`"30s"`) or a size (`"4MiB"`, or a byte count).
pub const MOVED: [(&str, &str); 54] = [
    ("listen", "http.listen"),
    ("endpoint_path", "http.endpoint_path"),
    ("allowed_origins", "http.allowed_origins"),
    ("allowed_hosts", "http.allowed_hosts"),
    ("max_body_bytes", "http.max_body"),
    ("max_request_head_bytes", "http.max_request_head"),
    ("connection_queue", "http.connection_queue"),
    ("retry_after_secs", "http.retry_after"),
    ("keepalive_interval_ms", "http.keepalive_interval"),
    ("sse_retry_ms", "http.sse_retry"),
    ("sse_after_ms", "http.sse_after"),
    ("legacy_sse_path", "transports.legacy_sse.sse_path"),
    (
        "legacy_messages_path",
        "transports.legacy_sse.messages_path",
    ),
    ("websocket_path", "transports.websocket.path"),
    ("node_id", "cluster.node_id"),
    ("heartbeat_interval_ms", "cluster.heartbeat_interval"),
    ("node_ttl_ms", "cluster.node_ttl"),
    (
        "liveness_check_interval_ms",
        "cluster.liveness_check_interval",
    ),
    ("reaper_interval_ms", "cluster.reaper_interval"),
    ("drain_timeout_ms", "cluster.drain_timeout"),
    ("redis_url", "redis.url"),
    ("key_prefix", "redis.key_prefix"),
    ("record_cache_entries", "redis.record_cache_entries"),
    ("idle_ttl_ms", "session.idle_ttl"),
    ("session_touch_interval_ms", "session.touch_interval"),
    ("max_sessions", "session.max_sessions"),
    ("max_events_per_stream", "session.max_events_per_stream"),
    ("max_inflight_per_session", "session.max_inflight"),
    (
        "client_request_timeout_ms",
        "session.client_request_timeout",
    ),
    ("max_subscriptions", "session.max_subscriptions"),
    ("max_uri_bytes", "session.max_uri"),
    ("max_progress_token_bytes", "session.max_progress_token"),
    ("max_listeners", "stateless.max_listeners"),
    ("listen_queue", "stateless.listen_queue"),
    ("max_ephemeral_sessions", "stateless.max_ephemeral_sessions"),
    ("mrtr_state_keys", "stateless.mrtr.state_keys"),
    ("mrtr_state_ttl_ms", "stateless.mrtr.state_ttl"),
    ("mrtr_max_state_bytes", "stateless.mrtr.max_state"),
    ("mrtr_max_parked", "stateless.mrtr.max_parked"),
    ("task_after_ms", "stateless.tasks.after"),
    ("task_ttl_ms", "stateless.tasks.ttl"),
    ("task_poll_interval_ms", "stateless.tasks.poll_interval"),
    ("auth_resource_url", "auth.resource_url"),
    ("auth_authorization_servers", "auth.authorization_servers"),
    ("auth_scopes_supported", "auth.scopes_supported"),
    ("auth_required_scopes", "auth.required_scopes"),
    ("auth_issuer", "auth.issuer"),
    ("auth_audience", "auth.audience"),
    ("auth_jwt_hs256_secrets", "auth.jwt_hs256_secrets"),
    ("auth_jwt_public_keys_pem", "auth.jwt_public_keys_pem"),
    ("log_level", "log.level"),
    ("log_format", "log.format"),
    // Kept at the top level beside `[[upstreams]]`; listed so the table covers every old key.
    ("tool_separator", "tool_separator"),
    ("upstreams", "upstreams"),
];

/// Where the old flat `key` lives now, with a word on its new unit; `None` for a key that was
/// never flat or did not move.
pub fn moved_to(key: &str) -> Option<String> {
    let (_, new) = MOVED.iter().find(|(old, new)| *old == key && old != new)?;
    let unit = if key.ends_with("_ms") || key.ends_with("_secs") {
        " (now a duration such as \"30s\" or \"250ms\")"
    } else if key.ends_with("_bytes") {
        " (now a size such as \"4MiB\", or a byte count)"
    } else {
        ""
    };
    Some(format!("`{key}` moved to `{new}`{unit}"))
}
