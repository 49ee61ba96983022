//! What makes this node one replica among many:
//!
//! - [`inbox`]: messages other nodes (and the store) send here over the bus.
//! - [`ownership`]: who owns a session's node-bound upstream resource, and taking it over.
//! - [`forward`]: running a request of a node-bound upstream on its owner node.
//! - [`held`]: what upstreams hold here, checked against the store.
//! - [`background`]: heartbeat, session keep-alive, reaper.

pub mod background;
pub mod forward;
pub mod held;
pub mod inbox;
pub mod ownership;
