//! Node-bound upstreams across nodes, in process: two nodes over one memory store, each with its
//! bus inbox running. A request of a session whose resource is owned by node A, made on node B,
//! runs on A; its progress notifications come back to B's peer in order; cancelling on B cancels
//! on A; when A stops, B takes over: within the request when A is stopping (any request) or dies
//! while the request is out (requests safe to run again), and the wait is bounded by the
//! upstream's timeout (case C08).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::exec::session_handle::NodeSession;
use crate::state::{App, AppState};
use crate::NodeConfig;
use async_trait::async_trait;
use serde_json::{json, Value};
use switchboard_protocol::Revision;
use switchboard_store::memory::MemoryStore;
use switchboard_store::{SessionRecord, Store, StoreConfig};
use switchboard_upstream::demo::DemoUpstream;
use switchboard_upstream::placement::{NodeBound, Owner};
use switchboard_upstream::{ClientPeer, PeerError, RequestContext, SessionHandle, Upstream};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Recorder(Mutex<Vec<Value>>);

#[async_trait]
impl ClientPeer for Recorder {
    async fn notify(&self, message: Value) -> Result<(), PeerError> {
        self.0.lock().unwrap().push(message);
        Ok(())
    }
    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError> {
        self.notify(message).await
    }
    async fn request(&self, _: &str, _: Value) -> Result<Value, PeerError> {
        Err(PeerError::Cancelled)
    }
    async fn send_raw(&self, message: Value) -> Result<(), PeerError> {
        self.notify(message).await
    }
}

/// The node-bound upstreams' `timeout_ms`.
const TIMEOUT: Duration = Duration::from_secs(10);

fn config() -> NodeConfig {
    NodeConfig {
        liveness_check_interval: Duration::from_millis(50),
        ..NodeConfig::default()
    }
}

async fn node(store: Arc<MemoryStore>) -> App {
    let upstream: Arc<dyn Upstream> =
        Arc::new(NodeBound::new(Arc::new(DemoUpstream::new()), TIMEOUT));
    let store: Arc<dyn Store> = store;
    let inbox = store.subscribe().await.unwrap();
    store.heartbeat().await.unwrap();
    let app = AppState::new(config(), store, upstream);
    tokio::spawn(switchboard_runtime::inbox::listen(
        app.clone(),
        inbox,
        tokio_util::sync::CancellationToken::new(),
    ));
    app
}

async fn session(app: &App) -> SessionRecord {
    let record = SessionRecord {
        id: switchboard_protocol::SessionId::generate().to_string(),
        revision: "2025-11-25".into(),
        initialize_params: json!({"capabilities": {}}).into(),
        initialized: true,
        log_level: None,
        subscriptions: vec![],
        subscription_upstreams: Default::default(),
        principal: "anonymous".into(),
        upstream_sessions: Default::default(),
        owners: Default::default(),
        created_ms: 0,
    };
    app.store.create_session(&record).await.unwrap();
    record
}

async fn reload(app: &App, sid: &str) -> SessionRecord {
    match app.store.begin(sid, None).await.unwrap() {
        switchboard_store::BeginOutcome::Ready(r) => r,
        other => panic!("{other:?}"),
    }
}

fn ctx(
    app: &App,
    record: &SessionRecord,
    peer: Arc<Recorder>,
    token: Option<Value>,
    cancel: CancellationToken,
) -> RequestContext {
    RequestContext {
        session_id: record.id.clone(),
        revision: Revision::LATEST,
        client_capabilities: std::sync::Arc::new(json!({})),
        progress_token: token,
        cancel,
        peer,
        session: NodeSession::new(record, app),
        principal: switchboard_upstream::Principal::anonymous(),
    }
}

