//! The inbox of a node in standalone and Sentinel mode: a pub/sub connection subscribed to the
//! node's inbox channel and the broadcast channel (the doorbells of its mailboxes, see the
//! `intake` module), feeding a bounded receiver. (Redis Cluster: the `sharded` module.) In
//! Sentinel mode every reconnection asks the sentinels for the primary first, so the inbox
//! follows a promotion.
//!
//! When the connection drops (or stops answering pings, or the node's probe through it does not
//! come back within a check) the reader reconnects and resubscribes with exponential backoff
//! (50 ms doubling to 2 s, so an inbox follows a promotion within about a second of it), logging
//! with `tracing`. What was posted meanwhile waits in the mailboxes: after subscribing the reader
//! reads them, and hands the node [`BusMessage::Resubscribed`] so that held streams catch up
//! from their event logs (live events have no mailbox: their log is their durable copy). A full
//! receiver makes the reader wait (it never drops a message); meanwhile doorbells queue in the
//! client's buffer.

use std::time::Duration;

use futures::StreamExt;
use redis::aio::{PubSub, PubSubStream};
use redis::Client;
use tokio::sync::mpsc;

use super::intake::{Closed, Intake};
use super::probe::Prober;
use super::wire;
use crate::bus::BusSettings;
use crate::error::StoreError;
use crate::model::BusMessage;
use crate::redis::connection::Conn;
use crate::redis::keys::Keys;
use crate::redis::sentinel::Primary;
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
            Source::Sentinel(p) => p.inbox_client().await,
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

/// What the reader of one node's classic inbox works with.
pub(crate) struct Reader {
    source: Source,
    /// The command connection: probes and mailbox reads.
    conn: Conn,
    /// The node's inbox channel, then the broadcast channel.
    channels: Vec<String>,
    /// The node's mailbox, then the broadcast mailbox (the channels' in the same order).
    mailboxes: Vec<String>,
    intake: Intake,
    prober: Prober,
    check_every: Duration,
}

