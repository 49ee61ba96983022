//! A store whose link to Redis goes silent (packets held back, connections left open): each
//! operation fails within the 5 s command timeout, and the store answers again once the link is
//! back. (A request that makes several store calls can still wait several times that: the
//! node's fence refuses it once it is fenced, see `switchboard-node`'s `app::not_fenced`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_store::redis::{RedisTopology, RESPONSE_TIMEOUT};
use switchboard_store::*;
use switchboard_tests::redis_server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::harness::*;

/// A TCP relay to `target` on a free loopback port that forwards bytes both ways while `link`
/// holds `true`; while it holds `false` nothing is read or written, so bytes wait in the
/// kernel's buffers and arrive once the link is back, as over a link whose packets are dropped
/// and then retransmitted.
async fn relay(target: u16, link: watch::Receiver<bool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let link = link.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                    return;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pipe(cr, sw, link.clone()));
                pipe(sr, cw, link).await;
            });
        }
    });
    port
}

/// Copies `from` to `to`, holding still while the link is down.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut link: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if link.wait_for(|up| *up).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if link.wait_for(|up| *up).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_link_fails_each_operation_within_the_command_timeout() {
    let redis = RedisServer::start();
    let (link, rx) = watch::channel(true);
    let port = relay(redis.port(), rx).await;
    let topology = RedisTopology::standalone(&format!("redis://127.0.0.1:{port}/"));
    let store: Arc<dyn Store> = RedisStore::open(&topology, StoreConfig::default_for("a"))
        .await
        .unwrap();
    let id = new_session(&store).await;
    link.send_replace(false);
    let cut = Instant::now();
    // The link comes back after 12 s, past two operations' 5 s bounds: an operation that
    // waited for it would then succeed late.
    let back = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(12)).await;
        link.send_replace(true);
        link
    });
    let limit = RESPONSE_TIMEOUT + Duration::from_millis(500);
    let started = Instant::now();
    let checked = store.check(&id, "1", &[]).await;
    let check_took = started.elapsed();
    let started = Instant::now();
    let exists = store.exists(&id).await;
    let exists_took = started.elapsed();
    println!(
        "on a silent link: check {:?} after {check_took:?}, exists {:?} after {exists_took:?}",
        checked.as_ref().map(|_| "answered"),
        exists
    );
    assert!(
        checked.is_err() && check_took <= limit,
        "check waited {check_took:?}: {checked:?}"
    );
    assert!(
        exists.is_err() && exists_took <= limit,
        "exists waited {exists_took:?}: {exists:?}"
    );
    let _link = back.await.unwrap();
    assert!(cut.elapsed() >= Duration::from_secs(12));
    // Back: the store answers again (the client reconnects).
    let again = switchboard_tests::eventually::eventually(
        "the store to answer after the link is back",
        Duration::from_secs(15),
        || {
            let (store, id) = (store.clone(), id.clone());
            async move { store.exists(&id).await.ok() }
        },
    )
    .await;
    assert!(again, "the session is still there");
}
