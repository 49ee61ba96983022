//! CORS for browser clients (the Fetch standard, CORS protocol; MCP 2025-11-25,
//! basic/transports: a browser page is a Streamable HTTP client with nothing but `fetch`).
//!
//! One list decides: an `Origin` the Origin check lets through (`http.allowed_origins`, and
//! loopback origins) gets CORS headers; any other was refused with 403 before this layer, with
//! none. CORS never widens what the Origin check allows.
//!
//! - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) is answered 204
//!   here, before authentication (a browser sends no credentials with it), with
//!   `Access-Control-Allow-Origin` (the origin), `Access-Control-Allow-Methods: GET,POST,DELETE`,
//!   `Access-Control-Allow-Headers` echoing the headers asked for (MCP clients send
//!   `Content-Type`, `Accept`, `Authorization`, `Mcp-Session-Id`, `MCP-Protocol-Version`,
//!   `Last-Event-ID`, and in 2026-07-28 `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`, whose names a
//!   tool defines, so no fixed list can hold them), and `Access-Control-Max-Age`
//!   (`http.cors_max_age`).
//! - Every other answer to an allowed origin, errors and SSE streams included, carries
//!   `Access-Control-Allow-Origin` and `Access-Control-Expose-Headers` ([`EXPOSED`]), so a page
//!   can read the session id, the negotiated revision, an authorization challenge and when to
//!   retry.
//! - An `OPTIONS` that is not a preflight keeps its 405 (with the CORS headers, as any answer).
//!
//! `Vary: Origin` (and the request headers a preflight depends on) on every answer, so a cache
//! between the browser and the node keeps them apart. No `Access-Control-Allow-Credentials`:
//! MCP clients send their token in `Authorization`, which CORS allows without it; cookies are
//! not MCP's.
//!
//! The headers are `tower-http`'s `CorsLayer`; [`preflight_only`] keeps a plain `OPTIONS` from
//! it (the layer answers every `OPTIONS` as a preflight) and makes its preflight answer a 204.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::{
    ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN, VARY,
};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use crate::config::NodeConfig;
use crate::edge::error::HttpError;
use crate::edge::header_checks::origin_allowed;

/// What a page may read of an answer, besides the CORS-safelisted headers: the session id and
/// the negotiated revision (Streamable HTTP), the authorization challenge (RFC 6750 §3, so a
/// browser client can start OAuth discovery), when to retry (a 503, a 429), the rate-limit
/// headers of a 429 (draft-ietf-httpapi-ratelimit-headers), and `Allow` of a 405.
pub const EXPOSED: [&str; 7] = [
    "mcp-session-id",
    "mcp-protocol-version",
    "www-authenticate",
    "retry-after",
    "ratelimit",
    "ratelimit-policy",
    "allow",
];

/// The CORS headers of the MCP routes, for origins the Origin check allows.
pub fn layer(cfg: &Arc<NodeConfig>) -> CorsLayer {
    let allowed = cfg.clone();
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            origin.to_str().is_ok_and(|o| origin_allowed(&allowed, o))
        }))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(EXPOSED.map(HeaderName::from_static))
        .max_age(cfg.cors_max_age)
}

/// The CORS headers of the RFC 9728 metadata documents: public, so readable from any origin
/// (a browser client reads them before it has a token), `GET` only.
pub fn public_layer(max_age: Duration) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::mirror_request())
        .allow_methods([Method::GET])
        .max_age(max_age)
}

/// Outside [`layer`]: an `OPTIONS` without `Origin` and `Access-Control-Request-Method` is not
/// a preflight and gets 405 as before; the layer's preflight answer (200, empty) becomes 204.
pub async fn preflight_only(req: Request, next: Next) -> Response {
    if req.method() == Method::OPTIONS && !is_preflight(&req) {
        let mut refused = HttpError::MethodNotAllowed.into_response();
        // Outside the layer, so its headers are added here (the origin passed the check).
        if let Some(origin) = req.headers().get(ORIGIN) {
            let h = refused.headers_mut();
            h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            h.append(VARY, HeaderValue::from_static("origin"));
            h.insert(
                ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_str(&EXPOSED.join(",")).expect("header names"),
            );
        }
        return refused;
    }
    let mut response = next.run(req).await;
    if response
        .headers()
        .contains_key(ACCESS_CONTROL_ALLOW_METHODS)
    {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

fn is_preflight(req: &Request) -> bool {
    let h = req.headers();
    h.contains_key(ORIGIN) && h.contains_key(ACCESS_CONTROL_REQUEST_METHOD)
}
