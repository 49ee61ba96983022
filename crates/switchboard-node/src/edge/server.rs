//! The connection loop under the router: accepts TCP connections, serves each with hyper's HTTP/1
//! connection (upgrades on, for `/ws`), and on shutdown stops accepting and drains them.
//!
//! Why not `axum::serve`: an open SSE stream is an idle connection held for minutes, and its
//! memory is mostly the HTTP stack's (issue 4, `BENCHMARKS.md` §4). `axum::serve` wraps every
//! connection in hyper-util's auto-protocol builder (a version sniff before HTTP/1, the builder
//! kept in the connection task) and lets hyper keep a box the size of the router's whole request
//! future for the connection's life. Here the connection is plain HTTP/1 (the node never spoke
//! HTTP/2: axum is built without it), the read buffer is capped at hyper's minimum, and each
//! request's future is boxed so that an idle connection holds a pointer, not the future's space.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};

use axum::body::Body;
use axum::response::Response;
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

/// hyper's smallest read-buffer cap (its initial read buffer); it panics below it.
const MIN_BUF_SIZE: usize = 8192;

/// One request's future, boxed: hyper keeps a box of the service's future type for the whole
/// connection, so an unboxed router future would cost its full size on every idle stream.
type BoxedResponse = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// Serves `router` on every connection `listener` accepts until `shutdown` resolves, then stops
/// accepting, asks every open connection to finish its current response and close (HTTP/1
/// keep-alive off), and returns when all have closed. The caller bounds that wait.
///
/// `max_head` caps each connection's read buffer, hence the request head (a larger one gets
/// 431, as hyper answers it); hyper's default cap (~400 KiB) would let a buffer grown by a fast
/// body stay that large for the connection's life.
pub(crate) async fn serve<L>(
    mut listener: L,
    router: axum::Router,
    max_head: usize,
    shutdown: impl Future<Output = ()> + Send,
) where
    L: Listener,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(max_head.max(MIN_BUF_SIZE));
    let draining = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut shutdown = pin!(shutdown);
    loop {
        // `Listener::accept` retries failed accepts itself (with a pause on errors such as
        // EMFILE), so this loop only ends on shutdown.
        let (io, _remote) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            // The router's `poll_ready` is always ready; its future owns what it needs.
            Box::pin(router.clone().call(request.map(Body::new))) as BoxedResponse
        });
        let conn = http
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        let draining = draining.clone();
        connections.spawn(async move {
            let mut conn = pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                () = draining.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = served {
                tracing::trace!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    draining.cancel();
    connections.close();
    connections.wait().await;
}

#[cfg(test)]
mod tests {
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
        let server = tokio::spawn(super::serve(listener, router, 16 * 1024, async {
            let _ = stopped.await;
        }));

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
}
