//! The upstream's own GET stream (MCP 2025-11-25, basic/transports, Listening for Messages from
//! the Server) against [`super::get_server`]: a session type with a recording standalone peer
//! stands in for the node, and a fake placement for the lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::get_server::{self, GetServer};
use super::{call, client_params, eventually, FakePeer};
use crate::placement::{Forwarded, Owner, Placement};
use crate::upstream::{ClientPeer, RequestContext, RpcError, SessionHandle, Upstream};
use crate::{HttpUpstream, LocalSession};

/// A client session with a standalone peer (as inside a node) and, optionally, a placement that
/// answers every lease question with a fixed owner (without one it acts as a single process).
struct ListeningSession {
    inner: LocalSession,
    standalone: Arc<FakePeer>,
    placement: Option<Arc<FixedPlacement>>,
}

impl ListeningSession {
    /// A session `id` whose standalone stream is `standalone`.
    fn open(
        id: &str,
        standalone: &Arc<FakePeer>,
        placement: Option<&Arc<FixedPlacement>>,
    ) -> Arc<dyn SessionHandle> {
        Arc::new(ListeningSession {
            inner: LocalSession::new(id, client_params()),
            standalone: standalone.clone(),
            placement: placement.cloned(),
        })
    }
}

/// A placement whose every answer is `owner`; records the lease names asked about.
struct FixedPlacement {
    owner: Owner,
    asked: Mutex<Vec<String>>,
}

impl FixedPlacement {
    fn new(owner: Owner) -> Arc<FixedPlacement> {
        Arc::new(FixedPlacement {
            owner,
            asked: Mutex::default(),
        })
    }
}

#[async_trait]
impl Placement for FixedPlacement {
    async fn owner(&self, _session: &dyn SessionHandle, name: &str) -> Result<Owner, RpcError> {
        self.asked.lock().unwrap().push(name.to_owned());
        Ok(self.owner.clone())
    }

    async fn take_over(
        &self,
        _session: &dyn SessionHandle,
        _: &str,
        _: &str,
    ) -> Result<Owner, RpcError> {
        unreachable!("an HTTP upstream forwards nothing")
    }

    async fn forward(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &Value,
        _: &RequestContext,
        _: std::time::Duration,
    ) -> Forwarded {
        unreachable!("an HTTP upstream forwards nothing")
    }
}

#[async_trait]
impl SessionHandle for ListeningSession {
    fn session_id(&self) -> &str {
        self.inner.session_id()
    }

    fn initialize_params(&self) -> &Value {
        self.inner.initialize_params()
    }

    fn upstream_session(&self, upstream: &str) -> Option<String> {
        self.inner.upstream_session(upstream)
    }

    fn standalone_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        Some(self.standalone.clone())
    }

    fn placement(&self) -> Option<Arc<dyn Placement>> {
        self.placement.clone().map(|p| p as Arc<dyn Placement>)
    }

    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String> {
        self.inner.set_upstream_session(upstream, id).await
    }
}

fn ctx(session: &Arc<dyn SessionHandle>) -> RequestContext {
    RequestContext {
        session_id: session.session_id().to_owned(),
        revision: switchboard_protocol::Revision::V2025_11_25,
        client_capabilities: std::sync::Arc::new(client_params()["capabilities"].clone()),
        progress_token: None,
        cancel: CancellationToken::new(),
        peer: FakePeer::quiet(),
        session: session.clone(),
        principal: crate::Principal::anonymous(),
    }
}

async fn echo(up: &HttpUpstream, session: &Arc<dyn SessionHandle>) {
    up.request(
        "tools/call",
        call("echo", json!({"text": "hi"})),
        ctx(session),
    )
    .await
    .unwrap();
}

async fn started(no_get: bool) -> (CancellationToken, Arc<GetServer>, HttpUpstream) {
    let stop = CancellationToken::new();
    let (server, url) = get_server::start(&stop, no_get).await;
    let up = HttpUpstream::new(
        "gs",
        &url,
        Vec::<(String, String)>::new(),
        Duration::from_secs(10),
    )
    .unwrap();
    (stop, server, up)
}

fn note(n: u64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": {"seq": n}}})
}

fn seqs(peer: &FakePeer) -> Vec<u64> {
    peer.notes()
        .iter()
        .filter_map(|n| n["params"]["data"]["seq"].as_u64())
        .collect()
}

