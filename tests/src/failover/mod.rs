//! Streaming clients for the Redis failover tests (`tests/tests/redis_failover.rs`): each client
//! holds its session's standalone GET stream ([`stream`]) and calls the demo tools `notify` and
//! `countdown` in a loop ([`calls`]), rotating over the nodes, while [`watch_ready`] polls every
//! node's `/readyz`. Everything they see is recorded for the test to count and assert on.
//!
//! Modules: [`stream`] holds and resumes a GET stream and counts its events (lost, duplicated,
//! out of order) against a replay of the log; [`calls`] runs the calls and checks each 503.

pub mod calls;
pub mod stream;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::task::JoinHandle;

use crate::client::Reply;

/// A stop flag shared by a test and its client tasks.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// Tells every task holding a clone to finish what it is doing and return.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Stop::stop`] was called.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What is wrong with a 503 answer, if anything: the issue wants a JSON-RPC error body
/// (`{"jsonrpc": "2.0", "error": {"code": <integer>, …}, …}`) and a `Retry-After` header on every
/// one. `None` when both are there. Reads the body (at most 15 s).
pub async fn check_503(reply: Reply) -> Option<String> {
    let retry_after = reply.header("retry-after");
    let text = reply.text().await;
    let body: Option<Value> = serde_json::from_str(&text).ok();
    let rpc_error = body
        .as_ref()
        .is_some_and(|b| b["jsonrpc"] == "2.0" && b["error"]["code"].is_i64());
    match (rpc_error, retry_after) {
        (true, Some(_)) => None,
        (rpc, after) => Some(format!(
            "503 with JSON-RPC error body {rpc}, Retry-After {after:?}: {text:?}"
        )),
    }
}

/// What [`watch_ready`] saw of one node's `/readyz`.
#[derive(Clone, Debug, Default)]
pub struct ReadyLog {
    /// Polls answered.
    pub polls: usize,
    /// Answers that were 503.
    pub not_ready: usize,
    /// Polls that got no answer at all (connection refused or 2 s without one).
    pub unanswered: usize,
    /// Answers other than 200 and 503, by status.
    pub other: Vec<u16>,
    /// When the first and the last 503 came.
    pub not_ready_span: Option<(Instant, Instant)>,
}

/// Polls `GET <base_url>/readyz` every 50 ms until `stop`, on a client with a 2 s timeout.
pub fn watch_ready(base_url: String, stop: Stop) -> JoinHandle<ReadyLog> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("reqwest client");
        let url = format!("{base_url}/readyz");
        let mut log = ReadyLog::default();
        while !stop.is_set() {
            match http.get(&url).send().await {
                Ok(r) => {
                    log.polls += 1;
                    match r.status().as_u16() {
                        200 => {}
                        503 => {
                            log.not_ready += 1;
                            let now = Instant::now();
                            let first = log.not_ready_span.map_or(now, |(f, _)| f);
                            log.not_ready_span = Some((first, now));
                        }
                        other => log.other.push(other),
                    }
                }
                Err(_) => log.unanswered += 1,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        log
    })
}

/// The `p`-th percentile (0–100, nearest rank) of `samples`; zero when there are none.
pub fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}