#[tokio::test]
async fn a_request_made_on_b_runs_on_the_owner_a_and_streams_back_in_order() {
    let shared = MemoryStore::new(StoreConfig::default_for("a"));
    let a = node(shared.clone()).await;
    let b = node(shared.for_node("b")).await;
    let record = session(&a).await;

    // A touches the upstream first and becomes the owner.
    let peer_a = Arc::new(Recorder::default());
    let placement = NodeSession::new(&record, &a).placement().unwrap();
    assert_eq!(
        placement
            .owner(&*NodeSession::new(&record, &a), "demo")
            .await
            .unwrap(),
        Owner::Here
    );

    // B sees A as the owner and forwards; the countdown's progress comes back to B's peer.
    let record_b = reload(&b, &record.id).await;
    assert_eq!(record_b.owners.get("demo").map(String::as_str), Some("a"));
    let peer_b = Arc::new(Recorder::default());
    let args = json!({"name": "countdown", "arguments": {"n": 3, "interval_ms": 30}});
    let up = b.upstream.clone();
    let result = up
        .request(
            "tools/call",
            args,
            ctx(
                &b,
                &record_b,
                peer_b.clone(),
                Some(json!("t")),
                CancellationToken::new(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "countdown finished");
    let seen: Vec<i64> = peer_b
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|m| m["params"]["progress"].as_i64().unwrap())
        .collect();
    assert_eq!(seen, vec![1, 2, 3], "progress relayed in order");
    assert!(peer_a.0.lock().unwrap().is_empty());
}

#[tokio::test]
async fn cancelling_on_the_origin_cancels_on_the_owner() {
    let shared = MemoryStore::new(StoreConfig::default_for("a"));
    let a = node(shared.clone()).await;
    let b = node(shared.for_node("b")).await;
    let record = session(&a).await;
    let placement = NodeSession::new(&record, &a).placement().unwrap();
    placement
        .owner(&*NodeSession::new(&record, &a), "demo")
        .await
        .unwrap();
    let record_b = reload(&b, &record.id).await;
    let cancel = CancellationToken::new();
    let args = json!({"name": "countdown", "arguments": {"n": 100, "interval_ms": 50}});
    let call = b.upstream.request(
        "tools/call",
        args,
        ctx(
            &b,
            &record_b,
            Arc::new(Recorder::default()),
            None,
            cancel.clone(),
        ),
    );
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(a.replica.calls.count(), 1, "the call runs on the owner");
        cancel.cancel();
    };
    let (outcome, ()) = tokio::join!(call, canceller);
    assert_eq!(
        outcome.unwrap_err().code,
        switchboard_protocol::codes::REQUEST_ABORTED
    );
    for _ in 0..100 {
        if a.replica.calls.count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the owner's call was not cancelled");
}

#[tokio::test]
async fn a_dead_owner_is_taken_over() {
    let shared = MemoryStore::new(StoreConfig {
        node_ttl: Duration::from_millis(100),
        ..StoreConfig::default_for("a")
    });
    let a = node(shared.clone()).await;
    let b = node(shared.for_node("b")).await;
    let record = session(&a).await;
    let placement = NodeSession::new(&record, &a).placement().unwrap();
    placement
        .owner(&*NodeSession::new(&record, &a), "demo")
        .await
        .unwrap();
    drop(a); // A stops heartbeating.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let record_b = reload(&b, &record.id).await;
    let handle = NodeSession::new(&record_b, &b);
    assert_eq!(
        handle
            .placement()
            .unwrap()
            .owner(&*handle, "demo")
            .await
            .unwrap(),
        Owner::Here,
        "B takes over"
    );
    assert_eq!(
        reload(&b, &record.id)
            .await
            .owners
            .get("demo")
            .map(String::as_str),
        Some("b")
    );
}

/// Records the client notifications it gets.
struct Noted {
    seen: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Upstream for Noted {
    fn name(&self) -> &str {
        "noted"
    }
    fn capabilities(&self) -> Value {
        json!({})
    }
    fn server_info(&self) -> Value {
        json!({"name": "noted"})
    }
    async fn request(
        &self,
        _: &str,
        _: Value,
        _: RequestContext,
    ) -> Result<Value, switchboard_upstream::RpcError> {
        Ok(json!({}))
    }
    async fn notify(&self, method: &str, _: Value, _: Arc<dyn SessionHandle>) {
        self.seen.lock().unwrap().push(method.to_owned());
    }
}

async fn noted_node(store: Arc<MemoryStore>) -> (App, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream: Arc<dyn Upstream> = Arc::new(NodeBound::new(
        Arc::new(Noted { seen: seen.clone() }),
        TIMEOUT,
    ));
    let store: Arc<dyn Store> = store;
    let inbox = store.subscribe().await.unwrap();
    store.heartbeat().await.unwrap();
    let app = AppState::new(config(), store, upstream);
    tokio::spawn(switchboard_runtime::inbox::listen(
        app.clone(),
        inbox,
        tokio_util::sync::CancellationToken::new(),
    ));
    (app, seen)
}

#[tokio::test]
async fn client_notifications_reach_the_owner_node() {
    let shared = MemoryStore::new(StoreConfig::default_for("a"));
    let (a, seen_a) = noted_node(shared.clone()).await;
    let (b, seen_b) = noted_node(shared.for_node("b")).await;
    let record = session(&a).await;
    let handle = NodeSession::new(&record, &a);
    handle
        .placement()
        .unwrap()
        .owner(&*handle, "noted")
        .await
        .unwrap();
    let record_b = reload(&b, &record.id).await;
    b.upstream
        .notify(
            "notifications/roots/list_changed",
            json!({}),
            NodeSession::new(&record_b, &b),
        )
        .await;
    for _ in 0..100 {
        if !seen_a.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *seen_a.lock().unwrap(),
        vec!["notifications/roots/list_changed".to_owned()],
        "delivered on the owner"
    );
    assert!(
        seen_b.lock().unwrap().is_empty(),
        "not on the node that received it"
    );
}

/// Answers every request with the node it ran on.
struct Where {
    node: String,
}

#[async_trait]
impl Upstream for Where {
    fn name(&self) -> &str {
        "where"
    }
    fn capabilities(&self) -> Value {
        json!({"tools": {}})
    }
    fn server_info(&self) -> Value {
        json!({"name": "where"})
    }
    async fn request(
        &self,
        method: &str,
        _: Value,
        _: RequestContext,
    ) -> Result<Value, switchboard_upstream::RpcError> {
        Ok(json!({"ran_on": self.node, "method": method}))
    }
}

/// A node of `store` serving [`Where`] node-bound with `timeout`; its bus inbox runs only when
/// `inbox` (a node without one takes no forwarded request, like a process that hangs or died).
async fn where_node(store: Arc<MemoryStore>, timeout: Duration, inbox: bool) -> App {
    let node = store.config().node_id.clone();
    let upstream: Arc<dyn Upstream> = Arc::new(NodeBound::new(Arc::new(Where { node }), timeout));
    let store: Arc<dyn Store> = store;
    let messages = store.subscribe().await.unwrap();
    store.heartbeat().await.unwrap();
    let app = AppState::new(config(), store, upstream);
    if inbox {
        tokio::spawn(switchboard_runtime::inbox::listen(
            app.clone(),
            messages,
            tokio_util::sync::CancellationToken::new(),
        ));
    }
    app
}

/// A session whose `where` resource node `owner` holds.
async fn owned_by(owner: &App) -> SessionRecord {
    let record = session(owner).await;
    let handle = NodeSession::new(&record, owner);
    let placement = handle.placement().unwrap();
    assert_eq!(
        placement.owner(&*handle, "where").await.unwrap(),
        Owner::Here
    );
    record
}

/// Sends `method` of `where` through node `via` for the session.
async fn ask_where(
    via: &App,
    record: &SessionRecord,
    method: &str,
) -> Result<Value, switchboard_upstream::RpcError> {
    let record = reload(via, &record.id).await;
    let ctx = ctx(
        via,
        &record,
        Arc::new(Recorder::default()),
        None,
        CancellationToken::new(),
    );
    via.upstream.request(method, json!({}), ctx).await
}

/// C08: an owner that is stopping (draining) runs no forwarded request: it answers "moved" at
/// once and the origin claims the resource and runs the request itself, `tools/call` included
/// (the owner never ran it); later requests go to the new owner.
#[tokio::test]
async fn a_stopping_owner_hands_a_request_back_to_the_origin_which_runs_it() {
    let shared = MemoryStore::new(StoreConfig::default_for("a"));
    let a = where_node(shared.clone(), TIMEOUT, true).await;
    let b = where_node(shared.for_node("b"), TIMEOUT, true).await;
    let record = owned_by(&a).await;
    assert_eq!(
        ask_where(&b, &record, "tools/call").await.unwrap()["ran_on"],
        "a",
        "a live owner runs it"
    );
    a.shutdown.cancel(); // A drains.
    let began = std::time::Instant::now();
    let out = ask_where(&b, &record, "tools/call").await.unwrap();
    assert_eq!(out["ran_on"], "b", "run by the origin: {out}");
    assert!(
        began.elapsed() < Duration::from_millis(500),
        "no waiting for A's heartbeat: {:?}",
        began.elapsed()
    );
    let owners = reload(&b, &record.id).await.owners;
    assert_eq!(owners.get("where").map(String::as_str), Some("b"));
    assert_eq!(a.replica.calls.count(), 0);
}

/// C08: an owner that dies (no answer, then its heartbeat lapses) while a request is out: a
/// `tools/list` runs again on the origin within the same request; a `tools/call`, which may have
/// run, fails with -32006 naming the upstream and the node, and the next request runs on a live
/// node.
#[tokio::test]
async fn a_dead_owner_is_replaced_within_a_list_but_not_within_a_call() {
    let shared = MemoryStore::new(StoreConfig {
        node_ttl: Duration::from_millis(300),
        ..StoreConfig::default_for("a")
    });
    let a = where_node(shared.clone(), TIMEOUT, false).await;
    let b = where_node(shared.for_node("b"), TIMEOUT, true).await;
    let (listed, called) = (owned_by(&a).await, owned_by(&a).await);
    let (list, call) = tokio::join!(
        ask_where(&b, &listed, "tools/list"),
        ask_where(&b, &called, "tools/call")
    );
    assert_eq!(list.unwrap()["ran_on"], "b", "the list ran again on b");
    let err = call.unwrap_err();
    assert_eq!(err.code, switchboard_protocol::codes::UPSTREAM_UNAVAILABLE);
    assert!(
        err.message
            .starts_with("upstream `where` is unavailable: node a "),
        "{}",
        err.message
    );
    let next = ask_where(&b, &called, "tools/call").await.unwrap();
    assert_eq!(next["ran_on"], "b", "the next request runs on a live node");
    drop(a);
}

/// C08: the wait for an owner that is alive but never answers is bounded by the upstream's
/// timeout: -32005 naming the upstream.
#[tokio::test]
async fn the_wait_for_a_silent_owner_is_bounded_by_the_upstream_timeout() {
    let shared = MemoryStore::new(StoreConfig::default_for("a"));
    let a = where_node(shared.clone(), TIMEOUT, false).await;
    let b = where_node(shared.for_node("b"), Duration::from_millis(300), true).await;
    let record = owned_by(&a).await;
    let began = std::time::Instant::now();
    let err = ask_where(&b, &record, "tools/list").await.unwrap_err();
    assert_eq!(err.code, switchboard_protocol::codes::UPSTREAM_TIMEOUT);
    assert_eq!(
        err.message,
        "upstream `where` did not answer tools/list within 300 ms"
    );
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    drop(a);
}
