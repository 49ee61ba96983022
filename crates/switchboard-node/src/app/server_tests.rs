//! [`super::serve`] on a real listener: keep-alive, the head cap, the drain.

use std::time::Duration;

use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Sends one request with a `X-Pad` header of `pad` bytes and returns the status line.
async fn status(conn: &mut TcpStream, pad: usize) -> String {
    let head = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(pad)
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"ok") && !answer.ends_with(b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed early");
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn keeps_connections_alive_caps_the_head_and_drains_on_shutdown() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route("/", get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(super::serve(
        listener,
        router,
        (16 * 1024, Duration::from_secs(30)),
        async {
            let _ = stopped.await;
        },
    ));

    let mut conn = TcpStream::connect(addr).await.unwrap();
    assert_eq!(status(&mut conn, 10).await, "HTTP/1.1 200 OK");
    // The same connection again (keep-alive), with a head over hyper's initial 8 KiB buffer.
    assert_eq!(status(&mut conn, 12 * 1024).await, "HTTP/1.1 200 OK");
    let mut big = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        status(&mut big, 20 * 1024).await,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );

    // Shutdown closes the idle keep-alive connection and then returns.
    stop.send(()).unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest));
    assert!(closed.await.is_ok(), "the idle connection is closed");
    let done = tokio::time::timeout(Duration::from_secs(5), server).await;
    assert!(done.is_ok(), "serve returns once connections closed");
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}
