//! The router and the edge stack: where each request goes, and every layer it passes before a
//! transport handler sees it, in one place.
//!
//! The edge of every MCP route (the Streamable HTTP endpoint, `/mcp` by default; the legacy
//! HTTP+SSE routes; the WebSocket upgrade), outermost first:
//! 0. The connection (`edge::server`): HTTP/1 with upgrades, TCP_NODELAY; a request head over
//!    `http.max_request_head` gets 431 from hyper before any layer runs.
//! 1. Body limit ([`edge`]: `tower-http`'s `RequestBodyLimitLayer`): a body that declares more
//!    than `http.max_body` gets 413 with a JSON-RPC error before it is read; a longer one
//!    fails with 413 when the handler reads it.
//! 2. Origin and Host ([`origin_and_host`], `edge::guard`): 403 / 421.
//! 3. Authentication, only when `auth_*` is configured ([`authenticate`], `edge::auth`): POST,
//!    GET and DELETE need a valid bearer token, else 401/403 with `WWW-Authenticate`, before any
//!    body is read (C34). The token's principal runs with the request; the session load checks
//!    it.
//! 4. The method router: the endpoint takes POST (`transport::streamable::post`), GET
//!    (`…::get`) and DELETE (`…::delete`); the legacy routes GET on the SSE path and POST on the
//!    messages path (`transport::legacy_sse`); the WebSocket path GET (`transport::websocket`).
//!    Anything else gets 405 with `Allow`.
//! 5. The handler: its own header checks (Content-Type, Accept, `MCP-Protocol-Version`), the
//!    JSON-RPC parse, the session load (one store round trip, the principal checked), then
//!    `exec::start::start_call` (`docs/architecture.md` walks it).
//!
//! Outside the edge: `/healthz` (process up), `/readyz` (store reachable; never about
//! upstreams, see [`ready`]), `/metrics` (Prometheus text), `/upstreamz` (this node's view of
//! each upstream, JSON), and with authorization on the RFC 9728 metadata, no token needed, at
//! `/.well-known/oauth-protected-resource<resource path>` and at the root
//! `/.well-known/oauth-protected-resource` (`edge::auth::metadata::served_paths`).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get as get_route, on, MethodFilter, MethodRouter};
use axum::Router;
use http::{Method, StatusCode};
use tower::util::{MapRequestLayer, MapResponseLayer};
use tower::ServiceBuilder;
use tower_http::body::Limited;
use tower_http::limit::{RequestBodyLimitLayer, ResponseBody};

use crate::edge::error::HttpError;
use crate::state::App;
use crate::{
    edge::auth, edge::guard, telemetry, transport::legacy_sse, transport::streamable::delete,
    transport::streamable::get, transport::streamable::post, transport::websocket,
};

/// Builds the router: each MCP route behind [`edge`], the probes and metadata beside it.
pub fn router(app: App) -> Router {
    let mcp = on(MethodFilter::POST, post::on_post)
        .on(MethodFilter::GET, get::on_get)
        .on(MethodFilter::DELETE, delete::on_delete)
        .on(MethodFilter::HEAD, not_allowed)
        .fallback(not_allowed);
    let mut router = Router::new()
        .route(&app.cfg.endpoint_path, edge(&app, mcp))
        .route("/healthz", get_route(|| async { "ok" }))
        .route("/readyz", get_route(ready))
        .route("/metrics", get_route(metrics))
        .route("/upstreamz", get_route(upstreamz));
    for (path, legacy) in legacy_sse::routes(&app) {
        router = router.route(&path, edge(&app, legacy));
    }
    if !app.cfg.websocket_path.is_empty() {
        let ws = edge(&app, get_route(websocket::on_upgrade));
        router = router.route(&app.cfg.websocket_path, ws);
    }
    for path in app.auth.iter().flat_map(auth::Auth::metadata_paths) {
        router = router.route(&path, get_route(protected_resource_metadata));
    }
    router.with_state(app)
}

/// Layers 1 to 3 of the module's stack around an MCP route's methods (layer 4), outermost
/// first.
fn edge(app: &App, routes: MethodRouter<App>) -> MethodRouter<App> {
    let max_body = app.cfg.max_body_bytes;
    let stack = ServiceBuilder::new()
        // 1. Body limit (`tower-http`): a body declared too large gets 413 before it is read,
        //    answered with the edge's JSON-RPC error; every body is counted as the handler
        //    reads it, and handed on as axum's body type.
        .layer(MapResponseLayer::new(move |r| {
            too_large_as_json_rpc(r, max_body)
        }))
        .layer(RequestBodyLimitLayer::new(max_body))
        .layer(MapRequestLayer::new(|r: http::Request<Limited<Body>>| {
            r.map(Body::new)
        }))
        // 2. Origin and Host.
        .layer(middleware::from_fn_with_state(app.clone(), origin_and_host))
        // 3. Authentication, when configured.
        .option_layer(
            app.auth
                .is_some()
                .then(|| middleware::from_fn_with_state(app.clone(), authenticate)),
        );
    routes.route_layer(stack)
}

/// Layer 1's answer: `tower-http` refuses a body declared too large with a plain-text 413; the
/// client gets the edge's JSON-RPC error instead (the same as for a body found too long while
/// it is read). Other responses pass unchanged.
fn too_large_as_json_rpc(
    response: http::Response<ResponseBody<Body>>,
    max_body: usize,
) -> Response {
    let plain = !response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && plain {
        return HttpError::PayloadTooLarge(max_body).into_response();
    }
    response.map(Body::new)
}

