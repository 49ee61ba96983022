//! Requests of node-bound upstreams that run on another node (see
//! [`switchboard_upstream::placement`]), in three leaves:
//!
//! - [`origin`]: the node holding the client's request sends it to the owner and waits
//!   ([`origin::await_outcome`]), relaying the owner's messages to the client's stream.
//! - [`wire`]: what the owner side sends back (its outcome, or "moved"), and finding the member
//!   upstream a forwarded request names. The owner side itself (running the request with a
//!   peer that routes back to the origin) is `transport::forwarded`: a request that arrives
//!   over the bus instead of HTTP.
//! - both sides' bookkeeping is `state::forwards` ([`crate::state::forwards::Forwards`]).
//!
//! The placement service depends on the origin side only.

pub mod origin;
pub mod wire;

#[cfg(test)]
mod tests;
