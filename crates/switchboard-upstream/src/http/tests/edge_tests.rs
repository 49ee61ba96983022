//! [`HttpUpstream`] against the hand-written edge server and unreachable URLs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_protocol::codes;
use tokio_util::sync::CancellationToken;

use super::edge::{self, Edge};
use super::{call, ctx, echo, eventually, refused_url, session, text, FakePeer};
use crate::config::{OnUpstreamLoss, UpstreamConfig, UpstreamKind};
use crate::http::Replication;
use crate::{HttpUpstream, LocalSession, PeerError, SessionHandle, Upstream};

fn upstream(url: &str, timeout: Duration) -> HttpUpstream {
    HttpUpstream::new("edge", url, [("X-Api-Key", "k-1")], timeout).unwrap()
}

/// The edge upstream with `replication` settings.
fn replicated(url: &str, replication: Replication) -> HttpUpstream {
    let timeout = Duration::from_secs(10);
    HttpUpstream::replicated("edge", url, [("X-Api-Key", "k-1")], timeout, replication).unwrap()
}

async fn started(stateless: bool) -> (CancellationToken, Arc<Edge>, HttpUpstream) {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, stateless).await;
    (stop, edge, upstream(&url, Duration::from_secs(10)))
}

/// An edge server (minting sessions) behind an upstream declared `stateless = true`.
async fn started_declared_stateless() -> (CancellationToken, Arc<Edge>, HttpUpstream) {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, false).await;
    let replication = Replication {
        stateless: true,
        ..Replication::default()
    };
    (stop, edge, replicated(&url, replication))
}

#[tokio::test]
async fn later_requests_carry_the_upstreams_revision_session_and_static_headers() {
    let (stop, edge, up) = started(false).await;
    let s = session("c20");
    let peer = FakePeer::quiet();
    let r = echo(&up, &s, &peer, "a").await.unwrap();
    assert_eq!(text(&r), "a");
    let init = &edge.seen_method("initialize")[0];
    assert_eq!(init.body["params"]["protocolVersion"], "2025-11-25");
    assert!(!init.headers.contains_key("mcp-protocol-version"));
    assert_eq!(
        s.upstream_session("edge").as_deref(),
        Some("edge-0|2025-06-18")
    );
    for seen in edge.seen() {
        assert_eq!(
            seen.headers.get("x-api-key").map(String::as_str),
            Some("k-1")
        );
        assert!(!seen.headers.contains_key("authorization"));
        if seen.method != "initialize" {
            // The UPSTREAM's negotiated revision, not the client's (case C20 step 4).
            assert_eq!(seen.headers["mcp-protocol-version"], "2025-06-18");
            assert_eq!(seen.headers["mcp-session-id"], "edge-0");
        }
    }
    let methods: Vec<String> = edge.seen().into_iter().map(|s| s.method).collect();
    assert_eq!(
        methods,
        ["initialize", "notifications/initialized", "tools/call"]
    );
    // Our own id upstream, never the client's.
    let sent_id = r["structuredContent"]["id"].as_str().unwrap().to_owned();
    assert!(sent_id.starts_with("sb-"), "{sent_id}");
    stop.cancel();
}

#[tokio::test]
async fn a_404_reinitializes_a_stateless_upstream_with_the_stored_params_and_retries_once() {
    let (stop, edge, up) = started_declared_stateless().await;
    let s = session("c-404");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "1").await.unwrap();
    edge.expire_all();
    let r = echo(&up, &s, &peer, "2").await.unwrap();
    assert_eq!(text(&r), "2");
    let inits = edge.seen_method("initialize");
    assert_eq!(inits.len(), 2);
    assert_eq!(inits[1].body["params"], inits[0].body["params"]);
    assert_eq!(
        s.upstream_session("edge").as_deref(),
        Some("edge-1|2025-06-18")
    );
    assert_eq!(s.session_id(), "c-404");
    assert_eq!(edge.seen_method("tools/call").len(), 3);

    // A server that forgets every session at once: exactly one retry, then a clear error.
    edge.forget_always();
    let before = edge.seen_method("tools/call").len();
    let err = echo(&up, &s, &peer, "3").await.unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(err.message.contains("upstream `edge`"), "{}", err.message);
    assert_eq!(edge.seen_method("tools/call").len() - before, 2);
    stop.cancel();
}

