//! # switchboard-runtime
//!
//! The replica runtime: what makes a process one replica of a Switchboard cluster, shared by the
//! gateway node (`switchboard-node`) and library mode (`switchboard-rmcp`), so that a cluster
//! rule is written once. The layers: `switchboard-protocol` → `switchboard-store` → this crate →
//! {`switchboard-node`, `switchboard-rmcp`} → the `switchboard` binary.
//!
//! Depends on `switchboard-protocol` (request ids, error codes, stream ids),
//! `switchboard-store` (sessions, event logs, the bus, liveness) and `switchboard-telemetry`
//! (metrics, session ids in logs).
//!
//! ## Modules
//! - [`replica`]: [`Replica`], what the runtime needs of its host (its store and its
//!   [`ReplicaState`]: hub, heartbeat health, memory-policy watch, the loops' [`Timing`]) and
//!   the hooks where the two hosts differ ([`Beat`]: what a heartbeat came to).
//! - [`hub`]: the stream connections held here, keyed by (session, stream), fed live events.
//! - [`pump`]: the task behind one held stream (replay, live events, the log re-read, a dead
//!   replica's request ended); how events are framed is the host's [`pump::Sink`].
//! - [`inbox`]: the bus inbox; live events, takeovers and a resubscribed inbox reach the hub.
//! - [`background`]: heartbeat, session keep-alive, reaper, Redis memory-policy re-read.
//! - [`health`]: how this replica's heartbeats fared ([`StoreHealth`]).
//! - [`calls`]: the calls running here ([`Calls`]), keyed by session and request id, with their
//!   cancellation.
//! - [`liveness`]: when another replica counts as dead, and the answer of a request lost with it.
//! - [`resume`]: whether a stream can be resumed from a `Last-Event-ID`, checked before it is
//!   claimed.
//! - [`lost`]: ending the requests registered in flight with no call behind them (a dead
//!   replica's, or this replica's whose registration failed as far as it could tell).
//!
//! [`rules`] (feature `rules`, tests only) holds the runtime's rules once (replay then live
//! events each once, the log re-read, a gone log closing the stream, a dead replica's request
//! ended, this replica's lost requests ended and its running ones left alone), as a suite each
//! host runs through its own replica and sink; this crate runs it through a bare replica.

#![warn(clippy::too_many_lines)]

pub mod background;
pub mod calls;
pub mod health;
pub mod hub;
pub mod inbox;
pub mod liveness;
pub mod lost;
pub mod pump;
pub mod replica;
pub mod resume;
#[cfg(any(test, feature = "rules"))]
pub mod rules;

pub use calls::Calls;
pub use health::StoreHealth;
pub use hub::{ConnHandle, Hub, Outbound, StreamEvent};
pub use replica::{Beat, Replica, ReplicaState, Timing};
