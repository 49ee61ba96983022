//! The baselines `compare` measures Switchboard against, each a small HTTP server on loopback:
//!
//! - [`axum_fixed`]: a plain axum handler answering every POST with a fixed small JSON-RPC
//!   result (the HTTP ceiling of the machine);
//! - [`rmcp_echo`]: an `rmcp` stateful Streamable HTTP server with one `echo` tool and its
//!   sessions in memory (what a user would run without Switchboard);
//! - [`forward`]: the smallest proxy hop in the HTTP stack a node uses (axum + reqwest, no
//!   state), in front of another server.
//!
//! All set `TCP_NODELAY` on every accepted socket (without it, small SSE replies wait for
//! Nagle's algorithm).

pub mod axum_fixed;
pub mod forward;
pub mod rmcp_echo;

use axum::serve::ListenerExt;

/// Serves `app` on `listener` with `TCP_NODELAY` on each accepted connection, until
/// `shutdown` completes.
pub async fn serve_nodelay(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        // A socket that refuses the option still serves, only slower.
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Binds `addr`, which must be a loopback address (the baselines are never exposed).
pub async fn bind_loopback(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener, String> {
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--listen {addr}: only loopback addresses are allowed"
        ));
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("bind {addr}: {e}"))
}

/// The listening address of `serve-axum`, `serve-rmcp` and `serve-forward`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Loopback address to listen on, e.g. 127.0.0.1:9000.
    #[arg(long)]
    pub listen: std::net::SocketAddr,
}

/// Which baseline to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// [`axum_fixed`].
    Axum,
    /// [`rmcp_echo`].
    Rmcp,
    /// [`forward`] to this upstream URL.
    Forward(String),
}

/// Serves `which` on `args.listen` until Ctrl-C (or the process is killed). Prints
/// `listening on ADDR` once bound.
pub async fn serve(which: Baseline, args: ServeArgs) -> Result<(), String> {
    let listener = bind_loopback(args.listen).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let app = match which {
        Baseline::Axum => axum_fixed::router(),
        Baseline::Rmcp => rmcp_echo::router(cancel.child_token()),
        Baseline::Forward(upstream) => forward::router(upstream)?,
    };
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on {addr}");
    let shutdown = async move {
        let _ = tokio::signal::ctrl_c().await;
        cancel.cancel();
    };
    serve_nodelay(listener, app, shutdown)
        .await
        .map_err(|e| format!("serve {addr}: {e}"))
}