#[tokio::test]
async fn a_400_about_the_session_also_reinitializes_a_stateless_upstream_and_retries_once() {
    let (stop, edge, up) = started_declared_stateless().await;
    edge.unknown_session_is_400();
    let s = session("c-400");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "1").await.unwrap();
    edge.expire_all();
    let r = echo(&up, &s, &peer, "2").await.unwrap();
    assert_eq!(text(&r), "2", "re-initialized and retried");
    assert_eq!(edge.seen_method("initialize").len(), 2);
    // Every request refused the same way: one retry, then an error naming the upstream and
    // carrying its own error as data.
    edge.forget_always();
    let err = echo(&up, &s, &peer, "3").await.unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(err.message.contains("upstream `edge`"), "{}", err.message);
    stop.cancel();
}

#[tokio::test]
async fn json_and_sse_answers_and_progress_from_an_sse_stream() {
    let (stop, _edge, up) = started(false).await;
    let s = session("c-sse");
    let peer = FakePeer::quiet();
    let mut params = call("sse_echo", json!({"text": "streamed"}));
    params["_meta"] = json!({"progressToken": 42});
    let r = up
        .request("tools/call", params, ctx(&s, &peer))
        .await
        .unwrap();
    assert_eq!(text(&r), "streamed");
    let notes = peer.notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["params"]["progressToken"], 42);
    let r = up
        .request("tools/list", Value::Null, ctx(&s, &peer))
        .await
        .unwrap();
    assert_eq!(r, json!({"tools": []}));
    stop.cancel();
}

#[tokio::test]
async fn server_requests_are_answered_with_the_upstreams_original_id() {
    let (stop, edge, up) = started(false).await;
    let s = session("c-ask");
    let peer = FakePeer::answering(|method, _| {
        assert_eq!(method, "sampling/createMessage");
        Ok(
            json!({"jsonrpc": "2.0", "id": "s-abc", "result": {"model": "m", "role": "assistant",
            "content": {"type": "text", "text": "sampled"}}}),
        )
    });
    let r = up
        .request("tools/call", call("ask", json!({})), ctx(&s, &peer))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(answer["id"], "up-7");
    assert_eq!(answer["result"]["content"]["text"], "sampled");
    let posted = &edge.seen_method("response")[0];
    assert_eq!(posted.headers["mcp-session-id"], "edge-0");
    assert_eq!(posted.headers["mcp-protocol-version"], "2025-06-18");

    // A client that cannot answer: the upstream gets a JSON-RPC error with its id.
    let peer = FakePeer::answering(|_, _| Err(PeerError::MissingCapability("sampling")));
    let r = up
        .request("tools/call", call("ask", json!({})), ctx(&s, &peer))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(answer["id"], "up-7");
    assert_eq!(answer["error"]["code"], codes::METHOD_NOT_FOUND);
    stop.cancel();
}

#[tokio::test]
async fn cancellation_is_sent_upstream_with_our_id_and_returns_promptly() {
    let (stop, edge, up) = started(false).await;
    let s = session("c-cancel");
    let peer = FakePeer::quiet();
    let c = ctx(&s, &peer);
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let err = up
        .request("tools/call", call("hang", json!({})), c)
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::REQUEST_ABORTED);
    assert!(started.elapsed() < Duration::from_secs(2));
    let call_id = edge.seen_method("tools/call")[0].body["id"].clone();
    assert!(eventually(|| !edge.seen_method("notifications/cancelled").is_empty()).await);
    let note = &edge.seen_method("notifications/cancelled")[0];
    assert_eq!(note.body["params"]["requestId"], call_id);
    assert_eq!(note.headers["mcp-session-id"], "edge-0");
    stop.cancel();
}

