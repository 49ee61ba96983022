//! The reader of the sharded inbox: every push of the subscriber connection (messages,
//! Redis unsubscribing a channel by itself, disconnections), the periodic checks (the probe, the
//! slot map, the node's mailboxes), and the resubscriptions they make due.

use std::collections::HashSet;
use std::sync::Weak;
use std::time::Duration;

use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::Sharded;
use crate::bus::BusSettings;
use crate::model::BusMessage;
use crate::redis::bus::intake::{Closed, Intake};
use crate::redis::bus::probe::Prober;
use crate::redis::bus::wire;

/// How long after a disconnection the node subscribes again (a burst of disconnections, one per
/// lost node connection, ends first).
const CATCH_UP_AFTER: Duration = Duration::from_millis(200);

/// How long after Redis unsubscribed a channel by itself the node subscribes again (the slot's
/// other channels' pushes arrive meanwhile: one resubscription for all).
const UNSUBSCRIBED_AFTER: Duration = Duration::from_millis(50);

/// How long after a failed resubscription the node tries again.
const RESUBSCRIBE_RETRY: Duration = Duration::from_millis(500);

/// How long after a disconnection the node goes on subscribing again, every
/// [`RESUBSCRIBE_AGAIN`]: the promotion and the cluster connection's slot refreshes that follow
/// it (each may replace node connections and lose their subscriptions) come seconds later.
const RESUBSCRIBE_WINDOW: Duration = Duration::from_secs(15);

/// The interval of the resubscriptions within [`RESUBSCRIBE_WINDOW`].
const RESUBSCRIBE_AGAIN: Duration = Duration::from_secs(1);

/// A pending resubscription: of everything, or of the channels Redis unsubscribed by itself.
#[derive(Default)]
struct Heal {
    /// When it is due.
    at: Option<tokio::time::Instant>,
    /// Every wanted channel (after a disconnection, a lost probe, a slot map change).
    all: bool,
    /// Channels Redis unsubscribed by itself.
    channels: HashSet<String>,
    /// On a new subscriber connection ([`Sharded::renew`]): the slot map changed.
    renew: bool,
    /// What made it due, counted once it is done (`None` for a repetition within the window).
    cause: Option<&'static str>,
}

impl Heal {
    /// Makes a resubscription due within `after` (keeping an earlier one).
    fn due(&mut self, after: Duration, cause: &'static str) {
        let at = tokio::time::Instant::now() + after;
        self.at = Some(self.at.map_or(at, |t| t.min(at)));
        self.cause.get_or_insert(cause);
    }
}

/// The reader of the sharded inbox: the connection's pushes, the checks, the resubscriptions.
pub(super) struct Reader {
    owner: Weak<Sharded>,
    intake: Intake,
    prober: Prober,
    heal: Heal,
    /// Until when events are verified against their log (a window after a disconnection, while
    /// the cluster client may drop and restore subscriptions unseen).
    window_ends: tokio::time::Instant,
    /// From a disconnection until the first resubscription after it, pushes wait here: a live
    /// event delivered before the node is told to catch up would move its stream past the
    /// events it missed meanwhile, and the catch-up (which reads after the last event sent)
    /// would skip them. After `Resubscribed` they follow, in order.
    held: Option<Vec<PushInfo>>,
    /// The slot map's fingerprint at the last check.
    pub(super) slots: Option<u64>,
    check_every: Duration,
}

impl Reader {
    pub(super) fn new(owner: Weak<Sharded>, intake: Intake, settings: &BusSettings) -> Reader {
        Reader {
            owner,
            intake,
            prober: Prober::default(),
            heal: Heal::default(),
            window_ends: tokio::time::Instant::now(),
            held: None,
            slots: None,
            check_every: settings.check_interval.max(Duration::from_millis(10)),
        }
    }

