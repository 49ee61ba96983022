//! The node's Prometheus metrics, in one registry per process ([`get`]), rendered for
//! `/metrics` by [`render`] in the OpenMetrics text format ([`CONTENT_TYPE`]; Prometheus reads
//! it). Names follow Prometheus conventions: base units (`_seconds`), counters end in `_total`
//! (the encoder adds the suffix to the names registered here).
//!
//! Labels have bounded cardinality only ([`labels`]): MCP methods from a fixed list, upstream
//! names from the config, tool names up to `metrics.max_tool_labels` then `other`, store
//! operations and stream kinds from fixed lists. Never a session id, a request id, a resource URI
//! or a tool argument.

pub mod bus;
pub mod labels;

use std::sync::LazyLock;
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A histogram of durations in seconds: 14 buckets from 100 µs to about 15 s (×2.5 apart).
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 14))
}

/// A histogram of counts: 1, 4, 16, … 16,384.
fn counts() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 8))
}

/// `text` without its final period (the encoder adds one).
fn help(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

type Seconds<L> = Family<L, Histogram, fn() -> Histogram>;

macro_rules! counters {
    ($($field:ident => $name:literal, $help:literal;)*) => {
        /// The node's event counters (each rendered with the `_total` suffix).
        #[derive(Debug)]
        pub struct Counters {
            $(#[doc = $help] pub $field: Counter,)*
        }

        impl Counters {
            fn registered(registry: &mut Registry) -> Counters {
                let counters = Counters { $($field: Counter::default(),)* };
                $(registry.register($name, help($help), counters.$field.clone());)*
                counters
            }
        }
    };
}

counters! {
    sessions_created => "switchboard_sessions_created", "Sessions created by initialize on this node.";
    sessions_deleted => "switchboard_sessions_deleted", "Sessions ended by DELETE on this node.";
    sessions_reaped => "switchboard_sessions_reaped", "Expired sessions cleaned up by this node's reaper passes.";
    sessions_refused => "switchboard_sessions_refused", "initialize refused because the session cap was reached.";
    streams_resumed => "switchboard_streams_resumed", "Streams resumed with Last-Event-ID on this node.";
    streams_taken_over => "switchboard_streams_taken_over", "Local stream connections replaced by a newer connection.";
    streams_lagged => "switchboard_streams_lagged", "Events that found a full connection queue (recovered from the event log).";
    replay_misses => "switchboard_replay_misses", "Resumptions refused: unknown stream or trimmed log.";
    requests_aborted => "switchboard_requests_aborted", "Requests failed because the node running them died.";
    stateless_cancelled => "switchboard_stateless_cancelled", "2026-07-28 calls cancelled before they finished: their response stream closed, tasks/cancel, the task's TTL, or refused at stateless.tasks.max_per_principal.";
    tasks_created => "switchboard_tasks_created", "Tasks (tasks extension) created on this node.";
    tasks_cancelled => "switchboard_tasks_cancelled", "Task calls running on this node stopped by tasks/cancel.";
    tasks_lost => "switchboard_tasks_lost", "Tasks this node failed because the node running them died.";
    tasks_expired => "switchboard_tasks_expired", "Task calls still running on this node when the task reached stateless.tasks.ttl, cancelled then (a task that finished earlier expires without counting).";
    tasks_refused => "switchboard_tasks_refused", "Calls that would have become tasks refused at stateless.tasks.max_per_principal (cancelled, 503).";
    replies_unmatched => "switchboard_replies_unmatched", "Client responses for which no server request was waiting.";
    listen_lagged => "switchboard_listen_lagged", "subscriptions/listen streams ended because their queue was full (slow reader).";
    listen_refused => "switchboard_listen_refused", "subscriptions/listen refused at stateless.max_listeners.";
    notifications_rerouted => "switchboard_notifications_rerouted", "Notifications of requests answered as one JSON body (Accept without text/event-stream, or a batch) put on the session's standalone stream instead.";
    notifications_dropped => "switchboard_notifications_dropped", "2026-07-28 notifications with no stream to carry them: of a request answered as one JSON body (Accept without text/event-stream), of a task's call after its CreateTaskResult, after the request's stream closed, or unsolicited with no subscriptions/listen stream to carry them.";
    fences => "switchboard_fences", "Times this node fenced itself (it had not reached the store for two cluster.node_ttl) and refused requests until it reached it again.";
    inbox_resubscribed => "switchboard_inbox_resubscribed", "Times this node's bus inbox lost its Redis subscriptions and subscribed again (a Redis restart or failover); held streams catch up from their logs.";
    heartbeats_evicted => "switchboard_heartbeats_evicted", "Times this node found its own heartbeat key gone although its previous heartbeat was answered well within cluster.node_ttl: probably evicted by Redis (maxmemory-policy other than noeviction), or lost in a Redis restart without persistence.";
}

/// Labels of [`Metrics::requests`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The MCP method ([`labels::method`]).
    pub method: &'static str,
    /// The upstream it reached: its name, `*` for several (a merged list), empty for none.
    pub upstream: &'static str,
}

/// Labels of [`Metrics::upstream_calls`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamCallLabels {
    /// The upstream's configured name ([`labels::upstream`]).
    pub upstream: &'static str,
    /// The MCP method ([`labels::method`]).
    pub method: &'static str,
}

