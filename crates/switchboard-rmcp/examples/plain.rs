//! The `replicated` example's handler on rmcp's own session manager (`LocalSessionManager`:
//! sessions in this process's memory) and rmcp's default server settings: the plain rmcp server
//! that `replicated` is the scalable version of. One process serves every session it made; a
//! replica that did not make a session answers 404 for it, so several of these behind a
//! round-robin balancer fail the conformance suite (the integration tests' negative control).
//!
//! ```sh
//! cargo run -p switchboard-rmcp --example plain -- --listen 127.0.0.1:8081
//! ```

#[path = "replicated/catalog.rs"]
mod catalog;
#[path = "replicated/handler.rs"]
mod handler;

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;

/// The command line.
#[derive(Debug, Parser)]
#[command(about = "The conformance server on plain rmcp (in-memory sessions, one process)")]
struct Args {
    /// Address to listen on (the MCP endpoint is `/mcp`), e.g. `127.0.0.1:8081`.
    #[arg(long)]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let args = Args::parse();
    let service = StreamableHttpService::new(
        || Ok(handler::Conformance),
        Arc::new(LocalSessionManager::default()),
        Default::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let address = listener.local_addr()?;
    tracing::info!(%address, "listening on http://{address}/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
