//! [`NodeSession`], the node's [`SessionHandle`]: an upstream's view of the client session,
//! backed by the session record in the store so every node sees the same upstream session ids;
//! and ending a session an upstream asked to end ([`end_now`]).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::Revision;
use switchboard_store::{SessionRecord, SessionUpdate, UpstreamSwap};

use switchboard_upstream::placement::Placement;
use switchboard_upstream::{ClientPeer, ClientState, LocalSession, SessionHandle};

use crate::cluster::ownership::NodePlacement;
use crate::exec::client_peer::{NodePeer, Route};
use crate::exec::outage::{call_wait, Deadline, Sequence};
use crate::state::App;
use switchboard_telemetry::trace::logged_session;

/// A session record loaded for one request: the in-process view ([`LocalSession`]) plus what
/// only a node knows (owners, log level, subscriptions and the upstream of each), writing
/// upstream session ids through to the store.
pub struct NodeSession {
    local: LocalSession,
    owners: BTreeMap<String, String>,
    log_level: Option<String>,
    /// The record's subscribed URIs, in order, and the upstream that accepted each.
    subscriptions: Vec<String>,
    subscription_upstreams: BTreeMap<String, String>,
    /// The member an aggregate noted as serving this request ([`SessionHandle::served_by`]).
    served_by: Mutex<Option<String>>,
    /// The revision the client negotiated: what the standalone peer shapes for.
    revision: Revision,
    app: App,
    /// Set when an upstream asked to end the session during a request: the request's runner
    /// ends it once the answer went out ([`end_now`]). `None` outside a request: at once.
    ending: Option<Arc<OnceLock<String>>>,
}

impl NodeSession {
    /// Wraps a loaded record for one request: [`SessionHandle::end_session`] only records the
    /// reason in `ending`, for the runner to end the session after the answer.
    pub fn for_request(
        record: &SessionRecord,
        app: &App,
        ending: Arc<OnceLock<String>>,
    ) -> Arc<NodeSession> {
        let mut session = NodeSession::build(record, app);
        session.ending = Some(ending);
        Arc::new(session)
    }

    /// Wraps a loaded record.
    pub fn new(record: &SessionRecord, app: &App) -> Arc<NodeSession> {
        Arc::new(NodeSession::build(record, app))
    }

    fn build(record: &SessionRecord, app: &App) -> NodeSession {
        let local = LocalSession::with_upstream_sessions(
            record.id.clone(),
            record.initialize_params.clone(),
            record.upstream_sessions.clone(),
        );
        NodeSession {
            local,
            owners: record.owners.clone(),
            log_level: record.log_level.clone(),
            subscriptions: record.subscriptions.clone(),
            subscription_upstreams: record.subscription_upstreams.clone(),
            served_by: Mutex::new(None),
            revision: crate::session::revision(record),
            app: app.clone(),
            ending: None,
        }
    }

    /// The upstream an aggregate noted as serving this request, if any.
    pub fn served(&self) -> Option<String> {
        self.served_by.lock().clone()
    }
}

/// Ends session `sid` cluster-wide on an upstream's request, over the same path as DELETE (the
/// store removes every key and tells every node, which close its streams, stop its calls and
/// delete its upstream sessions).
pub async fn end_now(app: &App, sid: &str, reason: &str) -> Result<(), String> {
    match app.store.delete_session(sid).await {
        Ok(existed) => {
            if existed {
                tracing::warn!(
                    session = %logged_session(sid),
                    reason,
                    "ended the session on an upstream's request"
                );
                crate::telemetry::session_deleted(sid);
            }
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

#[async_trait]
impl SessionHandle for NodeSession {
    fn session_id(&self) -> &str {
        self.local.session_id()
    }

    fn initialize_params(&self) -> &Value {
        self.local.initialize_params()
    }

    fn owner(&self, upstream: &str) -> Option<String> {
        self.owners.get(upstream).cloned()
    }

    fn standalone_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        let sid = self.session_id().to_owned();
        let peer = NodePeer {
            app: self.app.clone(),
            sid: sid.clone(),
            capabilities: Arc::new(
                self.initialize_params()
                    .get("capabilities")
                    .cloned()
                    .unwrap_or_default(),
            ),
            log_level: self.log_level.clone(),
            revision: self.revision,
            route: Route::Standalone,
            // Ends with the session on this node (the dispatcher ends its calls).
            cancel: self.app.replica.calls.session_token(&sid),
            no_requests: None,
            // Not a call's: each message may wait for the store as long as a call of the
            // upstream may take.
            sequence: Arc::new(Sequence::new(Deadline::Each(call_wait(&self.app)))),
        };
        Some(Arc::new(peer))
    }

    /// The session's log level, and the URIs the record says `upstream` accepted.
    fn client_state(&self, upstream: &str) -> ClientState {
        let subscriptions = self
            .subscriptions
            .iter()
            .filter(|uri| {
                self.subscription_upstreams.get(*uri).map(String::as_str) == Some(upstream)
            })
            .cloned()
            .collect();
        ClientState {
            log_level: self.log_level.clone(),
            subscriptions,
        }
    }

    fn served_by(&self, upstream: &str) {
        *self.served_by.lock() = Some(upstream.to_owned());
    }

    fn placement(&self) -> Option<Arc<dyn Placement>> {
        Some(Arc::new(NodePlacement::new(self.app.clone())))
    }

    fn upstream_session(&self, upstream: &str) -> Option<String> {
        self.local.upstream_session(upstream)
    }

    /// Written to the session record first (so every node sees it), then to this view.
    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String> {
        let update = SessionUpdate::UpstreamSession {
            upstream: upstream.to_owned(),
            session_id: id.clone(),
        };
        match self.app.store.update(self.session_id(), update).await {
            Ok(true) => self.local.set_upstream_session(upstream, id).await,
            Ok(false) => Err("the client session has ended".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// One store round trip; on a lost race this view takes the entries as stored.
    async fn swap_upstream_sessions(
        &self,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> Result<bool, String> {
        let sid = self.session_id();
        let swap = self
            .app
            .store
            .swap_upstream_sessions(sid, upstream, expected, entries.clone())
            .await
            .map_err(|e| e.to_string())?;
        match swap {
            UpstreamSwap::Swapped => {
                for (name, id) in entries {
                    self.local.set_upstream_session(&name, id).await?;
                }
                Ok(true)
            }
            UpstreamSwap::Changed(current) => {
                let names = entries.into_iter().map(|(n, _)| n);
                for name in names.chain(std::iter::once(upstream.to_owned())) {
                    let value = current.get(&name).cloned();
                    self.local.set_upstream_session(&name, value).await?;
                }
                Ok(false)
            }
            UpstreamSwap::Missing => Err("the client session has ended".into()),
        }
    }

    async fn end_session(&self, reason: &str) -> Result<(), String> {
        match &self.ending {
            Some(ending) => {
                let _ = ending.set(reason.to_owned());
                Ok(())
            }
            None => end_now(&self.app, self.session_id(), reason).await,
        }
    }
}