    /// Reads pushes and runs the checks until the receiver or the store is dropped.
    pub(super) async fn run(mut self, mut pushes: mpsc::UnboundedReceiver<PushInfo>) {
        let mut check = tokio::time::interval(self.check_every);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        check.tick().await;
        loop {
            let step = tokio::select! {
                push = pushes.recv() => match push {
                    Some(push) => self.push(push).await,
                    None => return,
                },
                _ = wait_until(self.heal.at) => self.resubscribe().await,
                _ = check.tick() => self.check().await,
                _ = self.intake.until_closed() => return,
            };
            if step.is_err() || self.owner.strong_count() == 0 {
                return;
            }
        }
    }

    async fn push(&mut self, push: PushInfo) -> Result<(), Closed> {
        match push.kind {
            PushKind::SMessage => {
                if let Some(held) = self.held.as_mut() {
                    held.push(push);
                    return Ok(());
                }
                self.message(&push).await
            }
            PushKind::SUnsubscribe => {
                let Some(Value::BulkString(channel)) = push.data.first() else {
                    return Ok(());
                };
                let channel = String::from_utf8_lossy(channel).into_owned();
                let Some(sharded) = self.owner.upgrade() else {
                    return Err(Closed);
                };
                if !sharded.own_unsubscribe(&channel) && sharded.wants(&channel) {
                    tracing::warn!(%channel, "Redis unsubscribed this node from a channel it still wants (its slot moved, or its server was demoted): subscribing again");
                    self.heal.channels.insert(channel);
                    self.heal.due(UNSUBSCRIBED_AFTER, "unsubscribed");
                    self.verify_for_a_while();
                }
                Ok(())
            }
            PushKind::Disconnection => {
                tracing::warn!("bus inbox connection lost; subscribing again in 200 ms");
                // Confirmations of this node's own unsubscriptions may be lost with it.
                if let Some(sharded) = self.owner.upgrade() {
                    sharded.leaving.lock().clear();
                }
                // The last of a burst of disconnections (one per lost node connection) sets when.
                let now = tokio::time::Instant::now();
                self.heal.at = Some(now + CATCH_UP_AFTER);
                self.heal.all = true;
                self.heal.cause.get_or_insert("disconnected");
                self.window_ends = now + RESUBSCRIBE_WINDOW;
                self.held.get_or_insert_with(Vec::new);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Some subscriptions were (or may have been) lost and are being restored: for
    /// [`RESUBSCRIBE_WINDOW`] live events are verified against their logs, so that one arriving
    /// on a restored subscription does not move its stream past the events missed before it
    /// (the chaos suite's graceful Cluster failover lost 4 of 3,296 `notify` events this way).
    fn verify_for_a_while(&mut self) {
        let until = tokio::time::Instant::now() + RESUBSCRIBE_WINDOW;
        self.window_ends = self.window_ends.max(until);
    }

    /// One message push: a probe of this node's, or a doorbell of a mailbox.
    async fn message(&mut self, push: &PushInfo) -> Result<(), Closed> {
        let [Value::BulkString(channel), Value::BulkString(payload)] = push.data.as_slice() else {
            return Ok(());
        };
        let channel = String::from_utf8_lossy(channel);
        let Some(sharded) = self.owner.upgrade() else {
            return Err(Closed);
        };
        let Some(mailbox) = sharded.mailbox_of(&channel) else {
            return Ok(());
        };
        let (for_me, body) = if channel.ends_with("}:bus") {
            let Some(split) = payload.iter().position(|b| *b == b'\n') else {
                return Ok(());
            };
            let to = &payload[..split];
            (
                to == b"*" || to == sharded.node_id.as_bytes(),
                &payload[split + 1..],
            )
        } else {
            if let Some(n) = wire::probe_number(payload) {
                self.prober.back(n);
                return Ok(());
            }
            (true, &payload[..])
        };
        drop(sharded);
        // Within the window a subscription may have been lost and restored (by the cluster
        // client) unseen: the holder checks its log before writing the event.
        self.intake
            .verify_events(tokio::time::Instant::now() < self.window_ends);
        self.intake.rung(&mailbox, for_me, body).await
    }

    /// Subscribes again (everything, or what Redis unsubscribed), then reads the mailboxes behind
    /// those channels and tells the node to catch its held streams up.
    async fn resubscribe(&mut self) -> Result<(), Closed> {
        self.heal.at = None;
        let Some(sharded) = self.owner.upgrade() else {
            return Err(Closed);
        };
        let all = self.heal.all;
        let channels: Vec<String> = if all {
            sharded.wanted()
        } else {
            self.heal
                .channels
                .iter()
                .filter(|c| sharded.wants(c))
                .cloned()
                .collect()
        };
        let renew = self.heal.renew && all;
        let subscribed = if renew {
            sharded.renew().await
        } else {
            sharded.resubscribe(channels.clone()).await
        };
        if let Err(e) = subscribed {
            tracing::warn!(error = %e, renew, "bus inbox could not subscribe again; retrying");
            self.heal.at = Some(tokio::time::Instant::now() + RESUBSCRIBE_RETRY);
            return Ok(());
        }
        self.heal.renew = false;
        let mut mailboxes: Vec<String> = channels
            .iter()
            .filter_map(|c| sharded.mailbox_of(c))
            .collect();
        mailboxes.extend(sharded.own_mailboxes());
        drop(sharded);
        tracing::info!(channels = channels.len(), "bus inbox resubscribed");
        if let Some(cause) = self.heal.cause.take() {
            switchboard_telemetry::metrics::get().bus.heal(cause);
        }
        self.heal.channels.clear();
        self.heal.all = false;
        self.prober.reset();
        let now = tokio::time::Instant::now();
        if all && now < self.window_ends {
            self.heal.at = Some(now + RESUBSCRIBE_AGAIN);
            self.heal.all = true;
        }
        self.intake.hand(BusMessage::Resubscribed {}).await?;
        for push in self.held.take().unwrap_or_default() {
            self.message(&push).await?;
        }
        for mailbox in mailboxes {
            self.intake.catch_up(&mailbox).await?;
        }
        Ok(())
    }

    /// The periodic check: the probe sent at the last check came back, the slot map is the
    /// same, the node's mailboxes hold nothing unread.
    async fn check(&mut self) -> Result<(), Closed> {
        let Some(sharded) = self.owner.upgrade() else {
            return Err(Closed);
        };
        if !self.prober.healthy() {
            tracing::warn!("bus inbox: this node's probe did not come back through its subscription; subscribing again");
            self.heal.all = true;
            self.heal.due(Duration::ZERO, "probe");
            self.verify_for_a_while();
        }
        let probe = wire::probe(self.prober.next());
        let sent = redis::cmd("SPUBLISH")
            .arg(sharded.keys.inbox(&sharded.node_id))
            .arg(probe)
            .query_async::<i64>(&mut sharded.conn.clone())
            .await;
        if sent.is_ok() {
            self.prober.sent();
        }
        match sharded.slot_map().await {
            Ok(map) => {
                if self.slots.is_some_and(|old| old != map) {
                    tracing::warn!("the cluster's slot map changed: subscribing again to every channel of this node, on a new connection that knows the new map");
                    self.heal.all = true;
                    self.heal.renew = true;
                    self.heal.due(Duration::ZERO, "slot_map");
                    self.verify_for_a_while();
                }
                self.slots = Some(map);
            }
            Err(e) => tracing::debug!(error = %e, "could not read the cluster's slot map"),
        }
        let own = sharded.own_mailboxes();
        let interest: HashSet<String> = sharded
            .interest
            .lock()
            .keys()
            .map(|sid| sharded.keys.session_mailbox(sid))
            .collect();
        drop(sharded);
        self.intake
            .retain(|mailbox| own.iter().any(|m| m == mailbox) || interest.contains(mailbox));
        self.intake.check(&own).await
    }
}

async fn wait_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
