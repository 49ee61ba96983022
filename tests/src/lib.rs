//! # switchboard-tests
//!
//! The one harness every integration test goes through: it starts a real `redis-server` and real
//! `switchboard` node processes on free loopback ports, and kills them by PID when dropped. Waits
//! go through [`eventually`] (`eventually`, `eventually_sync`, `always_for`), never a bare sleep.
//!
//! Modules:
//! - [`auth_upstream`]: a small HTTP upstream in the test process that refuses (401/403) or
//!   checks credentials, recording every request's headers.
//! - [`jwks_server`]: a JWKS provider in the test process (rotating, failing or stopped) and
//!   signing keys made at test time.
//! - [`counter`]: a stateful HTTP MCP server (replicas on loopback addresses, stoppable).
//! - [`dns`]: a private `dnsmasq` answering from a hosts file the test writes.
//! - [`daemon`]: what [`balancer`] and [`dns`] share: a packaged server on a free port, in its
//!   own temp dir, killed by PID on drop.
//! - [`redis_server`]: a private `redis-server` per test on a free port, with key inspection
//!   through the `redis` crate; optionally with AOF, killed and restarted in place.
//! - [`redis_cluster`]: a private Redis Cluster (3 primaries × 1 replica by default) whose nodes
//!   can be killed and restarted, with failover waits; slots moved by hand, graceful failovers,
//!   a shard added and removed.
//! - [`redis_sentinel`]: a private Sentinel group (a primary, a replica, three sentinels) with
//!   promotion waits.
//! - [`redis_process`]: what those two share: the binaries, one killable, restartable Redis
//!   process, bounded queries of a port.
//! - [`cargo_build`]: a workspace program built once per test process (`cargo build` from a test).
//! - [`node`]: one `switchboard` node process (built once, started, killed by PID, logged), on
//!   loopback or placed on another address or network namespace.
//! - [`cluster`]: a Redis plus N nodes `a`, `b`, `c`, … as one test's cluster.
//! - [`previous`]: the previous release's node binary (built once, from a commit of this
//!   repository's history), for rolling upgrades.
//! - [`replicated`]: switchboard-rmcp's example servers as processes (library mode): N replicas
//!   of `replicated` on a private Redis, or N `plain` rmcp servers; what a session left in Redis.
//! - [`replicated_sdk`]: the checks of the SDK clients' scenario runs against those replicas.
//! - [`conformance_suite`]: the official conformance suite run against a URL, its checks read
//!   back.
//! - [`netns`]: a network namespace (root) with a Redis link that can be cut and a client link,
//!   for a node partitioned from Redis.
//! - [`client`]: a raw MCP-over-HTTP client with exact control of headers.
//! - [`sse`]: the incremental SSE stream reader (over the `sse-stream` parser).
//! - [`msg`]: the JSON-RPC messages the cases send.
//! - [`metrics`]: a node's `/metrics` counters and `/upstreamz` statuses.
//! - [`modern`]: requests of the stateless revision 2026-07-28 (`_meta`, mirrored headers).
//! - [`legacy_sse`]: a client of the 2024-11-05 HTTP+SSE transport.
//! - [`bus_drop`]: nodes cut off the bus for a while: their pub/sub connections killed and
//!   their reconnection held off (`maxclients`).
//! - [`bus_probes`]: what the bus cases send from node to node and time (a sampling answer, a
//!   `notify` on a GET stream held elsewhere), node ids, the bus counters of `/metrics`.
//! - [`big_upstream`]: an HTTP MCP upstream whose tool streams an answer of any size (1 GB).
//! - [`sse_upstream`]: a 2024-11-05 HTTP+SSE MCP server, for `kind = "sse"` upstreams.
//! - [`inspector`]: the MCP Inspector's CLI runs, its web UI as a peer process, and the headless
//!   Chromium driver of that UI.
//! - [`failover`]: streaming clients for the failover tests (a held GET stream, a loop of
//!   event-producing calls, `/readyz` polls) and the counts of what they saw.
//! - [`expect`]: shared assertions (refusals, 404 everywhere, 202, 405).
//! - [`eventually`]: the bounded waits (until a condition holds, or while it keeps holding).
//! - [`ports`]: free loopback ports.
//! - [`raw_http`]: one raw HTTP/1.1 exchange over TCP, for requests reqwest cannot send.
//! - [`ws`]: a WebSocket client for the WebSocket transport.
//! - [`temp`]: temporary directories.

pub mod auth_upstream;
pub mod balancer;
pub mod big_upstream;
pub mod bus_drop;
pub mod bus_probes;
pub mod cargo_build;
pub mod client;
pub mod cluster;
pub mod conformance_suite;
pub mod counter;
pub mod daemon;
pub mod dns;
pub mod eventually;
pub mod expect;
pub mod failover;
pub mod inspector;
pub mod jwks_server;
pub mod jwt;
pub mod legacy_sse;
pub mod metrics;
pub mod modern;
pub mod msg;
pub mod netns;
pub mod node;
pub mod oldver_upstream;
pub mod otlp;
pub mod peers;
pub mod ports;
pub mod previous;
pub mod raw_http;
pub mod redis_backend;
pub mod redis_cluster;
pub mod redis_process;
pub mod redis_sentinel;
pub mod redis_server;
pub mod replicated;
pub mod replicated_sdk;
pub mod rmcp_route;
pub mod sse;
pub mod sse_upstream;
pub mod stdio_children;
pub mod temp;
pub mod ticker_upstream;
pub mod upstreams;
pub mod ws;
