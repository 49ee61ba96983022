//! Streamable HTTP (MCP 2025-11-25, basic/transports): one endpoint, POST for every client
//! message ([`post`]), GET for the standalone stream and resumption ([`get`]), DELETE to end the
//! session ([`delete`]).

pub mod delete;
pub mod get;
pub mod post;
