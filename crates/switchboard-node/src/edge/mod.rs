//! The HTTP edge: what every request passes before a transport handler sees it.
//!
//! The stack itself (the connection, the layers in order, the router) is in `app.rs`;
//! this folder holds what its layers call:
//!
//! - [`cors`]: CORS headers and preflights for browser clients of allowed origins.
//! - [`header_checks`]: `Origin`, `Host`, `Content-Type`, the `Accept` policy (which answer
//!   forms a client takes) and the `MCP-Protocol-Version` format.
//! - [`body`]: reading a POST body within `http.max_body` and `http.body_read_timeout`.
//! - [`auth`]: the optional OAuth 2.1 resource-server layer.
//! - [`error`]: every refusal of the edge, each with one HTTP status and one JSON-RPC code.
//! - [`request_id`]: the request's id, once read, for the refusals that answer it.
//! - [`json_body`]: a JSON response body that a large answer does not have to fit whole.
//! - [`rate_limited`]: how a refusal by a rate limit is answered (its JSON-RPC error's `data`, a
//!   429's headers); the limits themselves are `limits`.

pub mod auth;
pub mod body;
pub mod cors;
pub mod error;
pub mod header_checks;
pub mod json_body;
pub(crate) mod rate_limited;
pub mod request_id;
