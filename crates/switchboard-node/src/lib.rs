//! # switchboard-node
//!
//! The axum application of one front node: the Streamable HTTP transport (POST/GET/DELETE on one
//! endpoint), Origin/Host checks, session handling, SSE streams backed by event logs, and what
//! makes it one replica among many on top of the replica runtime (whose heartbeat, session
//! keep-alive, reaper and bus inbox it runs).
//!
//! Depends on `switchboard-protocol`, `switchboard-telemetry`, `switchboard-store`,
//! `switchboard-runtime` and `switchboard-upstream`. The binary
//! calls [`serve`] with an already-bound listener. Nothing here outlives a process except through
//! the store: a node holds only open connections, running calls and waiters.
//!
//! Modules, in layers: each folder imports only folders above it in this list (checked by
//! `structure.py`: no two folders import each other), so a rule lives where its folder is:
//! - [`units`]: durations and sizes as config values.
//! - `config` ([`NodeConfig`]): the settings; config-only leaves for `[auth]` and
//!   `[rate_limits]`.
//! - `telemetry`: domain events, logged and counted in one place.
//! - `edge`: what the stack's layers call: header and revision checks, the `Accept` policy,
//!   authentication, refusals (and a rate limit's refusal answer).
//! - [`mrtr`]: multi round-trip requests of the 2026-07-28 era: sealed request state, a
//!   request's inputs.
//! - `state`: what handlers share (`AppState`) and the registries it holds, as leaves.
//! - [`limits`]: rate limits, taken in a request's admission.
//! - `session`: the session a request names: headers, principal, admission, lost requests,
//!   `initialize`.
//! - `cluster`: ownership of node-bound upstreams, the origin side of forwarding, what upstreams
//!   hold here.
//! - `streams`: a held stream's SSE framing (the task behind it is the runtime's), resumption
//!   checks.
//! - `exec`: a request while it runs here: its task, when and how it answers, its answer
//!   channel, the session handle and client peer its upstream gets.
//! - `transport`: Streamable HTTP, legacy HTTP+SSE, WebSocket, the 2026-07-28 era, and a request
//!   forwarded here over the bus.
//! - `probes`: `/readyz`, `/metrics`, `/upstreamz`.
//! - `replica`: this node as the replica runtime sees it (the fence, what a heartbeat or a
//!   reaper pass means here) and the bus messages that are not about held streams.
//! - `app`: the whole edge in one file: the connection loop, the tower stack, the router, each
//!   method's header checks.
//!
//! The public API is [`serve`], [`NodeConfig`], [`auth`] (the resource-server settings, also the
//! `[auth]` config section), [`mrtr`] (the MRTR settings, also `[stateless.mrtr]`), [`limits`] (the rate-limit settings,
//! also `[rate_limits]`) and [`units`];
//! everything else is internal to the crate.

#![warn(clippy::too_many_lines)]

pub(crate) mod app;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod edge;
pub(crate) mod exec;
pub mod limits;
pub mod mrtr;
pub(crate) mod probes;
pub(crate) mod replica;
pub(crate) mod session;
pub(crate) mod state;
pub(crate) mod streams;
pub(crate) mod telemetry;
pub(crate) mod transport;
pub mod units;

pub use edge::auth;

/// Entry points for the fuzz targets (`fuzz/`) and their corpus replay test; not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// Runs the 2026-07-28 request checks (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`
    /// against the body, `_meta`) on `headers`, `method` and `params`: `Ok` when they pass, else
    /// the refusal's HTTP status and JSON-RPC code.
    ///
    /// # Errors
    /// The refusal's (status, code) when a check fails.
    pub fn stateless_checks(
        headers: &http::HeaderMap,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<(), (u16, i64)> {
        crate::transport::stateless::checks::check(headers, method, params)
            .map(|_| ())
            .map_err(|r| (r.status().as_u16(), r.code()))
    }
}

use std::future::Future;
use std::sync::Arc;

use axum::serve::ListenerExt;
pub use config::{NodeConfig, MIN_REQUEST_HEAD_BYTES};
use switchboard_store::eviction::EvictionWatch;
use switchboard_store::Store;
use switchboard_upstream::Upstream;

/// The `metrics.listen` listener, when one is configured.
async fn bind_metrics(
    addr: Option<std::net::SocketAddr>,
) -> std::io::Result<Option<tokio::net::TcpListener>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot listen on {addr} (metrics.listen): {e}"),
        )
    })?;
    if let Ok(local) = listener.local_addr() {
        tracing::info!(address = %local, "serving /metrics on its own listener");
    }
    Ok(Some(listener))
}

