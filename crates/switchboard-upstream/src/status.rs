//! What one node knows of each upstream's health: [`UpstreamStatus`], served as JSON on the
//! node's `GET /upstreamz` and as `switchboard_upstream_*` metrics.
//!
//! Each status is this node's view only: the calls that clients made through this node, the
//! children this process runs, the failures it saw. Another node may see the same upstream
//! otherwise (a stdio child crash-looping on one node only, an HTTP server reachable from some
//! nodes only).
//!
//! ## States
//! [`State`] means, per kind:
//! - **stdio**, from its children in this process (the `stdio` module): `unknown` before any
//!   child was started here (the start-up probe counts); `up` when the last start succeeded and
//!   no restart back-off is in force; `degraded` while in back-off with some children still
//!   running (they serve their sessions; a session that needs a new child is refused at once);
//!   `down` while in back-off with no child running (every call that needs a child is refused at
//!   once until [`UpstreamStatus::next_start_at_ms`]).
//! - **http**, **sse**, **demo**, from the outcome of the last call through this node that says
//!   something of the server's availability (the `Tracked` wrapper, `tracked`): `unknown`
//!   before any such call finished; `up` when it reached the server (a result, an error
//!   answered by the server itself, a refusal it answered at the HTTP level with a JSON-RPC
//!   error or of the credentials, a message over the size limit); `degraded` when it ran out of
//!   time (-32005: reachable but too slow, or hanging); `down` when the server could not be
//!   reached or failed otherwise (-32006). A cancelled call and a lost upstream session
//!   (`data.reason = "upstream_session_lost"`: the server forgot the session, or the replica
//!   holding it left the name, and a new one is made) change nothing.
//! - **http whose URL names a host** (endpoints listed): from its endpoints the last resolution
//!   returned, once this node has tried one: `down` when none can be reached (every one was
//!   tried and refused), `degraded` when some cannot be (or the last call timed out or failed),
//!   `up` when none failed and the last call was answered. One stopped replica of three is
//!   `degraded`, not `down`.
//!
//! ## Counters
//! `calls` and `call_errors` are counted in one place for every kind, where a configured
//! upstream is called (the `Tracked` wrapper): a request forwarded to the node owning a
//! stdio child is counted on the node the client's request reached, once. A call error is a call
//! answered with a JSON-RPC error of any code (the server's own refusals included) except a
//! cancellation (-32004). `restarts` is kind-specific (stdio: children started to replace one
//! that exited on its own or failed to start).

use serde::Serialize;

/// The health of one upstream as this node sees it (see the module doc for each kind).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// No contact yet.
    #[default]
    Unknown,
    /// Working.
    Up,
    /// Working in part, or slowly.
    Degraded,
    /// Not working: calls fail.
    Down,
}

impl State {
    /// Every state, in the order of the `switchboard_upstream_state` metric.
    pub const ALL: [State; 4] = [State::Unknown, State::Up, State::Degraded, State::Down];

    /// `unknown`, `up`, `degraded` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Up => "up",
            State::Degraded => "degraded",
            State::Down => "down",
        }
    }
}

/// The most recent failure of an upstream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastError {
    /// What failed, as the client was told (naming the upstream and the cause, e.g.
    /// ``upstream `files` exited (exit status 1)``).
    pub message: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl LastError {
    /// `message`, now.
    pub fn now(message: impl Into<String>) -> LastError {
        LastError {
            message: message.into(),
            at_ms: unix_ms(std::time::SystemTime::now()),
        }
    }
}

/// One network endpoint of an upstream: for a Streamable HTTP upstream whose URL names a host,
/// each address the host resolves to (and any address that left the name while sessions this
/// node remembers are still pinned to it); empty for an IP-address URL and the other kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EndpointStatus {
    /// The endpoint's address (`ip:port`).
    pub address: String,
    /// Its health as this node sees it: `up` when the last request to it connected, `down` when
    /// it could not connect, `unknown` before any request.
    pub state: State,
    /// Whether the last resolution of the URL's host returned it (`false`: it left the name,
    /// and only sessions pinned to it before still go there).
    pub resolved: bool,
    /// How many upstream sessions this node knows to be pinned to it (this node's memory of
    /// recently used sessions, not the cluster's count).
    pub sessions: u64,
}

