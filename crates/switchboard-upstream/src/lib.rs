//! # switchboard-upstream
//!
//! The MCP servers behind the cluster. An [`Upstream`] answers the client requests that are not
//! about the session itself (`tools/*`, `resources/*`, `prompts/*`, `completion/complete`) and may
//! talk back to the client through the [`ClientPeer`] it is handed for each request.
//!
//! Depends on `switchboard-protocol` only; the node crate implements [`ClientPeer`] on top of the
//! store. Sits at the end of the request path: limits → auth → header checks → session load →
//! **upstream**.
//!
//! Modules:
//! - [`upstream`]: the [`Upstream`] and [`ClientPeer`] traits and [`RpcError`].
//! - [`placement`]: node-bound upstreams ([`placement::NodeBound`]) and the node's
//!   [`placement::Placement`] service that runs their requests on the owning node.
//! - [`local_session`]: [`LocalSession`], an in-process [`SessionHandle`] for tests.
//! - [`demo`]: the built-in demo server [`demo::DemoUpstream`] (tools echo, add, countdown,
//!   sample, elicit, list_roots, notify; resource `demo://greeting`; prompt `greet`; completions).
//!   User documentation: `docs/demo-upstream.md`.

pub mod demo;
pub mod local_session;
pub mod placement;
pub mod upstream;

pub use local_session::LocalSession;
pub use upstream::{ClientPeer, PeerError, RequestContext, RpcError, SessionHandle, Upstream};
