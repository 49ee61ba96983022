//! `resume-storm`: N clients each start a `countdown` call whose SSE answer carries E progress
//! events, drop the connection after the priming event, and, once every call has finished on
//! the server, all resume at once with `Last-Event-ID` on another node. Measures the time to
//! the first replayed byte and to the end of the replay, and checks that every event arrived
//! exactly once and in order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Barrier;

use crate::client::{answer_to, CallError, McpClient, Target};
use crate::memory::RedisProbe;
use crate::stats::{Latencies, LatencySummary};

/// Settings of one `resume-storm` run.
#[derive(Debug, Clone)]
pub struct ResumeConfig {
    /// Node URLs: client `i` calls on `urls[i % n]` and resumes on `urls[(i + 1) % n]`.
    pub urls: Vec<String>,
    /// Clients (one session and one call each).
    pub clients: usize,
    /// Progress events per call (the `n` of `countdown`).
    pub events: u64,
    /// With a Redis URL, wait until no call is running (`HLEN <prefix>:{sid}:run` is 0 for
    /// every session) instead of a fixed pause.
    pub redis_url: Option<String>,
    /// The cluster's `redis.key_prefix`.
    pub key_prefix: String,
    /// Without a Redis URL: the fixed pause between dropping and resuming. With one: the
    /// longest wait for the calls to finish.
    pub wait: Duration,
    /// Limit on the handshakes, on the call's headers, and on each whole replay.
    pub request_timeout: Duration,
}

/// The result of `resume-storm`.
#[derive(Debug, Clone, Serialize)]
pub struct ResumeReport {
    /// Always `"resume-storm"`.
    pub mode: &'static str,
    /// Node URLs.
    pub urls: Vec<String>,
    /// Clients.
    pub clients: usize,
    /// Progress events per call.
    pub events: u64,
    /// Time from the first call sent to every call finished on the server (or the end of the
    /// fixed pause), in seconds: how long the nodes took to log N × E events.
    pub produce_secs: f64,
    /// Clients whose replay was complete: E progress events with progress 1..=E in order, each
    /// once, event ids increasing, then the call's response.
    pub complete: usize,
    /// Whether every client's replay was complete.
    pub exactly_once_in_order: bool,
    /// Progress events received over all replays.
    pub events_received: u64,
    /// From sending the resuming GET to its first body byte, in ms.
    pub first_byte_ms: LatencySummary,
    /// From sending the resuming GET to the call's final response, in ms.
    pub complete_ms: LatencySummary,
    /// Clients that failed anywhere (handshake, call, resume, incomplete replay).
    pub errors: u64,
    /// The first few error messages.
    pub error_samples: Vec<String>,
}

impl ResumeReport {
    /// The human summary.
    pub fn lines(&self) -> String {
        format!(
            "clients={} events={} produce_secs={:.2} complete={}/{} exactly_once_in_order={} errors={}\n\
             first_byte p50={:.3}ms p99={:.3}ms max={:.3}ms\n\
             complete   p50={:.3}ms p99={:.3}ms max={:.3}ms",
            self.clients,
            self.events,
            self.produce_secs,
            self.complete,
            self.clients,
            self.exactly_once_in_order,
            self.errors,
            self.first_byte_ms.p50,
            self.first_byte_ms.p99,
            self.first_byte_ms.max,
            self.complete_ms.p50,
            self.complete_ms.p99,
            self.complete_ms.max
        )
    }
}

/// What one client measured on its replay.
struct Replay {
    first_byte: Duration,
    complete: Duration,
    progress_events: u64,
}

/// Starts the countdown call on `url` and returns the first event id of its stream.
async fn start_call(client: &mut McpClient, url: &str, events: u64) -> Result<String, CallError> {
    let id = client.next_request_id();
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "countdown",
            "arguments": {"n": events, "interval_ms": 0},
            "_meta": {"progressToken": "bench"}
        }
    });
    let mut stream = client.post_stream(url, &body).await?;
    let first = tokio::time::timeout(client.target.timeout, stream.next_event()).await;
    match first {
        Ok(Ok(Some(e))) => {
            e.id.ok_or_else(|| CallError::Transport("first event has no id".into()))
        }
        Ok(Ok(None)) => Err(CallError::Transport("stream ended at once".into())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(CallError::Timeout),
    }
    // The stream drops here: the connection is closed, the call goes on.
}

/// `ms-seq` of an event id `<stream>_<ms>-<seq>`, for ordering.
fn position(id: &str) -> Option<(u64, u64)> {
    let (_, pos) = id.split_once('_')?;
    let (ms, seq) = pos.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// What the replay check reads of each message: a typed parse that skips everything else, so
/// that the client's own cost per replayed event stays well below the server's (a
/// `serde_json::Value` per event cost this tool ~3 µs of CPU per replayed event, about what
/// the nodes spent).
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    params: Option<ProgressParams>,
}

#[derive(Deserialize)]
struct ProgressParams {
    #[serde(default)]
    progress: Option<serde_json::Number>,
}

