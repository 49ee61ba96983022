//! The session a request names:
//!
//! - [`headers`]: reading `Mcp-Session-Id` (and the `MCP-Protocol-Version` format with it).
//! - [`principal`]: the principal a request runs as, and the sessions it may use.
//! - [`admission`]: loading and admitting the session against the store ([`LoadedSession`],
//!   [`admit`], [`load`]), and a new session's record.
//! - [`lost`]: ending lost requests that hold a refused request's slot or id (the runtime's rule).
//! - [`initialize`]: creating a session.
//!
//! The session handle given to upstreams is the running request's: `exec::session_handle`.

pub mod admission;
pub mod headers;
pub mod initialize;
pub mod lost;
pub mod principal;

pub(crate) use crate::limits::admission::Admit;
pub(crate) use admission::admit;
pub use admission::{load, load_updating, new_record, revision, LoadedSession, NotAdmitted};
pub use headers::{named, session_id};
pub use principal::{current, current_principal, may_use, with_principal};
