//! `[http]`: the listener, the MCP endpoint, the Origin/Host allow-lists and the limits and
//! timings of every HTTP connection and stream.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::owners::{count, node, positive, size};
use super::units::{NonZeroDuration, Size};

/// The HTTP front of a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Socket address the listener binds. A loopback address also restricts `Host` to loopback
    /// names unless `allowed_hosts` is set.
    pub listen: SocketAddr,
    /// Path of the MCP endpoint. Other paths get 404, except the node's own `/healthz`,
    /// `/readyz`, `/metrics` and `/upstreamz`, which it may not be.
    pub endpoint_path: String,
    /// Origins allowed besides loopback ones: exact `scheme://host[:port]`, or `*`. Any other
    /// `Origin` gets 403.
    pub allowed_origins: Vec<String>,
    /// Host names (no port) allowed in `Host` (none: loopback names on a loopback listener,
    /// anything otherwise). Any other `Host` gets 421.
    pub allowed_hosts: Vec<String>,
    /// `Access-Control-Max-Age` of the answer to a CORS preflight from an allowed origin: how
    /// long a browser may reuse it before asking again (browsers cap it; Chromium at 2 h).
    #[serde(with = "humantime_serde")]
    pub cors_max_age: Duration,
    /// Largest accepted POST body; larger gets 413. Also the largest WebSocket message; larger
    /// closes the socket with 1009.
    pub max_body: Size,
    /// Largest HTTP/1 request head (request line and headers), and the cap on each connection's
    /// read buffer (at least 8KiB); a larger head gets 431.
    pub max_request_head: Size,
    /// How long a request head (request line and headers) may take to arrive; then the
    /// connection is closed without an answer (a slowloris client). Also how long an idle
    /// keep-alive connection is kept waiting for its next request.
    pub header_read_timeout: NonZeroDuration,
    /// How long a POST body may take to arrive in full, counted from the end of its head; then
    /// the request gets 408 with a JSON-RPC error and the connection is closed (a client that
    /// sends its body a byte at a time).
    pub body_read_timeout: NonZeroDuration,
    /// Events queued per open stream connection; when full, the connection catches up from the
    /// event log instead of losing events.
    pub connection_queue: NonZeroUsize,
    /// `Retry-After` sent with every 503 of an MCP route (the session cap, a store error such as
    /// a Redis failover under way), in whole seconds (a fraction is dropped).
    #[serde(with = "humantime_serde")]
    pub retry_after: Duration,
    /// Interval of SSE keep-alive comments on open streams and of WebSocket pings (two
    /// unanswered close the socket).
    pub keepalive_interval: NonZeroDuration,
    /// SSE `retry` hint sent to 2025-11-25 clients (sent in whole milliseconds).
    #[serde(with = "humantime_serde")]
    pub sse_retry: Duration,
    /// An answer not ready within this time goes out as an SSE stream instead of one JSON body.
    #[serde(with = "humantime_serde")]
    pub sse_after: Duration,
}

impl Default for HttpConfig {
    /// The listener's address is the binary's own; the rest are the node's defaults
    /// ([`super::owners`]).
    fn default() -> Self {
        let node = node();
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            endpoint_path: node.endpoint_path,
            allowed_origins: node.allowed_origins,
            allowed_hosts: node.allowed_hosts,
            cors_max_age: node.cors_max_age,
            max_body: size(node.max_body_bytes),
            max_request_head: size(node.max_request_head_bytes),
            header_read_timeout: positive(node.header_read_timeout),
            body_read_timeout: positive(node.body_read_timeout),
            connection_queue: count(node.connection_queue),
            retry_after: Duration::from_secs(node.retry_after_secs),
            keepalive_interval: positive(node.keepalive_interval),
            sse_retry: Duration::from_millis(node.sse_retry_ms),
            sse_after: node.sse_after,
        }
    }
}

/// The smallest `http.max_request_head`: hyper's initial HTTP/1 read buffer, below which it
/// refuses to be configured (the node's [`switchboard_node::MIN_REQUEST_HEAD_BYTES`]).
pub(super) const MIN_REQUEST_HEAD_BYTES: u64 = switchboard_node::MIN_REQUEST_HEAD_BYTES as u64;

/// The node's router also serves these paths; the MCP endpoint must not shadow them.
const RESERVED_PATHS: [&str; 4] = ["/healthz", "/readyz", "/metrics", "/upstreamz"];

/// A route path under `key`: it becomes an axum route, so no pattern characters (`{}`, `*`,
/// `:`), no query or fragment, and none of the node's own paths.
pub(super) fn check_path(key: &str, path: &str) -> Option<String> {
    let ok = path.starts_with('/')
        && !path.contains(['?', '#', '{', '}', '*', ':'])
        && !path.chars().any(|c| c.is_whitespace() || c.is_control());
    if !ok {
        return Some(format!(
            "{key} `{path}` must start with `/` and have no spaces or any of ? # {{ }} * :"
        ));
    }
    RESERVED_PATHS
        .contains(&path)
        .then(|| format!("{key} `{path}` is taken by the node's own {path} route"))
}

/// Origins are compared exactly with the `Origin` header, which never has a path or a trailing
/// slash (RFC 6454): refuse entries that could never match.
pub(super) fn check_origin(origin: &str) -> Option<String> {
    if origin == "*" {
        return None;
    }
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let ok = rest.is_some_and(|r| !r.is_empty() && !r.contains(['/', ' ', '?', '#']));
    if !ok {
        return Some(format!("http.allowed_origins entry `{origin}` must be `*` or `http(s)://host[:port]` (scheme in lower case) with no path or trailing slash"));
    }
    // RFC 6454 §6.1: a browser's `Origin` leaves the scheme's default port out.
    let default_port = (origin.starts_with("http://") && origin.ends_with(":80"))
        || (origin.starts_with("https://") && origin.ends_with(":443"));
    default_port.then(|| {
        format!("http.allowed_origins entry `{origin}` names its scheme's default port, which browsers leave out of `Origin`: drop the port")
    })
}

/// `Host` is matched without its port, so an entry with a port could never match.
pub(super) fn check_host(host: &str) -> Option<String> {
    let bracketed_v6 = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    let ok = !host.is_empty()
        && !host.contains(['/', ' ', '@'])
        && (bracketed_v6 || !host.contains(':'));
    (!ok).then(|| {
        format!("http.allowed_hosts entry `{host}` must be a host name without scheme or port (IPv6 in brackets)")
    })
}
