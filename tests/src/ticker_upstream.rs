//! A Streamable HTTP upstream with a GET stream, hand-written on raw TCP (one request per
//! connection), for tests of who holds that stream: it appends a `notifications/message` with an
//! increasing `seq` to its event log every 200 ms (event id `e-<seq>`), streams the log to every
//! GET from after `Last-Event-ID` (or from now), counts open GET streams and records each GET's
//! `Last-Event-ID`. Its one tool, `echo`, answers `ok`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::sse::SseStream;

/// The upstream's state.
#[derive(Default)]
pub struct Up {
    log: Mutex<Vec<Value>>,
    /// GET streams open now.
    pub open: AtomicUsize,
    /// The `Last-Event-ID` of each GET, in order.
    pub gets: Mutex<Vec<Option<String>>>,
}

/// Starts the upstream on `host`, port 0 (`127.0.0.1`, or an address a node in a network
/// namespace reaches); returns it and its MCP endpoint.
pub async fn start(host: &str) -> (Arc<Up>, String) {
    let listener = TcpListener::bind((host, 0)).await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let up = Arc::new(Up::default());
    let ticker = up.clone();
    tokio::spawn(async move {
        for seq in 1u64.. {
            tokio::time::sleep(Duration::from_millis(200)).await;
            ticker.log.lock().unwrap().push(json!({"jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "error", "logger": "ticker", "data": {"seq": seq}}}));
        }
    });
    let server = up.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(serve(server.clone(), conn));
        }
    });
    (up, url)
}

/// One request on `conn`, answered with `Connection: close`.
async fn serve(up: Arc<Up>, conn: TcpStream) {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
        return;
    }
    let method = line.split(' ').next().unwrap_or("").to_owned();
    let (mut length, mut last_event_id) = (0, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
            return;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "last-event-id" => last_event_id = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).await.is_err() {
        return;
    }
    let mut conn = reader.into_inner();
    if method == "GET" {
        return stream(up, conn, last_event_id).await;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let answer = match body.get("method").and_then(Value::as_str) {
        _ if method != "POST" || body.get("id").is_none() => None,
        Some("initialize") => Some(json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "ticker", "version": "1"}})),
        Some("tools/list") => Some(json!({"tools": [{"name": "echo",
            "inputSchema": {"type": "object"}}]})),
        Some(_) => Some(json!({"content": [{"type": "text", "text": "ok"}]})),
        None => None,
    };
    let head = match answer {
        Some(result) => {
            let text = json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string();
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: up-1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}", text.len())
        }
        None => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
    };
    let _ = conn.write_all(head.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// The GET stream: the log after `Last-Event-ID` (or from now), then new entries as they come,
/// until a write fails (the node went away).
async fn stream(up: Arc<Up>, mut conn: TcpStream, last_event_id: Option<String>) {
    up.gets.lock().unwrap().push(last_event_id.clone());
    let mut next = match last_event_id.and_then(|id| id.strip_prefix("e-")?.parse().ok()) {
        Some(seq) => seq,
        None => up.log.lock().unwrap().len(),
    };
    up.open.fetch_add(1, Ordering::SeqCst);
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\nretry: 200\n\n";
    let mut alive = conn.write_all(head.as_bytes()).await.is_ok();
    while alive {
        let pending: Vec<Value> = up.log.lock().unwrap()[next..].to_vec();
        for message in pending {
            next += 1;
            let event = format!("id: e-{next}\ndata: {message}\n\n");
            if conn.write_all(event.as_bytes()).await.is_err() {
                alive = false;
                break;
            }
        }
        // A comment now and then finds a dead peer even between events.
        alive = alive && conn.write_all(b": .\n\n").await.is_ok();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    up.open.fetch_sub(1, Ordering::SeqCst);
}

/// The `seq` of the ticker notifications read from `sse` within `limit`.
pub async fn ticks(sse: &mut SseStream, limit: Duration) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some((_, msg)) = sse.next_message(left).await else {
            return out;
        };
        if let Some(seq) = msg["params"]["data"]["seq"].as_u64() {
            out.push(seq);
        }
    }
}

/// `seen` (ticker `seq`s, in arrival order, repeats allowed) sorted and deduplicated; panics
/// naming `across` when a `seq` between the first and the last is missing.
pub fn assert_no_gap(mut seen: Vec<u64>, across: &str) -> Vec<u64> {
    seen.sort_unstable();
    seen.dedup();
    let (first, last) = (seen[0], *seen.last().expect("some ticks"));
    assert_eq!(
        seen.len() as u64,
        last - first + 1,
        "no gap across {across}: {seen:?}"
    );
    seen
}
