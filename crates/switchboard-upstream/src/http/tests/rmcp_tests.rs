//! [`HttpUpstream`] against the rmcp fixture server.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{call, client_params, ctx, echo, rmcp_server, session, text, FakePeer};
use crate::http::session::UpstreamSession;
use crate::{HttpUpstream, SessionHandle, Upstream};

fn upstream(url: &str) -> HttpUpstream {
    HttpUpstream::new("fx", url, [("X-Static", "yes")], Duration::from_secs(10)).unwrap()
}

#[tokio::test]
async fn replays_the_clients_initialize_and_stores_the_upstream_session() {
    let stop = CancellationToken::new();
    let up = upstream(&rmcp_server::start(&stop, true).await);
    let s = session("client-1");
    let peer = FakePeer::quiet();
    let result = up
        .request("tools/call", call("whoami", json!({})), ctx(&s, &peer))
        .await
        .unwrap();
    let seen: Value = serde_json::from_str(&text(&result)).unwrap();
    let sent = client_params();
    assert_eq!(seen["clientInfo"]["name"], sent["clientInfo"]["name"]);
    assert_eq!(seen["clientInfo"]["version"], sent["clientInfo"]["version"]);
    assert_eq!(seen["protocolVersion"], "2025-11-25");
    assert!(seen["capabilities"]["sampling"].is_object(), "{seen}");
    assert_eq!(seen["capabilities"]["roots"]["listChanged"], true);

    let stored = s.upstream_session("fx").expect("stored upstream session");
    let decoded = UpstreamSession::decode(&stored).unwrap();
    assert!(decoded.id.is_some(), "{stored}");
    assert_eq!(decoded.revision, "2025-11-25");
    // The first client session taught the upstream's facts (no probe ran).
    assert!(up.probed());
    assert_eq!(up.server_info()["name"], "rmcp-fixture");

    // The next request continues the same upstream session.
    let echoed = echo(&up, &s, &peer, "hi").await.unwrap();
    assert_eq!(text(&echoed), "hi");
    assert_eq!(s.upstream_session("fx"), Some(stored));
    let tools = up
        .request("tools/list", Value::Null, ctx(&s, &peer))
        .await
        .unwrap();
    assert_eq!(tools["tools"].as_array().unwrap().len(), 5);
    stop.cancel();
}

#[tokio::test]
async fn prepare_probes_capabilities_server_info_and_instructions() {
    let stop = CancellationToken::new();
    let up = upstream(&rmcp_server::start(&stop, true).await);
    assert_eq!(
        up.capabilities(),
        json!({"tools": {}, "resources": {}, "prompts": {}})
    );
    assert!(!up.probed());
    up.prepare().await;
    assert!(up.probed());
    assert_eq!(up.server_info()["name"], "rmcp-fixture");
    assert_eq!(up.server_info()["version"], "1.2.3");
    assert!(up.capabilities()["tools"].is_object());
    assert!(up.capabilities().get("prompts").is_none());
    assert_eq!(up.instructions().as_deref(), Some("the rmcp fixture"));
    stop.cancel();
}

#[tokio::test]
async fn progress_notifications_pass_through_with_the_clients_token() {
    let stop = CancellationToken::new();
    let up = upstream(&rmcp_server::start(&stop, true).await);
    let s = session("client-p");
    let peer = FakePeer::quiet();
    let mut params = call("progress", json!({"steps": 3}));
    params["_meta"] = json!({"progressToken": "tok-9"});
    let mut c = ctx(&s, &peer);
    c.progress_token = Some(json!("tok-9"));
    let result = up.request("tools/call", params, c).await.unwrap();
    assert_eq!(text(&result), "progress done");
    let notes = peer.notes();
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{notes:?}");
    for (i, n) in progress.iter().enumerate() {
        assert_eq!(n["params"]["progressToken"], "tok-9");
        assert_eq!(n["params"]["progress"], json!((i + 1) as f64));
    }
    stop.cancel();
}

