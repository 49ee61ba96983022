//! What a node takes from its mailboxes: each message once, in each mailbox's order, whether it
//! came by its doorbell (pub/sub) or was read from the mailbox after a gap.
//!
//! A mailbox numbers its messages `0-1`, `0-2`, … (`XADD … 0-*`), and every doorbell names the
//! number of the message it carries (`_q`). So the node knows, per mailbox, the last number it
//! took (its cursor), and a doorbell tells it whether it missed any:
//! - the next number: the message is taken from the doorbell as it is;
//! - a later one: one was missed (a doorbell published while the node was not subscribed): the
//!   mailbox is read after the cursor, in order, which takes this one too;
//! - an earlier one: already taken (a doorbell after a read), unless its mailbox was created
//!   again meanwhile (it expired, or Redis restarted without its data), which a read finds: the
//!   mailbox's last number is below the cursor, and it is read from the start.
//!
//! In both of the last cases the message in hand is taken after the read when the read did not
//! take it: its mailbox lost it (evicted under an evicting `maxmemory-policy`, or written to a
//! primary that was demoted before its replica had it), and the doorbell's copy is the only one.
//!
//! A message taken once is not taken again ([`Seen`] keeps ids until their deadline), so a
//! mailbox read from the start, or a message posted twice by a resent command, delivers nothing
//! twice. A message past its deadline is dropped and counted.
//!
//! Reads happen after every (re)subscription, on a gap, and at every check
//! ([`super::BusSettings::check_interval`]: the node's own and the broadcast mailbox), so a
//! message whose doorbell was lost still arrives within one check.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use redis::streams::StreamRangeReply;
use tokio::sync::mpsc;

use super::wire::{self, Letter, Seen};
use crate::bus::BusSettings;
use crate::model::BusMessage;
use crate::redis::connection::Conn;
use crate::rules;

/// Messages read from a mailbox per command.
const PAGE: usize = 256;

/// The node's receiver is gone: stop reading.
#[derive(Debug)]
pub(crate) struct Closed;

/// Called with every message before it is handed on (the sharded inbox forgets a session's
/// channel on its `Terminated`).
pub(crate) type Watch = Arc<dyn Fn(&BusMessage) + Send + Sync>;

/// How a message reached the node.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Doorbell,
    Mailbox,
}

/// One node's cursors over its mailboxes and the ids it has taken.
pub(crate) struct Intake {
    me: String,
    conn: Conn,
    tx: mpsc::Sender<BusMessage>,
    settings: BusSettings,
    /// Mailbox key → the number of the last message taken from it.
    cursors: HashMap<String, u64>,
    seen: Seen,
    /// Mailboxes a read failed for (Redis unreachable): read again at the next check.
    behind: HashSet<String>,
    watch: Option<Watch>,
    /// Whether live events are marked for verification ([`BusMessage::Event`]'s `verify`).
    verify: bool,
    /// When the mailboxes were last set to be read from their start (Unix ms; 0: never):
    /// a message past its deadline before then is dropped without a word (it was taken, or
    /// counted, when it was read before).
    reread_at_ms: u64,
}

impl Intake {
    /// The intake of node `me`, reading over `conn` and handing messages to `tx`.
    pub fn new(
        me: &str,
        conn: Conn,
        tx: mpsc::Sender<BusMessage>,
        settings: BusSettings,
    ) -> Intake {
        Intake {
            me: me.to_owned(),
            conn,
            tx,
            settings,
            cursors: HashMap::new(),
            seen: Seen::default(),
            behind: HashSet::new(),
            watch: None,
            verify: false,
            reread_at_ms: 0,
        }
    }

    /// Calls `watch` with every message taken.
    pub fn watch(&mut self, watch: Watch) {
        self.watch = Some(watch);
    }

    /// Marks (or not) the live events taken from now on for verification: the holder re-reads
    /// its log up to such an event before writing it, as events may have been missed just
    /// before (see the `sharded` module).
    pub fn verify_events(&mut self, verify: bool) {
        self.verify = verify;
    }

    /// Waits until the node's receiver is gone.
    pub async fn until_closed(&self) {
        self.tx.closed().await
    }

    /// Hands `msg` to the node as it is (not from a mailbox: `Resubscribed`).
    pub async fn hand(&self, msg: BusMessage) -> Result<(), Closed> {
        self.tx.send(msg).await.map_err(|_| Closed)
    }

