//! What makes this node one replica among many:
//!
//! - [`ownership`]: who owns a session's node-bound upstream resource, and taking it over.
//! - [`forward`]: running a request of a node-bound upstream on its owner node.
//! - [`held`]: what upstreams hold here, checked against the store.

pub mod forward;
pub mod held;
pub mod ownership;
