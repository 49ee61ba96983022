//! The whole HTTP edge in one file: the connection, the router, and every layer a request passes
//! before a transport handler sees it. "Where does a POST go" is answered here, top to bottom.
//!
//! The edge of every MCP route (the Streamable HTTP endpoint, `/mcp` by default; the legacy
//! HTTP+SSE routes; the WebSocket upgrade), outermost first:
//!
//! 0. The connection ([`serve`]): plain HTTP/1 with upgrades; a request head over
//!    `http.max_request_head` gets 431 from hyper before any layer runs.
//! 1. Origin and Host ([`origin_and_host`], `edge::header_checks`): 403 / 421, without CORS
//!    headers. Then CORS for an allowed origin (`edge::cors`): a preflight is answered 204
//!    here; every other answer, the refusals below included, gets the CORS headers.
//! 2. Body limit (`tower-http`'s `RequestBodyLimitLayer`, [`edge`]): a body that declares more
//!    than `http.max_body` gets 413 with a JSON-RPC error before it is read; a longer one fails
//!    with 413 when the handler reads it. The body's deadline, `http.body_read_timeout` from
//!    here (the end of the head), is set too; a body not in by then gets 408 and the
//!    connection is closed (`edge::body`). Around it, every 503 of the layers below gets
//!    `Retry-After` (`http.retry_after`) when it has none (a store error; the session cap sets
//!    its own). Inside it, a refusal made once the handler has read the request's id answers
//!    with that id, whichever layer made it (JSON-RPC 2.0 §5, `edge::request_id`); one made
//!    before (layers 1 to 5, the fence at once) says `id: null`. Then a node cut off from the
//!    store for two `cluster.node_ttl`s answers 503 at once ([`not_fenced`]).
//! 3. Authentication, only when `[auth]` is configured ([`authenticate`], `edge::auth`): POST,
//!    GET and DELETE need a valid bearer token, else 401/403 with `WWW-Authenticate`, before any
//!    body is read (C34). The token's principal runs with the request; the session load checks
//!    it.
//! 4. The method router ([`router`]): the endpoint takes POST, GET and DELETE; the legacy routes
//!    GET on the SSE path and POST on the messages path; the WebSocket path GET. Anything else
//!    gets 405 with `Allow`.
//! 5. Header and revision checks of the endpoint's methods ([`post_headers`], [`get_headers`],
//!    [`delete_headers`], `edge::header_checks`): a POST's `Content-Type` (415) and `Accept`
//!    (406; the answer forms it allows go on with the request as
//!    [`header_checks::Answers`]); a GET or DELETE in the sessionless 2026-07-28 revision
//!    (405), then a GET's `Accept` (406). A POST's revision needs its body, so the handler
//!    decides it after the parse (`header_checks::is_modern`). The legacy HTTP+SSE and
//!    WebSocket routes check their headers in their handlers, in the order their transports
//!    define.
//! 6. The transport handler: `transport::streamable::{post, get, delete}`,
//!    `transport::legacy_sse`, `transport::websocket`. A POST is parsed (400), sent on by
//!    revision (a 2026-07-28 request to `transport::stateless`, `initialize` to
//!    `session::initialize`), and any other message gets its session loaded and admitted
//!    (`session`: `Mcp-Session-Id` 400/404, `MCP-Protocol-Version` 400, one store round trip,
//!    the principal checked) before `exec::call::start_call` runs it. A GET receives its
//!    session from the [`crate::session::LoadedSession`] extractor. `docs/architecture.md`
//!    walks each path file by file.
//!
//! Outside the edge: `/healthz` (process up) and the probes of [`crate::probes`] (`/readyz`,
//! `/metrics`, `/upstreamz`; the last two on the `metrics.listen` listener instead when it is
//! set), and with authorization on the RFC 9728 metadata, no token needed,
//! at `/.well-known/oauth-protected-resource<resource path>` and at the root
//! `/.well-known/oauth-protected-resource` (`edge::auth::metadata::served_paths`).
//!
//! Why [`serve`] and not `axum::serve`: an open SSE stream is an idle connection held for
//! minutes, and its memory is mostly the HTTP stack's (issue 4, `BENCHMARKS.md` §4).
//! `axum::serve` wraps every connection in hyper-util's auto-protocol builder (a version sniff
//! before HTTP/1, the builder kept in the connection task) and lets hyper keep a box the size of
//! the router's whole request future for the connection's life. Here the connection is plain
//! HTTP/1 (the node never spoke HTTP/2: axum is built without it), the read buffer is capped at
//! `http.max_request_head`, and each request's future is boxed so that an idle connection holds
//! a pointer, not the future's space.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get as get_route, on, MethodFilter, MethodRouter};
use axum::serve::Listener;
use axum::Router;
use http::{Method, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::util::{MapRequestLayer, MapResponseLayer};
use tower::ServiceBuilder;
use tower_http::body::Limited;
use tower_http::limit::{RequestBodyLimitLayer, ResponseBody};
use tower_service::Service;

use crate::config::NodeConfig;
use crate::edge::auth::Auth;
use crate::edge::body::BodyDeadline;
use crate::edge::error::HttpError;
use crate::edge::{cors, header_checks, request_id};
use crate::probes;
use crate::state::{App, Fence};
use crate::transport::streamable::{delete, get, post};
use crate::transport::{legacy_sse, websocket};

/// Builds the router (layer 4): each MCP route behind [`edge`] (layers 1 to 3), each method
/// behind its header checks (layer 5); the probes and the metadata beside them.
pub fn router(app: App) -> Router {
    let mcp = on(
        MethodFilter::POST,
        post::on_post.layer(middleware::from_fn(post_headers)),
    )
    .on(
        MethodFilter::GET,
        get::on_get.layer(middleware::from_fn(get_headers)),
    )
    .on(
        MethodFilter::DELETE,
        delete::on_delete.layer(middleware::from_fn(delete_headers)),
    )
    .on(MethodFilter::HEAD, not_allowed)
    .fallback(not_allowed);
    let mut router = Router::new()
        .route_service(&app.cfg.endpoint_path, edge(&app, mcp))
        .route("/healthz", get_route(|| async { "ok" }))
        .route("/readyz", get_route(probes::ready));
    // With `metrics.listen` set, `/metrics` and `/upstreamz` are on that listener only
    // (`probes::serve_metrics`); they need no token, so they leave the public listener.
    if app.cfg.metrics_listen.is_none() {
        router = router
            .route("/metrics", get_route(probes::metrics))
            .route("/upstreamz", get_route(probes::upstreamz));
    }
    for (path, legacy) in legacy_sse::routes(&app) {
        router = router.route_service(&path, edge(&app, legacy));
    }
    if !app.cfg.websocket_path.is_empty() {
        let ws = edge(&app, get_route(websocket::on_upgrade));
        router = router.route_service(&app.cfg.websocket_path, ws);
    }
    if let Some(auth) = &app.auth {
        for path in auth.metadata_paths() {
            let metadata = get_route(protected_resource_metadata)
                .layer(cors::public_layer(app.cfg.cors_max_age))
                .layer(middleware::from_fn(cors::preflight_only))
                .with_state(auth.clone());
            router = router.route(&path, metadata);
        }
    }
    router.with_state(app)
}

/// Layers 1 to 3 around an MCP route's methods, outermost first, and the route as one service.
/// Only a 405 keeps the `Allow` header: axum's method router adds one, listing its routed
/// methods, to every answer for a method it does not route, so a PUT refused by layer 2 would
/// otherwise carry a second, different `Allow` beside its 403.
fn edge(app: &App, routes: MethodRouter<App>) -> EdgeRoute {
    let max_body = app.cfg.max_body_bytes;
    let retry_after = app.cfg.retry_after_secs;
    let body_read_timeout = app.cfg.body_read_timeout;
    let stack = ServiceBuilder::new()
        // 1. Origin and Host, first: a refused origin gets its 403 without CORS headers.
        .layer(middleware::from_fn_with_state(
            app.cfg.clone(),
            origin_and_host,
        ))
        //    CORS for an allowed origin: a preflight answered here, and the CORS headers on
        //    every other answer, the refusals below included (`edge::cors`).
        .layer(middleware::from_fn(cors::preflight_only))
        .layer(cors::layer(&app.cfg))
        // Every 503 says when to come back (see `retry_after_on_503`).
        .layer(MapResponseLayer::new(move |r| {
            retry_after_on_503(r, retry_after)
        }))
        // 2. Body limit (`tower-http`): a body declared too large gets 413 before it is read,
        //    answered with the edge's JSON-RPC error; every body is counted as the handler
        //    reads it, and handed on as axum's body type with its deadline (`edge::body`).
        .layer(MapResponseLayer::new(move |r| {
            too_large_as_json_rpc(r, max_body)
        }))
        .layer(RequestBodyLimitLayer::new(max_body))
        .layer(MapRequestLayer::new(
            move |r: http::Request<Limited<Body>>| {
                let mut r = r.map(Body::new);
                r.extensions_mut()
                    .insert(BodyDeadline::from_now(body_read_timeout));
                r
            },
        ))
        //    A refusal made below once the handler read the request's id answers with that id
        //    (JSON-RPC 2.0 §5, `edge::request_id`): the fence's 503 too.
        .layer(middleware::from_fn(request_id::answer_with_id))
        //    A node cut off from the store refuses at once.
        .layer(middleware::from_fn_with_state(app.fence(), not_fenced))
        // 3. Authentication, when configured.
        .option_layer(
            app.auth
                .clone()
                .map(|auth| middleware::from_fn_with_state(auth, authenticate)),
        );
    let routes = routes.layer(stack).with_state(app.clone());
    ServiceBuilder::new()
        .map_response(only_a_405_says_allow as fn(Response) -> Response)
        .service(routes)
}

/// An MCP route behind its edge (see [`edge`]).
type EdgeRoute = tower::util::MapResponse<MethodRouter, fn(Response) -> Response>;

/// Drops `Allow` from every answer but a 405.
fn only_a_405_says_allow(mut response: Response) -> Response {
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        response.headers_mut().remove(http::header::ALLOW);
    }
    response
}

