//! The router: where each request goes, in one place.
//!
//! `/mcp` (configurable) — the Streamable HTTP endpoint. Its stack, outermost first:
//! 1. TCP_NODELAY on every accepted socket (in [`crate::serve`]).
//! 2. Origin/Host check → 403/421 ([`guard::check_origin_and_host`]).
//! 3. Authorization, only when `auth_*` is configured ([`auth`]): POST, GET and DELETE need a
//!    valid bearer token → 401/403 with `WWW-Authenticate`, before any body is read (C34). The
//!    token's principal runs with the request; the session load in step 5 checks it.
//! 4. Method: POST ([`post`]), GET ([`get`]), DELETE ([`delete`]); anything else (HEAD,
//!    OPTIONS, PUT, PATCH) → 405 with `Allow`.
//! 5. Inside each handler: Accept/Content-Type → body → session id → protocol version → one
//!    store round trip (session load, and the principal check) → the request runs.
//!
//! `/sse` and `/messages` (configurable; [`legacy_sse`]) — the legacy HTTP+SSE transport (MCP
//! 2024-11-05): the same steps 2 and 3, then GET on the first and POST on the second (other
//! methods → 405 with `Allow`); its request path is in that module.
//!
//! `/ws` (configurable; [`websocket`]) — the WebSocket transport: the same steps 2 and 3 on the
//! upgrade request, then GET only (other methods → 405); its request path is in that module.
//!
//! `/healthz` (process up), `/readyz` (store reachable; never about upstreams, see [`ready`]),
//! `/metrics` (Prometheus text), `/upstreamz` (this node's view of each upstream, JSON). With
//! authorization on, also the RFC 9728 metadata, no token needed, at
//! `/.well-known/oauth-protected-resource<resource path>` and at the root
//! `/.well-known/oauth-protected-resource` ([`auth::metadata::served_paths`]).

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get as get_route, on, MethodFilter, MethodRouter};
use axum::Router;
use http::{Method, StatusCode};

use crate::edge::error::HttpError;
use crate::state::App;
use crate::{
    edge::auth, edge::guard, telemetry, transport::legacy_sse, transport::streamable::delete,
    transport::streamable::get, transport::streamable::post, transport::websocket,
};

/// Builds the router.
pub fn router(app: App) -> Router {
    // Route layers run outermost-last-added: Origin/Host (2), then authorization (3), then the
    // method router (4).
    let mut mcp = on(MethodFilter::POST, post::on_post)
        .on(MethodFilter::GET, get::on_get)
        .on(MethodFilter::DELETE, delete::on_delete)
        .on(MethodFilter::HEAD, not_allowed)
        .fallback(not_allowed);
    if app.auth.is_some() {
        mcp = mcp.route_layer(middleware::from_fn_with_state(app.clone(), authenticate));
    }
    let mcp = mcp.route_layer(middleware::from_fn_with_state(app.clone(), origin_and_host));
    let mut router = Router::new()
        .route(&app.cfg.endpoint_path, mcp)
        .route("/healthz", get_route(|| async { "ok" }))
        .route("/readyz", get_route(ready))
        .route("/metrics", get_route(metrics))
        .route("/upstreamz", get_route(upstreamz));
    for (path, legacy) in legacy_sse::routes(&app) {
        router = router.route(&path, guarded(&app, legacy));
    }
    if !app.cfg.websocket_path.is_empty() {
        let ws = guarded(&app, get_route(websocket::on_upgrade));
        router = router.route(&app.cfg.websocket_path, ws);
    }
    for path in app.auth.iter().flat_map(auth::Auth::metadata_paths) {
        router = router.route(&path, get_route(protected_resource_metadata));
    }
    router.with_state(app)
}

/// Steps 2 and 3 around another transport's routes: Origin/Host, then authorization when on.
fn guarded(app: &App, mut route: MethodRouter<App>) -> MethodRouter<App> {
    if app.auth.is_some() {
        route = route.route_layer(middleware::from_fn_with_state(app.clone(), authenticate));
    }
    route.route_layer(middleware::from_fn_with_state(app.clone(), origin_and_host))
}

/// Step 3: POST, GET and DELETE need a valid token; the rest go on to their 405.
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