/// Labels of [`Metrics::upstream_call_errors`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamErrorLabels {
    /// The upstream's configured name.
    pub upstream: &'static str,
    /// The JSON-RPC error code of the answer ([`labels::code`]: `other` outside the reserved
    /// range).
    pub code: String,
}

/// Labels of [`Metrics::tool_calls`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    /// The upstream's configured name ([`labels::upstream`]).
    pub upstream: &'static str,
    /// The tool name ([`labels::tool`]: tools that exist, capped, then `other`).
    pub tool: &'static str,
    /// `ok`, `tool_error` (a result with `isError: true`) or `error` (a JSON-RPC error).
    pub outcome: &'static str,
}

/// Labels of the store operation metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// The store operation: the `Store` traits' method names (`append`, `replay`,
    /// `route_reply`, …), but `admit` for `check` (a request's admission: the session loaded and
    /// touched, its principal, id and in-flight cap checked).
    pub operation: &'static str,
}

/// Labels of [`Metrics::rate_limit_decisions`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RateDecisionLabels {
    /// `allowed`, `limited` or `store_error`.
    pub decision: &'static str,
    /// The limit's name: `principal`, `tool:<name>` or `upstream:<name>`, one per configured
    /// limit (so the label set is bounded by the config).
    pub limit: String,
}

/// Labels of [`Metrics::bus_delivery`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BusLabels {
    /// The bus message's kind (`event`, `reply`, `forward`, …).
    pub message: &'static str,
}

/// Labels of [`Metrics::streams_open`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabels {
    /// `request` (a POST's answer stream) or `standalone` (a session's GET stream, legacy SSE
    /// or WebSocket connection). `subscriptions/listen` streams are `switchboard_listeners_open`.
    pub kind: &'static str,
}

/// Labels of [`Metrics::redis_evicting`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    /// Redis's `maxmemory-policy` ([`labels::maxmemory_policy`]), or [`labels::UNREAD`].
    pub policy: &'static str,
}