/// Layer 3: POST, GET and DELETE need a valid token; the rest go on to their 405.
async fn authenticate(State(app): State<App>, req: Request, next: Next) -> Response {
    let Some(auth) = app.auth.as_ref() else {
        return next.run(req).await;
    };
    if ![Method::POST, Method::GET, Method::DELETE].contains(req.method()) {
        return next.run(req).await;
    }
    match auth.authenticate(req.headers()) {
        Ok(principal) => auth::with_principal(principal, next.run(req)).await,
        Err(e) => e.into_response(),
    }
}

/// The RFC 9728 document (no token needed: clients read it to learn how to get one).
async fn protected_resource_metadata(State(app): State<App>) -> Response {
    match app.auth.as_ref() {
        Some(auth) => auth.metadata_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Layer 2: `Origin` and `Host` against `http.allowed_origins` / `http.allowed_hosts`.
async fn origin_and_host(State(app): State<App>, req: Request, next: Next) -> Response {
    match guard::check_origin_and_host(&app.cfg, req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

async fn not_allowed() -> Response {
    HttpError::MethodNotAllowed.into_response()
}

/// How long reading `/upstreamz` or `/metrics` waits for upstreams to bring their view up to
/// date first ([`switchboard_upstream::Upstream::refresh_statuses`]: an http upstream's host
/// resolved again when its last resolution is older than `resolve_interval_ms`). Past it the
/// answer shows the older view, whose `resolved_at_ms` says how old.
pub const STATUS_REFRESH_WAIT: Duration = Duration::from_secs(2);

/// Lets the upstreams bring their status up to date, for at most [`STATUS_REFRESH_WAIT`].
async fn refresh_statuses(app: &App) {
    let refresh = app.upstream.refresh_statuses();
    if tokio::time::timeout(STATUS_REFRESH_WAIT, refresh)
        .await
        .is_err()
    {
        tracing::debug!(
            "the upstreams' status was not brought up to date in time; showing the older view"
        );
    }
}

/// The node's counters, then each upstream's series.
async fn metrics(State(app): State<App>) -> String {
    refresh_statuses(&app).await;
    let mut text = telemetry::render();
    text.push_str(&telemetry::render_upstreams(&app.upstream.statuses()));
    text
}

/// `{"node": <node id>, "upstreams": [<UpstreamStatus>, …]}`: this node's view of each configured
/// upstream ([`switchboard_upstream::status`]), in config order.
async fn upstreamz(State(app): State<App>) -> Response {
    refresh_statuses(&app).await;
    let body = serde_json::json!({
        "node": app.node_id(),
        "upstreams": app.upstream.statuses(),
    });
    axum::Json(body).into_response()
}

/// 200 when the store answers within 2 s, else 503. Upstreams play no part: one upstream's
/// outage must not take every replica out of the Service (which would stop all other upstreams
/// and all session handling too), and restarting a node cannot mend an upstream; `/upstreamz`
/// and the `switchboard_upstream_*` metrics are where upstreams are watched.
async fn ready(State(app): State<App>) -> Response {
    let probe = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        app.store.count_sessions(),
    )
    .await;
    match probe {
        Ok(Ok(_)) => (StatusCode::OK, "ready").into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "store unreachable").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use serde_json::Value;
    use switchboard_protocol::codes;
    use switchboard_store::memory::MemoryStore;
    use switchboard_store::StoreConfig;
    use switchboard_upstream::demo::DemoUpstream;
    use tower::ServiceExt;

    use super::*;
    use crate::state::AppState;
    use crate::NodeConfig;

    fn router_with_max_body(max_body_bytes: usize) -> Router {
        let config = NodeConfig {
            max_body_bytes,
            ..NodeConfig::default()
        };
        let store = MemoryStore::new(StoreConfig::default_for("edge"));
        router(AppState::new(config, store, Arc::new(DemoUpstream::new())))
    }

    fn post(body: Body, length: Option<usize>) -> http::Request<Body> {
        let mut req = http::Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(n) = length {
            req = req.header("content-length", n);
        }
        req.body(body).unwrap()
    }

    async fn json_rpc_413(response: Response) {
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["error"]["code"], codes::INVALID_REQUEST, "{body}");
        assert!(body["id"].is_null(), "{body}");
    }

    #[tokio::test]
    async fn a_body_declared_too_large_gets_a_json_rpc_413_before_it_is_read() {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","pad":"{}"}}"#,
            "x".repeat(200)
        );
        let response = router_with_max_body(64)
            .oneshot(post(Body::from(text.clone()), Some(text.len())))
            .await
            .unwrap();
        json_rpc_413(response).await;
    }

    #[tokio::test]
    async fn a_streamed_body_that_grows_too_large_gets_a_json_rpc_413() {
        let chunks = (0..10).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 32])));
        let body = Body::from_stream(futures::stream::iter(chunks));
        let response = router_with_max_body(64)
            .oneshot(post(body, None))
            .await
            .unwrap();
        json_rpc_413(response).await;
    }

    #[tokio::test]
    async fn a_body_within_the_limit_reaches_the_handler() {
        // No session and no `initialize`: the handler's own 400 shows the edge let it through.
        let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let response = router_with_max_body(1024)
            .oneshot(post(Body::from(text), Some(text.len())))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
}
