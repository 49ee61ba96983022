//! An rmcp server with two tools, made horizontally scalable by its session manager: the
//! `main` below differs from rmcp's single-process server only in the two lines marked.
//!
//! ```sh
//! cargo run -p switchboard-rmcp --example minimal -- 127.0.0.1:8081 redis://127.0.0.1:6379
//! ```

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use switchboard_rmcp::{ReplicatedConfig, ReplicatedSessionManager};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Sum {
    a: i64,
    b: i64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

/// The tools of one session.
#[derive(Clone)]
struct Calculator {
    tool_router: ToolRouter<Calculator>,
}

#[tool_router]
impl Calculator {
    fn new() -> Calculator {
        Calculator {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Adds two integers")]
    fn add(&self, Parameters(Sum { a, b }): Parameters<Sum>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Returns its text")]
    fn echo(&self, Parameters(Text { text }): Parameters<Text>) -> String {
        text
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Calculator {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8081".into());
    let redis = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());

    // Bound before the manager starts (it sends the replica's first heartbeat).
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    // Changed: rmcp's `Arc::new(LocalSessionManager::default())` and `Default::default()`.
    let manager = ReplicatedSessionManager::redis(&redis, ReplicatedConfig::default()).await?;
    let service = StreamableHttpService::new(
        || Ok(Calculator::new()),
        manager.clone(),
        manager.http_config(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    println!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(stop_signal())
        .await?;
    manager.shutdown().await;
    Ok(())
}

/// SIGTERM (how a container is stopped) or Ctrl-C.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
