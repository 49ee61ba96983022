//! What makes this node one replica among many:
//!
//! - [`inbox`]: the bus messages other nodes (and the store) send here that are not about held
//!   streams.
//! - [`ownership`]: who owns a session's node-bound upstream resource, and taking it over.
//! - [`forward`]: running a request of a node-bound upstream on its owner node.
//! - [`held`]: what upstreams hold here, checked against the store.
//! - [`replica`]: this node as the shared replica runtime sees it (its heartbeat, keep-alive,
//!   reaper and inbox run there), and the fence.

pub mod forward;
pub mod held;
pub mod inbox;
pub mod ownership;
pub mod replica;