/// Every 503 of an MCP route carries `Retry-After` (`http.retry_after`, in seconds) unless the
/// refusal set its own: besides the session cap, a 503 is a store error (Redis unreachable, or
/// a failover under way until the promotion), and issue 14 wants those retried after a while
/// too (RFC 9110 §10.2.3: `Retry-After` with 503 says how long the service is expected to be
/// unavailable).
fn retry_after_on_503(mut response: Response, secs: u64) -> Response {
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .entry(http::header::RETRY_AFTER)
            .or_insert_with(|| http::HeaderValue::from(secs));
    }
    response
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

/// Layer 1: `Origin` and `Host` against `http.allowed_origins` / `http.allowed_hosts`.
async fn origin_and_host(State(cfg): State<Arc<NodeConfig>>, req: Request, next: Next) -> Response {
    match header_checks::check_origin_and_host(&cfg, req.version(), req.uri(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            // A browser shows the page only "Failed to fetch": the operator finds why here.
            tracing::debug!(refused = %e, "request refused by the Origin/Host check");
            e.into_response()
        }
    }
}

/// Layer 2, inside the body limit: a node whose heartbeat has not been answered for longer than
/// `cluster.node_ttl` (`AppState::fenced`) answers 503 with a JSON-RPC body at once: the other
/// nodes take it for dead and end its requests, and what it would serve (sessions, event logs)
/// it can no longer see. Without this, each request waited out the store's 5 s command timeout.
///
/// A request admitted before the fence and still without its answer's headers when the fence
/// goes up is refused the same way then: each of its store calls may wait up to 5 s, and in the
/// chaos suite's partition a `POST` to the cut-off node got its headers 10,017 ms after it was
/// sent, at the end of the 10 s partition (RELIABILITY.md, finding 2). Its call is dropped with
/// it; a streamed answer already under way is closed by the fence instead. That refusal carries
/// the request's id when the handler has read it (the layer above fills it in); the one at once
/// comes before the body is read, with `id: null` (JSON-RPC 2.0 §5: the id could not be read).
async fn not_fenced(State(mut fence): State<Fence>, req: Request, next: Next) -> Response {
    let refusal = || {
        HttpError::Store(
            "this node cannot reach the session store; another node will serve the request".into(),
        )
        .into_response()
    };
    if fence.is_up() {
        return refusal();
    }
    tokio::select! {
        response = next.run(req) => response,
        () = fence.until_up() => {
            tracing::debug!("fenced while a request waited for its answer; refused");
            refusal()
        }
    }
}