#[tokio::test]
async fn timeout_names_the_upstream_and_cancels_upstream() {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, false).await;
    let up = upstream(&url, Duration::from_millis(300));
    let s = session("c-timeout");
    let peer = FakePeer::quiet();
    let err = up
        .request("tools/call", call("hang", json!({})), ctx(&s, &peer))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_TIMEOUT);
    assert_eq!(err.message, "upstream `edge` did not answer within 300 ms");
    assert!(eventually(|| !edge.seen_method("notifications/cancelled").is_empty()).await);
    stop.cancel();
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_prompt_error_naming_it() {
    let up = upstream(&refused_url().await, Duration::from_secs(30));
    let s = session("c-down");
    let peer = FakePeer::quiet();
    let started = Instant::now();
    let err = up
        .request("tools/call", call("echo", json!({})), ctx(&s, &peer))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(
        err.message.starts_with("upstream `edge` is unavailable: "),
        "{}",
        err.message
    );
    assert!(started.elapsed() < Duration::from_secs(6));
    // The message that failed and the endpoint it was for.
    assert!(err.message.contains("for `initialize`"), "{}", err.message);
    let endpoint = err.data.as_ref().unwrap()["endpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(err.message.contains(&endpoint), "{}", err.message);
    assert_eq!(
        err.data,
        Some(json!({"upstream": "edge", "endpoint": endpoint}))
    );
    // prepare() logs and keeps the defaults.
    up.prepare().await;
    assert!(!up.probed());
    assert_eq!(
        up.capabilities(),
        json!({"tools": {}, "resources": {}, "prompts": {}})
    );
}

#[tokio::test]
async fn a_broken_stream_is_resumed_with_last_event_id() {
    let (stop, edge, up) = started(false).await;
    let s = session("c-break");
    let peer = FakePeer::quiet();
    let r = up
        .request("tools/call", call("break", json!({})), ctx(&s, &peer))
        .await
        .unwrap();
    assert_eq!(text(&r), "resumed");
    let gets: Vec<_> = edge
        .seen()
        .into_iter()
        .filter(|s| s.http == "GET")
        .collect();
    assert_eq!(gets.len(), 1);
    assert_eq!(gets[0].headers["last-event-id"], "e-1");
    assert_eq!(gets[0].headers["mcp-session-id"], "edge-0");
    assert_eq!(peer.notes().len(), 1);
    stop.cancel();
}

#[tokio::test]
async fn notifications_are_forwarded_and_session_end_deletes_the_upstream_session() {
    let (stop, edge, up) = started(false).await;
    let s = session("c-end");
    let peer = FakePeer::quiet();
    // Before the upstream session exists, a notification is not forwarded.
    up.notify("notifications/roots/list_changed", Value::Null, s.clone())
        .await;
    assert!(edge.seen().is_empty());
    up.request("tools/list", Value::Null, ctx(&s, &peer))
        .await
        .unwrap();
    up.notify("notifications/roots/list_changed", Value::Null, s.clone())
        .await;
    let note = &edge.seen_method("notifications/roots/list_changed")[0];
    assert_eq!(note.headers["mcp-session-id"], "edge-0");
    up.session_ended("c-end").await;
    let deletes: Vec<_> = edge
        .seen()
        .into_iter()
        .filter(|s| s.http == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].headers["mcp-session-id"], "edge-0");
    stop.cancel();
}

#[tokio::test]
async fn prepare_probes_with_a_neutral_identity_and_deletes_the_probe_session() {
    let (stop, edge, up) = started(false).await;
    up.prepare().await;
    let init = &edge.seen_method("initialize")[0];
    assert_eq!(init.body["params"]["clientInfo"]["name"], "switchboard");
    assert_eq!(init.body["params"]["capabilities"], json!({}));
    assert_eq!(up.capabilities(), json!({"tools": {}, "logging": {}}));
    assert_eq!(up.server_info()["name"], "edge");
    assert!(edge.seen().iter().any(|s| s.http == "DELETE"));
    stop.cancel();
}

#[tokio::test]
async fn stateless_servers_get_no_session_header() {
    let (stop, edge, up) = started(true).await;
    let s = session("c-stateless");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "x").await.unwrap();
    assert_eq!(s.upstream_session("edge").as_deref(), Some("|2025-06-18"));
    assert!(edge
        .seen()
        .iter()
        .all(|s| !s.headers.contains_key("mcp-session-id")));
    stop.cancel();
}

