//! `sampling`: cross-node server-to-client round trips. Each client calls the demo tool `sample`
//! on its home node; the tool sends `sampling/createMessage` on the call's SSE stream; the client
//! POSTs its answer either to the same node (the baseline) or to the other node, alternating
//! call by call, and the full call latency of each variant is measured.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::client::{answer_to, CallError, McpClient, Target};
use crate::run::{count, create_sessions, delete_sessions};
use crate::stats::{ErrorCounts, Latencies, LatencySummary};

/// Settings of one `sampling` run.
#[derive(Debug, Clone)]
pub struct SamplingConfig {
    /// Node URLs (at least two for the cross-node variant): client `i` calls on `urls[i % n]`
    /// and answers cross-node on `urls[(i + 1) % n]`.
    pub urls: Vec<String>,
    /// Virtual clients.
    pub clients: usize,
    /// Length of the measured phase.
    pub duration: Duration,
    /// Limit on every whole call.
    pub request_timeout: Duration,
}

/// The result of `sampling`.
#[derive(Debug, Clone, Serialize)]
pub struct SamplingReport {
    /// Always `"sampling"`.
    pub mode: &'static str,
    /// Node URLs.
    pub urls: Vec<String>,
    /// Virtual clients.
    pub clients: usize,
    /// Requested duration, in seconds.
    pub duration_secs: f64,
    /// Successful calls answered on the calling node.
    pub same_node_calls: u64,
    /// Successful calls answered on the other node.
    pub cross_node_calls: u64,
    /// Full call latency (POST of `tools/call` to its response), answer on the same node, ms.
    pub same_node_ms: LatencySummary,
    /// Full call latency, answer on the other node, ms.
    pub cross_node_ms: LatencySummary,
    /// `cross_node_ms.p50 - same_node_ms.p50`, in ms: what the target bounds.
    pub p50_difference_ms: f64,
    /// Failed calls and handshakes, all kinds.
    pub errors: u64,
    /// Failed calls by kind.
    pub errors_by_kind: ErrorCounts,
}

impl SamplingReport {
    /// The human summary.
    pub fn lines(&self) -> String {
        format!(
            "clients={} same_node calls={} p50={:.3}ms p99={:.3}ms | cross_node calls={} p50={:.3}ms p99={:.3}ms\n\
             p50_difference={:.3}ms errors={} errors_by_kind: {:?}",
            self.clients,
            self.same_node_calls,
            self.same_node_ms.p50,
            self.same_node_ms.p99,
            self.cross_node_calls,
            self.cross_node_ms.p50,
            self.cross_node_ms.p99,
            self.p50_difference_ms,
            self.errors,
            self.errors_by_kind
        )
    }
}

/// One `sample` call: POST on `home`, answer the sampling request on `answer_to_url`, read the
/// call's response. The result's text must be the answer's.
async fn sample_call(
    client: &mut McpClient,
    home: &str,
    answer_url: &str,
) -> Result<(), CallError> {
    let call_id = client.next_request_id();
    let body = json!({
        "jsonrpc": "2.0", "id": call_id, "method": "tools/call",
        "params": {"name": "sample", "arguments": {"prompt": "bench"}}
    });
    let mut stream = client.post_stream(home, &body).await?;
    let mut answered = false;
    while let Some((_, msg)) = stream.next_message().await? {
        if msg.get("method").and_then(Value::as_str) == Some("sampling/createMessage") {
            let answer = json!({
                "jsonrpc": "2.0", "id": msg["id"].clone(),
                "result": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "ok"},
                    "model": "switchboard-bench"
                }
            });
            client.post_message(answer_url, &answer).await?;
            answered = true;
        } else if let Some(resp) = answer_to(&msg.to_string(), call_id) {
            if let Some(err) = resp.get("error") {
                return Err(CallError::JsonRpc(err.clone()));
            }
            let result = &resp["result"];
            if !answered
                || result["isError"] == json!(true)
                || result["structuredContent"]["text"] != "ok"
            {
                return Err(CallError::JsonRpc(result.clone()));
            }
            return Ok(());
        }
    }
    Err(CallError::Transport(
        "stream ended without the response".into(),
    ))
}

/// What one client measured.
#[derive(Default)]
struct Tally {
    same: Latencies,
    cross: Latencies,
    errors: ErrorCounts,
}

/// Loops `sample` calls until `deadline`, alternating the answer's node (A B A B; client `i`
/// starts with the same node when `i` is even).
async fn client_loop(
    mut client: McpClient,
    i: usize,
    urls: Vec<String>,
    deadline: Instant,
    limit: Duration,
) -> (McpClient, Tally) {
    let home = &urls[i % urls.len()];
    let other = &urls[(i + 1) % urls.len()];
    let mut tally = Tally::default();
    let mut k = i;
    while Instant::now() < deadline {
        let cross = k % 2 == 1;
        k += 1;
        let answer_url = if cross { other } else { home };
        let t0 = Instant::now();
        match tokio::time::timeout(limit, sample_call(&mut client, home, answer_url)).await {
            Ok(Ok(())) if cross => tally.cross.record(t0.elapsed()),
            Ok(Ok(())) => tally.same.record(t0.elapsed()),
            Ok(Err(e)) => count(&mut tally.errors, &e),
            Err(_) => tally.errors.timeout += 1,
        }
    }
    (client, tally)
}

/// Runs the mode: V sessions declaring `sampling`, then V client loops for the duration.
pub async fn sampling(cfg: SamplingConfig) -> Result<SamplingReport, String> {
    let v = cfg.clients.max(1);
    let target =
        Target::new(cfg.urls.clone(), v * 2, cfg.request_timeout).map_err(|e| e.to_string())?;
    let created = create_sessions(&target, v, 64, &json!({"sampling": {}})).await;
    let mut errors = ErrorCounts {
        transport: created.errors,
        ..ErrorCounts::default()
    };
    let deadline = Instant::now() + cfg.duration;
    let tasks: Vec<_> = created
        .clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            tokio::spawn(client_loop(
                c,
                i,
                cfg.urls.clone(),
                deadline,
                cfg.request_timeout,
            ))
        })
        .collect();
    let (mut same, mut cross) = (Latencies::new(), Latencies::new());
    let mut clients = Vec::new();
    for t in tasks {
        let (c, tally) = t.await.map_err(|e| e.to_string())?;
        clients.push(c);
        same.merge(tally.same);
        cross.merge(tally.cross);
        errors.add(&tally.errors);
    }
    let (same_node_calls, cross_node_calls) = (same.len() as u64, cross.len() as u64);
    let (same_node_ms, cross_node_ms) = (same.summary(), cross.summary());
    delete_sessions(clients, 64).await;
    Ok(SamplingReport {
        mode: "sampling",
        urls: cfg.urls,
        clients: v,
        duration_secs: cfg.duration.as_secs_f64(),
        same_node_calls,
        cross_node_calls,
        same_node_ms,
        cross_node_ms,
        p50_difference_ms: cross_node_ms.p50 - same_node_ms.p50,
        errors: errors.total(),
        errors_by_kind: errors,
    })
}
