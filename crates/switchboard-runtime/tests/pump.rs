//! The stream rules of the replica runtime, once for both of its hosts (the gateway node and
//! library mode frame events differently, through their `Sink`s, but run this pump): against
//! the memory store, with a sink that records what it was handed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_protocol::StreamId;
use switchboard_runtime::pump::{Closing, OpenStream, Pump, Sink, Step, StreamTiming};
use switchboard_runtime::{Beat, Replica, ReplicaState, StreamEvent, Timing};
use switchboard_store::eviction::EvictionWatch;
use switchboard_store::{
    BusMessage, InflightRequest, MemoryStore, Replay, RunningRequest, SessionRecord, Store,
    StoreConfig,
};
use tokio::sync::mpsc;

/// How long any one expected write may take.
const WAIT: Duration = Duration::from_secs(5);

const NODE_TTL: Duration = Duration::from_millis(100);

struct Host {
    store: Arc<dyn Store>,
    state: ReplicaState,
}

#[async_trait]
impl Replica for Host {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
    fn state(&self) -> &ReplicaState {
        &self.state
    }
    fn busy_sessions(&self) -> Vec<String> {
        Vec::new()
    }
    async fn session_gone(&self, _sid: &str) {}
    async fn beat(self: Arc<Self>, _beat: Beat) {}
    async fn message(self: Arc<Self>, _message: BusMessage) {}
}

/// What the pump handed the sink.
#[derive(Debug, PartialEq)]
enum Written {
    Opened,
    Event(String),
    Keepalive,
}

struct Recorder(mpsc::UnboundedSender<Written>);