    /// Starts `mailbox` after its last message now: what it holds from before (a node that ran
    /// with this id earlier, or broadcasts older than this node) is not this node's.
    pub async fn start_at_tail(&mut self, mailbox: &str) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        let last: StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(mailbox)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        let tail = last.ids.first().map(|e| wire::seq(&e.id)).unwrap_or(0);
        self.cursors.insert(mailbox.to_owned(), tail);
        Ok(())
    }

    /// Reads every mailbox from its start at its next read (after a switch to another primary;
    /// ids already taken are not taken again).
    pub fn read_from_start(&mut self) {
        for cursor in self.cursors.values_mut() {
            *cursor = 0;
        }
        self.reread_at_ms = rules::now_ms();
    }

    /// Forgets the cursors of the mailboxes `keep` rejects (sessions this node left).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.cursors.retain(|k, _| keep(k));
        self.behind.retain(|k| keep(k));
    }

    /// A doorbell rung on `mailbox`'s channel with `payload`; `for_me`: whether it is addressed
    /// to this node (a session channel carries every node's). A payload without a mailbox number
    /// (a live event, or a message of format 1) is handed on as it is.
    pub async fn rung(
        &mut self,
        mailbox: &str,
        for_me: bool,
        payload: &[u8],
    ) -> Result<(), Closed> {
        let letter = match wire::decode(payload) {
            Ok(letter) => letter,
            Err(e) => {
                tracing::warn!(error = %e, "bus message this node cannot read; ignored");
                return Ok(());
            }
        };
        let Some(n) = letter.entry.as_deref().map(wire::seq).filter(|n| *n > 0) else {
            if for_me {
                self.take(letter, Via::Doorbell).await?;
            }
            return Ok(());
        };
        match self.cursors.get(mailbox).copied() {
            Some(cursor) if n == cursor + 1 => {
                self.cursors.insert(mailbox.to_owned(), n);
                if for_me {
                    self.take(letter, Via::Doorbell).await?;
                }
                Ok(())
            }
            Some(cursor) if n <= cursor => {
                // Taken already, unless the mailbox began again. A message at or below the
                // cursor that this node never took says it did: the new mailbox may already
                // number as many messages as the cursor (its first one is `0-1` when the cursor
                // is 1), so a read after the cursor would skip them; it is read from its start
                // (what was taken before is not taken again).
                let fresh = letter.id.as_deref().is_some_and(|id| !self.seen.has(id));
                if for_me && fresh && !self.expired(&letter) {
                    tracing::info!(%mailbox, "a bus mailbox began again (it expired, or Redis lost it): reading it from its start");
                    self.cursors.insert(mailbox.to_owned(), 0);
                    self.catch_up(mailbox).await?;
                    self.take(letter, Via::Doorbell).await?;
                }
                Ok(())
            }
            _ => {
                self.catch_up(mailbox).await?;
                if for_me {
                    self.take(letter, Via::Doorbell).await?;
                }
                Ok(())
            }
        }
    }

    /// Reads `mailbox` after its cursor to its end and takes what is for this node. A failed
    /// read leaves the mailbox to the next check ([`Intake::check`]).
    pub async fn catch_up(&mut self, mailbox: &str) -> Result<(), Closed> {
        let known = self.cursors.get(mailbox).copied();
        let mut cursor = known.unwrap_or(0);
        let mut restarted = false;
        loop {
            let (tail, page) = match self.read(mailbox, cursor).await {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(error = %e, %mailbox, "could not read a bus mailbox; reading it again at the next check");
                    self.behind.insert(mailbox.to_owned());
                    self.cursors.insert(mailbox.to_owned(), cursor);
                    return Ok(());
                }
            };
            if tail < cursor && !restarted {
                tracing::info!(%mailbox, "a bus mailbox began again (it expired, or Redis lost it): reading it from its start");
                cursor = 0;
                restarted = true;
                continue;
            }
            let full = page.ids.len() >= PAGE;
            for entry in page.ids {
                let n = wire::seq(&entry.id);
                if n > cursor + 1 && known.is_some() && cursor > 0 {
                    let lost = n - cursor - 1;
                    tracing::warn!(%mailbox, lost, "bus messages were gone from a mailbox before this node read them (its cap or TTL passed)");
                    switchboard_telemetry::metrics::get().bus.lost.inc_by(lost);
                }
                cursor = cursor.max(n);
                self.cursors.insert(mailbox.to_owned(), cursor);
                let to: Option<String> = entry.get("to");
                if to.as_deref().is_some_and(|to| to != "*" && to != self.me) {
                    continue;
                }
                let Some(text) = entry.get::<Vec<u8>>("m") else {
                    continue;
                };
                match wire::decode(&text) {
                    Ok(letter) => self.take(letter, Via::Mailbox).await?,
                    Err(e) => {
                        tracing::warn!(error = %e, %mailbox, "bus message this node cannot read; ignored")
                    }
                }
            }
            if !full {
                break;
            }
        }
        self.cursors.insert(mailbox.to_owned(), cursor);
        self.behind.remove(mailbox);
        Ok(())
    }

    /// Whether every mailbox read so far succeeded (none waits for the next check).
    pub fn all_read(&self) -> bool {
        self.behind.is_empty()
    }

    /// The periodic check: reads `mailboxes` (the node's own and the broadcast one) and every
    /// mailbox a read failed for, and forgets ids past their deadline.
    pub async fn check(&mut self, mailboxes: &[String]) -> Result<(), Closed> {
        let mut due: Vec<String> = mailboxes.to_vec();
        due.extend(
            self.behind
                .iter()
                .filter(|m| !mailboxes.contains(m))
                .cloned(),
        );
        for mailbox in due {
            self.catch_up(&mailbox).await?;
        }
        self.seen.forget_until(rules::now_ms());
        Ok(())
    }

    /// The last number in `mailbox` (0 when it does not exist) and up to [`PAGE`] messages after
    /// `cursor`, in one round trip.
    async fn read(
        &self,
        mailbox: &str,
        cursor: u64,
    ) -> redis::RedisResult<(u64, StreamRangeReply)> {
        let mut p = redis::pipe();
        p.cmd("XREVRANGE")
            .arg(mailbox)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .cmd("XRANGE")
            .arg(mailbox)
            .arg(format!("(0-{cursor}"))
            .arg("+")
            .arg("COUNT")
            .arg(PAGE);
        let mut conn = self.conn.clone();
        let (last, page): (StreamRangeReply, StreamRangeReply) = p.query_async(&mut conn).await?;
        let tail = last.ids.first().map(|e| wire::seq(&e.id)).unwrap_or(0);
        Ok((tail, page))
    }

    fn expired(&self, letter: &Letter) -> bool {
        letter
            .deadline_ms
            .is_some_and(|deadline| deadline < rules::now_ms())
    }

    /// Hands a message on, once: not past its deadline, not taken before.
    async fn take(&mut self, letter: Letter, via: Via) -> Result<(), Closed> {
        let Some(mut msg) = letter.msg else {
            return Ok(());
        };
        let deadline = letter
            .deadline_ms
            .unwrap_or_else(|| rules::now_ms() + rules::millis(self.settings.message_ttl));
        if let Some(id) = &letter.id {
            if !self.seen.take(id, deadline) {
                return Ok(());
            }
        }
        if letter.deadline_ms.is_some() && deadline < rules::now_ms() {
            if deadline < self.reread_at_ms {
                return Ok(());
            }
            tracing::warn!(
                kind = kind(&msg),
                late_ms = rules::now_ms() - deadline,
                "a bus message reached this node after its deadline; dropped"
            );
            switchboard_telemetry::metrics::get().bus.expired.inc();
            return Ok(());
        }
        if via == Via::Mailbox {
            tracing::debug!(
                kind = kind(&msg),
                "bus message read from its mailbox (its doorbell was missed)"
            );
            switchboard_telemetry::metrics::get().bus.redelivered.inc();
        }
        if let BusMessage::Event(e) = &mut msg {
            e.verify = self.verify;
        }
        observe_delivery(&msg);
        if let Some(watch) = &self.watch {
            watch(&msg);
        }
        self.tx.send(msg).await.map_err(|_| Closed)
    }
}