/// Layer 3: POST, GET and DELETE need a valid token; the rest go on to their 405.
async fn authenticate(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    if ![Method::POST, Method::GET, Method::DELETE].contains(req.method()) {
        return next.run(req).await;
    }
    match auth.authenticate(req.headers()).await {
        Ok(principal) => {
            crate::session::with_principal(std::sync::Arc::new(principal), next.run(req)).await
        }
        Err(e) => e.into_response(),
    }
}

/// Layer 5 of a POST: `Content-Type` must be JSON (415), `Accept` must allow an answer form
/// (406); the forms allowed ride with the request as an extension, for the handler.
async fn post_headers(mut req: Request, next: Next) -> Response {
    let checked = header_checks::check_content_type(req.headers())
        .and_then(|()| header_checks::Answers::of_post(req.headers()));
    match checked {
        Ok(answers) => {
            req.extensions_mut().insert(answers);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Layer 5 of a GET: no GET in the 2026-07-28 revision (405); `Accept` must allow
/// `text/event-stream` (406).
async fn get_headers(req: Request, next: Next) -> Response {
    let checked = header_checks::refuse_get_or_delete(req.headers())
        .and_then(|()| header_checks::check_get(req.headers()));
    match checked {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// Layer 5 of a DELETE: no DELETE in the 2026-07-28 revision (405).
async fn delete_headers(req: Request, next: Next) -> Response {
    match header_checks::refuse_get_or_delete(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// The RFC 9728 document (no token needed: clients read it to learn how to get one).
async fn protected_resource_metadata(State(auth): State<Arc<Auth>>) -> Response {
    auth.metadata_response()
}

async fn not_allowed() -> Response {
    HttpError::MethodNotAllowed.into_response()
}

/// hyper's smallest read-buffer cap (its initial read buffer); it panics below it.
const MIN_BUF_SIZE: usize = crate::config::MIN_REQUEST_HEAD_BYTES;

/// One request's future, boxed: hyper keeps a box of the service's future type for the whole
/// connection, so an unboxed router future would cost its full size on every idle stream.
type BoxedResponse = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// Serves `router` on every connection `listener` accepts until `shutdown` resolves, then stops
/// accepting, asks every open connection to finish its current response and close (HTTP/1
/// keep-alive off), and returns when all have closed. The caller bounds that wait.
///
/// `max_head` caps each connection's read buffer, hence the request head (a larger one gets
/// 431, as hyper answers it); hyper's default cap (~400 KiB) would let a buffer grown by a fast
/// body stay that large for the connection's life. `header_read_timeout` bounds how long a
/// request head may take to arrive (`http.header_read_timeout`): a slowloris client that sends
/// it a byte at a time has its connection closed then, without an answer (hyper's timer; it also
/// runs while a keep-alive connection waits for its next request).
pub(crate) async fn serve<L>(
    mut listener: L,
    router: axum::Router,
    (max_head, header_read_timeout): (usize, std::time::Duration),
    shutdown: impl Future<Output = ()> + Send,
) where
    L: Listener,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(max_head.max(MIN_BUF_SIZE))
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let draining = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut shutdown = pin!(shutdown);
    loop {
        // `Listener::accept` retries failed accepts itself (with a pause on errors such as
        // EMFILE), so this loop only ends on shutdown.
        let (io, _remote) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            // The router's `poll_ready` is always ready; its future owns what it needs.
            Box::pin(router.clone().call(request.map(Body::new))) as BoxedResponse
        });
        let conn = http
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        let draining = draining.clone();
        connections.spawn(async move {
            let mut conn = pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                () = draining.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = served {
                tracing::trace!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    draining.cancel();
    connections.close();
    connections.wait().await;
}

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;
