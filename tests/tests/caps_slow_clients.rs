//! Issue 16, "Slow clients": a slowloris client (a request head sent one byte a second) is cut
//! after `http.header_read_timeout`; one that sends its body a byte a second gets 408 and its
//! connection closed after `http.body_read_timeout`; a client that never reads its SSE stream cannot grow node
//! memory past what `http.connection_queue` holds.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const T: Duration = Duration::from_secs(60);

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// With `http.header_read_timeout = 2s`, a raw TCP client that sends `POST /mcp HTTP/1.1 ...` one
/// byte a second has its connection closed, unanswered, between 2 s and 4 s after it connected;
/// a normal client is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_head_is_cut_after_header_read_timeout() {
    let cluster = Cluster::start(
        1,
        ClusterOptions::new().set("http.header_read_timeout", "2s"),
    );
    let addr = cluster.node(0).addr();
    let url = cluster.url(0);
    let started = Instant::now();
    let stream = TcpStream::connect(&addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let head = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n");
    let dribble = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        for byte in head.into_bytes() {
            tick.tick().await;
            if write.write_all(&[byte]).await.is_err() {
                return;
            }
        }
    });
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut got)).await;
    let after = started.elapsed();
    dribble.abort();
    eprintln!(
        "slowloris connection closed after {after:?}; it got {} bytes",
        got.len()
    );
    assert!(closed.is_ok(), "the connection was not closed within 10 s");
    assert!(
        after >= Duration::from_millis(1900) && after <= Duration::from_secs(4),
        "closed after {after:?}, expected 2 s + at most 2 s slack"
    );
    assert!(
        got.is_empty(),
        "no answer: {:?}",
        String::from_utf8_lossy(&got)
    );
    let echoed = client
        .call_tool(&url, 1, "echo", json!({"text": "still served"}))
        .await
        .answer(json!(1), T)
        .await
        .response;
    assert_eq!(msg::result_text(&echoed), "still served", "{echoed}");
}

/// With `http.body_read_timeout = 2s`, a raw TCP client that sends a whole POST head with
/// `Content-Length: 100000` and then its body one byte a second is answered 408 with a JSON-RPC
/// error (id null, -32600) and `Connection: close` about 2 s after its head, and the connection
/// is closed; a normal client is served meanwhile. (Before `http.body_read_timeout`, the head's
/// timeout did not cover the body and such a connection stayed open for as long as it dribbled.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_gets_408_after_body_read_timeout() {
    let cluster = Cluster::start(1, ClusterOptions::new().set("http.body_read_timeout", "2s"));
    let addr = cluster.node(0).addr();
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let stream = TcpStream::connect(&addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n"
    );
    write.write_all(head.as_bytes()).await.expect("send head");
    let head_sent = Instant::now();
    let dribble = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        for _ in 0..100_000 {
            tick.tick().await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    // Served meanwhile.
    let echoed = client
        .call_tool(&url, 1, "echo", json!({"text": "still served"}))
        .await
        .answer(json!(1), T)
        .await
        .response;
    assert_eq!(msg::result_text(&echoed), "still served", "{echoed}");
    assert!(
        head_sent.elapsed() < Duration::from_millis(1900),
        "the normal call took until {:?}",
        head_sent.elapsed()
    );
    // Read to the end: the answer, then the close (a reset after the answer counts as closed).
    let mut got = Vec::new();
    let mut answered_after = None;
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answered_after.get_or_insert_with(|| head_sent.elapsed());
                    got.extend_from_slice(&buf[..n]);
                }
            }
        }
    })
    .await;
    let after = head_sent.elapsed();
    dribble.abort();
    let text = String::from_utf8_lossy(&got).into_owned();
    eprintln!("slow body: answered after {answered_after:?}, closed after {after:?}: {text:?}");
    assert!(closed.is_ok(), "the connection was not closed within 10 s");
    let answered = answered_after.expect("an answer before the close");
    assert!(
        answered >= Duration::from_millis(1900) && answered <= Duration::from_secs(4),
        "answered after {answered:?}, expected 2 s + at most 2 s slack"
    );
    assert!(after <= Duration::from_secs(5), "closed after {after:?}");
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole answer");
    assert!(
        head.to_ascii_lowercase().contains("\r\nconnection: close"),
        "{head}"
    );
    let body: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
    assert!(body["id"].is_null(), "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
}

