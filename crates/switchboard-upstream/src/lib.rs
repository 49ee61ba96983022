//! # switchboard-upstream
//!
//! The MCP servers behind the cluster. An [`Upstream`] answers the client requests that are not
//! about the session itself (`tools/*`, `resources/*`, `prompts/*`, `completion/complete`) and may
//! talk back to the client through the [`ClientPeer`] it is handed for each request.
//!
//! Depends on `switchboard-protocol` and `switchboard-telemetry` (metrics, trace context); the node crate implements [`ClientPeer`] on top of the
//! store. Sits at the end of the request path: the node's edge (connection, Origin/Host,
//! authentication) → its transport handler (header checks, session load) → `start_call` →
//! **upstream** (`docs/architecture.md` lists the files).
//!
//! Modules:
//! - [`upstream`]: the [`Upstream`] and [`ClientPeer`] traits, [`RpcError`], and the interface of
//!   the placement service a node implements ([`upstream::Placement`]).
//! - [`status`]: [`status::UpstreamStatus`], what a node knows of each upstream's health
//!   (served on `/upstreamz` and as metrics).
//! - [`revisions`]: [`revisions::RevisionWatch`], the revision each upstream negotiated against
//!   the client's (logged once per upstream session that differs, shown on `/upstreamz`).
//! - [`tracked`]: [`tracked::Tracked`], the wrapper that counts every configured upstream's
//!   calls and call errors in one place.
//! - [`placement`]: node-bound upstreams ([`placement::NodeBound`]) and the node's
//!   [`placement::Placement`] service that runs their requests on the owning node.
//! - [`principal`]: [`Principal`], who a request runs as (id, name, scopes).
//! - [`policy`]: the `[policy]` section: per-principal allow and deny lists of upstreams, tools,
//!   resources and prompts, applied by the aggregate.
//! - [`item`]: [`item::Kind`], the kinds of item a policy rule's lists and
//!   [`Upstream::visible`] are about (upstreams, tools, resources, prompts).
//! - [`client_state`]: replaying [`ClientState`], the log level and resource subscriptions a
//!   client set through an upstream, into each new upstream session of it.
//! - [`local_session`]: [`LocalSession`], an in-process [`SessionHandle`] for tests.
//! - [`aggregate`]: [`aggregate::Aggregate`], several upstreams behind one endpoint (names
//!   namespaced by prefix, resources routed by URI, merged lists with cursors).
//! - [`config`]: the `[[upstreams]]` config tables: fields, defaults and checks.
//! - [`build`]: the node's upstream made from those tables ([`build::upstreams`]), each one
//!   wrapped in [`tracked::Tracked`] (and [`placement::NodeBound`] when node-bound).
//! - [`demo`]: the built-in demo server [`demo::DemoUpstream`] (tools echo, add, countdown,
//!   sample, elicit, list_roots, notify; resource `demo://greeting`; prompt `greet`; completions).
//!   User documentation: `docs/demo-upstream.md`.
//! - [`http`]: [`http::HttpUpstream`], an MCP server reached over Streamable HTTP (its upstream
//!   session kept in the client's session record, so any node continues it).
//! - [`sse`]: [`sse::SseUpstream`], a legacy HTTP+SSE (2024-11-05) MCP server; its connection
//!   per client session is held in one process.
//! - [`stdio`]: [`stdio::StdioUpstream`], an MCP server run as a child process (one per
//!   session, or one shared), speaking newline-delimited JSON-RPC on stdin/stdout.

/// How log lines name a session: its hash, never the id (a credential).
pub(crate) use switchboard_telemetry::trace::logged_session;

pub mod aggregate;
pub mod build;
pub mod client_state;
pub mod config;
pub mod demo;
pub mod http;
pub mod item;
pub mod local_session;
pub mod placement;
pub mod policy;
pub mod principal;
pub mod revisions;
pub mod sse;
pub mod status;
pub mod stdio;
pub mod tracked;
pub mod upstream;

pub use http::HttpUpstream;
pub use local_session::LocalSession;
pub use principal::Principal;
pub use sse::SseUpstream;
pub use stdio::StdioUpstream;
pub use upstream::{
    ClientPeer, ClientState, PeerError, RequestContext, RpcError, SessionHandle, Upstream,
};

/// Entry points for the fuzz targets (`fuzz/`) and their corpus replay test; not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::http::events::read_all_events;
}