impl Sink for Recorder {
    async fn open(&mut self) -> Step {
        self.send(Written::Opened)
    }
    async fn event(&mut self, event: StreamEvent) -> Step {
        self.send(Written::Event(event.data))
    }
    async fn page(&mut self, events: Vec<StreamEvent>) -> Step {
        for e in events {
            if let Step::Stop = self.send(Written::Event(e.data)) {
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

impl Recorder {
    fn send(&self, w: Written) -> Step {
        match self.0.send(w) {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }
}

struct Rig {
    memory: Arc<MemoryStore>,
    host: Arc<Host>,
    sid: String,
}

async fn rig() -> Rig {
    let mut config = StoreConfig::default_for("a");
    config.node_ttl = NODE_TTL;
    let memory = MemoryStore::new(config);
    let store: Arc<dyn Store> = memory.for_node("a");
    let sid = switchboard_protocol::SessionId::generate()
        .as_str()
        .to_owned();
    let record = SessionRecord {
        id: sid.clone(),
        revision: "2025-11-25".into(),
        initialize_params: Arc::new(serde_json::Value::Null),
        initialized: true,
        log_level: None,
        subscriptions: Vec::new(),
        principal: "anonymous".into(),
        upstream_sessions: Default::default(),
        owners: Default::default(),
        created_ms: 0,
    };
    store
        .create_session(&record)
        .await
        .expect("create the session");
    let eviction = EvictionWatch::new(Default::default(), "eviction.allow");
    let timing = Timing {
        node_ttl: NODE_TTL,
        heartbeat: NODE_TTL / 3,
        keep_alive: Duration::from_secs(1),
        reaper: Duration::from_secs(1),
    };
    let host = Arc::new(Host {
        store,
        state: ReplicaState::new(8, eviction, timing),
    });
    Rig { memory, host, sid }
}

impl Rig {
    /// Starts the pump of `stream` (claimed for a fresh holder, its replay read from the log
    /// after `after`); returns what it writes.
    async fn open(
        &self,
        stream: &str,
        after: &str,
        watch: Option<RunningRequest>,
        recheck: Duration,
    ) -> (mpsc::UnboundedReceiver<Written>, String) {
        let holder = format!("a/{}", rand_suffix());
        let conn = self.host.hub().register(&self.sid, stream, &holder);
        let store = self.host.store();
        let _ = store.claim(&self.sid, stream, &holder).await;
        let replay = match store.replay(&self.sid, stream, after, 256).await {
            Ok(Replay::Events(events)) => events,
            _ => Vec::new(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let open = OpenStream {
            sid: self.sid.clone(),
            stream: stream.to_owned(),
            holder: holder.clone(),
            conn,
            replay,
            after: after.to_owned(),
            watch,
            close_after_replay: false,
            resumed_at: None,
        };
        let timing = StreamTiming {
            recheck,
            liveness_check: Duration::from_millis(50),
        };
        let pump = Pump::new(
            self.host.clone(),
            open,
            Recorder(tx),
            timing,
            Closing::default(),
        );
        tokio::spawn(pump.run());
        (rx, holder)
    }

    /// Appends `data` to the stream's log; returns its position.
    async fn append(&self, stream: &str, data: &str, end: bool) -> String {
        let appended = self.host.store().append(&self.sid, stream, data, end).await;
        appended.expect("append").position
    }
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The next write that is not a keep-alive, within [`WAIT`] in all; `None` once the pump has
/// ended.
async fn next_event(rx: &mut mpsc::UnboundedReceiver<Written>) -> Option<Written> {
    let next = async {
        loop {
            match rx.recv().await {
                Some(Written::Keepalive) => continue,
                w => return w,
            }
        }
    };
    match tokio::time::timeout(WAIT, next).await {
        Ok(w) => w,
        Err(_) => panic!("nothing but keep-alives written within {WAIT:?}"),
    }
}

fn event(data: &str) -> Option<Written> {
    Some(Written::Event(data.to_owned()))
}

#[tokio::test]
async fn replay_then_live_events_each_once_in_order_until_the_end_event() {
    let r = rig().await;
    let stream = StreamId::generate().as_str().to_owned();
    r.append(&stream, "e1", false).await;
    r.append(&stream, "e2", false).await;
    let (mut rx, holder) = r.open(&stream, "0-0", None, Duration::from_secs(60)).await;
    assert_eq!(next_event(&mut rx).await, Some(Written::Opened));
    assert_eq!(next_event(&mut rx).await, event("e1"));
    assert_eq!(next_event(&mut rx).await, event("e2"));
    let p2 = r
        .host
        .store()
        .replay(&r.sid, &stream, "0-0", 10)
        .await
        .unwrap();
    let Replay::Events(logged) = p2 else {
        panic!("the log");
    };
    let again = StreamEvent::from(logged[1].clone());
    r.host.hub().deliver(&r.sid, &stream, &holder, again);
    let p3 = r.append(&stream, "e3", false).await;
    let live = StreamEvent {
        position: p3,
        data: "e3".into(),
        end: false,
    };
    r.host.hub().deliver(&r.sid, &stream, &holder, live);
    assert_eq!(
        next_event(&mut rx).await,
        event("e3"),
        "e2 again is skipped"
    );
    let p4 = r.append(&stream, "the answer", true).await;
    let end = StreamEvent {
        position: p4,
        data: "the answer".into(),
        end: true,
    };
    r.host.hub().deliver(&r.sid, &stream, &holder, end);
    assert_eq!(next_event(&mut rx).await, event("the answer"));
    assert_eq!(
        next_event(&mut rx).await,
        None,
        "the end event ends the stream"
    );
}

#[tokio::test]
async fn a_recheck_writes_what_the_bus_did_not_deliver() {
    let r = rig().await;
    let stream = StreamId::generate().as_str().to_owned();
    r.append(&stream, "e1", false).await;
    let (mut rx, _holder) = r
        .open(&stream, "0-0", None, Duration::from_millis(50))
        .await;
    assert_eq!(next_event(&mut rx).await, Some(Written::Opened));
    assert_eq!(next_event(&mut rx).await, event("e1"));
    r.append(&stream, "missed by the bus", false).await;
    assert_eq!(next_event(&mut rx).await, event("missed by the bus"));
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(Written::Keepalive)) => {}
        other => panic!("a keep-alive at the next recheck, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stream_whose_log_is_gone_closes_at_its_recheck() {
    let r = rig().await;
    let stream = StreamId::generate().as_str().to_owned();
    // A resumed position in a stream the store does not know: not a fresh POST stream.
    let (mut rx, _holder) = r
        .open(&stream, "5-0", None, Duration::from_millis(50))
        .await;
    assert_eq!(next_event(&mut rx).await, Some(Written::Opened));
    assert_eq!(
        next_event(&mut rx).await,
        None,
        "closed for its client to hear why"
    );
}

#[tokio::test]
async fn a_request_of_a_dead_replica_ends_with_its_error() {
    let r = rig().await;
    let stream = StreamId::generate().as_str().to_owned();
    let b: Arc<dyn Store> = r.memory.for_node("b");
    let inflight = InflightRequest {
        request_key: "7".into(),
        stream: stream.clone(),
        node: "b".into(),
        holder: "b/1".into(),
    };
    b.begin(&r.sid, Some(&inflight))
        .await
        .expect("b registers its request");
    r.append(&stream, "progress", false).await;
    // This replica has reached the store without a gap for two node_ttls; b never beat.
    r.host.health().answered(true, Duration::from_secs(60));
    tokio::time::sleep(NODE_TTL * 2 + Duration::from_millis(20)).await;
    let watch = RunningRequest {
        node: "b".into(),
        request_key: "7".into(),
    };
    let (mut rx, _holder) = r
        .open(&stream, "0-0", Some(watch), Duration::from_secs(60))
        .await;
    assert_eq!(next_event(&mut rx).await, Some(Written::Opened));
    assert_eq!(next_event(&mut rx).await, event("progress"));
    let Some(Written::Event(last)) = next_event(&mut rx).await else {
        panic!("the lost request's error");
    };
    let last: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["id"], 7);
    assert_eq!(last["error"]["code"], -32004);
    let message = last["error"]["message"].as_str().unwrap();
    assert!(message.contains("node b running it stopped"), "{message}");
    assert_eq!(next_event(&mut rx).await, None);
}
