//! A replica's periodic work and its bus inbox. All of it runs until the replica stops (not
//! merely drains: calls still running need a live heartbeat, their sessions must not expire,
//! and the answers to their server-to-client requests arrive through the inbox).
//!
//! - heartbeat (every `node_ttl / 3`): marks this replica alive, so others do not end its
//!   requests; the Redis backend also keeps its session index alive with it;
//! - keep-alive (every `idle_ttl / 3`, at most 10 s): sessions with a stream open or a call
//!   running here do not idle out; one that is gone meanwhile is closed here;
//! - reaper (every `idle_ttl`, at most 10 s; one replica at a time does the work): removes what
//!   is left of expired sessions and tells every replica they ended;
//! - inbox: live events for connections here, takeovers, client answers and cancellations for
//!   calls running here, the end of sessions;
//! - Redis's `maxmemory-policy` (every `eviction.check_interval`, default 30 s; not on the
//!   memory store): read again, a change logged ([`switchboard_store::eviction`], the rule the
//!   gateway applies too).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_store::eviction::Lapse;
use switchboard_store::BusMessage;
use switchboard_telemetry::trace::logged_session;
use tokio::sync::mpsc;
use tokio::time::{interval, MissedTickBehavior};

use crate::error::Error;
use crate::hub::StreamEvent;
use crate::node::Node;
use crate::routing;

/// Sessions reaped per pass at most.
const REAP_LIMIT: usize = 1000;

/// Checks Redis's `maxmemory-policy` (refusing one that may evict keys unless
/// `eviction.allow`: [`Error::Eviction`]) before anything is written, subscribes this replica's
/// inbox and sends its first heartbeat (so both are in place before it serves anything), then
/// starts the loops.
pub(crate) async fn start(node: &Arc<Node>) -> Result<(), Error> {
    node.eviction.check_at_start(&*node.store).await?;
    let inbox = node.store.subscribe().await?;
    let ttl = node.config.store.node_ttl;
    let sent = Instant::now();
    let live = node.store.heartbeat().await?;
    node.eviction.heartbeat_answered(sent, live, ttl);
    node.health.answered(ttl);
    let config = &node.config;
    if node.eviction.applies() {
        let period = config.eviction.check_interval;
        tokio::spawn(every(node.clone(), period, |node: Arc<Node>| async move {
            node.eviction.recheck(&*node.store).await
        }));
    }
    tokio::spawn(listen(node.clone(), inbox));
    tokio::spawn(every(node.clone(), config.heartbeat_interval(), heartbeat));
    tokio::spawn(every(node.clone(), config.touch_interval(), keep_alive));
    tokio::spawn(every(node.clone(), config.reaper_interval(), reap));
    Ok(())
}

async fn every<F, Fut>(node: Arc<Node>, period: Duration, mut f: F)
where
    F: FnMut(Arc<Node>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut tick = interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => f(node.clone()).await,
            () = node.stopped.cancelled() => return,
        }
    }
}

/// Marks this replica alive, and counts how long the store has answered ([`Node::is_dead`]): a
/// failed heartbeat, one that finds its predecessor lapsed, or one answered more than `node_ttl`
/// after the previous, restarts the count. A predecessor gone although it was answered well
/// within `node_ttl` is logged and counted as a probable eviction
/// ([`switchboard_store::eviction::Lapse::ProbablyEvicted`]) instead of a lapse.
async fn heartbeat(node: Arc<Node>) {
    let ttl = node.config.store.node_ttl;
    let sent = Instant::now();
    match tokio::time::timeout(ttl, node.store.heartbeat()).await {
        Ok(Ok(true)) => {
            node.eviction.heartbeat_answered(sent, true, ttl);
            node.health.answered(ttl);
        }
        Ok(Ok(false)) => {
            if node.eviction.heartbeat_answered(sent, false, ttl) != Lapse::ProbablyEvicted {
                tracing::warn!("this replica's heartbeat had lapsed (the store was unreachable, or the process stalled): replicas that found it dead meanwhile may have ended requests it runs");
            }
            node.health.failed();
            node.health.answered(ttl);
        }
        Ok(Err(e)) => {
            node.eviction.heartbeat_failed();
            node.health.failed();
            tracing::warn!(error = %e, "liveness heartbeat failed");
        }
        Err(_) => {
            node.eviction.heartbeat_failed();
            node.health.failed();
            tracing::warn!("liveness heartbeat not answered within node_ttl");
        }
    }
}

async fn keep_alive(node: Arc<Node>) {
    let mut sids = node.hub.sessions();
    sids.extend(node.running.sessions());
    sids.sort();
    sids.dedup();
    for sid in sids {
        match node.store.touch(&sid).await {
            Ok(true) => {}
            Ok(false) => node.end_session_here(&sid).await,
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(&sid), "could not keep a session alive")
            }
        }
    }
}

async fn reap(node: Arc<Node>) {
    match node.store.reap(REAP_LIMIT).await {
        Ok(ids) if !ids.is_empty() => tracing::info!(count = ids.len(), "expired sessions reaped"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "reaper pass failed"),
    }
}

/// Handles inbox messages until the replica stops or the inbox closes.
async fn listen(node: Arc<Node>, mut inbox: mpsc::Receiver<BusMessage>) {
    loop {
        let msg = tokio::select! {
            m = inbox.recv() => m,
            () = node.stopped.cancelled() => None,
        };
        let Some(msg) = msg else {
            return;
        };
        deliver(&node, msg).await;
    }
}

async fn deliver(node: &Node, msg: BusMessage) {
    match msg {
        BusMessage::Event(e) => {
            let event = StreamEvent {
                position: e.position,
                data: e.data,
                end: e.end,
            };
            node.hub
                .deliver(&e.sid, &e.stream, &e.holder, event, e.verify);
        }
        BusMessage::Takeover {
            sid,
            stream,
            holder,
        } => node.hub.close(&sid, &stream, &holder),
        BusMessage::Reply { sid, message, .. } => routing::deliver_reply(node, &sid, message).await,
        BusMessage::Cancel {
            sid,
            request_key,
            reason,
        } => routing::deliver_cancel(node, &sid, &request_key, reason).await,
        BusMessage::Resubscribed {} => {
            tracing::warn!("bus inbox subscribed again: open streams re-read their logs for live events missed meanwhile (messages to this replica were kept in its mailboxes and arrive in order)");
            node.hub.catch_up_all();
        }
        BusMessage::Terminated { sid } => node.end_session_here(&sid).await,
        // The gateway's own messages (forwarding, tasks, 2026-07-28 subscriptions).
        _ => {}
    }
}
