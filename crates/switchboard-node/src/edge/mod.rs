//! The HTTP edge: what every request passes before a transport handler sees it.
//!
//! - [`server`]: the connection loop under the router (accept, HTTP/1, upgrades, drain).
//! - [`guard`]: `Origin`, `Host`, `Content-Type` and `MCP-Protocol-Version` format checks.
//! - [`accept`]: the `Accept` policy (which answer forms a client takes).
//! - [`auth`]: the optional OAuth 2.1 resource-server layer.
//! - [`error`]: every refusal of the edge, each with one HTTP status and one JSON-RPC code.

pub mod accept;
pub mod auth;
pub mod error;
pub mod guard;
pub(crate) mod server;
