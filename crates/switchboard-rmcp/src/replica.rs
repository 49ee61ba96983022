//! This replica as the shared runtime sees it ([`switchboard_runtime::Replica`]): the runtime
//! runs its heartbeat, keep-alive, reaper and bus inbox; what is library mode's own is here.
//!
//! - A heartbeat that found this replica's key lapsed is logged (replicas that found it dead
//!   meanwhile may have ended requests it runs); the runtime's [`StoreHealth`] restarts its count,
//!   which the runtime's dead-replica rule reads.
//! - Client answers and cancellations for calls here go to their rmcp session (`routing`); the
//!   end of a session closes it here.
//!
//! [`StoreHealth`]: switchboard_runtime::StoreHealth

use std::sync::Arc;

use async_trait::async_trait;
use switchboard_runtime::{Beat, Replica, ReplicaState};
use switchboard_store::eviction::Lapse;
use switchboard_store::{BusMessage, Store};

use crate::node::Node;
use crate::routing;

#[async_trait]
impl Replica for Node {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn state(&self) -> &ReplicaState {
        &self.replica
    }

    async fn until_cut_off(&self) {
        self.stopped.cancelled().await;
    }

    async fn session_gone(&self, sid: &str) {
        self.end_session_here(sid).await;
    }

    async fn beat(self: Arc<Self>, beat: Beat) {
        if let Beat::Answered {
            live: false, lapse, ..
        } = beat
        {
            if lapse != Lapse::ProbablyEvicted {
                tracing::warn!("this replica's heartbeat had lapsed (the store was unreachable, or the process stalled): replicas that found it dead meanwhile may have ended requests it runs");
            }
        }
    }

    async fn message(self: Arc<Self>, message: BusMessage) {
        match message {
            BusMessage::Reply { sid, message, .. } => {
                routing::deliver_reply(&self, &sid, message).await;
            }
            BusMessage::Cancel {
                sid,
                request_key,
                reason,
            } => routing::deliver_cancel(&self, &sid, &request_key, reason).await,
            BusMessage::Terminated { sid } => self.end_session_here(&sid).await,
            // The gateway's own messages (forwarding, tasks, 2026-07-28 subscriptions).
            _ => {}
        }
    }
}