/// An upstream session whose revision differed from its client's, as `/upstreamz` shows it
/// (`revisions_seen` of [`UpstreamStatus`], recorded by [`crate::revisions::RevisionWatch`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RevisionsSeen {
    /// The revision the client's session negotiated with the cluster (what it is answered in).
    pub client: String,
    /// The revision the upstream answered in `initialize`.
    pub upstream: String,
    /// When this node started that upstream session, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Upstream sessions this node started whose revision differed from their client's.
    pub mismatches: u64,
}

/// One child process of a stdio upstream running in this process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChildStatus {
    /// The client session it serves, or `shared` for the one child of a `shared = true` upstream.
    pub session: String,
    /// Its process id.
    pub pid: Option<u32>,
    /// When it was started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
}

/// What this node knows of one configured upstream (JSON: these field names; `last_error`,
/// `next_start_at_ms` and `resolved_at_ms` are `null` when there is none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpstreamStatus {
    /// The configured name.
    pub name: String,
    /// The configured kind: `demo`, `stdio`, `http` or `sse`.
    pub kind: String,
    /// Its health (see the module doc for what each state means per kind).
    pub state: State,
    /// Its most recent failure: a call that failed as unavailable (-32006) or timed out
    /// (-32005), or (stdio) a child that failed to start or exited on its own.
    pub last_error: Option<LastError>,
    /// Its network endpoints (see [`EndpointStatus`]).
    pub endpoints: Vec<EndpointStatus>,
    /// stdio: its children running in this process (per session, or the shared one).
    pub children: Vec<ChildStatus>,
    /// stdio: children started in this process to replace one that exited on its own or failed
    /// to start; 0 for other kinds.
    pub restarts: u64,
    /// Calls of clients through this node.
    pub calls: u64,
    /// Those answered with a JSON-RPC error (cancellations not counted).
    pub call_errors: u64,
    /// stdio in restart back-off: when the next child start will be tried, in milliseconds since
    /// the Unix epoch.
    pub next_start_at_ms: Option<u64>,
    /// http whose URL names a host: when this node last resolved it (the view `endpoints`
    /// comes from), in milliseconds since the Unix epoch; `null` before the first resolution
    /// and for the other kinds. Reading the status resolves again first when this is older than
    /// `resolve_interval_ms` (bounded, see [`crate::Upstream::refresh_statuses`]); a
    /// resolution that failed or did not finish in time leaves it older.
    pub resolved_at_ms: Option<u64>,
    /// http, sse, stdio: the last upstream session this node started whose negotiated revision
    /// differed from its client's (client and upstream revision, when, how many so far);
    /// `null` when none did (see [`crate::revisions`]).
    pub revisions_seen: Option<RevisionsSeen>,
}

impl UpstreamStatus {
    /// A status with nothing known yet: `unknown`, no error, no children, counters at 0.
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> UpstreamStatus {
        UpstreamStatus {
            name: name.into(),
            kind: kind.into(),
            state: State::Unknown,
            last_error: None,
            endpoints: Vec::new(),
            children: Vec::new(),
            restarts: 0,
            calls: 0,
            call_errors: 0,
            next_start_at_ms: None,
            resolved_at_ms: None,
            revisions_seen: None,
        }
    }
}

/// `t` in milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_the_documented_field_names() {
        let mut status = UpstreamStatus::new("files", "stdio");
        status.state = State::Down;
        status.last_error = Some(LastError {
            message: "upstream `files` exited (exit status 1)".into(),
            at_ms: 5,
        });
        status.children.push(ChildStatus {
            session: "shared".into(),
            pid: Some(7),
            started_at_ms: 3,
        });
        status.next_start_at_ms = Some(9);
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "name": "files", "kind": "stdio", "state": "down",
                "last_error": {"message": "upstream `files` exited (exit status 1)", "at_ms": 5},
                "endpoints": [],
                "children": [{"session": "shared", "pid": 7, "started_at_ms": 3}],
                "restarts": 0, "calls": 0, "call_errors": 0, "next_start_at_ms": 9,
                "resolved_at_ms": null, "revisions_seen": null
            })
        );
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["unknown", "up", "degraded", "down"]);
    }
}
