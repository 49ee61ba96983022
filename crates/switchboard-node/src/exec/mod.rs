//! A client request while it runs on this node:
//!
//! - [`call`]: starting one request of a session ([`call::start_call`], the path every
//!   session-era transport takes) and running it (session methods here, the rest at the
//!   upstream) in its own task.
//! - [`response`]: the request's answer channel (JSON or SSE, logged before it is sent).
//! - [`answer_form`]: when and in which form the answer goes out (the wait for the first
//!   message, `sse_after`; an answer ready at once).
//! - [`session_handle`]: [`session_handle::NodeSession`], the session handle an upstream gets.
//! - [`client_peer`]: the [`switchboard_upstream::ClientPeer`] an upstream talks back through.
//! - [`outage`]: a call's messages through a store outage (tried in order until its deadline).
//! - [`cancel`]: how a cancelled call ends ([`cancel::until_cancelled`]).
//! - [`traced`]: the span of one MCP message and what a finished request reports (metrics).

pub mod answer_form;
pub mod call;
pub mod cancel;
pub mod client_peer;
pub mod outage;
pub mod response;
pub mod session_handle;
pub mod traced;
