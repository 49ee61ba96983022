//! [`LocalSession`]: a [`SessionHandle`] held in process memory, for tests of upstreams and for
//! tools that drive an upstream outside the cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;

use crate::upstream::SessionHandle;

/// Session state kept in this process only.
pub struct LocalSession {
    id: String,
    initialize_params: Arc<Value>,
    upstream_sessions: Mutex<BTreeMap<String, String>>,
    ended: Mutex<Option<String>>,
}

impl LocalSession {
    /// A session with the given id and client `initialize` params (a `Value`, or an
    /// `Arc<Value>` shared with its session record).
    pub fn new(id: impl Into<String>, initialize_params: impl Into<Arc<Value>>) -> LocalSession {
        LocalSession::with_upstream_sessions(id, initialize_params, BTreeMap::new())
    }

    /// A session that already knows some upstreams' session ids (upstream name → id).
    pub fn with_upstream_sessions(
        id: impl Into<String>,
        initialize_params: impl Into<Arc<Value>>,
        upstream_sessions: BTreeMap<String, String>,
    ) -> LocalSession {
        LocalSession {
            id: id.into(),
            initialize_params: initialize_params.into(),
            upstream_sessions: Mutex::new(upstream_sessions),
            ended: Mutex::new(None),
        }
    }

    /// The reason given to [`SessionHandle::end_session`], once it was called.
    pub fn ended(&self) -> Option<String> {
        self.ended.lock().clone()
    }
}

#[async_trait]
impl SessionHandle for LocalSession {
    fn session_id(&self) -> &str {
        &self.id
    }

    fn initialize_params(&self) -> &Value {
        &self.initialize_params
    }

    fn upstream_session(&self, upstream: &str) -> Option<String> {
        self.upstream_sessions.lock().get(upstream).cloned()
    }

    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String> {
        let mut map = self.upstream_sessions.lock();
        match id {
            Some(id) => map.insert(upstream.to_owned(), id),
            None => map.remove(upstream),
        };
        Ok(())
    }

    /// Remembers `reason` (see [`LocalSession::ended`]); the session's entries are forgotten.
    async fn end_session(&self, reason: &str) -> Result<(), String> {
        *self.ended.lock() = Some(reason.to_owned());
        self.upstream_sessions.lock().clear();
        Ok(())
    }
}
