//! The two modes: `run` (V clients looping `tools/call` for D seconds) and `idle-sessions`
//! (create N sessions, hold them, delete them).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::Barrier;

use crate::client::{CallError, McpClient, Target};
use crate::memory::{rss_all, RedisProbe, RssDelta};
use crate::stats::{ErrorCounts, IdleReport, Latencies, RunReport};

/// Settings of one `run`.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Node URLs (the MCP endpoint, e.g. `http://127.0.0.1:8081/mcp`), round robin per request.
    pub urls: Vec<String>,
    /// Virtual clients.
    pub clients: usize,
    /// Length of the measured phase.
    pub duration: Duration,
    /// Tool to call.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// Limit on every single request.
    pub request_timeout: Duration,
}

/// What one client task measured.
#[derive(Default)]
struct ClientTally {
    connected: bool,
    ok: u64,
    /// When its measured loop started and ended.
    window: Option<(Instant, Instant)>,
    errors: ErrorCounts,
    latencies: Latencies,
}

/// Adds one failure to the counter of its kind.
pub fn count(errors: &mut ErrorCounts, e: &CallError) {
    match e {
        CallError::Http(_) => errors.http += 1,
        CallError::JsonRpc(_) => errors.jsonrpc += 1,
        CallError::Timeout => errors.timeout += 1,
        CallError::Transport(_) => errors.transport += 1,
    }
}

/// Runs the load: every client does its handshake, all wait for each other, then each loops
/// `tools/call` until `duration` has passed. Ends at the latest `duration + request_timeout +
/// 1 s` after the handshakes (clients still running then are aborted and counted as timeouts).
pub async fn run_load(cfg: RunConfig) -> Result<RunReport, CallError> {
    run_load_with(cfg, || ()).await
}

/// [`run_load`], calling `at_start` once, at the moment every client has finished its handshake
/// and the measured phase begins (`compare` samples the servers' CPU time there).
pub async fn run_load_with(
    cfg: RunConfig,
    at_start: impl FnOnce(),
) -> Result<RunReport, CallError> {
    let target = Target::new(cfg.urls.clone(), cfg.clients, cfg.request_timeout)?;
    let barrier = Arc::new(Barrier::new(cfg.clients + 1));
    let args = Arc::new(cfg.args.clone());
    let mut tasks = Vec::with_capacity(cfg.clients);
    for _ in 0..cfg.clients {
        let (target, barrier) = (target.clone(), barrier.clone());
        let (tool, args, duration) = (cfg.tool.clone(), args.clone(), cfg.duration);
        tasks.push(tokio::spawn(async move {
            let mut tally = ClientTally::default();
            let client = McpClient::connect(&target).await;
            barrier.wait().await;
            let mut client = match client {
                Ok(c) => c,
                Err(e) => {
                    count(&mut tally.errors, &e);
                    return tally;
                }
            };
            tally.connected = true;
            // Every client leaves the barrier at the same moment: its own clock is the run's.
            let started = Instant::now();
            let deadline = started + duration;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                match client.call_tool(&tool, &args).await {
                    Ok(_) => {
                        tally.latencies.record(t0.elapsed());
                        tally.ok += 1;
                    }
                    Err(e) => count(&mut tally.errors, &e),
                }
            }
            tally.window = Some((started, Instant::now()));
            tally
        }));
    }
    // The clock starts when every client has finished its handshake (or failed it).
    barrier.wait().await;
    at_start();
    let begin = Instant::now();
    let hard_stop = begin + cfg.duration + cfg.request_timeout + Duration::from_secs(1);

    let mut total = ClientTally::default();
    let mut sessions = 0;
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(hard_stop.into(), task).await {
            Ok(Ok(t)) => {
                sessions += usize::from(t.connected);
                total.ok += t.ok;
                total.errors.add(&t.errors);
                total.latencies.merge(t.latencies);
                if let Some((a, b)) = t.window {
                    first = Some(first.map_or(a, |f| f.min(a)));
                    last = Some(last.map_or(b, |l| l.max(b)));
                }
            }
            Ok(Err(_)) => total.errors.transport += 1,
            Err(_) => {
                abort.abort();
                total.errors.timeout += 1;
                last = Some(Instant::now());
            }
        }
    }
    // The measured window: first call of any client to last answer of any client.
    let elapsed = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => begin.elapsed().as_secs_f64(),
    };
    let errors = total.errors.total();
    Ok(RunReport {
        mode: "run",
        urls: cfg.urls,
        clients: cfg.clients,
        tool: cfg.tool,
        duration_secs: cfg.duration.as_secs_f64(),
        elapsed_secs: elapsed,
        sessions,
        requests: total.ok,
        requests_per_sec: if elapsed > 0.0 {
            total.ok as f64 / elapsed
        } else {
            0.0
        },
        errors,
        errors_by_kind: total.errors,
        latency_ms: total.latencies.summary(),
    })
}

