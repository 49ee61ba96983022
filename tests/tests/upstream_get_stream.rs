//! A Streamable HTTP upstream's own GET stream behind three nodes (MCP 2025-11-25,
//! basic/transports, Listening for Messages from the Server; Resumability and Redelivery):
//! exactly one node holds it (the lease `"<upstream>#get"`), its notifications reach the
//! client's standalone GET stream on whichever node holds that, and when the holder is killed
//! the next request through another node takes the stream over, resuming with `Last-Event-ID`.
//!
//! The upstream is hand-written on raw TCP in this process (one request per connection): it
//! appends a `notifications/message` with an increasing `seq` to its event log every 200 ms
//! (event id `e-<seq>`), streams the log to every GET from after `Last-Event-ID` (or from now),
//! counts open GET streams and records each GET's `Last-Event-ID`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::sse::SseStream;
use switchboard_tests::upstreams::{start_cluster, Upstream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(20);

/// The upstream's state.
#[derive(Default)]
struct Up {
    log: Mutex<Vec<Value>>,
    open: AtomicUsize,
    gets: Mutex<Vec<Option<String>>>,
}

/// Starts the upstream on 127.0.0.1:0; returns it and its MCP endpoint.
async fn start_upstream() -> (Arc<Up>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
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
async fn ticks(sse: &mut SseStream, limit: Duration) -> Vec<u64> {
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

async fn echo(client: &McpClient, url: &str, id: u64) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {}}});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    assert!(
        answer.response.get("result").is_some(),
        "echo on {url}: {}",
        answer.response
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_holds_the_upstream_get_stream_and_another_resumes_it_after_a_crash() {
    let (up, url) = start_upstream().await;
    let upstream = Upstream::http("ticker", &url).prefix("");
    let mut started = start_cluster(3, &[upstream], ClusterOptions::new().fast_liveness(1500));
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    // The client's standalone stream is on B; its requests go to A (first: A takes the lease) and C.
    let mut b_stream = client.get_stream(&urls[1], None).await.sse();
    echo(&client, &urls[0], 1).await;
    echo(&client, &urls[2], 2).await;
    echo(&client, &urls[0], 3).await;
    echo(&client, &urls[2], 4).await;

    let mut before = ticks(&mut b_stream, Duration::from_secs(2)).await;
    assert!(before.len() >= 4, "ticks reach B's stream: {before:?}");
    assert!(
        before.windows(2).all(|w| w[0] < w[1]),
        "in order: {before:?}"
    );
    // Exactly one GET stream upstream, however many nodes serve the session.
    always_for("one holder", Duration::from_secs(2), || async {
        up.open.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(up.gets.lock().unwrap().len(), 1, "never reopened meanwhile");
    before.extend(ticks(&mut b_stream, Duration::from_millis(600)).await);
    let last_before = *before.last().expect("ticks keep coming");

    // A holds the lease: killing it closes the upstream's GET stream.
    started.cluster.kill9(0);
    eventually("A's GET stream to close", T, || async {
        (up.open.load(Ordering::SeqCst) == 0).then_some(())
    })
    .await;
    // The next requests through C take over once A's heartbeat lapsed.
    let mut id = 100;
    eventually("another node to take the GET stream over", T, || {
        id += 1;
        let (client, url, up) = (&client, &urls[2], &up);
        async move {
            echo(client, url, id).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            (up.open.load(Ordering::SeqCst) == 1).then_some(())
        }
    })
    .await;
    let resumed_from = up.gets.lock().unwrap()[1].clone();
    let resumed_seq: u64 = resumed_from
        .as_deref()
        .and_then(|id| id.strip_prefix("e-")?.parse().ok())
        .unwrap_or_else(|| panic!("resumed with Last-Event-ID: {resumed_from:?}"));
    assert!(
        resumed_seq >= 1 && resumed_seq <= last_before + 10,
        "{resumed_seq} vs {last_before}"
    );

    // B's stream continues: what was sent while nobody listened is replayed (some events may
    // come twice, from the last stored id on), then live ticks.
    let after = ticks(&mut b_stream, Duration::from_secs(3)).await;
    assert!(!after.is_empty(), "ticks after the takeover");
    let mut seen: Vec<u64> = before.iter().chain(&after).copied().collect();
    seen.sort_unstable();
    seen.dedup();
    let (first, last) = (seen[0], *seen.last().unwrap());
    assert_eq!(
        seen.len() as u64,
        last - first + 1,
        "no gap across the takeover: {seen:?}"
    );
    always_for(
        "one holder after the takeover",
        Duration::from_secs(1),
        || async { up.open.load(Ordering::SeqCst) == 1 },
    )
    .await;
}
