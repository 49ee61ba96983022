//! The upstream side of one client session: what is stored in the client's session record, and
//! the small node-local memory of it.
//!
//! Stored form (the value of [`crate::SessionHandle::upstream_session`] for this upstream's
//! name): `"<upstream Mcp-Session-Id>|<revision the upstream negotiated>"`, with an empty id for
//! a stateless server that minted none (e.g. `"|2025-06-18"`). Session ids are visible ASCII and
//! may contain `|`; revisions never do, so the value is split at its LAST `|`. A present value
//! means "initialized"; anything unreadable is treated as absent and the session is initialized
//! again.
//!
//! The upstream session's **binding** (the endpoint it is pinned to and the cookies it set) is
//! kept beside it, under `"<name>#pin"` in the same map (like the GET stream's position under
//! `"<name>#get"`), as JSON `{"session":"<upstream Mcp-Session-Id>","endpoint":"<ip:port>",
//! "cookies":"<Cookie header>"}` (each member optional but `session`). A binding for another
//! upstream session is ignored, and every write of one is a compare-and-set on the
//! `"<id>|<revision>"` value it belongs to ([`crate::SessionHandle::swap_upstream_sessions`]),
//! so a call of a superseded upstream session that answers late cannot replace the binding of
//! the session that replaced it. Keeping it under its own name leaves the `"<id>|<revision>"`
//! value as it was, so nodes of the previous version still read the session during a rolling
//! upgrade (they do not honour the pin).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// One upstream session as stored in the client's session record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UpstreamSession {
    /// The upstream's `Mcp-Session-Id` (MCP 2025-11-25, basic/transports, Session Management);
    /// `None` for a server that minted none.
    pub id: Option<String>,
    /// The revision the upstream answered in `initialize`, sent as `MCP-Protocol-Version` on
    /// every later request (MCP 2025-11-25, basic/transports, Protocol Version Header).
    pub revision: String,
    /// The endpoint every request of this upstream session connects to, chosen when it was
    /// initialized; `None`: the URL as it is (an IP address, or a stateless upstream).
    pub endpoint: Option<SocketAddr>,
    /// The cookies the upstream set in this session, sent back as the `Cookie` header.
    pub cookies: Option<String>,
}

/// The stored form of a binding.
#[derive(serde::Serialize, serde::Deserialize)]
struct Binding {
    session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    endpoint: Option<SocketAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cookies: Option<String>,
}

/// The name the binding of `upstream`'s session is stored under.
pub(crate) fn binding_name(upstream: &str) -> String {
    format!("{upstream}#pin")
}

/// The lease (and stored position) name of `upstream`'s GET stream (see `lease`).
pub(crate) fn lease_name(upstream: &str) -> String {
    format!("{upstream}#get")
}

impl UpstreamSession {
    /// A session without a binding.
    pub fn new(id: Option<String>, revision: String) -> UpstreamSession {
        UpstreamSession {
            id,
            revision,
            endpoint: None,
            cookies: None,
        }
    }

    /// Where `initialize` goes before there is a session: `endpoint`, no id, no revision yet
    /// (so no `MCP-Protocol-Version` header), no cookie.
    pub fn before_initialize(endpoint: Option<SocketAddr>) -> UpstreamSession {
        UpstreamSession {
            endpoint,
            ..UpstreamSession::new(None, String::new())
        }
    }

    /// Whether `other` is the same upstream session (the same id, revision and endpoint; its
    /// cookies may have changed since).
    pub fn same(&self, other: &UpstreamSession) -> bool {
        self.id == other.id && self.revision == other.revision && self.endpoint == other.endpoint
    }

    /// The binding's stored form, `None` when there is nothing to bind (no endpoint, no cookie)
    /// or the upstream minted no session id.
    pub fn encode_binding(&self) -> Option<String> {
        let session = self.id.clone()?;
        if self.endpoint.is_none() && self.cookies.is_none() {
            return None;
        }
        let binding = Binding {
            session,
            endpoint: self.endpoint,
            cookies: self.cookies.clone(),
        };
        serde_json::to_string(&binding).ok()
    }

