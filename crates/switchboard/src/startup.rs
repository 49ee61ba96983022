//! Start-up and shutdown of one node: logging, store, upstream, listener, then
//! [`switchboard_node::serve`] until the shutdown future resolves.

use std::future::Future;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::Arc;

use switchboard_store::memory::MemoryStore;
use switchboard_store::redis::RedisStore;
use switchboard_store::{Store, StoreError};
use switchboard_upstream::Upstream;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat};

/// Why a node could not start or stopped with an error. The binary exits with code 1.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The listen address cannot be bound (in use, not local, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The Redis store cannot be reached.
    #[error("cannot connect to Redis at {url}: {source}")]
    Store {
        /// Where Redis was looked for: the URL (standalone), or the mode and addresses
        /// (Sentinel, Cluster); passwords redacted.
        url: String,
        /// Why.
        source: StoreError,
    },
    /// The upstreams cannot be set up (an unset `${VAR}` in a header, a table its kind refuses).
    #[error("cannot set up the upstreams: {0}")]
    Upstream(String),
    /// The node refused to start: its settings do not fit together, or Redis's
    /// `maxmemory-policy` may evict keys and `redis.allow_eviction` is off (the message names
    /// the Redis setting to change).
    #[error("refusing to start: {0}")]
    Refused(String),
    /// The listener failed while serving.
    #[error("serving failed: {0}")]
    Serve(std::io::Error),
}

/// Binds `config.http.listen` and runs the node on it until `shutdown` resolves, then drains.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let addr = config.http.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Bind { addr, source })?;
    run_on(listener, config, shutdown).await
}

/// Runs the node on an already-bound listener (tests bind `127.0.0.1:0`). `config.http.listen` is
/// not used; `loopback_only` comes from the listener's address. An empty `cluster.node_id` becomes
/// a random one here, at serve time.
pub async fn run_on(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let config = config.resolved();
    let local = listener.local_addr().map_err(RunError::Serve)?;
    // A signal while the store is still connecting (up to seconds against an unreachable
    // Redis) ends the node at once: it was ignored until the connect gave up (review of
    // issue 14).
    let mut shutdown = Box::pin(shutdown);
    let store = tokio::select! {
        store = build_store(&config) => store?,
        () = &mut shutdown => {
            tracing::info!("stopped before the store was ready");
            return Ok(());
        }
    };
    let store = switchboard_store::Observed::wrap(store);
    switchboard_telemetry::metrics::labels::set_max_tool_labels(config.metrics.max_tool_labels);
    let upstream: Arc<dyn Upstream> =
        switchboard_upstream::build::upstreams(&config.upstreams_config())
            .map_err(RunError::Upstream)?;
    tracing::info!(
        node_id = %config.cluster.node_id,
        store = store.backend(),
        redis = %if config.redis.uses_redis() {
            config.redis.topology().describe()
        } else {
            "(none)".to_owned()
        },
        "store ready"
    );
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    tracing::info!(
        upstreams = %match names.as_slice() {
            [] => "the built-in demo server".to_owned(),
            names => names.join(", "),
        },
        "upstreams configured (probed now; serving starts within 5 s whatever they answer)"
    );
    tracing::info!(
        address = %local,
        endpoint = %format!("http://{local}{}", config.http.endpoint_path),
        "listening"
    );
    if config.http.allowed_origins.iter().any(|o| o == "*") && !config.auth.is_on() {
        tracing::warn!("http.allowed_origins holds \"*\" while authorization is off: any web page a user opens can call this node from the user's browser (docs/clients.md, Browser clients)");
    }
    let node_config = config.node_config(local.ip().is_loopback());
    switchboard_node::serve(listener, node_config, store, upstream, shutdown)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => RunError::Refused(e.to_string()),
            _ => RunError::Serve(e),
        })?;
    tracing::info!(node_id = %config.cluster.node_id, "drained, exiting");
    Ok(())
}

/// The memory store when no Redis is configured, else the Redis store in its mode.
async fn build_store(config: &Config) -> Result<Arc<dyn Store>, RunError> {
    if !config.redis.uses_redis() {
        return Ok(MemoryStore::new(config.store_config()));
    }
    let topology = config.redis.topology();
    tracing::info!(redis = %topology.describe(), "connecting to Redis");
    RedisStore::open(&topology, config.store_config())
        .await
        .map(|store| store as Arc<dyn Store>)
        .map_err(|source| RunError::Store {
            url: topology.describe(),
            source,
        })
}

/// Installs the global subscriber: log lines (`RUST_LOG` when set, else `config.log.level`,
/// written to stderr as text or JSON) and, when `[otel]` names an endpoint, the OpenTelemetry
/// layer, which takes only the node's trace spans (target
/// [`switchboard_telemetry::trace::TARGET`]; the log layer never shows them). A second call (in
/// tests) leaves the first subscriber in place. The pipeline it returns flushes the last spans
/// on [`crate::otel::Pipeline::shutdown`]; an exporter that cannot be set up is logged and
/// tracing stays off.
pub fn init_tracing(config: &Config) -> Option<crate::otel::Pipeline> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let trace_target = switchboard_telemetry::trace::TARGET;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(format!("{v},{trace_target}=off")).ok())
        .unwrap_or_else(|| EnvFilter::new(format!("{},{trace_target}=off", config.log.level)));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let fmt = match config.log.format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
    };
    let (pipeline, problem) = match crate::otel::pipeline(&config.otel, &config.cluster.node_id) {
        Ok(Some((pipeline, tracer))) => (Some((pipeline, tracer)), None),
        Ok(None) => (None, None),
        Err(e) => (None, Some(e)),
    };
    let (pipeline, otel) = match pipeline {
        Some((pipeline, tracer)) => {
            let only_traces = tracing_subscriber::filter::Targets::new()
                .with_target(trace_target, tracing::Level::TRACE);
            let layer = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(only_traces);
            (Some(pipeline), Some(layer))
        }
        None => (None, None),
    };
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();
    if let Some(e) = problem {
        tracing::error!(error = %e, "traces are off");
    } else if pipeline.is_some() {
        tracing::info!(
            endpoint = %config.otel.effective_endpoint().unwrap_or_default(),
            protocol = if config.otel.grpc() { "grpc" } else { "http/protobuf" },
            sample_ratio = config.otel.sample_ratio,
            "exporting traces over OTLP"
        );
    }
    pipeline
}

/// Resolves on the first SIGTERM or Ctrl-C (SIGINT). The handlers are installed by this call,
/// before the future is first polled, so a signal that arrives early is not lost.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "shutting down: draining running requests");
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!(
                signal = "Ctrl-C",
                "shutting down: draining running requests"
            );
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_config() -> Config {
        let mut config = Config::default();
        config.http.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config
    }

    /// One HTTP/1.1 GET over a raw socket; the whole answer as text.
    async fn http_get(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn serves_on_the_memory_store_and_stops_on_shutdown() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let node = tokio::spawn(run_on(listener, test_config(), async {
            let _ = rx.await;
        }));
        let answer = http_get(addr, "/healthz").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        tx.send(()).unwrap();
        let result = tokio::time::timeout(std::time::Duration::from_secs(10), node)
            .await
            .expect("node stops within 10 s of shutdown")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
    }

    #[tokio::test]
    async fn a_taken_port_is_an_error_naming_the_address() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut config = test_config();
        config.http.listen = taken.local_addr().unwrap();
        let err = run(config, async {}).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&taken.local_addr().unwrap().to_string()),
            "{text}"
        );
    }
}
