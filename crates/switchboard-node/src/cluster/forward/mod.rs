//! Requests of node-bound upstreams that run on another node (see
//! [`switchboard_upstream::placement`]), in three leaves:
//!
//! - [`origin`]: the node holding the client's request sends it to the owner and waits
//!   ([`origin::await_outcome`]), relaying the owner's messages to the client's stream.
//! - [`owner`]: the node owning the upstream resource runs it ([`owner::execute`]) with a peer
//!   that routes back to the origin, or answers "moved" while it is stopping.
//! - both sides' bookkeeping is `state::forwards` ([`crate::state::forwards::Forwards`]).
//!
//! The placement service depends on the origin side only; the owner side depends on the session
//! handle and the peer.

pub mod origin;
pub mod owner;

#[cfg(test)]
mod tests;
