//! Tests of the legacy HTTP+SSE upstream against a tiny hand-written 2024-11-05 server: GET
//! `/sse` opens a stream whose first event is `endpoint` (`/messages?sessionId=L-n`), POSTs get
//! 202 and their answers travel on the stream. Tools: `echo`, `progress` (a progress
//! notification with the request's token), `ask` (a sampling request with id `srv-1`, answered
//! with what the client sent back), `hang`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde_json::{json, Value};
use switchboard_protocol::codes;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::SseUpstream;
use crate::config::{UpstreamConfig, UpstreamKind};
use crate::http::tests::{
    call, ctx, echo, eventually, refused_url, serve, session, text, FakePeer,
};
use crate::{SessionHandle, Upstream};

#[derive(Default)]
struct Legacy {
    streams: Mutex<HashMap<String, mpsc::Sender<String>>>,
    open: AtomicUsize,
    counter: AtomicU64,
    received: Mutex<Vec<Value>>,
}

impl Legacy {
    fn received(&self, method: &str) -> Vec<Value> {
        let all = self.received.lock().unwrap();
        all.iter()
            .filter(|m| m["method"] == method)
            .cloned()
            .collect()
    }

    async fn send(&self, sid: &str, message: Value) {
        let tx = self.streams.lock().unwrap().get(sid).cloned();
        if let Some(tx) = tx {
            let _ = tx
                .send(format!("event: message\ndata: {message}\n\n"))
                .await;
        }
    }

    /// Ends every stream, as a server restart would.
    fn drop_streams(&self) {
        self.streams.lock().unwrap().clear();
    }
}

async fn start(stop: &CancellationToken) -> (Arc<Legacy>, String) {
    let legacy = Arc::new(Legacy::default());
    let router = axum::Router::new()
        .route("/sse", axum::routing::get(open))
        .route("/messages", axum::routing::post(message))
        .with_state(legacy.clone());
    let base = serve(router, stop.clone()).await;
    (legacy, format!("{base}/sse"))
}

async fn open(State(legacy): State<Arc<Legacy>>) -> Response {
    let sid = format!("L-{}", legacy.counter.fetch_add(1, Ordering::SeqCst));
    let (tx, rx) = mpsc::channel(16);
    tx.try_send(format!(
        "event: endpoint\ndata: /messages?sessionId={sid}\n\n"
    ))
    .unwrap();
    legacy.streams.lock().unwrap().insert(sid.clone(), tx);
    legacy.open.fetch_add(1, Ordering::SeqCst);
    // Keep-alive comments make a vanished client visible as a failed write; the stream ends
    // when its sender leaves the map.
    let legacy = legacy.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let tx = legacy.streams.lock().unwrap().get(&sid).cloned();
            match tx {
                Some(tx) if tx.send(": ping\n\n".into()).await.is_ok() => {}
                _ => break,
            }
        }
        legacy.streams.lock().unwrap().remove(&sid);
        legacy.open.fetch_sub(1, Ordering::SeqCst);
    });
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn message(
    State(legacy): State<Arc<Legacy>>,
    Query(q): Query<HashMap<String, String>>,
    Json(msg): Json<Value>,
) -> Response {
    let sid = q.get("sessionId").cloned().unwrap_or_default();
    if !legacy.streams.lock().unwrap().contains_key(&sid) {
        return StatusCode::NOT_FOUND.into_response();
    }
    legacy.received.lock().unwrap().push(msg.clone());
    tokio::spawn(async move { answer(&legacy, &sid, msg).await });
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

async fn answer(legacy: &Arc<Legacy>, sid: &str, msg: Value) {
    let id = msg["id"].clone();
    let done = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    let reply = match msg["method"].as_str() {
        Some("initialize") => done(json!({"protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "0.9"},
            "instructions": "legacy fixture"})),
        Some("tools/call") => {
            match msg["params"]["name"].as_str().unwrap_or_default() {
                "echo" => done(
                    json!({"content": [{"type": "text", "text": msg["params"]["arguments"]["text"]}],
                "structuredContent": {"id": id}}),
                ),
                "progress" => {
                    let token = msg["params"]["_meta"]["progressToken"].clone();
                    legacy
                        .send(
                            sid,
                            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1}}),
                        )
                        .await;
                    done(json!({"content": [{"type": "text", "text": "progressed"}]}))
                }
                "ask" => {
                    legacy.send(sid, json!({"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage",
                    "params": {"messages": [], "maxTokens": 3}})).await;
                    return;
                }
                _ => return,
            }
        }
        Some(_) => return,
        // The client's answer to `ask`: finish the pending tools/call with it.
        None => {
            let call = legacy
                .received("tools/call")
                .into_iter()
                .rev()
                .find(|c| c["params"]["name"] == "ask")
                .unwrap();
            json!({"jsonrpc": "2.0", "id": call["id"],
                "result": {"content": [{"type": "text", "text": msg.to_string()}]}})
        }
    };
    legacy.send(sid, reply).await;
}