/// How long start-up waits for upstream probes before serving anyway.
const PREPARE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What must hold before the node writes anything to the store: settings that fit together,
/// and Redis's `maxmemory-policy` (case C38: one that may evict keys refuses the start unless
/// `redis.allow_eviction` accepts it). The eviction watch as the start found it.
async fn start_checks(config: &NodeConfig, store: &dyn Store) -> std::io::Result<EvictionWatch> {
    let refused = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    let auth = config.auth.as_ref().map(auth::AuthSettings::problems);
    let mut problems: Vec<String> = auth.into_iter().flatten().map(|(_, m)| m).collect();
    problems.extend(config.mrtr.problems());
    if !problems.is_empty() {
        return Err(refused(problems.join("; ")));
    }
    let eviction = EvictionWatch::new(config.eviction.clone(), config::EVICTION_OPT_IN);
    eviction
        .check_at_start(store)
        .await
        .map_err(|e| refused(e.to_string()))?;
    Ok(eviction)
}

/// Serves MCP on `listener` until `shutdown` resolves, then drains: stops accepting connections,
/// closes standalone streams (clients reopen them on other nodes), declines requests other nodes
/// forward here for node-bound upstreams (they run them themselves, see `transport::forwarded::execute`),
/// and lets running requests finish for at most `drain_timeout`; then it marks this node stopped
/// in the store and only then stops what upstreams hold here (stdio children).
///
/// `store` holds all shared state (its node id names this node); `upstream` answers tool,
/// resource and prompt requests. Errors when the listener fails or the store's inbox cannot be
/// subscribed, and (kind `InvalidInput`, before anything is written to the store) when the
/// settings are inconsistent or Redis's `maxmemory-policy` may evict keys and
/// `config.eviction.allow` is off ([`switchboard_store::eviction`]). The node id must be unique to this process (the binary adds a random suffix).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: NodeConfig,
    store: Arc<dyn Store>,
    upstream: Arc<dyn Upstream>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let eviction = start_checks(&config, &*store).await?;
    // Probe the upstreams (their capabilities go into `initialize` answers), but never hold the
    // start for a slow one: after PREPARE_WAIT the probes go on in the background.
    let probing = tokio::spawn({
        let upstream = upstream.clone();
        async move { upstream.prepare().await }
    });
    if tokio::time::timeout(PREPARE_WAIT, probing).await.is_err() {
        tracing::warn!(wait = ?PREPARE_WAIT, "upstream probes still running; serving meanwhile (capabilities default until they answer)");
    }
    let config = mrtr::settle_keys(config, &*store)
        .await
        .map_err(std::io::Error::other)?;
    let metrics_listener = bind_metrics(config.metrics_listen).await?;
    let app = state::AppState::with_eviction(config, store, upstream, eviction);
    // The node's loops and inbox end with the process (they outlive the drain).
    switchboard_runtime::background::start(app.clone(), tokio_util::sync::CancellationToken::new())
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(probes::serve_metrics(app.clone(), metrics_listener));
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
    let server = app::serve(
        listener,
        router,
        (app.cfg.max_request_head_bytes, app.cfg.header_read_timeout),
        async move {
            shutdown.await;
            tracing::info!(
                running = drain.replica.calls.count(),
                "draining: closing standalone streams, finishing running requests"
            );
            drain.shutdown.cancel();
            drain.replica.hub.close_standalone();
        },
    );
    let server = tokio::spawn(server);
    app.shutdown.cancelled().await;
    let deadline = tokio::time::Instant::now() + app.cfg.drain_timeout;
    let served = tokio::time::timeout_at(deadline, server).await;
    let _ = tokio::time::timeout_at(deadline, app.replica.calls.idle()).await;
    let left = app.replica.calls.count();
    if left > 0 || served.is_err() {
        tracing::warn!(
            running = left,
            "drain deadline reached: abandoning running requests"
        );
    }
    // Tell the cluster this node is gone before stopping what upstreams hold here, so the
    // sessions it owned resources of move on at once (no waiting for node_ttl) and no request is
    // sent here for a child about to be stopped; forwards that still arrive are answered "moved"
    // (`transport::forwarded::execute`), and in-flight work elsewhere stops waiting for this node.
    app.retired.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Err(e) = app.store.retire().await {
        tracing::warn!(error = %e, "could not mark this node stopped; others notice after cluster.node_ttl");
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