/// The kind of a message, for logs.
fn kind(msg: &BusMessage) -> &'static str {
    match msg {
        BusMessage::Event(_) => "event",
        BusMessage::Takeover { .. } => "takeover",
        BusMessage::Reply { .. } => "reply",
        BusMessage::Cancel { .. } => "cancel",
        BusMessage::Forward(_) => "forward",
        BusMessage::ForwardMessage { .. } => "forward_message",
        BusMessage::ForwardNotify(_) => "forward_notify",
        BusMessage::ForwardDone { .. } => "forward_done",
        BusMessage::ForwardCancel { .. } => "forward_cancel",
        BusMessage::Resume { .. } => "resume",
        BusMessage::TaskInput { .. } => "task_input",
        BusMessage::Resubscribed {} => "resubscribed",
        BusMessage::Terminated { .. } => "terminated",
        BusMessage::Notify { .. } => "notify",
    }
}

/// Counts an event's time on the bus in `switchboard_bus_delivery_seconds{message="event"}`:
/// from its log position, whose first part is the Redis server's clock in milliseconds when the
/// append script ran, to now on this node's clock (nodes and Redis are expected to share time
/// through NTP; a negative difference counts as 0).
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
    let labels = switchboard_telemetry::metrics::BusLabels { message: "event" };
    switchboard_telemetry::metrics::get()
        .bus_delivery
        .get_or_create(&labels)
        .observe(rules::now_ms().saturating_sub(ms) as f64 / 1000.0);
}