    /// This session with the binding `stored` applied when it belongs to it.
    pub fn with_binding(mut self, stored: Option<&str>) -> UpstreamSession {
        let Some(binding) = stored.and_then(|s| serde_json::from_str::<Binding>(s).ok()) else {
            return self;
        };
        if self.id.as_deref() == Some(binding.session.as_str()) {
            self.endpoint = binding.endpoint;
            self.cookies = binding.cookies;
        }
        self
    }

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
        Some(UpstreamSession::new(
            (!id.is_empty()).then(|| id.to_owned()),
            revision.to_owned(),
        ))
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
        let map = self.map.lock();
        map.get(sid).and_then(|e| e.session.clone())
    }

    /// Remembers `session` for `sid`.
    pub fn put(&self, sid: &str, session: UpstreamSession) {
        self.with_entry(sid, |e| e.session = Some(session));
    }

    /// Forgets `sid`, returning what was known.
    pub fn remove(&self, sid: &str) -> Option<UpstreamSession> {
        let mut map = self.map.lock();
        map.remove(sid).and_then(|e| e.session)
    }

    /// How many of the upstream sessions remembered here are pinned to each endpoint.
    pub fn pinned(&self) -> HashMap<SocketAddr, u64> {
        let map = self.map.lock();
        let mut out = HashMap::new();
        for endpoint in map.values().filter_map(|e| e.session.as_ref()?.endpoint) {
            *out.entry(endpoint).or_insert(0) += 1;
        }
        out
    }

    fn with_entry<T>(&self, sid: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut map = self.map.lock();
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
        let s = UpstreamSession::new(Some("a|b".into()), "2025-11-25".into());
        assert_eq!(s.encode(), "a|b|2025-11-25");
        assert_eq!(UpstreamSession::decode(&s.encode()), Some(s));
        let stateless = UpstreamSession::new(None, "2025-06-18".into());
        assert_eq!(stateless.encode(), "|2025-06-18");
        assert_eq!(UpstreamSession::decode("|2025-06-18"), Some(stateless));
        assert_eq!(UpstreamSession::decode("no-revision"), None);
        assert_eq!(UpstreamSession::decode("id|"), None);
    }

    #[test]
    fn a_binding_applies_to_its_own_session_only() {
        let mut s = UpstreamSession::new(Some("u-1".into()), "2025-11-25".into());
        assert_eq!(s.encode_binding(), None, "nothing to bind");
        s.endpoint = Some("127.0.0.2:80".parse().unwrap());
        s.cookies = Some("SRV=n1".into());
        let stored = s.encode_binding().unwrap();
        assert_eq!(
            stored,
            r#"{"session":"u-1","endpoint":"127.0.0.2:80","cookies":"SRV=n1"}"#
        );
        let bare = UpstreamSession::decode(&s.encode()).unwrap();
        assert_eq!(bare.clone().with_binding(Some(&stored)), s);
        let other = UpstreamSession::new(Some("u-2".into()), "2025-11-25".into());
        assert_eq!(other.clone().with_binding(Some(&stored)), other);
        assert_eq!(bare.clone().with_binding(Some("garbage")), bare);
        assert!(bare.same(&UpstreamSession::decode(&s.encode()).unwrap()));
        assert!(!bare.same(&s), "another endpoint is another session");
    }

    #[test]
    fn known_is_bounded() {
        let k = Known::default();
        for i in 0..CAPACITY + 10 {
            k.put(&format!("s{i}"), UpstreamSession::new(None, "r".into()));
        }
        assert!(k.map.lock().len() <= CAPACITY);
        assert!(k.get(&format!("s{}", CAPACITY + 9)).is_some());
    }
}
