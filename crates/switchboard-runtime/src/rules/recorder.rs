//! The rules through the runtime alone: a bare replica and a sink that records the events it is
//! handed, so that a broken rule shows here before it shows through a host.

use std::sync::Arc;

use async_trait::async_trait;
use switchboard_store::eviction::EvictionWatch;
use switchboard_store::{BusMessage, Store};
use tokio::sync::mpsc;

use super::{Host, Settings, Written};
use crate::hub::StreamEvent;
use crate::pump::{Closing, OpenStream, Pump, Sink, Step, StreamTiming};
use crate::replica::{Beat, Replica, ReplicaState, Timing};

struct Bare {
    store: Arc<dyn Store>,
    state: ReplicaState,
    settings: Settings,
}

#[async_trait]
impl Replica for Bare {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
    fn state(&self) -> &ReplicaState {
        &self.state
    }
    async fn session_gone(&self, _sid: &str) {}
    async fn beat(self: Arc<Self>, _beat: Beat) {}
    async fn message(self: Arc<Self>, _message: BusMessage) {}
}

/// Hands on what the pump wrote, each event's data parsed.
struct Recorder(mpsc::UnboundedSender<Written>);

impl Recorder {
    fn send(&self, w: Written) -> Step {
        match self.0.send(w) {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }
}

impl Sink for Recorder {
    async fn open(&mut self) -> Step {
        self.send(Written::Other)
    }
    async fn event(&mut self, event: StreamEvent) -> Step {
        let message = serde_json::from_str(&event.data).expect("JSON");
        self.send(Written::Event(message))
    }
    async fn page(&mut self, events: Vec<StreamEvent>) -> Step {
        for e in events {
            if let Step::Stop = self.event(e).await {
                return Step::Stop;
            }
        }
        Step::Continue
    }
    async fn keepalive(&mut self, _at_recheck: bool) -> Step {
        self.send(Written::Keepalive)
    }
    async fn closed(&self) {
        self.0.closed().await;
    }
}

struct Runtime;

impl Host for Runtime {
    type Replica = Bare;

    fn replica(&self, store: Arc<dyn Store>, settings: Settings) -> Arc<Bare> {
        let timing = Timing {
            node_ttl: settings.node_ttl,
            heartbeat: settings.node_ttl / 3,
            keep_alive: settings.recheck,
            reaper: settings.recheck,
        };
        let eviction = EvictionWatch::new(Default::default(), "eviction.allow");
        Arc::new(Bare {
            store,
            state: ReplicaState::new(8, eviction, timing),
            settings,
        })
    }

    fn open(&self, replica: &Arc<Bare>, open: OpenStream) -> mpsc::UnboundedReceiver<Written> {
        let (tx, rx) = mpsc::unbounded_channel();
        let timing = StreamTiming {
            recheck: replica.settings.recheck,
            liveness_check: replica.settings.liveness_check,
        };
        let sink = Recorder(tx);
        let pump = Pump::new(replica.clone(), open, sink, timing, Closing::default());
        tokio::spawn(pump.run());
        rx
    }
}

crate::rules_tests!(Runtime);
