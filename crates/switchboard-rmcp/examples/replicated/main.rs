//! A replicated rmcp server carrying every tool, resource and prompt the server scenarios of the
//! MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16) call.
//!
//! ```sh
//! cargo run --release -p switchboard-rmcp --example replicated -- --listen 127.0.0.1:8081 --redis-url redis://127.0.0.1:6379
//! ```
//!
//! Run several with the same `--redis-url` and distinct ports, behind any balancer: each serves
//! every session on `/mcp`. Without `--redis-url` it keeps its sessions in memory (one process).
//! It binds only the address it is given, logs it, and on SIGTERM or Ctrl-C stops taking
//! connections, lets running calls answer (10 s at most) and exits 0.
//!
//! Modules: `catalog` (the offer, as MCP JSON), `handler` (rmcp's `ServerHandler`).

mod catalog;
mod handler;

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use switchboard_rmcp::{ReplicatedConfig, ReplicatedSessionManager};
use tokio_util::sync::CancellationToken;

/// The command line.
#[derive(Debug, Parser)]
#[command(about = "A replicated rmcp MCP server (conformance features) on Switchboard's store")]
struct Args {
    /// Address to listen on (the MCP endpoint is `/mcp`), e.g. `127.0.0.1:8081`; port 0 picks one.
    #[arg(long)]
    listen: SocketAddr,
    /// Redis shared by every replica, e.g. `redis://127.0.0.1:6379`; without it sessions live in
    /// this process's memory.
    #[arg(long)]
    redis_url: Option<String>,
    /// This replica's node id (unique per process); default `rmcp-<8 random hex digits>`.
    #[arg(long)]
    node_id: Option<String>,
    /// Prefix of every Redis key and channel (default `sb`).
    #[arg(long)]
    key_prefix: Option<String>,
    /// Seconds after its last request that an idle session ends (default 1800).
    #[arg(long)]
    idle_ttl_secs: Option<u64>,
    /// `Host` values to accept besides loopback ones (DNS rebinding protection); repeatable.
    #[arg(long)]
    allowed_host: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    // rmcp logs every session id at `info`; ids are credentials, so its logs start at `warn`.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn config(args: &Args) -> ReplicatedConfig {
    let mut config = match &args.node_id {
        Some(id) => ReplicatedConfig::new(id.clone()),
        None => ReplicatedConfig::default(),
    };
    if let Some(prefix) = &args.key_prefix {
        config = config.with_key_prefix(prefix.clone());
    }
    if let Some(secs) = args.idle_ttl_secs {
        config = config.with_idle_ttl(std::time::Duration::from_secs(secs));
    }
    config
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = config(&args);
    let manager = match &args.redis_url {
        Some(url) => ReplicatedSessionManager::redis(url, config).await?,
        None => ReplicatedSessionManager::memory(config).await?,
    };
    let mut http = manager.http_config();
    if !args.allowed_host.is_empty() {
        let hosts = ["localhost", "127.0.0.1", "::1"].map(String::from);
        http = http.with_allowed_hosts(hosts.into_iter().chain(args.allowed_host.clone()));
    }
    let service = StreamableHttpService::new(|| Ok(handler::Conformance), manager.clone(), http);
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let address = listener.local_addr()?;
    tracing::info!(%address, node = manager.node_id(), "listening on http://{address}/mcp");

    let stopping = CancellationToken::new();
    let serve =
        axum::serve(listener, app).with_graceful_shutdown(stopping.clone().cancelled_owned());
    let serve = std::future::IntoFuture::into_future(serve);
    tokio::pin!(serve);
    tokio::select! {
        served = &mut serve => {
            manager.shutdown().await;
            return Ok(served?);
        }
        () = stop_signal() => {}
    }
    tracing::info!("stopping: draining");
    stopping.cancel();
    let (served, ()) = tokio::join!(serve, manager.shutdown());
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM or Ctrl-C (SIGINT).
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    () = ctrl_c => {}
                }
            }
            Err(_) => ctrl_c.await,
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}