/// Every metric of the process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The event counters.
    pub counters: Counters,
    /// `switchboard_request_duration_seconds{method, upstream}`: client requests handled here,
    /// from the parsed message to its answer.
    pub requests: Seconds<RequestLabels>,
    /// `switchboard_upstream_call_duration_seconds{upstream, method}`: calls to a configured
    /// upstream, on the node the client's request reached.
    pub upstream_calls: Seconds<UpstreamCallLabels>,
    /// `switchboard_upstream_call_errors_total{upstream, code}`: those answered with a JSON-RPC
    /// error (cancellations, -32004, not counted).
    pub upstream_call_errors: Family<UpstreamErrorLabels, Counter>,
    /// `switchboard_tool_calls_total{upstream, tool, outcome}`: counted by the upstream layer (every
    /// transport and revision), with the upstream's own tool name.
    pub tool_calls: Family<ToolLabels, Counter>,
    /// `switchboard_store_operation_duration_seconds{operation}`: one store operation (with
    /// Redis, its round trips: a script, a pipeline).
    pub store_operations: Seconds<OperationLabels>,
    /// `switchboard_store_operation_errors_total{operation}`.
    pub store_errors: Family<OperationLabels, Counter>,
    /// `switchboard_rate_limit_decisions_total{decision, limit}`: each limit a request was
    /// checked against and passed (`allowed`), the limit that refused one (`limited`), and each
    /// limit left unchecked because the store failed (`store_error`).
    pub rate_limit_decisions: Family<RateDecisionLabels, Counter>,
    /// `switchboard_resume_replay_events`: events replayed per `Last-Event-ID` resumption.
    pub replay_events: Histogram,
    /// `switchboard_resume_replay_duration_seconds`: reading and writing that replay.
    pub replay_duration: Histogram,
    /// `switchboard_bus_delivery_seconds{message}`: events (`message="event"`) from their append
    /// (the Redis server's clock, in the log position) to their arrival in this node's inbox.
    pub bus_delivery: Seconds<BusLabels>,
    /// `switchboard_streams_open{kind}`: SSE/WebSocket streams this node holds open.
    pub streams_open: Family<StreamLabels, Gauge>,
    /// `switchboard_calls_running`: client requests running on this node.
    pub calls_running: Gauge,
    /// `switchboard_listeners_open`: open `subscriptions/listen` streams.
    pub listeners_open: Gauge,
    /// `switchboard_node_fenced`: 1 while this node refuses requests because it cannot reach the
    /// store.
    pub fenced: Gauge,
    /// The bus's counters ([`bus::BusMetrics`]).
    pub bus: bus::BusMetrics,
    /// `switchboard_redis_evicting{policy}`: one series, the `maxmemory-policy` the store's
    /// Redis reported last ([`Metrics::redis_policy`]); 1 when it may evict keys (anything but
    /// `noeviction`), else 0 (also `policy="unknown"`, 0, when it could not be read). No series
    /// on the memory store.
    pub redis_evicting: Family<PolicyLabels, Gauge>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let counters = Counters::registered(&mut registry);
        let bus = bus::BusMetrics::registered(&mut registry);
        let m = Metrics {
            bus,
            counters,
            requests: Family::new_with_constructor(seconds),
            upstream_calls: Family::new_with_constructor(seconds),
            upstream_call_errors: Family::default(),
            tool_calls: Family::default(),
            store_operations: Family::new_with_constructor(seconds),
            store_errors: Family::default(),
            rate_limit_decisions: Family::default(),
            replay_events: counts(),
            replay_duration: seconds(),
            bus_delivery: Family::new_with_constructor(seconds),
            streams_open: Family::default(),
            calls_running: Gauge::default(),
            listeners_open: Gauge::default(),
            fenced: Gauge::default(),
            redis_evicting: Family::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        // Each help text below ends without a period: the encoder adds one.
        r.register("switchboard_request_duration_seconds", "Client requests handled by this node, from the parsed message to the answer, by MCP method and the upstream reached (* for several, empty for none)", m.requests.clone());
        r.register(
            "switchboard_upstream_call_duration_seconds",
            "Calls to a configured upstream through this node, by upstream and MCP method",
            m.upstream_calls.clone(),
        );
        r.register("switchboard_upstream_call_errors", "Calls to the upstream through this node answered with a JSON-RPC error, by upstream and error code (cancellations not counted)", m.upstream_call_errors.clone());
        r.register("switchboard_tool_calls", "tools/call requests that reached an upstream, by upstream, tool (tools that answered a result, at most metrics.max_tool_labels names, then other) and outcome (ok, tool_error, error)", m.tool_calls.clone());
        r.register(
            "switchboard_store_operation_duration_seconds",
            "Store operations (with Redis: their round trips) by operation",
            m.store_operations.clone(),
        );
        r.register(
            "switchboard_store_operation_errors",
            "Store operations that failed, by operation",
            m.store_errors.clone(),
        );
        r.register(
            "switchboard_rate_limit_decisions",
            "Rate-limit decisions by decision (allowed: a limit passed, limited: the limit that refused a request, store_error: a limit left unchecked because the store failed) and limit",
            m.rate_limit_decisions.clone(),
        );
        r.register(
            "switchboard_resume_replay_events",
            "Events replayed per Last-Event-ID resumption",
            m.replay_events.clone(),
        );
        r.register(
            "switchboard_resume_replay_duration_seconds",
            "Time to read and write one Last-Event-ID replay",
            m.replay_duration.clone(),
        );
        r.register(
            "switchboard_bus_delivery_seconds",
            "Events on the bus, from their append (the Redis server's clock) to this node's inbox",
            m.bus_delivery.clone(),
        );
        r.register(
            "switchboard_streams_open",
            "SSE and WebSocket streams this node holds open, by kind",
            m.streams_open.clone(),
        );
        r.register(
            "switchboard_calls_running",
            "Client requests running on this node",
            m.calls_running.clone(),
        );
        r.register(
            "switchboard_listeners_open",
            "Open subscriptions/listen streams on this node",
            m.listeners_open.clone(),
        );
        r.register(
            "switchboard_node_fenced",
            "1 while this node refuses requests because it cannot reach the store, else 0",
            m.fenced.clone(),
        );
        r.register(
            "switchboard_redis_evicting",
            "1 while the store's Redis has a maxmemory-policy that may evict keys (labelled with it), 0 under noeviction or when it could not be read (policy unknown)",
            m.redis_evicting.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Counts one store operation that took from `started` until now (an error too, when
    /// `failed`).
    pub fn store_operation(&self, operation: &'static str, started: Instant, failed: bool) {
        let labels = OperationLabels { operation };
        self.store_operations
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        if failed {
            self.store_errors.get_or_create(&labels).inc();
        }
    }

    /// Counts one rate-limit decision of `limit` (see [`Metrics::rate_limit_decisions`]).
    pub fn rate_decision(&self, decision: &'static str, limit: &str) {
        let labels = RateDecisionLabels {
            decision,
            limit: limit.to_owned(),
        };
        self.rate_limit_decisions.get_or_create(&labels).inc();
    }

    /// Sets [`Metrics::redis_evicting`] to the one series of `policy` (a label from
    /// [`labels::maxmemory_policy`] or [`labels::UNREAD`]): 1 when `evicting`, else 0.
    pub fn redis_policy(&self, policy: &'static str, evicting: bool) {
        self.redis_evicting.clear();
        self.redis_evicting
            .get_or_create(&PolicyLabels { policy })
            .set(i64::from(evicting));
    }

    /// The gauge of open streams of `kind` (see [`StreamLabels::kind`]).
    pub fn streams(&self, kind: &'static str) -> Gauge {
        self.streams_open
            .get_or_create(&StreamLabels { kind })
            .clone()
    }
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// Every metric of [`get`], then what `extra` collects at this scrape (series computed from
/// state, such as each upstream's status), as one OpenMetrics text ending in `# EOF`.
pub fn render(extra: Option<Box<dyn Collector>>) -> String {
    let mut out = String::new();
    let _ = encode_registry(&mut out, &get().registry);
    if let Some(extra) = extra {
        let mut scrape = Registry::default();
        scrape.register_collector(extra);
        let _ = encode_registry(&mut out, &scrape);
    }
    let _ = encode_eof(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_with_prometheus_names() {
        get().counters.sessions_created.inc();
        get()
            .requests
            .get_or_create(&RequestLabels {
                method: "tools/call",
                upstream: "demo",
            })
            .observe(0.002);
        let text = render(None);
        assert!(
            text.contains("# TYPE switchboard_sessions_created counter"),
            "{text}"
        );
        assert!(
            text.contains("\nswitchboard_sessions_created_total "),
            "{text}"
        );
        assert!(
            text.contains(
                "switchboard_request_duration_seconds_count{method=\"tools/call\",upstream=\"demo\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("Sessions created by initialize on this node.\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