#[tokio::test]
async fn notifications_reach_the_standalone_stream_in_order_and_requests_are_answered() {
    let (stop, server, up) = started(false).await;
    let peer = FakePeer::answering(|method, _| {
        assert_eq!(method, "roots/list");
        Ok(json!({"jsonrpc": "2.0", "id": 1, "result": {"roots": [{"uri": "file:///w"}]}}))
    });
    let lease = FixedPlacement::new(Owner::Here);
    let s = ListeningSession::open("c-get", &peer, Some(&lease));
    echo(&up, &s).await;
    assert!(eventually(|| server.open() == 1).await, "one GET stream");
    assert_eq!(lease.asked.lock().unwrap().as_slice(), ["gs#get"]);
    let get = &server.gets()[0];
    assert_eq!(get.headers["accept"], "text/event-stream");
    assert_eq!(get.headers["mcp-session-id"], "g-0");
    assert_eq!(get.headers["mcp-protocol-version"], "2025-11-25");
    assert!(!get.headers.contains_key("last-event-id"));
    for n in 1..=5 {
        server.push("g-0", note(n));
    }
    server.push(
        "g-0",
        json!({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}),
    );
    assert!(
        eventually(|| seqs(&peer).len() == 5).await,
        "{:?}",
        peer.notes()
    );
    assert_eq!(seqs(&peer), [1, 2, 3, 4, 5], "in order");
    assert!(eventually(|| server.answers().len() == 1).await);
    let (headers, answer) = &server.answers()[0];
    assert_eq!(answer["id"], "srv-1", "the upstream's own id");
    assert_eq!(answer["result"]["roots"][0]["uri"], "file:///w");
    assert_eq!(headers["mcp-session-id"], "g-0");
    assert_eq!(peer.requests.lock().unwrap()[0].0, "roots/list");
    // Later requests in the check window ask nothing and open nothing more.
    echo(&up, &s).await;
    assert_eq!(lease.asked.lock().unwrap().len(), 1);
    assert_eq!(server.gets().len(), 1);
    up.shutdown().await;
    assert!(eventually(|| server.open() == 0).await);
    stop.cancel();
}

#[tokio::test]
async fn a_broken_stream_is_resumed_with_the_last_event_id() {
    let (stop, server, up) = started(false).await;
    let peer = FakePeer::quiet();
    let s = ListeningSession::open("c-resume", &peer, None);
    echo(&up, &s).await;
    assert!(eventually(|| server.open() == 1).await);
    server.push("g-0", note(1));
    server.push("g-0", note(2));
    assert!(eventually(|| seqs(&peer).len() == 2).await);
    server.kick();
    assert!(eventually(|| server.open() == 0).await);
    // Sent while nobody listens: replayed after the resumption.
    server.push("g-0", note(3));
    assert!(eventually(|| server.open() == 1).await, "reconnected");
    server.push("g-0", note(4));
    assert!(
        eventually(|| seqs(&peer).len() == 4).await,
        "{:?}",
        seqs(&peer)
    );
    assert_eq!(seqs(&peer), [1, 2, 3, 4], "no loss, no duplicate");
    let gets = server.gets();
    assert_eq!(gets.len(), 2);
    assert_eq!(gets[1].headers["last-event-id"], "ev-2");
    // The position is stored for a node that takes over (at stop at the latest).
    up.session_ended("c-resume").await;
    assert_eq!(s.upstream_session("gs#get").as_deref(), Some("g-0 ev-4"));
    stop.cancel();
}

#[tokio::test]
async fn session_end_closes_the_stream() {
    let (stop, server, up) = started(false).await;
    let peer = FakePeer::quiet();
    let s = ListeningSession::open("c-end", &peer, None);
    echo(&up, &s).await;
    assert!(eventually(|| server.open() == 1).await);
    up.session_ended("c-end").await;
    assert!(
        eventually(|| server.open() == 0).await,
        "the upstream saw the close"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(server.gets().len(), 1, "no reconnection");
    stop.cancel();
}

#[tokio::test]
async fn a_405_is_remembered_and_never_retried() {
    let (stop, server, up) = started(true).await;
    let peer = FakePeer::quiet();
    let s = ListeningSession::open("c-405", &peer, None);
    echo(&up, &s).await;
    assert!(eventually(|| server.gets().len() == 1).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let other = ListeningSession::open("c-405-b", &peer, None);
    echo(&up, &other).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.gets().len(), 1, "one GET for the whole process");
    stop.cancel();
}

#[tokio::test]
async fn nothing_listens_without_the_lease_or_outside_a_node() {
    let (stop, server, up) = started(false).await;
    let peer = FakePeer::quiet();
    let elsewhere = FixedPlacement::new(Owner::Node("node-b".into()));
    let s = ListeningSession::open("c-other", &peer, Some(&elsewhere));
    echo(&up, &s).await;
    // A LocalSession has no standalone peer: nobody to deliver to.
    let local: Arc<dyn SessionHandle> = super::session("c-local");
    echo(&up, &local).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(elsewhere.asked.lock().unwrap().as_slice(), ["gs#get"]);
    assert!(server.gets().is_empty(), "no GET: {:?}", server.gets());
    stop.cancel();
}

#[tokio::test]
async fn a_404_stops_the_listener_until_the_next_request_has_a_new_session() {
    let (stop, server, up) = started(false).await;
    let peer = FakePeer::quiet();
    let s = ListeningSession::open("c-404", &peer, None);
    echo(&up, &s).await;
    assert!(eventually(|| server.open() == 1).await);
    server.expire_all();
    server.kick();
    assert!(
        eventually(|| server.gets().len() == 2).await,
        "one try on the old session"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(server.gets().len(), 2, "no retry loop after 404");
    // The next request finds the session lost: it fails saying so (the default policy), and the
    // new upstream session's GET stream is open right away (C06).
    let lost = up
        .request("tools/call", call("echo", json!({"text": "hi"})), ctx(&s))
        .await
        .unwrap_err();
    assert_eq!(
        lost.data.as_ref().unwrap()["reason"],
        "upstream_session_lost"
    );
    assert!(eventually(|| server.open() == 1).await);
    assert_eq!(
        server.gets().last().unwrap().headers["mcp-session-id"],
        "g-1"
    );
    up.shutdown().await;
    stop.cancel();
}