/// Subscribes node `me`'s inbox now (so nothing posted after this returns is missed), then keeps
/// the subscription alive and reads its mailboxes in a background task until the receiver is
/// dropped.
pub(crate) async fn start(
    source: Source,
    conn: Conn,
    keys: &Keys,
    me: &str,
    settings: &BusSettings,
) -> StoreResult<mpsc::Receiver<BusMessage>> {
    let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
    let mut reader = Reader {
        source,
        channels: vec![keys.inbox(me), keys.all()],
        mailboxes: vec![keys.mailbox(me), keys.broadcast_mailbox()],
        intake: Intake::new(me, conn.clone(), tx, settings.clone()),
        conn,
        prober: Prober::default(),
        check_every: settings.check_interval.max(Duration::from_millis(10)),
    };
    // Where the mailboxes end before subscribing: whatever is posted after it reaches this node
    // (by its doorbell, or by the read right after subscribing).
    for mailbox in reader.mailboxes.clone() {
        reader.intake.start_at_tail(&mailbox).await?;
    }
    let first = connect(&reader.source, &reader.channels).await?;
    tokio::spawn(run(reader, first));
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
    /// The subscription was lost (or may have been); the cause, for
    /// `switchboard_bus_subscriptions_healed_total`.
    Lost(&'static str),
}

async fn run(mut reader: Reader, first: Connected) {
    let mut followed = first.followed.clone();
    let mut current = Some(first);
    let mut backoff = reconnects();
    let mut away_checked = tokio::time::Instant::now();
    loop {
        let (connected, again) = match current.take() {
            Some(p) => (p, false),
            None => match connect(&reader.source, &reader.channels).await {
                Ok(p) => {
                    tracing::info!(channels = ?reader.channels, "bus inbox resubscribed");
                    backoff = reconnects();
                    (p, true)
                }
                Err(e) => {
                    let wait = backoff
                        .next()
                        .unwrap_or(MAX_BACKOFF)
                        .min(reader.check_every / 4);
                    tracing::warn!(error = %e, retry_in = ?wait, "bus inbox cannot reconnect");
                    if away_checked.elapsed() >= reader.check_every / 4 {
                        away_checked = tokio::time::Instant::now();
                        if away(&mut reader).await.is_err() {
                            return;
                        }
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = reader.intake.until_closed() => return,
                    }
                    continue;
                }
            },
        };
        reader.prober.reset();
        if connected.followed != followed {
            // The command connection, which reads the mailboxes, follows another primary (a
            // promotion): its mailboxes may number differently from the old one's (messages
            // the old primary took after the promotion never reached it), so a message posted
            // there can carry a number this node already read past (seen: a sampling answer
            // accepted with 202 and never delivered, `graceful-failover --redis sentinel`).
            // They are read from their start; what was taken is not taken again.
            followed = connected.followed.clone();
            reader.intake.read_from_start();
        }
        // Events published meanwhile are in their logs: held streams re-read them. Control
        // messages posted meanwhile wait in the mailboxes: read them now.
        if again
            && reader
                .intake
                .hand(BusMessage::Resubscribed {})
                .await
                .is_err()
        {
            return;
        }
        let mailboxes = reader.mailboxes.clone();
        if reader.intake.check(&mailboxes).await.is_err() {
            return;
        }
        match pump(connected, &mut reader).await {
            Stop::ReceiverGone => return,
            Stop::Lost(cause) => {
                tracing::warn!(channels = ?reader.channels, cause, "bus inbox subscription lost; subscribing again");
                switchboard_telemetry::metrics::get().bus.heal(cause);
            }
        }
    }
}

/// While the inbox cannot reconnect (its server refuses connections, a proxy holds them off)
/// the command connection may still work: four times per check interval what waits in the
/// mailboxes is read, and held streams are told to re-read their logs, so neither control
/// messages nor live events wait for the reconnection (the chaos suite's `bus-drop` held it off
/// for 1 s, and the backoff added up to 1.4 s more: live events arrived 2.5 s late).
async fn away(reader: &mut Reader) -> Result<(), Closed> {
    let mailboxes = reader.mailboxes.clone();
    reader.intake.check(&mailboxes).await?;
    // Only when the store answers: a held stream that re-reads its log while Redis is
    // unreachable ends (seen through a Sentinel promotion, where neither connection works).
    if reader.intake.all_read() {
        reader.intake.hand(BusMessage::Resubscribed {}).await?;
    }
    Ok(())
}

/// Forwards messages until the connection or the receiver goes away; pings now and then so a
/// silently dead connection is noticed; probes its own subscription and reads its mailboxes at
/// every check; in Sentinel mode leaves (as if disconnected) once the command connection follows
/// another primary, or after [`DISAGREE_LIMIT`] on another server than the command
/// connection's.
async fn pump(connected: Connected, reader: &mut Reader) -> Stop {
    let (server, followed) = (connected.server, connected.followed);
    let (mut sink, mut stream): (_, PubSubStream) = connected.pubsub.split();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let mut moved = tokio::time::interval(MOVED_CHECK_EVERY);
    let mut check = tokio::time::interval(reader.check_every);
    check.tick().await;
    let mut disagree = None;
    loop {
        tokio::select! {
            _ = moved.tick() => {
                if reader.source.moved_since(&followed) {
                    tracing::warn!(from = %server, "bus inbox: the primary moved");
                    return Stop::Lost("disconnected");
                }
                match reader.source.followed() {
                    Some(now) if now != server => {
                        let since = *disagree.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() >= DISAGREE_LIMIT {
                            tracing::warn!(inbox = %server, commands = %now, "bus inbox: on another server than the command connection; asking the sentinels again");
                            return Stop::Lost("disconnected");
                        }
                    }
                    _ => disagree = None,
                }
            }
            msg = stream.next() => {
                let Some(msg) = msg else { return Stop::Lost("disconnected") };
                if let Err(Closed) = take(reader, msg.get_channel_name(), msg.get_payload_bytes()).await {
                    return Stop::ReceiverGone;
                }
            }
            _ = ping.tick() => {
                let pong = tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await;
                if !matches!(pong, Ok(Ok(_))) {
                    return Stop::Lost("disconnected");
                }
            }
            _ = check.tick() => {
                if !reader.prober.healthy() {
                    tracing::warn!(channel = %reader.channels[0], "bus inbox: this node's probe did not come back through its subscription");
                    return Stop::Lost("probe");
                }
                send_probe(reader).await;
                let mailboxes = reader.mailboxes.clone();
                if reader.intake.check(&mailboxes).await.is_err() {
                    return Stop::ReceiverGone;
                }
            }
            _ = reader.intake.until_closed() => return Stop::ReceiverGone,
        }
    }
}

/// One doorbell on `channel`: a probe of this node's, or a message of the mailbox behind it.
async fn take(reader: &mut Reader, channel: &str, payload: &[u8]) -> Result<(), Closed> {
    let mine = channel == reader.channels[0];
    if mine {
        if let Some(n) = wire::probe_number(payload) {
            reader.prober.back(n);
            return Ok(());
        }
    }
    let mailbox = if mine {
        reader.mailboxes[0].clone()
    } else {
        reader.mailboxes[1].clone()
    };
    reader.intake.rung(&mailbox, true, payload).await
}

/// Publishes the next probe on this node's inbox channel, over the command connection (in
/// Sentinel mode the primary it follows, so an inbox left on a demoted server is found too).
async fn send_probe(reader: &mut Reader) {
    let mut conn = reader.conn.clone();
    let sent = redis::cmd("PUBLISH")
        .arg(&reader.channels[0])
        .arg(wire::probe(reader.prober.next()))
        .query_async::<i64>(&mut conn)
        .await;
    match sent {
        Ok(_) => {
            reader.prober.sent();
        }
        Err(e) => tracing::debug!(error = %e, "could not send the bus inbox probe"),
    }
}
