//! # switchboard-node
//!
//! The axum application of one front node: the Streamable HTTP transport (POST/GET/DELETE on one
//! endpoint), Origin/Host checks, session handling, SSE streams backed by event logs, and the
//! background work (heartbeat, session keep-alive, reaper, bus inbox).
//!
//! Depends on `switchboard-protocol`, `switchboard-store` and `switchboard-upstream`. The binary
//! calls [`serve`] with an already-bound listener. Nothing here outlives a process except through
//! the store: a node holds only open connections, running calls and waiters.
//!
//! Modules:
//! - [`app`]: the router; the request path in one file.
//! - [`accept`]: the `Accept` policy (which answer forms a client takes: JSON, SSE or both).
//! - [`auth`]: the optional OAuth 2.1 resource-server layer (bearer JWTs, RFC 9728 metadata,
//!   sessions bound to their principal).
//! - [`config`]: [`NodeConfig`], every limit of the HTTP front.
//! - [`error`]: [`error::HttpError`], each refusal's HTTP status and JSON-RPC code.
//! - [`guard`]: Origin, Host, Content-Type and protocol-version header checks.
//! - [`post`], [`get`], [`delete`], [`initialize`]: the handlers.
//! - [`stateless`]: the MCP 2026-07-28 era on the same endpoint (no session, `_meta` and
//!   `Mcp-Method`/`Mcp-Name` checks, `server/discover`, stream close as cancellation).
//! - [`legacy_sse`]: the legacy HTTP+SSE transport (MCP 2024-11-05) for old clients, its request
//!   path in one file.
//! - [`websocket`]: the WebSocket transport (subprotocol `mcp`, one session per socket,
//!   resumable on any node), its request path in one module.
//! - [`handle`]: the [`switchboard_upstream::SessionHandle`] given to upstreams.
//! - [`session`]: reading `Mcp-Session-Id` and loading the session.
//! - [`run`]: executing one request (session methods here, the rest upstream).
//! - [`response`]: one POST's answer channel (JSON or SSE, logged before sent).
//! - [`peer`]: the [`switchboard_upstream::ClientPeer`] given to upstreams.
//! - [`placement`], [`forward`]: node-bound upstreams — ownership and running requests on the
//!   owner node over the bus.
//! - [`pump`]: the task behind an open SSE connection.
//! - [`hub`]: the SSE connections held by this node.
//! - [`calls`]: requests running here and server requests waiting here.
//! - [`dispatch`]: this node's bus inbox.
//! - [`background`]: heartbeat, session keep-alive, reaper.
//! - [`held`]: what upstreams hold here, checked against the store (gone sessions, owners taken
//!   over).
//! - `server`: the HTTP/1 connection loop under the router (accept, serve, drain).
//! - [`sse`]: SSE framing and headers.
//! - [`telemetry`]: domain events, logged and counted in one place.
//! - [`state`]: what handlers share.

pub mod accept;
pub mod app;
pub mod auth;
pub mod background;
pub mod calls;
pub mod cancel;
pub mod config;
pub mod delete;
pub mod dispatch;
pub mod error;
pub mod forward;
pub mod get;
pub mod guard;
pub mod handle;
pub mod held;
pub mod hub;
pub mod initialize;
pub mod legacy_sse;
pub mod peer;
pub mod placement;
pub mod post;
pub mod pump;
pub mod response;
pub mod run;
mod server;
pub mod session;
pub mod sse;
pub mod state;
pub mod stateless;
pub mod telemetry;
pub mod websocket;

use std::future::Future;
use std::sync::Arc;

use axum::serve::ListenerExt;
pub use config::NodeConfig;
use switchboard_store::Store;
use switchboard_upstream::Upstream;

/// How long start-up waits for upstream probes before serving anyway.
const PREPARE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves MCP on `listener` until `shutdown` resolves, then drains: stops accepting connections,
/// closes standalone streams (clients reopen them on other nodes), declines requests other nodes
/// forward here for node-bound upstreams (they run them themselves, see [`forward::owner::execute`]),
/// and lets running requests finish for at most `drain_timeout`; then it marks this node stopped
/// in the store and only then stops what upstreams hold here (stdio children).
///
/// `store` holds all shared state (its node id names this node); `upstream` answers tool,
/// resource and prompt requests. Errors when the listener fails or the store's inbox cannot be
/// subscribed. The node id must be unique to this process (the binary adds a random suffix).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: NodeConfig,
    store: Arc<dyn Store>,
    upstream: Arc<dyn Upstream>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Some(problems) = config.auth.as_ref().map(auth::AuthSettings::problems) {
        if !problems.is_empty() {
            let text: Vec<String> = problems.into_iter().map(|(_, m)| m).collect();
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                text.join("; "),
            ));
        }
    }
    // Probe the upstreams (their capabilities go into `initialize` answers), but never hold the
    // start for a slow one: after PREPARE_WAIT the probes go on in the background.
    let probing = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.prepare().await }
    });
    if tokio::time::timeout(PREPARE_WAIT, probing).await.is_err() {
        tracing::warn!(wait = ?PREPARE_WAIT, "upstream probes still running; serving meanwhile (capabilities default until they answer)");
    }
    let config = stateless::mrtr::settle_keys(config, &*store)
        .await
        .map_err(std::io::Error::other)?;
    let inbox = store.subscribe().await.map_err(std::io::Error::other)?;
    store.heartbeat().await.map_err(std::io::Error::other)?;
    let app = state::AppState::new(config, store, upstream);
    tokio::spawn(dispatch::run(app.clone(), inbox));
    background::spawn_all(&app);
    let router = app::router(app.clone());
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let drain = app.clone();
    // Each connection gets a clone of the router (reference counted): no per-connection rebuild
    // of its route table (about 2.3 KiB per connection, held as long as an SSE stream is open;
    // massif, issue 4).
    let server = server::serve(
        listener,
        router,
        app.cfg.max_request_head_bytes,
        async move {
            shutdown.await;
            tracing::info!(
                running = drain.calls.running_count(),
                "draining: closing standalone streams, finishing running requests"
            );
            drain.shutdown.cancel();
            drain.hub.close_standalone();
        },
    );
    let server = tokio::spawn(server);
    app.shutdown.cancelled().await;
    let deadline = tokio::time::Instant::now() + app.cfg.drain_timeout;
    let served = tokio::time::timeout_at(deadline, server).await;
    while app.calls.running_count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let left = app.calls.running_count();
    if left > 0 || served.is_err() {
        tracing::warn!(
            running = left,
            "drain deadline reached: abandoning running requests"
        );
    }
    // Tell the cluster this node is gone before stopping what upstreams hold here, so the
    // sessions it owned resources of move on at once (no waiting for node_ttl) and no request is
    // sent here for a child about to be stopped; forwards that still arrive are answered "moved"
    // (`forward::owner::execute`), and in-flight work elsewhere stops waiting for this node.
    app.retired.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Err(e) = app.store.retire().await {
        tracing::warn!(error = %e, "could not mark this node stopped; others notice after node_ttl_ms");
    }
    // Stop what upstreams hold in this process (stdio children and their process groups),
    // bounded like the drain.
    let stop = app.upstream.shutdown();
    if tokio::time::timeout(std::time::Duration::from_secs(10), stop)
        .await
        .is_err()
    {
        tracing::warn!("upstreams did not stop within 10 s");
    }
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(join)) => Err(std::io::Error::other(join)),
        Err(_) => Ok(()),
    }
}
