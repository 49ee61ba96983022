//! # switchboard-node
//!
//! The axum application of one front node: the Streamable HTTP transport (POST/GET/DELETE on one
//! endpoint), Origin/Host checks, session handling, SSE streams with event logs, and the
//! background tasks (heartbeat, reaper, bus dispatcher).
//!
//! Depends on `switchboard-protocol`, `switchboard-store` and `switchboard-upstream`. The binary
//! calls [`serve`] with an already-bound listener.
//!
//! Modules:
//! - [`config`]: [`NodeConfig`], every limit of the HTTP front.

pub mod config;

use std::future::Future;
use std::sync::Arc;

pub use config::NodeConfig;
use switchboard_store::Store;
use switchboard_upstream::Upstream;

/// Serves MCP on `listener` until `shutdown` resolves, then drains open requests.
///
/// `store` holds all shared state (its node id names this node); `upstream` answers tool,
/// resource and prompt requests. Errors only when the listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: NodeConfig,
    store: Arc<dyn Store>,
    upstream: Arc<dyn Upstream>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let _ = (listener, config, store, upstream);
    shutdown.await;
    Ok(())
}
