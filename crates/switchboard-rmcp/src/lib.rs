//! # switchboard-rmcp
//!
//! Library mode of Switchboard: an [rmcp](https://docs.rs/rmcp) Streamable HTTP server becomes
//! horizontally scalable, without the gateway, by swapping its session manager. Replicas of the
//! server share one store (Redis standalone, Sentinel or Cluster; or the in-process memory store
//! for tests), and a load balancer may send any request of any session to any replica, with no
//! stickiness.
//!
//! Depends on `switchboard-store` (state, event logs, bus), `switchboard-runtime` (the held
//! streams, heartbeat, keep-alive, reaper, bus inbox), `switchboard-protocol` (id formats,
//! error codes), `switchboard-telemetry` (session ids in logs) and rmcp 3.11 (features `server`,
//! `transport-streamable-http-server`), pinned by the workspace. Sits inside rmcp's
//! `StreamableHttpService`, under its HTTP checks: rmcp parses and validates every request,
//! then calls this crate's [`ReplicatedSessionManager`] and [`StoreSessions`].
//!
//! ## Usage
//!
//! The crate is not on crates.io: depend on it by path (or git) next to the rmcp it is built
//! for (3.x, at least 3.11) and what an rmcp HTTP server uses anyway:
//!
//! ```toml
//! [dependencies]
//! switchboard-rmcp = { path = "<switchboard checkout>/crates/switchboard-rmcp" }
//! rmcp = { version = "3.11", features = ["server", "transport-streamable-http-server", "macros"] }
//! axum = "0.8"
//! tokio = { version = "1", features = ["full"] }
//! ```
//!
//! It brings the store's dependencies with it (redis-rs with rustls on aws-lc-rs, which needs a
//! C compiler, and the telemetry crates): in one trial a three-tool rmcp server went from 132 to
//! 231 crates in its lock file, and its build from 1 min 54 s to 5 min 43 s.
//!
//! The server's handler stays as it is; the session manager and the server settings change:
//!
//! ```no_run
//! # use rmcp::{ServerHandler, handler::server::router::tool::ToolRouter, tool_handler, tool_router, tool};
//! # #[derive(Clone)] struct Counter { tool_router: ToolRouter<Counter> }
//! # #[tool_router] impl Counter { fn new() -> Self { Self { tool_router: Self::tool_router() } }
//! #     #[tool(description = "one")] fn one(&self) -> String { "1".into() } }
//! # #[tool_handler] impl ServerHandler for Counter {}
//! use rmcp::transport::streamable_http_server::StreamableHttpService;
//! use switchboard_rmcp::{ReplicatedConfig, ReplicatedSessionManager};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Bind first: the manager's start marks the replica alive.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let manager = ReplicatedSessionManager::redis("redis://127.0.0.1:6379", ReplicatedConfig::default()).await?;
//! let service = StreamableHttpService::new(|| Ok(Counter::new()), manager.clone(), manager.http_config());
//! let app = axum::Router::new().nest_service("/mcp", service);
//! axum::serve(listener, app).with_graceful_shutdown(stop_signal()).await?;
//! manager.shutdown().await; // drains the calls running here, then hands the rest on
//! # Ok(()) }
//! # async fn stop_signal() {
//! #     use tokio::signal::unix::{signal, SignalKind};
//! #     let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
//! #     tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
//! # }
//! ```
//!
//! (Before: `Arc::new(LocalSessionManager::default())` and `Default::default()`.) `stop_signal`
//! is SIGTERM or Ctrl-C (written out in `examples/minimal.rs`): a container is stopped with SIGTERM, and
//! without `shutdown` the calls running on the replica are cut instead of drained.
//!
//! Three settings matter in a deployment:
//! - **Host names.** rmcp answers 403 to a `Host` outside its allowed list, which is loopback by
//!   default: behind a balancer add the names clients use,
//!   `manager.http_config().with_allowed_hosts(["localhost", "127.0.0.1", "mcp.example.com"])`
//!   (the example's `--allowed-host`).
//! - **One key prefix per server.** Two different servers on one Redis would share sessions:
//!   give each its own with [`ReplicatedConfig::with_key_prefix`].
//! - **The endpoint** is wherever the service is nested (`/mcp` above); clients POST
//!   `initialize` there, as to any Streamable HTTP server.
//!
//! `examples/minimal.rs` is this server, and `examples/replicated` carries every tool, resource
//! and prompt of the conformance suite's server scenarios; `examples/plain` is the same handler
//! on rmcp's own `LocalSessionManager`, which fails that suite behind a round-robin balancer
//! (the integration tests' negative control: "Session not found" on 31 of its 32 scenarios).
//!
//! ## Design
//!
//! rmcp 3.11 offers three seams: the `SessionManager` trait (every request of a session goes
//! through it), the `SessionStore` trait (the client's `initialize` params, which rmcp replays
//! into a fresh handler when a request reaches a process that does not hold the session) and
//! the `EventStore` trait (event ids and replay of persisted streams). This crate uses all three:
//!
//! - **Handlers stay rmcp's.** [`ReplicatedSessionManager`] wraps rmcp's `LocalSessionManager`:
//!   a session's handler runs in every replica that served one of its requests (restored there
//!   from [`StoreSessions`]), and closes there after the larger of `idle_ttl` and 5 minutes
//!   without a message (rmcp's `keep_alive`, which ends a handler even during a silent call:
//!   a call that runs longer than that without sending anything is cut, e.g. an elicitation a
//!   person leaves unanswered for 30 minutes under the defaults; and a session abandoned with a
//!   call still waiting keeps its keys that long, not `idle_ttl`).
//! - **Sessions** are switchboard-store session records ([`StoreSessions`]): created when
//!   `initialize` succeeds (so the store's session cap can refuse one), touched by every request
//!   and every open stream, ended by `DELETE` on any replica (every key removed, every replica
//!   told over the bus) or `idle_ttl` after the last activity (the record expires; the reaper
//!   removes the rest and tells every replica).
//! - **Every message goes through the log.** What a handler sends on a replica is appended to
//!   its stream's event log first (a recorder per rmcp stream), then delivered by the store to
//!   whichever connection holds that stream, here or on another replica. A client that lost its
//!   stream resumes it with `Last-Event-ID` on any replica and gets exactly the later events of
//!   that stream, in order, then the live ones. Event ids are `<stream>_<position>` (but for
//!   the priming event of an `initialize` answer, which rmcp numbers `0` itself).
//! - **Cross-replica delivery** uses the store's bus: a client's answer to a server-to-client
//!   request reaches the replica waiting for it (ids are rewritten to be unique across replicas,
//!   see `routing`); a `notifications/cancelled` reaches the replica running the call; `DELETE`
//!   ends the session on every replica; a resumer of a stream whose replica died gets error
//!   -32004 as that request's answer. A replica is taken for dead only when its heartbeat key
//!   is missing and the replica deciding has reached the store without a gap for 2 × `node_ttl`
//!   (a store outage lapses every key, live replicas' too), and a request's answer is logged
//!   only while the request is still recorded as running (the store's `abort_running`): a
//!   request has at most one final event.
//! - **Keys** are the store's: every key of a session carries the hash tag `{<session id>}`
//!   (one Redis Cluster slot), every key has a TTL, logs and sessions are capped
//!   ([`ReplicatedConfig`]). An abandoned session leaves no key once `idle_ttl` has passed and the
//!   reaper has run. [`StoreEvents`], for streams rmcp persists without a session (opt-in:
//!   `log_stateless_streams`), gives each stream a scope of its own with the same rules.
//! - **Cost.** rmcp asks `has_session` before every request of a session: that is one store
//!   round trip (it also keeps the session alive); a request then costs one more (`begin`:
//!   load, in-flight registration), and each message it sends one append.
//!
//! ## What rmcp's traits cannot express
//!
//! Nothing is patched upstream; these are the limits, and what this crate does about them:
//!
//! - **Routing a client's answer, and cancellation.** `SessionManager::accept_message` receives
//!   every client message, but rmcp's handlers number their server-to-client requests from 0 in
//!   each process and give no hook to change that, and nothing in the traits says which process
//!   waits for an answer or runs a call. This crate rewrites those ids on the way out (unique per
//!   process, whose node id carries a random suffix, and per handler lifetime: see `routing`),
//!   routes answers and cancellations over the bus itself, and drops an answer whose handler has
//!   ended.
//! - **`DELETE` vs. a handler ending.** rmcp calls `close_session` both for `DELETE` and when a
//!   process's handler ends (idle, shutdown); only `SessionStore::delete` marks a `DELETE`, so that
//!   is where the session ends cluster-wide, and `close_session` stays local.
//! - **The event store has no session.** `EventStore::store_event` gets a stream id of rmcp's
//!   making and no session id, so a log kept through it cannot carry the session's hash tag or be
//!   removed with the session. This crate's manager keeps its sessions' logs itself (rmcp's
//!   in-process layer runs without an event store); [`StoreEvents`] serves only what rmcp
//!   persists without a session (2026-07-28 stateless streams, when `log_stateless_streams` is
//!   set), under scopes of their own.
//! - **Errors become HTTP 500.** A session manager cannot choose a status: a session cap
//!   refusing `initialize`, or a store outage, answer 500 (not 503 with `Retry-After`); a failed
//!   `SessionStore::store` is only logged by rmcp. A session that ended between rmcp's
//!   `has_session` and the call also answers 500 rather than 404.
//! - **Per-process handler state.** Only the `initialize` params are replayed into a restored
//!   handler (its `initialize` runs again on every replica that restores the session, marked by
//!   rmcp's `SessionRestoreMarker`). State a handler keeps in memory (a log level set by `logging/setLevel`, resource
//!   subscriptions, counters) lives in the process that received the request; keep such state in
//!   your own store if replicas must share it. Client notifications other than cancellation
//!   (`notifications/roots/list_changed`) reach only the replica they were POSTed to.
//! - **Which stream a notification takes.** rmcp puts a handler's progress notifications on its
//!   request's stream and every other notification (log messages, list changes) on the
//!   standalone stream, which a client may not have open yet (a `GET` opened later starts after
//!   the newest logged event). [`ResponseStream::notify`], a request extension, sends one on the
//!   request's own stream instead.
//! - **Server-initiated stream close.** rmcp's `close_sse_stream` (SEP-1699) lives on its local
//!   session handle, which a handler cannot reach; [`ResponseStream::close`] does the same here.
//! - **Authentication.** rmcp hands a session manager no principal; sessions are bound to none.
//! - **HTTP answers that are rmcp's.** `DELETE` of an unknown session answers 202, not 404: rmcp
//!   calls `close_session` and `SessionStore::delete` without asking whether the session exists
//!   and answers 202 whatever `delete` returns (an error from `close_session` would be 500, never
//!   404). A foreign or malformed `Last-Event-ID` gets 200 with an empty stream: rmcp turns every
//!   error of `resume` into that. A body that is not JSON, or a JSON-RPC batch, gets 415 from
//!   rmcp's parser before this crate sees it. A second `initialize` in a live session is handed
//!   to the session like any request (rmcp does not refuse it, and this crate does not either).
//!
//! ## Store outages
//!
//! - A replica is taken for dead only when its heartbeat key is missing and the replica deciding
//!   has reached the store without a gap for 2 × `node_ttl`: after an outage, a truly dead
//!   replica's calls end (-32004) that much later.
//! - Every event, a request's answer and its notifications alike, is tried again until the store
//!   takes it (a Redis promotion, a restart), as the gateway does (`switchboard_store::retry`:
//!   jittered attempts 100 ms to 1 s apart, one append id per event, so an attempt that looked
//!   failed but ran is not logged twice), for `idle_ttl` while the replica runs (an rmcp call has
//!   no deadline of its own); its stream's later messages wait behind it, so a client gets them
//!   once, in order. Only an event still refused then (or when the replica stops) is not logged:
//!   a request's stream then ends with -32004 ("an event of its stream was lost") and its call is
//!   cancelled, rather than going on after a gap; [`ResponseStream::notify`] returns an error; an
//!   event of the standalone stream is lost (logged at error, no signal to the client).
//! - What one replica tells another (a client's answer to a server-to-client request posted to
//!   another replica, a cancellation, a `DELETE`'s notice) is kept in the receiver's mailbox in
//!   the store until it reads it, through a lapse of its subscription (a dropped connection, a
//!   slot move, a failover), within `bus.message_ttl` (the store's [`switchboard_store::Bus`]).
//!   What cannot be written while the store is down fails the request that carried it (a 500
//!   for the `POST`, rmcp's answer to every manager error). A `DELETE` that could not reach the store is
//!   retried in the background (up to `idle_ttl`); the replica that took it answers 404 at once,
//!   the others serve the session until the retry succeeds.
//! - A request whose `POST` failed (500) but which the store registered anyway is ended by the
//!   next request refused in its session (or undone in the background once the store answers).
//!
//! ## Redis eviction
//!
//! Every key a replica writes has a TTL, so a Redis whose `maxmemory-policy` is not `noeviction`
//! evicts them at its memory limit: heartbeats first under `volatile-ttl` (other replicas then end
//! this one's requests with -32004), sessions and event logs under the others. The constructors
//! read the policy (`INFO memory`: on every primary in Cluster mode, and where `CONFIG` is renamed
//! away) and fail with [`Error::Eviction`] on such a policy unless
//! [`ReplicatedConfig::eviction`]`.allow` is set ([`ReplicatedConfig::with_eviction_allowed`]: it
//! then starts with a warning); a policy that cannot be read starts with a warning. It is read again
//! every `eviction.check_interval` (30 s): a change is logged (an evicting one at error level without
//! the opt-in) and [`ReplicatedSessionManager::eviction_readiness`] answers not ready, for the
//! server's own readiness probe. A heartbeat key found gone well within `node_ttl` is logged as a
//! probable eviction and counted (`switchboard_heartbeats_evicted_total`). The rule is the gateway's,
//! in `switchboard_store::eviction`.
//!
//! ## Cost in memory, and start-up
//!
//! - Each replica that served a request of a session holds rmcp's handler for it, about 63 KB
//!   (measured in review with the example server), for the larger of `idle_ttl` and 5 minutes
//!   after the session's last message there: 10 000 sessions spread over every replica cost
//!   about 630 MB on each.
//! - [`ReplicatedSessionManager`]'s constructors send the replica's first heartbeat: bind the
//!   listening port before building it (as the examples do), or a replica that fails to bind
//!   looks alive to the others until `node_ttl` has passed.
//!
//! ## Modules
//!
//! - [`config`]: [`ReplicatedConfig`], the settings of one replica.
//! - `manager`: [`ReplicatedSessionManager`], rmcp's `SessionManager`.
//! - `session_store`: [`StoreSessions`], rmcp's `SessionStore`.
//! - `event_store`: [`StoreEvents`], rmcp's `EventStore`.
//! - `recorder`: rmcp's in-process streams into the event logs.
//! - `conn`: one client connection's sink: priming and rmcp's SSE messages (the task behind it,
//!   with replay, live events and the dead-replica watch, is the runtime's `pump`);
//!   [`ResponseStream`].
//! - `routing`: client answers and cancellations to the right replica.
//! - `admission`: a request's registration in flight, refusals, a failed one undone.
//! - `replica`: this replica as the shared runtime (`switchboard-runtime`) sees it; the
//!   runtime holds the open connections (its hub) and the calls running here, runs the
//!   heartbeat, keep-alive, reaper and bus inbox, tells when another replica is dead and ends
//!   the requests with no call behind them.
//! - `node`: what all of these share.
//! - `rules` (tests): the replica runtime's rules, run through this crate's replica and streams.
//! - [`error`]: the one error type, [`Error`].

#![warn(clippy::too_many_lines)]

mod admission;
pub mod config;
mod conn;
pub mod error;
mod event_store;
mod manager;
mod node;
mod recorder;
mod replica;
mod routing;
#[cfg(test)]
mod rules;
mod session_store;

pub use config::ReplicatedConfig;
pub use conn::ResponseStream;
pub use error::Error;
pub use event_store::StoreEvents;
pub use manager::ReplicatedSessionManager;
pub use session_store::StoreSessions;
/// The Redis deployment settings ([`ReplicatedSessionManager::open`]): standalone, Sentinel or
/// Cluster.
pub use switchboard_store::redis::RedisTopology;
