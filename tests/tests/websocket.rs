//! The WebSocket transport against real nodes with a real RFC 6455 client (tokio-tungstenite):
//! a whole session over one socket, sampling answered over it, the refusals made before the
//! upgrade, bad frames, keep-alive, and a socket cut mid-call resumed on other nodes with the
//! last event id it saw (headers, then query parameters), losing and repeating nothing; a call
//! lost with its node answered with -32004 after the resume; a resume from before the kept log
//! (410); bearer tokens on the upgrade.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::ws::*;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_socket_carries_a_whole_session_until_delete() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let mut ws = connect(&ws_url(&cluster, 0), Some("mcp"), &[])
        .await
        .unwrap();
    let sid = open_session(&mut ws).await;
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let list = until_response(&mut ws, json!(2)).await.pop().unwrap();
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "echo"), "{list}");
    send(&mut ws, call(3, "echo", json!({"text": "hello"}))).await;
    let echo = until_response(&mut ws, json!(3)).await.pop().unwrap();
    assert_eq!(echo["result"]["content"][0]["text"], "hello", "{echo}");
    assert!(event_id(&echo).starts_with("get_"), "{echo}");
    // An unknown method is a JSON-RPC error, its event id under error.data._meta.
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 4, "method": "nope/nope"}),
    )
    .await;
    let err = until_response(&mut ws, json!(4)).await.pop().unwrap();
    assert!(err["error"]["data"]["_meta"][EVENT_ID].is_string(), "{err}");
    // DELETE on the MCP endpoint of another node ends the session: the socket closes with 4404.
    let deleted = reqwest::Client::new()
        .delete(cluster.url(1))
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    expect_close(&mut ws, 4404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_request_is_answered_over_the_socket() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let mut ws = connect(&ws_url(&cluster, 1), Some("mcp"), &[])
        .await
        .unwrap();
    open_session(&mut ws).await;
    send(
        &mut ws,
        call(2, "sample", json!({"prompt": "Capital of France?"})),
    )
    .await;
    let request = next_json(&mut ws).await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert!(
        request["id"].as_str().unwrap().starts_with("s-"),
        "{request}"
    );
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant",
            "content": {"type": "text", "text": "Paris."}, "model": "ws-test"}}),
    )
    .await;
    let result = until_response(&mut ws, json!(2)).await.pop().unwrap();
    assert_eq!(result["result"]["content"][0]["text"], "Paris.", "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_come_before_the_upgrade() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let url = ws_url(&cluster, 0);
    assert_eq!(
        refused(&url, None, &[]).await,
        (400, -32600),
        "no subprotocol"
    );
    assert_eq!(refused(&url, Some("graphql-ws"), &[]).await.0, 400);
    let plain = reqwest::get(url.replace("ws://", "http://")).await.unwrap();
    assert_eq!(plain.status().as_u16(), 426, "a GET that is no upgrade");
    let unknown = "0123456789abcdef0123456789abcdef";
    let sid_only = [("mcp-session-id", unknown)];
    assert_eq!(refused(&url, Some("mcp"), &sid_only).await, (404, -32001));

    let mut ws = connect(&url, Some("mcp"), &[]).await.unwrap();
    let sid = open_session(&mut ws).await;
    let url_b = ws_url(&cluster, 1);
    for (last, status) in [
        ("nonsense", 400),
        ("abc_1-0", 400),
        ("get_99999999999999-0", 400),
    ] {
        let h = [("mcp-session-id", sid.as_str()), ("last-event-id", last)];
        assert_eq!(refused(&url_b, Some("mcp"), &h).await.0, status, "{last}");
    }
    // A second socket for the session (on another node) takes over: the first closes with 4409.
    let mut second = connect(&url_b, Some("mcp"), &[("mcp-session-id", sid.as_str())])
        .await
        .unwrap();
    expect_close(&mut ws, 4409).await;
    send(
        &mut second,
        json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
    )
    .await;
    let pong = until_response(&mut second, json!(9)).await.pop().unwrap();
    assert!(pong["result"].is_object(), "{pong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_the_right_errors() {
    let cluster = Cluster::start(1, ClusterOptions::new().set("http.max_body", 65536));
    let url = ws_url(&cluster, 0);
    let mut ws = connect(&url, Some("mcp"), &[]).await.unwrap();
    ws.send(Message::text("{not json")).await.unwrap();
    let parse = next_json(&mut ws).await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null, "{parse}");
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
    )
    .await;
    let early = next_json(&mut ws).await;
    assert_eq!(
        (early["id"].clone(), early["error"]["code"].clone()),
        (json!(7), json!(-32600))
    );
    send(
        &mut ws,
        json!([{"jsonrpc": "2.0", "id": 8, "method": "ping"}]),
    )
    .await;
    assert_eq!(next_json(&mut ws).await["error"]["code"], -32600, "a batch");
    open_session(&mut ws).await;
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    expect_close(&mut ws, u16::from(CloseCode::Unsupported)).await;

    let mut big = connect(&url, Some("mcp"), &[]).await.unwrap();
    let text = "x".repeat(100_000);
    send(&mut big, call(1, "echo", json!({"text": text}))).await;
    expect_close(&mut big, u16::from(CloseCode::Size)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_pings_and_a_silent_client_is_closed() {
    let cluster = Cluster::start(
        1,
        ClusterOptions::new().set("http.keepalive_interval", "300ms"),
    );
    let url = ws_url(&cluster, 0);
    let mut ws = connect(&url, Some("mcp"), &[]).await.unwrap();
    open_session(&mut ws).await;
    // A reading client answers pings (tungstenite does so by itself): still open after 1.5 s.
    let mut pings = 0;
    let until = tokio::time::Instant::now() + Duration::from_millis(1500);
    while let Ok(Some(Ok(m))) = tokio::time::timeout_at(until, ws.next()).await {
        pings += usize::from(matches!(m, Message::Ping(_)));
    }
    assert!(pings >= 3, "pings every 300 ms, got {pings}");
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    .await;
    until_response(&mut ws, json!(2)).await;
    // A client that reads nothing sends no pongs: closed with 4408 after two missed ones. Not
    // reading for 1.5 s is the thing under test (tungstenite answers pings only while read), so
    // this sleep waits for no event.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    loop {
        match next_frame(&mut ws).await {
            Message::Close(Some(f)) => {
                assert_eq!(u16::from(f.code), 4408, "{f:?}");
                break;
            }
            Message::Text(_) => continue,
            other => panic!("{other:?}"),
        }
    }
}

