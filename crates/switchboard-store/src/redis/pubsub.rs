//! The inbox of a node in standalone and Sentinel mode: a pub/sub connection subscribed to the
//! node's inbox channel and the broadcast channel, feeding a bounded receiver. (Redis Cluster:
//! the `sharded` module.) In Sentinel mode every reconnection asks the sentinels for the primary
//! first, so the inbox follows a promotion.
//!
//! When the connection drops (or stops answering pings) the reader reconnects and resubscribes
//! with exponential backoff (50 ms doubling to 2 s, so an inbox follows a promotion within about a second of it), logging with `tracing`. Messages published
//! while it is disconnected are lost (Redis pub/sub does not keep them); after resubscribing the
//! reader hands the node [`BusMessage::Resubscribed`] so that held streams catch up from their
//! event logs. A full receiver makes the
//! reader wait (it never drops a message); meanwhile messages queue in the client's buffer.

use std::time::Duration;

use futures::StreamExt;
use redis::aio::{PubSub, PubSubStream};
use redis::Client;
use tokio::sync::mpsc;

use super::sentinel::Primary;

use crate::error::StoreError;
use crate::model::BusMessage;
use crate::rules::INBOX_CAPACITY;
use crate::traits::StoreResult;

/// The shortest wait before reconnecting the inbox (the first try after a loss waits 50–100 ms).
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait before reconnecting the inbox.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const PING_EVERY: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the inbox looks whether the command connection followed another primary.
const MOVED_CHECK_EVERY: Duration = Duration::from_millis(250);
/// How long the inbox may stay on another server than the command connection's (Sentinel
/// mode) before it reconnects, asking the sentinels again.
const DISAGREE_LIMIT: Duration = Duration::from_secs(2);

/// Where the inbox connects.
#[derive(Clone)]
pub(crate) enum Source {
    /// One server.
    Fixed(Box<Client>),
    /// The primary the sentinels name at the time of connecting.
    Sentinel(Primary),
}

impl Source {
    async fn client(&self) -> redis::RedisResult<Client> {
        match self {
            Source::Fixed(c) => Ok(Client::clone(c)),
            Source::Sentinel(p) => p.client().await,
        }
    }

    /// The primary the command connection uses now (Sentinel mode), else `None`.
    fn followed(&self) -> Option<String> {
        match self {
            Source::Fixed(_) => None,
            Source::Sentinel(p) => Some(p.address()),
        }
    }

    /// Whether the inbox should move: in Sentinel mode, the command connection has followed
    /// another primary since the inbox connected (`followed`: the one it used then). Comparing with the inbox's own
    /// server instead made it reconnect in a loop, one every 2–5 ms, for the 0.6–2 s the
    /// command connection took to follow a promotion the inbox had already seen
    /// (RELIABILITY.md, finding 5).
    fn moved_since(&self, followed: &Option<String>) -> bool {
        self.followed()
            .is_some_and(|now| Some(&now) != followed.as_ref())
    }

    /// Called once connected to `server`: when the command connection uses another primary, it
    /// is asked to ask the sentinels again (the inbox saw a promotion first).
    fn nudge(&self, server: &str) {
        if let Source::Sentinel(p) = self {
            if p.address() != server {
                p.re_resolve();
            }
        }
    }
}

/// Subscribes to `channels` now (so nothing published after this returns is missed), then keeps
/// the subscription alive in a background task until the receiver is dropped.
pub(crate) async fn start(
    source: Source,
    channels: Vec<String>,
) -> StoreResult<mpsc::Receiver<BusMessage>> {
    let first = connect(&source, &channels).await?;
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    tokio::spawn(run(source, channels, first, tx));
    Ok(rx)
}

/// A subscribed inbox connection, the server it is on (`host:port`), and the primary the
/// command connection used when it connected (Sentinel mode).
struct Connected {
    pubsub: PubSub,
    server: String,
    followed: Option<String>,
}

async fn connect(source: &Source, channels: &[String]) -> StoreResult<Connected> {
    let attempt = async {
        let followed = source.followed();
        let client = source.client().await?;
        let server = client.get_connection_info().addr().to_string();
        tracing::info!(%server, "bus inbox subscribing");
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channels).await?;
        source.nudge(&server);
        Ok::<_, redis::RedisError>(Connected {
            pubsub,
            server,
            followed,
        })
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(StoreError::Backend(
            "timed out subscribing to the inbox".to_owned(),
        )),
    }
}