fn upstream(url: &str, timeout: Duration) -> SseUpstream {
    SseUpstream::new("old", url, [("X-Key", "v")], timeout).unwrap()
}

#[tokio::test]
async fn initializes_with_the_clients_params_and_answers_on_the_stream() {
    let stop = CancellationToken::new();
    let (legacy, url) = start(&stop).await;
    let up = upstream(&url, Duration::from_secs(10));
    let s = session("l-1");
    let peer = FakePeer::quiet();
    let r = echo(&up, &s, &peer, "old").await.unwrap();
    assert_eq!(text(&r), "old");
    assert!(r["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .starts_with("sb-"));
    let init = &legacy.received("initialize")[0];
    assert_eq!(init["params"]["clientInfo"]["name"], "test-client");
    assert!(init["params"]["capabilities"]["sampling"].is_object());
    assert_eq!(legacy.received("notifications/initialized").len(), 1);
    assert_eq!(
        s.upstream_session("old").as_deref(),
        Some("legacy-sse|2024-11-05")
    );
    assert_eq!(up.server_info()["name"], "legacy");
    assert_eq!(up.instructions().as_deref(), Some("legacy fixture"));
    // The same connection serves the next request.
    echo(&up, &s, &peer, "again").await.unwrap();
    assert_eq!(legacy.received("initialize").len(), 1);
    assert_eq!(up.open_connections(), 1);
    stop.cancel();
}

#[tokio::test]
async fn progress_and_server_requests_reach_the_client() {
    let stop = CancellationToken::new();
    let (legacy, url) = start(&stop).await;
    let up = upstream(&url, Duration::from_secs(10));
    let s = session("l-2");
    let peer = FakePeer::answering(|method, _| {
        assert_eq!(method, "sampling/createMessage");
        Ok(
            json!({"jsonrpc": "2.0", "id": "s-x", "result": {"model": "m", "role": "assistant",
            "content": {"type": "text", "text": "hi"}}}),
        )
    });
    let mut params = call("progress", json!({}));
    params["_meta"] = json!({"progressToken": "p-1"});
    let mut c = ctx(&s, &peer);
    c.progress_token = Some(json!("p-1"));
    let r = up.request("tools/call", params, c).await.unwrap();
    assert_eq!(text(&r), "progressed");
    assert_eq!(peer.notes()[0]["params"]["progressToken"], "p-1");

    let r = up
        .request("tools/call", call("ask", json!({})), ctx(&s, &peer))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(answer["id"], "srv-1");
    assert_eq!(answer["result"]["content"]["text"], "hi");
    drop(legacy);
    stop.cancel();
}

#[tokio::test]
async fn cancellation_and_timeout() {
    let stop = CancellationToken::new();
    let (legacy, url) = start(&stop).await;
    let up = upstream(&url, Duration::from_millis(400));
    let s = session("l-3");
    let peer = FakePeer::quiet();
    let err = up
        .request("tools/call", call("hang", json!({})), ctx(&s, &peer))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_TIMEOUT);
    assert!(err.message.contains("upstream `old`"));
    assert!(eventually(|| legacy.received("notifications/cancelled").len() == 1).await);

    let c = ctx(&s, &peer);
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let err = up
        .request("tools/call", call("hang", json!({})), c)
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::REQUEST_ABORTED);
    assert!(eventually(|| legacy.received("notifications/cancelled").len() == 2).await);
    let calls = legacy.received("tools/call");
    let notes = legacy.received("notifications/cancelled");
    assert_eq!(notes[1]["params"]["requestId"], calls[1]["id"]);
    stop.cancel();
}

