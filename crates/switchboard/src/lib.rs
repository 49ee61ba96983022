//! # switchboard
//!
//! The binary that runs one Switchboard node: it parses the command line, merges the config,
//! sets up logging, builds the store (embedded memory store, or Redis for a cluster) and the
//! built-in demo upstream, binds the listener and hands everything to
//! [`switchboard_node::serve`] until SIGTERM or Ctrl-C, then drains and exits 0.
//!
//! Depends on `switchboard-node`, `switchboard-store`, `switchboard-upstream` and
//! `switchboard-telemetry`; nothing depends on it. It sits before the
//! request path: once `serve` runs, requests never come back here.
//!
//! Exit codes: 0 after a clean drain, 1 when start-up or serving fails (port taken, Redis
//! unreachable), 2 for a bad command line or config (the message names the key and its source).
//!
//! Modules:
//! - [`cli`]: subcommands (`serve`, `config`) and the flags that set keys.
//! - [`config`]: [`Config`], the one typed config tree of sections: defaults, validation, mapping onto
//!   [`switchboard_node::NodeConfig`] and [`switchboard_store::StoreConfig`].
//! - [`mod@load`]: merging defaults < TOML file < `SWITCHBOARD_*` env (`SWITCHBOARD_SESSION__IDLE_TTL`) < flags with `figment`.
//! - [`startup`]: start-up ([`startup::run`], testable on a bound listener), logging, signals.
//! - [`otel`]: the OpenTelemetry pipeline of `[otel]` (OTLP exporter, sampler, propagator).

pub mod cli;
pub mod config;
pub mod load;
pub mod otel;
pub mod startup;

pub use config::{Config, LogFormat};
pub use load::{load, ConfigError, Sources};
