//! The node's own routes beside the MCP edge: `/readyz` (the store reachable; never about
//! upstreams), `/metrics` (OpenMetrics text: the process's metrics, then each upstream's series,
//! `upstream_series.rs`) and `/upstreamz` (this node's view of each upstream, JSON); the last
//! two on the `metrics.listen` listener alone when it is set. `/healthz` is a constant answer in
//! `app.rs`.

mod upstream_series;

use std::time::Duration;

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use switchboard_runtime::ReplicaState;
use switchboard_store::eviction::Readiness;
use switchboard_store::Store;
use switchboard_telemetry::metrics;
use switchboard_upstream::Upstream;

use crate::state::{App, Fence};

/// What the probes read of the node: the store (reachable?), the upstreams (their status), the
/// replica runtime's state (calls, held streams, the memory-policy watch) and the fence.
#[derive(Clone)]
pub(crate) struct Probes {
    store: Arc<dyn Store>,
    upstream: Arc<dyn Upstream>,
    replica: Arc<ReplicaState>,
    fence: Fence,
}

impl FromRef<App> for Probes {
    fn from_ref(app: &App) -> Probes {
        Probes {
            store: app.store.clone(),
            upstream: app.upstream.clone(),
            replica: app.replica.clone(),
            fence: app.fence(),
        }
    }
}

/// How long reading `/upstreamz` or `/metrics` waits for upstreams to bring their view up to
/// date first ([`switchboard_upstream::Upstream::refresh_statuses`]: an http upstream's host
/// resolved again when its last resolution is older than `resolve_interval_ms`). Past it the
/// answer shows the older view, whose `resolved_at_ms` says how old.
pub const STATUS_REFRESH_WAIT: Duration = Duration::from_secs(2);

/// Lets the upstreams bring their status up to date, for at most [`STATUS_REFRESH_WAIT`].
async fn refresh_statuses(upstream: &dyn Upstream) {
    let refresh = upstream.refresh_statuses();
    if tokio::time::timeout(STATUS_REFRESH_WAIT, refresh)
        .await
        .is_err()
    {
        tracing::debug!(
            "the upstreams' status was not brought up to date in time; showing the older view"
        );
    }
}

/// The process's metrics, then each upstream's series, as OpenMetrics text.
pub(crate) async fn metrics(State(node): State<Probes>) -> Response {
    refresh_statuses(node.upstream.as_ref()).await;
    let m = metrics::get();
    m.calls_running.set(node.replica.calls.count() as i64);
    m.fenced.set(i64::from(node.fence.is_up()));
    let (request, standalone) = node.replica.hub.open_counts();
    m.streams("request").set(request as i64);
    m.streams("standalone").set(standalone as i64);
    let series = upstream_series::UpstreamSeries(node.upstream.statuses());
    let text = metrics::render(Some(Box::new(series)));
    ([(http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

/// Serves `/metrics` and `/upstreamz` on `listener` (`metrics.listen`) until the node shuts
/// down; nothing when there is none. Neither asks for a token (`/upstreamz` names every
/// upstream, its endpoints and its last error), so with a listener of their own they are not
/// on the public one (the router in `app.rs`).
pub(crate) async fn serve_metrics(app: App, listener: Option<tokio::net::TcpListener>) {
    let Some(listener) = listener else {
        return;
    };
    let router = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .route("/upstreamz", axum::routing::get(upstreamz))
        .with_state(app.clone());
    let stop = app.shutdown.clone();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(e) = served {
        tracing::warn!(error = %e, "the metrics listener failed");
    }
}

/// `{"node": <node id>, "upstreams": [<UpstreamStatus>, …]}`: this node's view of each configured
/// upstream ([`switchboard_upstream::status`]), in config order.
pub(crate) async fn upstreamz(State(node): State<Probes>) -> Response {
    refresh_statuses(node.upstream.as_ref()).await;
    let body = serde_json::json!({
        "node": node.store.node_id(),
        "upstreams": node.upstream.statuses(),
    });
    axum::Json(body).into_response()
}

/// 200 when the store answers within 2 s (every primary, in Redis Cluster, each with the
/// replicas `redis.min_replicas_acked` needs: [`switchboard_store::Liveness::reachable`]), else
/// 503. Upstreams play no part: one upstream's
/// outage must not take every replica out of the Service (which would stop all other upstreams
/// and all session handling too), and restarting a node cannot mend an upstream; `/upstreamz`
/// and the `switchboard_upstream_*` metrics are where upstreams are watched.
///
/// Redis's `maxmemory-policy` as last read ([`switchboard_store::eviction::Readiness`]): one that
/// may evict keys is 503 `store not ready: …` like too few replicas, unless `redis.allow_eviction`
/// accepts it; then, and when it could not be read, the answer stays 200 and its body says so
/// (`ready; warning: …`), as a probe passes on anything 2xx.
pub(crate) async fn ready(State(node): State<Probes>) -> Response {
    let probe =
        tokio::time::timeout(std::time::Duration::from_secs(2), node.store.reachable()).await;
    match probe {
        Ok(Ok(_)) => match node.replica.eviction.readiness() {
            Readiness::Ready => (StatusCode::OK, "ready".to_owned()).into_response(),
            Readiness::Warn(warning) => {
                (StatusCode::OK, format!("ready; warning: {warning}")).into_response()
            }
            Readiness::NotReady(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("store not ready: {why}"),
            )
                .into_response(),
        },
        // Too few replicas for `redis.min_replicas_acked` is reachable but not ready: say so.
        Ok(Err(e)) if e.to_string().contains("min_replicas_acked") => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store not ready: {e}"),
        )
            .into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "store unreachable").into_response(),
    }
}