#[test]
fn from_config_reads_name_url_headers_and_timeout() {
    let mut cfg = UpstreamConfig::new("weather", UpstreamKind::Http);
    cfg.url = Some("http://127.0.0.1:9/mcp".into());
    cfg.headers
        .insert("Authorization".into(), "Bearer abc".into());
    cfg.timeout_ms = 1234;
    let up = HttpUpstream::from_config(&cfg).unwrap();
    assert_eq!(up.name(), "weather");
    assert_eq!(up.url(), "http://127.0.0.1:9/mcp");
    assert_eq!(up.timeout(), Duration::from_millis(1234));
    cfg.url = None;
    assert!(HttpUpstream::from_config(&cfg)
        .unwrap_err()
        .contains("`weather`"));
    let stdio = UpstreamConfig::new("x", UpstreamKind::Stdio);
    assert!(HttpUpstream::from_config(&stdio).is_err());
}

/// C32: with `max_message_bytes` = 2048, a JSON answer and an SSE event under it arrive intact;
/// over it the call fails with -32006 naming the upstream and the limit (nothing truncated), and
/// a response stream that broke on the oversized event is not resumed (it would bring the same
/// event again) although its priming event gave an id to resume from.
#[tokio::test]
async fn messages_over_max_message_bytes_fail_the_call_naming_the_limit() {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, false).await;
    let up = upstream(&url, Duration::from_secs(10)).with_max_message_bytes(2048);
    let s = session("c32");
    let peer = FakePeer::quiet();
    for tool in ["echo", "sse_echo"] {
        let small = "s".repeat(1500);
        let args = json!({"text": small});
        let r = up
            .request("tools/call", call(tool, args), ctx(&s, &peer))
            .await
            .unwrap();
        assert_eq!(text(&r), small, "{tool} under the limit");
        let args = json!({"text": "b".repeat(5000)});
        let e = up
            .request("tools/call", call(tool, args), ctx(&s, &peer))
            .await
            .unwrap_err();
        assert_eq!(e.code, codes::UPSTREAM_UNAVAILABLE, "{tool}");
        assert_eq!(
            e.message,
            "upstream `edge` sent a message larger than max_message_bytes (2048 bytes); \
             the request failed",
            "{tool}"
        );
        assert_eq!(
            e.data,
            Some(json!({"upstream": "edge", "max_message_bytes": 2048}))
        );
    }
    let gets = edge.seen().into_iter().filter(|s| s.http == "GET").count();
    assert_eq!(gets, 0, "no resumption of the broken stream");
    stop.cancel();
}

/// C02 (the default `on_upstream_loss = "reinitialize"`): a stateful upstream that forgot the
/// session is never continued silently: the request that finds it gone is not run and fails
/// with -32006 saying the state was lost (and where); a new upstream session is made from the
/// stored params at once, the next request runs in it, and the client's session id stays.
#[tokio::test]
async fn a_lost_session_of_a_stateful_upstream_fails_the_request_and_reinitializes() {
    let (stop, edge, up) = started(false).await;
    let s = session("c-lost");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "1").await.unwrap();
    edge.expire_all();
    let err = echo(&up, &s, &peer, "2").await.unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    let data = err.data.clone().unwrap();
    assert_eq!(data["upstream"], "edge");
    assert_eq!(data["reason"], "upstream_session_lost");
    let endpoint = data["endpoint"].as_str().unwrap();
    for needle in [
        "upstream `edge` lost this session's state",
        "`tools/call`",
        "HTTP 404",
        endpoint,
        "the request was not run",
        "the next request runs in a new upstream session",
    ] {
        assert!(
            err.message.contains(needle),
            "{needle:?} in {}",
            err.message
        );
    }
    // The request that found the session gone was sent once, never retried.
    assert_eq!(edge.seen_method("tools/call").len(), 2);
    assert_eq!(edge.seen_method("initialize").len(), 2);
    assert_eq!(
        s.upstream_session("edge").as_deref(),
        Some("edge-1|2025-06-18")
    );
    let r = echo(&up, &s, &peer, "3").await.unwrap();
    assert_eq!(text(&r), "3");
    assert_eq!(
        edge.seen().last().unwrap().headers["mcp-session-id"],
        "edge-1"
    );
    assert_eq!(s.session_id(), "c-lost");
    stop.cancel();
}