/// Resumes on `url` from `last` and checks the replay: progress 1..=E in order, increasing
/// event ids, then the response to request `call_id`.
async fn replay(
    client: &McpClient,
    url: &str,
    last: &str,
    events: u64,
    call_id: u64,
) -> Result<Replay, CallError> {
    let t0 = Instant::now();
    let mut stream = client.get_stream(url, Some(last)).await?;
    let (mut expected, mut prev) = (1u64, position(last));
    while let Some(event) = stream.next_event().await? {
        if event.data.is_empty() {
            continue;
        }
        let (id, data) = (event.id, event.data);
        let msg: Message<'_> = serde_json::from_str(&data)
            .map_err(|err| CallError::Transport(format!("bad event data: {err}")))?;
        let pos = id.as_deref().and_then(position);
        if pos.is_none() || pos <= prev {
            return Err(CallError::Transport(format!(
                "event id {id:?} not after {prev:?}"
            )));
        }
        prev = pos;
        if msg.method.as_deref() == Some("notifications/progress") {
            let p = msg.params.and_then(|p| p.progress).and_then(|n| n.as_u64());
            if p != Some(expected) {
                return Err(CallError::Transport(format!(
                    "progress {p:?} where {expected} was expected"
                )));
            }
            expected += 1;
        } else if let Some(answer) = answer_to(&data, call_id) {
            if expected != events + 1 {
                return Err(CallError::Transport(format!(
                    "response after {} of {events} progress events",
                    expected - 1
                )));
            }
            if answer.get("error").is_some() {
                return Err(CallError::JsonRpc(answer));
            }
            let first = stream.first_byte().unwrap_or_else(Instant::now);
            return Ok(Replay {
                first_byte: first.duration_since(t0),
                complete: t0.elapsed(),
                progress_events: expected - 1,
            });
        }
    }
    Err(CallError::Transport(format!(
        "replay ended after {} of {events} progress events, without the response",
        expected - 1
    )))
}

/// Waits until no session in `sids` has a running request, or `limit` passes.
async fn wait_finished(
    probe: &mut RedisProbe,
    sids: &[String],
    limit: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    for sid in sids {
        while probe.running_requests(sid).await? > 0 {
            if Instant::now() > deadline {
                return Err(format!("calls still running after {limit:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Runs the storm. Each client task: handshake, start the call, drop it; then all wait at a
/// barrier while the main task waits for the calls to finish; then every client resumes.
pub async fn resume_storm(cfg: ResumeConfig) -> Result<ResumeReport, String> {
    let n = cfg.clients.max(1);
    let target =
        Target::new(cfg.urls.clone(), n, cfg.request_timeout).map_err(|e| e.to_string())?;
    let started = Arc::new(Barrier::new(n + 1));
    let go = Arc::new(Barrier::new(n + 1));
    let (sid_tx, mut sid_rx) = tokio::sync::mpsc::unbounded_channel();
    let begin = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let (target, started, go, sid_tx) =
            (target.clone(), started.clone(), go.clone(), sid_tx.clone());
        let home = cfg.urls[i % cfg.urls.len()].clone();
        let other = cfg.urls[(i + 1) % cfg.urls.len()].clone();
        let (events, limit) = (cfg.events, cfg.request_timeout);
        tasks.push(tokio::spawn(async move {
            let prepared = async {
                let mut client = McpClient::connect(&target).await?;
                let last = start_call(&mut client, &home, events).await?;
                Ok::<_, CallError>((client, last))
            }
            .await;
            if let Ok((c, _)) = &prepared {
                let _ = sid_tx.send(c.session().to_owned());
            }
            drop(sid_tx);
            started.wait().await;
            go.wait().await;
            let (client, last) = prepared?;
            let call_id = client.next_id - 1;
            let replayed = replay(&client, &other, &last, events, call_id);
            let result = tokio::time::timeout(limit, replayed)
                .await
                .unwrap_or(Err(CallError::Timeout));
            // Not measured: end the session so its logs leave Redis now, not at idle expiry.
            let _ = client.close().await;
            result
        }));
    }
    drop(sid_tx);
    started.wait().await;
    let mut sids = Vec::new();
    while let Some(sid) = sid_rx.recv().await {
        sids.push(sid);
    }
    let waited = match &cfg.redis_url {
        Some(url) => {
            let mut probe = RedisProbe::connect(url, &cfg.key_prefix).await?;
            wait_finished(&mut probe, &sids, cfg.wait).await
        }
        None => {
            tokio::time::sleep(cfg.wait).await;
            Ok(())
        }
    };
    let produce_secs = begin.elapsed().as_secs_f64();
    go.wait().await;
    waited?;
    collect(cfg, produce_secs, tasks).await
}

/// Gathers the client tasks' results into the report.
async fn collect(
    cfg: ResumeConfig,
    produce_secs: f64,
    tasks: Vec<tokio::task::JoinHandle<Result<Replay, CallError>>>,
) -> Result<ResumeReport, String> {
    let (mut first, mut whole) = (Latencies::new(), Latencies::new());
    let (mut complete, mut received, mut errors) = (0, 0, 0);
    let mut samples = Vec::new();
    for t in tasks {
        match t.await.map_err(|e| e.to_string())? {
            Ok(r) => {
                complete += 1;
                received += r.progress_events;
                first.record(r.first_byte);
                whole.record(r.complete);
            }
            Err(e) => {
                errors += 1;
                if samples.len() < 5 {
                    samples.push(e.to_string());
                }
            }
        }
    }
    Ok(ResumeReport {
        mode: "resume-storm",
        urls: cfg.urls,
        clients: cfg.clients,
        events: cfg.events,
        produce_secs,
        complete,
        exactly_once_in_order: complete == cfg.clients,
        events_received: received,
        first_byte_ms: first.summary(),
        complete_ms: whole.summary(),
        errors,
        error_samples: samples,
    })
}

#[cfg(test)]
mod tests {
    use super::position;

    #[test]
    fn positions_order_numerically() {
        assert_eq!(position("r1_0-0"), Some((0, 0)));
        assert!(position("r1_1700000000000-2") < position("r1_1700000000000-10"));
        assert!(position("a_9-1") < position("a_10-0"));
        assert_eq!(position("nounderscore"), None);
    }
}