#[tokio::test]
async fn unreachable_is_a_prompt_error_naming_the_upstream() {
    let up = upstream(&refused_url().await, Duration::from_secs(30));
    let s = session("l-4");
    let started = Instant::now();
    let err = up
        .request("tools/list", Value::Null, ctx(&s, &FakePeer::quiet()))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(
        err.message.starts_with("upstream `old` is unavailable: "),
        "{}",
        err.message
    );
    assert!(started.elapsed() < Duration::from_secs(6));
    up.prepare().await;
    assert_eq!(
        up.capabilities(),
        json!({"tools": {}, "resources": {}, "prompts": {}})
    );
}

#[tokio::test]
async fn a_lost_connection_is_reopened_and_session_end_closes_it() {
    let stop = CancellationToken::new();
    let (legacy, url) = start(&stop).await;
    let up = upstream(&url, Duration::from_secs(10));
    let s = session("l-5");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "first").await.unwrap();
    legacy.drop_streams();
    assert!(eventually(|| up.open_connections() == 0).await);
    let r = echo(&up, &s, &peer, "back").await.unwrap();
    assert_eq!(text(&r), "back");
    assert_eq!(legacy.received("initialize").len(), 2);
    up.notify("notifications/roots/list_changed", Value::Null, s.clone())
        .await;
    assert_eq!(legacy.received("notifications/roots/list_changed").len(), 1);
    up.session_ended("l-5").await;
    assert_eq!(up.open_connections(), 0);
    assert!(eventually(|| legacy.open.load(Ordering::SeqCst) == 0).await);
    stop.cancel();
}

#[tokio::test]
async fn prepare_probes_and_closes_its_connection() {
    let stop = CancellationToken::new();
    let (legacy, url) = start(&stop).await;
    let up = upstream(&url, Duration::from_secs(10));
    up.prepare().await;
    assert_eq!(up.server_info()["name"], "legacy");
    assert_eq!(
        legacy.received("initialize")[0]["params"]["clientInfo"]["name"],
        "switchboard"
    );
    assert!(eventually(|| legacy.open.load(Ordering::SeqCst) == 0).await);
    stop.cancel();
}

#[test]
fn from_config_needs_kind_sse_and_a_url() {
    let mut cfg = UpstreamConfig::new("old", UpstreamKind::Sse);
    cfg.url = Some("http://127.0.0.1:9/sse".into());
    assert_eq!(SseUpstream::from_config(&cfg).unwrap().name(), "old");
    cfg.kind = UpstreamKind::Http;
    assert!(SseUpstream::from_config(&cfg).is_err());
}

/// C32: with `max_message_bytes = 2048` (from its config table), an answer event under it
/// arrives intact; one over it closes the connection and fails the call with -32006 naming the
/// upstream and the limit (not "closed before the answer"); the next call opens a new one.
#[tokio::test]
async fn an_event_over_max_message_bytes_fails_the_call_and_the_connection() {
    let stop = CancellationToken::new();
    let (legacy, url) = start(&stop).await;
    let mut cfg = UpstreamConfig::new("old", UpstreamKind::Sse);
    cfg.url = Some(url);
    cfg.max_message_bytes = Some(2048);
    let up = SseUpstream::from_config(&cfg).unwrap();
    let s = session("l-big");
    let peer = FakePeer::quiet();
    let small = "s".repeat(1500);
    let r = up
        .request(
            "tools/call",
            call("echo", json!({"text": small})),
            ctx(&s, &peer),
        )
        .await
        .unwrap();
    assert_eq!(text(&r), small);
    let args = json!({"text": "b".repeat(5000)});
    let e = up
        .request("tools/call", call("echo", args), ctx(&s, &peer))
        .await
        .unwrap_err();
    assert_eq!(e.code, codes::UPSTREAM_UNAVAILABLE);
    assert_eq!(
        e.message,
        "upstream `old` sent a message larger than max_message_bytes (2048 bytes); the request failed"
    );
    assert_eq!(
        e.data,
        Some(json!({"upstream": "old", "max_message_bytes": 2048}))
    );
    let r = echo(&up, &s, &peer, "ok").await.unwrap();
    assert_eq!(text(&r), "ok");
    assert_eq!(legacy.received("initialize").len(), 2, "a new connection");
    stop.cancel();
}
