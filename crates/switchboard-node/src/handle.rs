//! The node's [`SessionHandle`]: an upstream's view of the client session, backed by the session
//! record in the store so every node sees the same upstream session ids.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use switchboard_store::{SessionRecord, SessionUpdate, Store};
use switchboard_upstream::placement::Placement;
use switchboard_upstream::{ClientPeer, SessionHandle};

use crate::peer::{NodePeer, Route};

use crate::placement::NodePlacement;
use crate::state::App;

/// A session record loaded for one request, writable through the store.
pub struct NodeSession {
    id: String,
    initialize_params: Value,
    upstream_sessions: Mutex<BTreeMap<String, String>>,
    owners: BTreeMap<String, String>,
    log_level: Option<String>,
    store: Arc<dyn Store>,
    app: App,
}

impl NodeSession {
    /// Wraps a loaded record.
    pub fn new(record: &SessionRecord, app: &App) -> Arc<NodeSession> {
        Arc::new(NodeSession {
            id: record.id.clone(),
            initialize_params: record.initialize_params.clone(),
            upstream_sessions: Mutex::new(record.upstream_sessions.clone()),
            owners: record.owners.clone(),
            log_level: record.log_level.clone(),
            store: app.store.clone(),
            app: app.clone(),
        })
    }
}

#[async_trait]
impl SessionHandle for NodeSession {
    fn session_id(&self) -> &str {
        &self.id
    }

    fn initialize_params(&self) -> &Value {
        &self.initialize_params
    }

    fn owner(&self, upstream: &str) -> Option<String> {
        self.owners.get(upstream).cloned()
    }

    fn standalone_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        let peer = NodePeer {
            app: self.app.clone(),
            sid: self.id.clone(),
            capabilities: self
                .initialize_params
                .get("capabilities")
                .cloned()
                .unwrap_or_default(),
            log_level: self.log_level.clone(),
            route: Route::Standalone {
                sid: self.id.clone(),
            },
            // Ends with the session on this node (the dispatcher ends its calls).
            cancel: self.app.calls.session_token(&self.id),
        };
        Some(Arc::new(peer))
    }

    fn placement(&self) -> Option<Arc<dyn Placement>> {
        Some(Arc::new(NodePlacement::new(self.app.clone())))
    }

    fn upstream_session(&self, upstream: &str) -> Option<String> {
        self.upstream_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(upstream)
            .cloned()
    }

    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String> {
        let update = SessionUpdate::UpstreamSession {
            upstream: upstream.to_owned(),
            session_id: id.clone(),
        };
        match self.store.update(&self.id, update).await {
            Ok(true) => {}
            Ok(false) => return Err("the client session has ended".into()),
            Err(e) => return Err(e.to_string()),
        }
        let mut map = self
            .upstream_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match id {
            Some(id) => map.insert(upstream.to_owned(), id),
            None => map.remove(upstream),
        };
        Ok(())
    }
}
