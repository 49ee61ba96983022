//! `open-streams`: N sessions, each with an idle standalone GET stream held open, and the node
//! memory per open stream (RSS delta from `/proc/<pid>/status`).

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;
use serde_json::json;

use crate::client::{CallError, Target};
use crate::events::EventStream;
use crate::memory::{open_files_limit, rss_all, RssDelta};
use crate::run::{create_sessions, delete_sessions};
use crate::stats::{Latencies, LatencySummary};

/// Settings of one `open-streams` run.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// Node URLs, round robin per request (sessions and streams are spread over them).
    pub urls: Vec<String>,
    /// Streams (and sessions) to open.
    pub count: usize,
    /// Handshakes and GETs in flight at once while opening.
    pub concurrency: usize,
    /// How long to hold the streams once all are open (and sampled).
    pub hold: Duration,
    /// Pause after opening, before RSS is sampled.
    pub settle: Duration,
    /// Node PIDs whose RSS is sampled.
    pub node_pids: Vec<u32>,
    /// Limit on every single request (for a GET: until its priming event).
    pub request_timeout: Duration,
}

/// The result of `open-streams`.
#[derive(Debug, Clone, Serialize)]
pub struct StreamsReport {
    /// Always `"open-streams"`.
    pub mode: &'static str,
    /// Node URLs.
    pub urls: Vec<String>,
    /// Streams asked for.
    pub count: usize,
    /// Sessions created.
    pub sessions: usize,
    /// GET streams open (priming event received) after the settle pause.
    pub streams_open: usize,
    /// Wall time to open every stream, in seconds (sessions already created).
    pub open_secs: f64,
    /// Time from sending a GET to its priming event.
    pub open_ms: LatencySummary,
    /// Streams that ended while they should have been held (counted at the end of the hold).
    pub closed_early: usize,
    /// Failed handshakes, GETs and deletes.
    pub errors: u64,
    /// Node RSS before the sessions and after they were created (with `--node-pid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_sessions: Option<RssDelta>,
    /// Node RSS after the sessions and after every stream was open: the memory per open idle
    /// stream (with `--node-pid`; `per_item_kib` is the figure of the target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_streams: Option<RssDelta>,
    /// Sessions deleted with 2xx at the end.
    pub deleted: usize,
}

impl StreamsReport {
    /// The human summary.
    pub fn lines(&self) -> String {
        let mut s = format!(
            "sessions={} streams_open={}/{} open_secs={:.2} open_p50={:.3}ms p99={:.3}ms errors={}",
            self.sessions,
            self.streams_open,
            self.count,
            self.open_secs,
            self.open_ms.p50,
            self.open_ms.p99,
            self.errors
        );
        if let (Some(a), Some(b)) = (&self.rss_sessions, &self.rss_streams) {
            s += &format!(
                "\nnode_rss_kib before={:?} sessions={:?} streams={:?}\nper_session_kib={:.2} per_stream_kib={:.2}",
                a.before_kib, a.after_kib, b.after_kib, a.per_item_kib, b.per_item_kib
            );
        }
        s
    }
}

/// Opens one standalone stream and waits for its priming event.
async fn open_one(
    client: &crate::client::McpClient,
    url: &str,
    timeout: Duration,
) -> Result<EventStream, CallError> {
    let mut stream = client.get_stream(url, None).await?;
    match tokio::time::timeout(timeout, stream.next_event()).await {
        Ok(Ok(Some(_))) => Ok(stream),
        Ok(Ok(None)) => Err(CallError::Transport("stream ended before priming".into())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(CallError::Timeout),
    }
}

/// Runs the mode: sample RSS, create the sessions, sample, open a GET per session, settle,
/// sample, hold, then close the streams and delete the sessions.
pub async fn open_streams(cfg: StreamsConfig) -> Result<StreamsReport, String> {
    if let Some(limit) = open_files_limit() {
        if limit < cfg.count as u64 + 256 {
            eprintln!(
                "warning: the open-files limit is {limit}; {} streams need about {} (ulimit -n)",
                cfg.count,
                cfg.count + 256
            );
        }
    }
    let concurrency = cfg.concurrency.max(1);
    let target = Target::new(cfg.urls.clone(), concurrency, cfg.request_timeout)
        .map_err(|e| e.to_string())?;
    let rss0 = rss_all(&cfg.node_pids)?;
    let created = create_sessions(&target, cfg.count, concurrency, &json!({})).await;
    let mut errors = created.errors;
    let sessions = created.clients.len();
    tokio::time::sleep(cfg.settle).await;
    let rss1 = rss_all(&cfg.node_pids)?;

    let begin = Instant::now();
    let urls = cfg.urls.clone();
    let timeout = cfg.request_timeout;
    let opened: Vec<(Duration, Result<EventStream, CallError>)> =
        futures::stream::iter(created.clients.iter().enumerate())
            .map(|(i, c)| {
                let url = urls[i % urls.len()].clone();
                async move {
                    let t0 = Instant::now();
                    let r = open_one(c, &url, timeout).await;
                    (t0.elapsed(), r)
                }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
    let open_secs = begin.elapsed().as_secs_f64();
    let mut latencies = Latencies::new();
    let mut holders = Vec::with_capacity(opened.len());
    for (d, r) in opened {
        match r {
            Ok(stream) => {
                latencies.record(d);
                // Each held stream is drained by its own task, which ends when the stream does.
                holders.push(tokio::spawn(stream.drain()));
            }
            Err(_) => errors += 1,
        }
    }
    tokio::time::sleep(cfg.settle).await;
    let rss2 = rss_all(&cfg.node_pids)?;
    let streams_open = holders.iter().filter(|h| !h.is_finished()).count();
    let mut report = StreamsReport {
        mode: "open-streams",
        urls: cfg.urls,
        count: cfg.count,
        sessions,
        streams_open,
        open_secs,
        open_ms: latencies.summary(),
        closed_early: 0,
        errors,
        rss_sessions: None,
        rss_streams: None,
        deleted: 0,
    };
    if !cfg.node_pids.is_empty() {
        let pids = &cfg.node_pids;
        report.rss_sessions = Some(RssDelta::new(pids, rss0, rss1.clone(), sessions));
        report.rss_streams = Some(RssDelta::new(pids, rss1, rss2, streams_open));
    }
    println!("{}", report.lines());
    if !cfg.hold.is_zero() {
        println!("holding for {} s", cfg.hold.as_secs_f64());
        tokio::select! {
            _ = tokio::time::sleep(cfg.hold) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    report.closed_early = holders.iter().filter(|h| h.is_finished()).count();
    for h in &holders {
        h.abort();
    }
    report.deleted = delete_sessions(created.clients, concurrency).await;
    report.errors += (sessions - report.deleted) as u64;
    Ok(report)
}