/// Settings of one `idle-sessions` run.
#[derive(Debug, Clone)]
pub struct IdleConfig {
    /// Node URLs, round robin per request.
    pub urls: Vec<String>,
    /// Sessions to create.
    pub count: usize,
    /// Handshakes in flight at once.
    pub concurrency: usize,
    /// Limit on every single request.
    pub request_timeout: Duration,
    /// Node PIDs whose RSS is sampled before and after the sessions are created.
    pub node_pids: Vec<u32>,
    /// The cluster's Redis, to measure the memory of a sample of the sessions.
    pub redis_url: Option<String>,
    /// The cluster's `redis.key_prefix`.
    pub key_prefix: String,
    /// Sessions whose Redis keys are measured.
    pub redis_sample: usize,
    /// Pause after creating the sessions, before memory is sampled.
    pub settle: Duration,
}

/// Sessions opened by [`create_sessions`].
#[derive(Debug, Default)]
pub struct Created {
    /// The sessions that completed their handshake.
    pub clients: Vec<McpClient>,
    /// Latency of each successful handshake.
    pub latencies: Latencies,
    /// Failed handshakes.
    pub errors: u64,
    /// Wall time of the whole creation, in seconds.
    pub secs: f64,
}

/// Opens `count` sessions declaring `capabilities`, at most `concurrency` handshakes in flight.
pub async fn create_sessions(
    target: &Target,
    count: usize,
    concurrency: usize,
    capabilities: &Value,
) -> Created {
    let begin = Instant::now();
    let results: Vec<(Duration, Result<McpClient, CallError>)> = futures::stream::iter(0..count)
        .map(|_| async move {
            let t0 = Instant::now();
            let r = McpClient::connect_with(target, capabilities.clone()).await;
            (t0.elapsed(), r)
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut created = Created {
        secs: begin.elapsed().as_secs_f64(),
        clients: Vec::with_capacity(results.len()),
        ..Created::default()
    };
    for (d, r) in results {
        match r {
            Ok(c) => {
                created.latencies.record(d);
                created.clients.push(c);
            }
            Err(_) => created.errors += 1,
        }
    }
    created
}

/// DELETEs every session, at most `concurrency` at once; returns how many got a 2xx.
pub async fn delete_sessions(clients: Vec<McpClient>, concurrency: usize) -> usize {
    let deletes: Vec<bool> = futures::stream::iter(clients)
        .map(|c| async move { c.close().await.is_ok() })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    deletes.iter().filter(|ok| **ok).count()
}

/// Creates `count` sessions with at most `concurrency` handshakes in flight, measures memory
/// (node RSS, Redis) when asked to, calls `hold` with the partial report (creation figures),
/// then deletes every session (same concurrency).
pub async fn idle_sessions<F, Fut>(cfg: IdleConfig, hold: F) -> Result<IdleReport, CallError>
where
    F: FnOnce(IdleReport) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let concurrency = cfg.concurrency.max(1);
    let target = Target::new(cfg.urls.clone(), concurrency, cfg.request_timeout)?;
    let memory_err = |e: String| CallError::Transport(format!("memory sampling: {e}"));
    let rss_before = rss_all(&cfg.node_pids).map_err(memory_err)?;
    let mut redis = match &cfg.redis_url {
        Some(url) => {
            let mut probe = RedisProbe::connect(url, &cfg.key_prefix)
                .await
                .map_err(memory_err)?;
            let used = probe.used_memory().await.map_err(memory_err)?;
            Some((probe, used))
        }
        None => None,
    };
    let c = create_sessions(&target, cfg.count, concurrency, &serde_json::json!({})).await;
    let created = c.clients.len();
    let mut report = IdleReport {
        mode: "idle-sessions",
        urls: cfg.urls,
        count: cfg.count,
        created,
        create_secs: c.secs,
        sessions_per_sec: if c.secs > 0.0 {
            created as f64 / c.secs
        } else {
            0.0
        },
        handshake_ms: c.latencies.summary(),
        deleted: 0,
        errors: c.errors,
        node_rss: None,
        redis_memory: None,
    };
    if !cfg.node_pids.is_empty() || redis.is_some() {
        tokio::time::sleep(cfg.settle).await;
    }
    if !cfg.node_pids.is_empty() {
        let after = rss_all(&cfg.node_pids).map_err(memory_err)?;
        report.node_rss = Some(RssDelta::new(&cfg.node_pids, rss_before, after, created));
    }
    if let Some((probe, used_before)) = &mut redis {
        let n = cfg.redis_sample.min(created);
        let sample: Vec<&str> = c.clients[..n].iter().map(McpClient::session).collect();
        let mem = probe.session_memory(&sample, Some(*used_before), created);
        report.redis_memory = Some(mem.await.map_err(memory_err)?);
    }
    hold(report.clone()).await;
    report.deleted = delete_sessions(c.clients, concurrency).await;
    report.errors += (created - report.deleted) as u64;
    Ok(report)
}
