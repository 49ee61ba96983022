//! The router: where each request goes, in one place.
//!
//! `/mcp` (configurable) — the Streamable HTTP endpoint. Its stack, outermost first:
//! 1. TCP_NODELAY on every accepted socket (in [`crate::serve`]).
//! 2. Origin/Host check → 403/421 ([`guard::check_origin_and_host`]).
//! 3. Method: POST ([`post`]), GET ([`get`]), DELETE ([`delete`]); anything else (HEAD,
//!    OPTIONS, PUT, PATCH) → 405 with `Allow`.
//! 4. Inside each handler: Accept/Content-Type → body → session id → protocol version → one
//!    store round trip (session load) → the request runs.
//!
//! `/healthz` (process up), `/readyz` (store reachable), `/metrics` (Prometheus text).

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get as get_route, on, MethodFilter};
use axum::Router;
use http::StatusCode;

use crate::error::HttpError;
use crate::state::App;
use crate::{delete, get, guard, post, telemetry};

/// Builds the router.
pub fn router(app: App) -> Router {
    let mcp = on(MethodFilter::POST, post::handle)
        .on(MethodFilter::GET, get::handle)
        .on(MethodFilter::DELETE, delete::handle)
        .on(MethodFilter::HEAD, not_allowed)
        .fallback(not_allowed)
        .route_layer(middleware::from_fn_with_state(app.clone(), origin_and_host));
    Router::new()
        .route(&app.cfg.endpoint_path, mcp)
        .route("/healthz", get_route(|| async { "ok" }))
        .route("/readyz", get_route(ready))
        .route("/metrics", get_route(|| async { telemetry::render() }))
        .with_state(app)
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