/// Opens the session's standalone SSE stream on a raw socket with a 16 KiB receive buffer, reads
/// the response head only, and returns the socket (never read again by the caller until it
/// chooses).
async fn unread_stream(addr: &str, sid: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(16 * 1024).expect("SO_RCVBUF");
    let mut stream = socket
        .connect(addr.parse().expect("an address"))
        .await
        .expect("connect");
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("send head");
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(T, stream.read(&mut byte))
            .await
            .expect("a response head")
            .expect("read");
        assert_eq!(n, 1, "the stream closed before its head");
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    stream
}

/// A client opens its standalone stream and never reads it, while its session's tool pushes
/// 3 × 1,000 messages of 32 KiB (about 100 MB) onto that stream. The node's RSS stays under the
/// baseline plus 2 × `connection_queue` (64) × 32 KiB plus 24 MB: the events wait in the store's
/// log, not in the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_stream_does_not_grow_node_memory() {
    let cluster = Cluster::start(1, ClusterOptions::new().set("http.connection_queue", 64));
    let (addr, url) = (cluster.node(0).addr(), cluster.url(0));
    let pid = cluster.node(0).pid().expect("the node runs");
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&url, "2025-11-25").await;
    let mut stream = unread_stream(&addr, &sid).await;
    let baseline = status_kib(pid, "VmRSS");
    let tag = "t".repeat(32 * 1024);
    let mut peak = 0;
    for id in 1..=3 {
        let args = json!({"count": 1000, "interval_ms": 0, "tag": tag});
        let call = client.call_tool(&url, id, "notify", args);
        let answered = async { call.await.answer(json!(id), T).await.response };
        tokio::pin!(answered);
        let answer = loop {
            tokio::select! {
                a = &mut answered => break a,
                () = tokio::time::sleep(Duration::from_millis(5)) => {
                    peak = peak.max(status_kib(pid, "VmRSS"));
                }
            }
        };
        assert!(msg::result_text(&answer).contains("sent 1000"), "{answer}");
    }
    let hwm = status_kib(pid, "VmHWM");
    let ceiling = baseline + 2 * 64 * 32 + 24 * 1024;
    eprintln!(
        "unread stream: baseline {baseline} KiB, peak VmRSS {peak} KiB, VmHWM {hwm} KiB, \
         ceiling {ceiling} KiB for ~100 MB pushed"
    );
    assert!(peak <= ceiling, "peak VmRSS {peak} KiB over {ceiling} KiB");
    assert!(hwm <= ceiling, "VmHWM {hwm} KiB over {ceiling} KiB");
    // What the client finds when it reads at last: what was queued and in the socket buffers,
    // then the end of the stream (the last chunk of its chunked body): the log no longer holds
    // the events after those, so the connection cannot catch up and is closed; a resume from
    // its last event id is refused as trimmed.
    let mut got = Vec::new();
    let ended = tokio::time::timeout(T, async {
        let mut buf = vec![0u8; 64 * 1024];
        while !got.ends_with(b"\r\n0\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&got);
    let events = text.matches("data: ").count();
    let last_id = text
        .rsplit("id: ")
        .next()
        .and_then(|rest| rest.lines().next())
        .unwrap_or_default()
        .to_owned();
    eprintln!(
        "then read: {} bytes, {events} events, the stream {}",
        got.len(),
        if ended.is_ok() { "ended" } else { "still open" }
    );
    assert!(ended.is_ok(), "the stream ends once it cannot catch up");
    assert!(events > 0 && events < 3000, "{events} events");
    let resumed = client.get_stream(&url, Some(&last_id)).await;
    eprintln!("resume from {last_id}: {}", resumed.status);
    assert_eq!(
        resumed.status, 410,
        "a resume from the last event id it got is refused as trimmed"
    );
}
