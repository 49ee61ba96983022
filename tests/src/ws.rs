//! A real RFC 6455 client (tokio-tungstenite) for the WebSocket transport's tests: connecting
//! with the `mcp` subprotocol, JSON frames, bounded reads, and the session handshake.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::cluster::Cluster;

/// How long any single read may take.
pub const T: Duration = Duration::from_secs(10);
/// The `_meta` key of event ids.
pub const EVENT_ID: &str = "io.switchboard/eventId";

/// A client socket.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The WebSocket URL of node `i` (default `transports.websocket.path`).
pub fn ws_url(cluster: &Cluster, i: usize) -> String {
    format!("ws://127.0.0.1:{}/ws", cluster.node(i).port())
}

/// Opens a socket offering `mcp` (unless `protocol` is `None`) with extra headers.
pub async fn connect(
    url: &str,
    protocol: Option<&str>,
    headers: &[(&'static str, &str)],
) -> Result<Ws, tungstenite::Error> {
    let mut req = url.into_client_request().expect("request");
    if let Some(p) = protocol {
        req.headers_mut()
            .insert("sec-websocket-protocol", p.parse().unwrap());
    }
    for (k, v) in headers {
        req.headers_mut().insert(*k, v.parse().unwrap());
    }
    let (ws, resp) = tokio::time::timeout(T, tokio_tungstenite::connect_async(req))
        .await
        .expect("connect timed out")?;
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .map(|v| v.to_str().unwrap()),
        Some("mcp"),
        "the answer selects the subprotocol"
    );
    Ok(ws)
}

/// Sends one JSON text frame.
pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.expect("send");
}

/// The next frame that is not a ping or pong, within 10 s (pings do not extend the wait).
pub async fn next_frame(ws: &mut Ws) -> Message {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let m = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("no frame within 10 s")
            .expect("socket ended")
            .expect("read");
        if !matches!(m, Message::Ping(_) | Message::Pong(_)) {
            return m;
        }
    }
}

/// The next frame, which must be JSON text.
pub async fn next_json(ws: &mut Ws) -> Value {
    match next_frame(ws).await {
        Message::Text(t) => serde_json::from_str(t.as_str()).expect("JSON frame"),
        other => panic!("expected a text frame, got {other:?}"),
    }
}

/// Every message up to and including the response with `id`.
pub async fn until_response(ws: &mut Ws, id: Value) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let m = next_json(ws).await;
        let done = m.get("method").is_none() && m["id"] == id;
        seen.push(m);
        if done {
            return seen;
        }
    }
}

/// The next frame must close the socket with `code`.
pub async fn expect_close(ws: &mut Ws, code: u16) {
    match next_frame(ws).await {
        Message::Close(Some(f)) => assert_eq!(u16::from(f.code), code, "{f:?}"),
        other => panic!("expected close {code}, got {other:?}"),
    }
}

/// An `initialize` request (revision 2025-11-25, `sampling` declared).
pub fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
        "clientInfo": {"name": "ws-test", "version": "0"}}})
}

/// A `tools/call` with progress token `p`.
pub fn call(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": args, "_meta": {"progressToken": "p"}}})
}

/// `initialize` + `notifications/initialized` on a new socket; the session id.
pub async fn open_session(ws: &mut Ws) -> String {
    send(ws, initialize(1)).await;
    let init = next_json(ws).await;
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert!(init["result"]["_meta"][EVENT_ID].is_string(), "{init}");
    send(
        ws,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    init["result"]["_meta"]["io.switchboard/sessionId"]
        .as_str()
        .expect("session id in result._meta")
        .to_owned()
}

/// The event id under `_meta` of a delivered request, notification or result.
pub fn event_id(m: &Value) -> String {
    let meta = m
        .pointer("/params/_meta")
        .or_else(|| m.pointer("/result/_meta"))
        .unwrap_or_else(|| panic!("no _meta in {m}"));
    meta[EVENT_ID].as_str().expect("event id").to_owned()
}

/// Status and JSON-RPC error code of a refused upgrade.
pub async fn refused(
    url: &str,
    protocol: Option<&str>,
    headers: &[(&'static str, &str)],
) -> (u16, i64) {
    match connect(url, protocol, headers).await {
        Err(tungstenite::Error::Http(resp)) => {
            let body: Value =
                serde_json::from_slice(resp.body().as_deref().unwrap_or_default()).unwrap();
            (
                resp.status().as_u16(),
                body["error"]["code"].as_i64().unwrap(),
            )
        }
        Err(e) => panic!("expected an HTTP refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, the upgrade succeeded"),
    }
}