/// Progress values and the result among `messages`, checking event ids only grow.
fn progress_and_result(messages: &[Value], last_id: &mut String) -> (Vec<u64>, Option<Value>) {
    let mut progress = Vec::new();
    let mut result = None;
    for m in messages {
        let id = event_id(m);
        assert!(order(&id) > order(last_id), "{id} after {last_id}");
        *last_id = id;
        if m["method"] == "notifications/progress" {
            progress.push(m["params"]["progress"].as_u64().unwrap());
        } else if m["id"] == 2 {
            result = Some(m.clone());
        }
    }
    (progress, result)
}

fn order(event_id: &str) -> (u64, u64) {
    let pos = event_id.strip_prefix("get_").unwrap_or("0-0");
    let (ms, seq) = pos.split_once('-').unwrap();
    (ms.parse().unwrap(), seq.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_socket_resumes_on_other_nodes_without_loss() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let mut ws = connect(&ws_url(&cluster, 0), Some("mcp"), &[])
        .await
        .unwrap();
    let sid = open_session(&mut ws).await;
    send(
        &mut ws,
        call(2, "countdown", json!({"n": 8, "interval_ms": 300})),
    )
    .await;
    let mut last = "get_0-0".to_owned();
    let mut got = Vec::new();
    for _ in 0..2 {
        let m = next_json(&mut ws).await;
        got.extend(progress_and_result(&[m], &mut last).0);
    }
    // Cut the TCP connection without a close frame; events meanwhile stay in the log.
    drop(ws);
    cluster.log_grows_past(&sid, &last).await;
    let headers = [
        ("mcp-session-id", sid.as_str()),
        ("last-event-id", last.as_str()),
    ];
    let mut on_c = connect(&ws_url(&cluster, 2), Some("mcp"), &headers)
        .await
        .unwrap();
    for _ in 0..3 {
        let m = next_json(&mut on_c).await;
        got.extend(progress_and_result(&[m], &mut last).0);
    }
    drop(on_c);
    // Browsers cannot set headers: the same resume through query parameters, on node b.
    let url = format!(
        "{}?session_id={sid}&last_event_id={last}",
        ws_url(&cluster, 1)
    );
    let mut on_b = connect(&url, Some("mcp"), &[]).await.unwrap();
    let rest = until_response(&mut on_b, json!(2)).await;
    let (progress, result) = progress_and_result(&rest, &mut last);
    got.extend(progress);
    assert_eq!(
        got,
        (1..=8).collect::<Vec<u64>>(),
        "every progress once, in order"
    );
    let result = result.expect("the result");
    assert_eq!(result["result"]["content"][0]["text"], "countdown finished");
}

/// The node holding the socket dies mid-call: resumed on another node, the socket gets the
/// -32004 "request was lost" answer for the call (at a keep-alive once the dead node's heartbeat
/// has lapsed), exactly once, and the id can be sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_lost_with_its_node_is_answered_after_the_resume() {
    let options = ClusterOptions::new()
        .fast_liveness(600)
        .set("http.keepalive_interval", "300ms");
    let mut cluster = Cluster::start(2, options);
    let mut ws = connect(&ws_url(&cluster, 1), Some("mcp"), &[])
        .await
        .unwrap();
    let sid = open_session(&mut ws).await;
    send(
        &mut ws,
        call(2, "countdown", json!({"n": 100, "interval_ms": 200})),
    )
    .await;
    let first = next_json(&mut ws).await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let last = event_id(&first);
    cluster.kill9(1);
    drop(ws);
    let headers = [
        ("mcp-session-id", sid.as_str()),
        ("last-event-id", last.as_str()),
    ];
    let mut on_a = connect(&ws_url(&cluster, 0), Some("mcp"), &headers)
        .await
        .unwrap();
    let got = until_response(&mut on_a, json!(2)).await;
    let lost = got.last().expect("the answer");
    assert_eq!(lost["error"]["code"], -32004, "{lost}");
    let text = lost["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains("lost"), "{lost}");
    send(&mut on_a, call(2, "echo", json!({"text": "again"}))).await;
    let again = until_response(&mut on_a, json!(2)).await;
    let answer = again.last().expect("the echo");
    assert_eq!(answer["result"]["content"][0]["text"], "again", "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_from_before_the_kept_log_is_gone() {
    let cluster = Cluster::start(
        2,
        ClusterOptions::new().set("session.max_events_per_stream", 4),
    );
    let mut ws = connect(&ws_url(&cluster, 0), Some("mcp"), &[])
        .await
        .unwrap();
    let sid = open_session(&mut ws).await;
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    .await;
    let first = event_id(&until_response(&mut ws, json!(2)).await.pop().unwrap());
    send(
        &mut ws,
        call(3, "countdown", json!({"n": 6, "interval_ms": 0})),
    )
    .await;
    until_response(&mut ws, json!(3)).await;
    let h = [
        ("mcp-session-id", sid.as_str()),
        ("last-event-id", first.as_str()),
    ];
    assert_eq!(refused(&ws_url(&cluster, 1), Some("mcp"), &h).await.0, 410);
}

const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "websocket-test-secret-0123456789abcdef";

fn token(sub: &str) -> String {
    let claims = json!({"iss": ISSUER, "sub": sub, "aud": GW,
        "exp": get_current_timestamp() + 600});
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_needs_a_token_and_the_session_its_principal() {
    let options = ClusterOptions::new()
        .set("auth.resource_url", GW)
        .set("auth.authorization_servers", ISSUER)
        .set("auth.issuer", ISSUER)
        .set("auth.jwt_hs256_secrets", SECRET);
    let cluster = Cluster::start(2, options);
    let url = ws_url(&cluster, 0);
    assert_eq!(refused(&url, Some("mcp"), &[]).await.0, 401, "no token");
    let alice = format!("Bearer {}", token("alice"));
    let mut ws = connect(&url, Some("mcp"), &[("authorization", &alice)])
        .await
        .unwrap();
    let sid = open_session(&mut ws).await;
    let bob = format!("Bearer {}", token("bob"));
    let as_bob = [("authorization", bob.as_str()), ("mcp-session-id", &sid)];
    assert_eq!(
        refused(&ws_url(&cluster, 1), Some("mcp"), &as_bob).await,
        (404, -32001)
    );
    let as_alice = [("authorization", alice.as_str()), ("mcp-session-id", &sid)];
    let mut again = connect(&ws_url(&cluster, 1), Some("mcp"), &as_alice)
        .await
        .unwrap();
    send(&mut again, call(2, "echo", json!({"text": "mine"}))).await;
    let echo = until_response(&mut again, json!(2)).await.pop().unwrap();
    assert_eq!(echo["result"]["content"][0]["text"], "mine", "{echo}");
}
