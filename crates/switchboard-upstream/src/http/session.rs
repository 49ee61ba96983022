//! The upstream side of one client session: what is stored in the client's session record, and
//! the small node-local memory of it.
//!
//! Stored form (the value of [`crate::SessionHandle::upstream_session`] for this upstream's
//! name): `"<upstream Mcp-Session-Id>|<revision the upstream negotiated>"`, with an empty id for
//! a stateless server that minted none (e.g. `"|2025-06-18"`). Session ids are visible ASCII and
//! may contain `|`; revisions never do, so the value is split at its LAST `|`. A present value
//! means "initialized"; anything unreadable is treated as absent and the session is initialized
//! again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One upstream session as stored in the client's session record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UpstreamSession {
    /// The upstream's `Mcp-Session-Id` (MCP 2025-11-25, basic/transports, Session Management);
    /// `None` for a server that minted none.
    pub id: Option<String>,
    /// The revision the upstream answered in `initialize`, sent as `MCP-Protocol-Version` on
    /// every later request (MCP 2025-11-25, basic/transports, Protocol Version Header).
    pub revision: String,
}

impl UpstreamSession {
    /// `"<id>|<revision>"`.
    pub fn encode(&self) -> String {
        format!("{}|{}", self.id.as_deref().unwrap_or(""), self.revision)
    }

    /// Reads [`UpstreamSession::encode`]'s form; `None` when it is not that.
    pub fn decode(stored: &str) -> Option<UpstreamSession> {
        let (id, revision) = stored.rsplit_once('|')?;
        if revision.is_empty() {
            return None;
        }
        Some(UpstreamSession {
            id: (!id.is_empty()).then(|| id.to_owned()),
            revision: revision.to_owned(),
        })
    }
}

/// How many client sessions the node-local memory keeps at most; past that the least recently
/// used is forgotten (which only loses the best-effort DELETE at session end).
const CAPACITY: usize = 4096;

struct Entry {
    session: Option<UpstreamSession>,
    lock: Arc<tokio::sync::Mutex<()>>,
    used: Instant,
}

/// Node-local memory, per client session id: the upstream session this process last learned or
/// created (for `session_ended`, which can no longer read the record, and for concurrent first
/// requests on this node), and a lock so that one process initializes a client session's
/// upstream side only once at a time. Bounded by [`CAPACITY`].
#[derive(Default)]
pub(crate) struct Known {
    map: Mutex<HashMap<String, Entry>>,
}

impl Known {
    /// The initialization lock of `sid`.
    pub fn lock_for(&self, sid: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.with_entry(sid, |e| e.lock.clone())
    }

    /// The upstream session this process knows for `sid`.
    pub fn get(&self, sid: &str) -> Option<UpstreamSession> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(sid).and_then(|e| e.session.clone())
    }

    /// Remembers `session` for `sid`.
    pub fn put(&self, sid: &str, session: UpstreamSession) {
        self.with_entry(sid, |e| e.session = Some(session));
    }

    /// Forgets `sid`, returning what was known.
    pub fn remove(&self, sid: &str) -> Option<UpstreamSession> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(sid).and_then(|e| e.session)
    }

    fn with_entry<T>(&self, sid: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(sid) && map.len() >= CAPACITY {
            let oldest = map
                .iter()
                .filter(|(_, e)| Arc::strong_count(&e.lock) == 1)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let entry = map.entry(sid.to_owned()).or_insert_with(|| Entry {
            session: None,
            lock: Arc::default(),
            used: Instant::now(),
        });
        entry.used = Instant::now();
        f(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes_with_pipes_in_the_id() {
        let s = UpstreamSession {
            id: Some("a|b".into()),
            revision: "2025-11-25".into(),
        };
        assert_eq!(s.encode(), "a|b|2025-11-25");
        assert_eq!(UpstreamSession::decode(&s.encode()), Some(s));
        let stateless = UpstreamSession {
            id: None,
            revision: "2025-06-18".into(),
        };
        assert_eq!(stateless.encode(), "|2025-06-18");
        assert_eq!(UpstreamSession::decode("|2025-06-18"), Some(stateless));
        assert_eq!(UpstreamSession::decode("no-revision"), None);
        assert_eq!(UpstreamSession::decode("id|"), None);
    }

    #[test]
    fn known_is_bounded() {
        let k = Known::default();
        for i in 0..CAPACITY + 10 {
            k.put(
                &format!("s{i}"),
                UpstreamSession {
                    id: None,
                    revision: "r".into(),
                },
            );
        }
        assert!(k.map.lock().unwrap().len() <= CAPACITY);
        assert!(k.get(&format!("s{}", CAPACITY + 9)).is_some());
    }
}