/// The waits between the inbox's reconnection attempts: `backon`'s exponential schedule with
/// jitter, each in [d, 2d) with d doubling from [`FIRST_BACKOFF`] up to half of [`MAX_BACKOFF`],
/// so that after a Redis restart the nodes do not reconnect in lockstep.
fn reconnects() -> backon::ExponentialBackoff {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::new()
        .with_jitter()
        .with_factor(2.0)
        .with_min_delay(FIRST_BACKOFF)
        .with_max_delay(MAX_BACKOFF / 2)
        .without_max_times()
        .build()
}

/// Why [`pump`] stopped.
enum Stop {
    /// The receiver was dropped: the inbox is no longer wanted.
    ReceiverGone,
    /// The connection was lost.
    Disconnected,
}

async fn run(
    source: Source,
    channels: Vec<String>,
    first: Connected,
    tx: mpsc::Sender<BusMessage>,
) {
    let mut current = Some(first);
    let mut backoff = reconnects();
    loop {
        let pubsub = match current.take() {
            Some(p) => p,
            None => match connect(&source, &channels).await {
                Ok(p) => {
                    tracing::info!(?channels, "bus inbox resubscribed");
                    backoff = reconnects();
                    // Whatever was published meanwhile is gone: tell the node, which re-reads
                    // the event logs of the streams it holds.
                    if tx.send(BusMessage::Resubscribed {}).await.is_err() {
                        return;
                    }
                    p
                }
                Err(e) => {
                    let wait = backoff.next().unwrap_or(MAX_BACKOFF);
                    tracing::warn!(error = %e, retry_in = ?wait, "bus inbox cannot reconnect");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = tx.closed() => return,
                    }
                    continue;
                }
            },
        };
        match pump(pubsub, &source, &tx).await {
            Stop::ReceiverGone => return,
            Stop::Disconnected => {
                tracing::warn!(?channels, "bus inbox connection lost; reconnecting")
            }
        }
    }
}

/// Forwards messages until the connection or the receiver goes away; pings now and then so a
/// silently dead connection is noticed; in Sentinel mode leaves (as if disconnected) once the
/// command connection follows another primary, or after [`DISAGREE_LIMIT`] on another server
/// than the command connection's.
async fn pump(connected: Connected, source: &Source, tx: &mpsc::Sender<BusMessage>) -> Stop {
    let (server, followed) = (connected.server, connected.followed);
    let (mut sink, mut stream): (_, PubSubStream) = connected.pubsub.split();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let mut moved = tokio::time::interval(MOVED_CHECK_EVERY);
    let mut disagree = None;
    loop {
        tokio::select! {
            _ = moved.tick() => {
                if source.moved_since(&followed) {
                    tracing::warn!(from = %server, "bus inbox: the primary moved");
                    return Stop::Disconnected;
                }
                match source.followed() {
                    Some(now) if now != server => {
                        let since = *disagree.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() >= DISAGREE_LIMIT {
                            tracing::warn!(inbox = %server, commands = %now, "bus inbox: on another server than the command connection; asking the sentinels again");
                            return Stop::Disconnected;
                        }
                    }
                    _ => disagree = None,
                }
            }
            msg = stream.next() => {
                let Some(msg) = msg else { return Stop::Disconnected };
                let Some(decoded) = decode(msg.get_payload_bytes()) else { continue };
                if tx.send(decoded).await.is_err() {
                    return Stop::ReceiverGone;
                }
            }
            _ = ping.tick() => {
                let pong = tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await;
                if !matches!(pong, Ok(Ok(_))) {
                    return Stop::Disconnected;
                }
            }
            _ = tx.closed() => return Stop::ReceiverGone,
        }
    }
}

/// A bus message from its JSON, or `None` (logged) when it is not one.
pub(crate) fn decode(payload: &[u8]) -> Option<BusMessage> {
    match serde_json::from_slice(payload) {
        Ok(msg) => {
            observe_delivery(&msg);
            Some(msg)
        }
        Err(e) => {
            tracing::warn!(error = %e, "bus message is not a BusMessage; ignored");
            None
        }
    }
}

/// Counts an event's time on the bus in `switchboard_bus_delivery_seconds{message="event"}`:
/// from its log position, whose first part is the Redis server's clock in milliseconds when the
/// append script ran (`XADD *`), to now on this node's clock (nodes and Redis are expected to
/// share time through NTP; a negative difference counts as 0).
fn observe_delivery(msg: &BusMessage) {
    let BusMessage::Event(event) = msg else {
        return;
    };
    let Some(ms) = event
        .position
        .split_once('-')
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
    else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(ms);
    let labels = switchboard_telemetry::metrics::BusLabels { message: "event" };
    switchboard_telemetry::metrics::get()
        .bus_delivery
        .get_or_create(&labels)
        .observe(now.saturating_sub(ms) as f64 / 1000.0);
}