#[tokio::test]
async fn sampling_round_trip_reaches_the_client_and_returns() {
    let stop = CancellationToken::new();
    let up = upstream(&rmcp_server::start(&stop, true).await);
    let s = session("client-s");
    let peer = FakePeer::answering(|method, params| {
        assert_eq!(method, "sampling/createMessage");
        let asked = params["messages"][0]["content"]["text"].as_str().unwrap();
        Ok(json!({"jsonrpc": "2.0", "id": "s-node-1", "result": {
            "role": "assistant", "model": "fake-model",
            "content": {"type": "text", "text": format!("answer to {asked}")}}}))
    });
    let result = up
        .request(
            "tools/call",
            call("sample", json!({"text": "2+2"})),
            ctx(&s, &peer),
        )
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(answer["content"]["text"], "answer to 2+2");
    assert_eq!(answer["model"], "fake-model");
    assert_eq!(peer.requests.lock().unwrap().len(), 1);
    stop.cancel();
}

#[tokio::test]
async fn sampling_refused_by_the_client_becomes_an_error_upstream() {
    let stop = CancellationToken::new();
    let up = upstream(&rmcp_server::start(&stop, true).await);
    let s = session("client-r");
    let peer = FakePeer::answering(|_, _| Err(crate::PeerError::MissingCapability("sampling")));
    let err = up
        .request(
            "tools/call",
            call("sample", json!({"text": "x"})),
            ctx(&s, &peer),
        )
        .await;
    // rmcp turns the client's error into a tool failure or a JSON-RPC error; either way it
    // mentions the refusal and nothing hangs.
    let shown = match err {
        Ok(result) => result.to_string(),
        Err(e) => e.message,
    };
    assert!(shown.contains("sampling"), "{shown}");
    stop.cancel();
}

#[tokio::test]
async fn concurrent_requests_with_the_same_client_id_from_two_sessions_do_not_cross() {
    let stop = CancellationToken::new();
    let up = std::sync::Arc::new(upstream(&rmcp_server::start(&stop, true).await));
    let (a, b) = (session("client-a"), session("client-b"));
    let peer = FakePeer::quiet();
    // Both clients use JSON-RPC id 1; the upstream only ever sees our own ids.
    for round in 0..10 {
        let slow = up.request(
            "tools/call",
            call("slow_echo", json!({"text": format!("A{round}"), "ms": 30})),
            ctx(&a, &peer),
        );
        let fast = up.request(
            "tools/call",
            call("echo", json!({"text": format!("B{round}")})),
            ctx(&b, &peer),
        );
        let (ra, rb) = tokio::join!(slow, fast);
        assert_eq!(text(&ra.unwrap()), format!("A{round}"));
        assert_eq!(text(&rb.unwrap()), format!("B{round}"));
    }
    assert_ne!(a.upstream_session("fx"), b.upstream_session("fx"));
    stop.cancel();
}

#[tokio::test]
async fn a_stateless_server_is_used_without_a_session_id() {
    let stop = CancellationToken::new();
    let up = upstream(&rmcp_server::start(&stop, false).await);
    let s = session("client-x");
    let peer = FakePeer::quiet();
    let result = echo(&up, &s, &peer, "stateless").await.unwrap();
    assert_eq!(text(&result), "stateless");
    let stored = UpstreamSession::decode(&s.upstream_session("fx").unwrap()).unwrap();
    assert_eq!(stored.id, None);
    stop.cancel();
}

#[tokio::test]
async fn an_rmcp_server_that_lost_the_session_is_initialized_again() {
    let stop = CancellationToken::new();
    let url = rmcp_server::start(&stop, true).await;
    let up = upstream(&url);
    let s = session("client-gone");
    let peer = FakePeer::quiet();
    echo(&up, &s, &peer, "1").await.unwrap();
    let before = UpstreamSession::decode(&s.upstream_session("fx").unwrap()).unwrap();
    // The session ends behind our back (as when the server expires it).
    let deleted = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", before.id.clone().unwrap())
        .header("mcp-protocol-version", &before.revision)
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    // The request that finds it gone is not run: it fails saying the state was lost, and a new
    // upstream session is ready for the next one.
    let lost = echo(&up, &s, &peer, "2").await.unwrap_err();
    assert_eq!(lost.code, switchboard_protocol::codes::UPSTREAM_UNAVAILABLE);
    assert_eq!(
        lost.data.as_ref().unwrap()["reason"],
        "upstream_session_lost"
    );
    assert!(
        lost.message.contains("lost this session's state"),
        "{}",
        lost.message
    );
    let after = UpstreamSession::decode(&s.upstream_session("fx").unwrap()).unwrap();
    assert_ne!(after.id, before.id);
    let r = echo(&up, &s, &peer, "3").await.unwrap();
    assert_eq!(text(&r), "3");
    stop.cancel();
}
