//! This replica's bus inbox: what other replicas (and the store) send here. The runtime handles
//! what concerns the streams held here (live events, takeovers, a resubscribed inbox); every
//! other message goes to [`Replica::message`] (client answers, cancellations, the end of a
//! session, and the gateway's own: forwarded calls, parked requests, tasks).

use std::sync::Arc;

use switchboard_store::BusMessage;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::hub::{Hub, StreamEvent};
use crate::replica::Replica;

/// Handles inbox messages until the inbox closes or `stop` fires (the inbox stays open while a
/// replica drains: answers to server requests of still-running calls arrive here).
pub async fn listen<R: Replica>(
    replica: Arc<R>,
    mut inbox: mpsc::Receiver<BusMessage>,
    stop: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            m = inbox.recv() => m,
            () = stop.cancelled() => None,
        };
        let Some(message) = message else {
            return;
        };
        if let Some(rest) = for_streams(replica.hub(), message) {
            replica.clone().message(rest).await;
        }
    }
}

/// Hands a live event or a takeover to the hub, and makes every held stream re-read its log when
/// the inbox was subscribed again; returns any other message.
pub fn for_streams(hub: &Hub, message: BusMessage) -> Option<BusMessage> {
    match message {
        BusMessage::Event(e) => {
            let event = StreamEvent {
                position: e.position,
                data: e.data,
                end: e.end,
            };
            if e.verify {
                hub.deliver_verified(&e.sid, &e.stream, &e.holder, event);
            } else {
                hub.deliver(&e.sid, &e.stream, &e.holder, event);
            }
        }
        BusMessage::Takeover {
            sid,
            stream,
            holder,
        } => hub.close(&sid, &stream, &holder),
        BusMessage::Resubscribed {} => {
            switchboard_telemetry::metrics::get()
                .counters
                .inbox_resubscribed
                .inc();
            tracing::warn!("bus inbox subscribed again: open streams re-read their event logs for live events missed meanwhile (messages to this replica were kept in its mailboxes and arrive in order)");
            hub.catch_up_all();
        }
        other => return Some(other),
    }
    None
}