/// C02 with `on_upstream_loss = "end_session"`: the request fails saying the client session has
/// ended, and the session handle is asked to end the client session.
#[tokio::test]
async fn a_lost_session_ends_the_client_session_when_configured() {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, false).await;
    let replication = Replication {
        on_loss: OnUpstreamLoss::EndSession,
        ..Replication::default()
    };
    let up = replicated(&url, replication);
    let s: Arc<LocalSession> = session("c-end-on-loss");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "1").await.unwrap();
    edge.expire_all();
    let err = echo(&up, &s, &peer, "2").await.unwrap_err();
    assert_eq!(err.data.as_ref().unwrap()["session_ended"], true);
    assert!(
        err.message.contains("the client session has ended"),
        "{}",
        err.message
    );
    let reason = s.ended().expect("the client session was ended");
    assert!(reason.contains("HTTP 404"), "{reason}");
    assert_eq!(
        edge.seen_method("initialize").len(),
        1,
        "no new upstream session"
    );
    stop.cancel();
}

/// The cookie the upstream set on `initialize` goes back on every later request of the upstream
/// session (`notifications/initialized` first), after a configured `Cookie`, in one header; it
/// is kept with the session's binding, so another node sends it too.
#[tokio::test]
async fn cookies_the_upstream_sets_go_back_on_every_request_of_its_session() {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, false).await;
    let timeout = Duration::from_secs(10);
    let up = HttpUpstream::new("edge", &url, [("Cookie", "team=blue")], timeout).unwrap();
    let s = session("c-cookie");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "1").await.unwrap();
    let seen = edge.seen();
    assert_eq!(
        seen[0].headers["cookie"], "team=blue",
        "initialize: no session cookie yet"
    );
    for later in &seen[1..] {
        assert_eq!(
            later.headers["cookie"], "team=blue; SRV=e1",
            "{}",
            later.method
        );
    }
    let binding = s
        .upstream_session("edge#pin")
        .expect("the binding is stored");
    assert_eq!(binding, r#"{"session":"edge-0","cookies":"SRV=e1"}"#);
    // Another node (a fresh upstream over the same record) sends it too.
    let other = HttpUpstream::new("edge", &url, [("Cookie", "team=blue")], timeout).unwrap();
    echo(&other, &s, &peer, "2").await.unwrap();
    assert_eq!(
        edge.seen().last().unwrap().headers["cookie"],
        "team=blue; SRV=e1"
    );
    stop.cancel();
}

/// Two nodes initialize the upstream session of one client session at the same moment: the one
/// that records second deletes its own upstream session and uses the first one's, so the client
/// session never has two upstream sessions in use (its state would be split between them).
#[tokio::test]
async fn a_node_that_loses_the_race_to_initialize_uses_the_winners_session() {
    let stop = CancellationToken::new();
    let (edge, url) = edge::start(&stop, false).await;
    let (a, b) = (
        upstream(&url, Duration::from_secs(10)),
        upstream(&url, Duration::from_secs(10)),
    );
    let s = session("c-race");
    let peer = FakePeer::quiet();
    echo(&a, &s, &peer, "1").await.unwrap();
    // B's request found no upstream session when it started.
    let used = b.start_session(&ctx(&s, &peer), None).await.unwrap();
    assert_eq!(used.id.as_deref(), Some("edge-0"), "the winner's");
    assert_eq!(
        s.upstream_session("edge").as_deref(),
        Some("edge-0|2025-06-18")
    );
    let deleted: Vec<_> = edge
        .seen()
        .into_iter()
        .filter(|r| r.http == "DELETE")
        .collect();
    assert_eq!(deleted.len(), 1);
    assert_eq!(
        deleted[0].headers["mcp-session-id"], "edge-1",
        "its own, unused"
    );
    let r = echo(&b, &s, &peer, "2").await.unwrap();
    assert_eq!(text(&r), "2");
    assert_eq!(
        edge.seen().last().unwrap().headers["mcp-session-id"],
        "edge-0"
    );
    stop.cancel();
}
