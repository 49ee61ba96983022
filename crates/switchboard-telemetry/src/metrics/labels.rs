//! Label values of bounded cardinality: MCP methods from a fixed list, upstream names and tool
//! names interned up to a cap (past it, `other`), and the upstream a request reached, noted by
//! the upstream layer and read by the request's own histogram.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::{Mutex, RwLock};

/// The label value past every cap.
pub const OTHER: &str = "other";

/// Default of [`set_max_tool_labels`]: distinct tool names a node labels before `other`.
pub const DEFAULT_MAX_TOOL_LABELS: usize = 100;

/// Distinct upstream names labelled before `other` (upstreams come from the config, so this is
/// never reached by a sane config).
const MAX_UPSTREAM_LABELS: usize = 256;

/// The MCP methods (every revision, 2024-11-05 to 2026-07-28) that get a label of their own;
/// anything else is `other`, so a client cannot mint series by sending made-up methods.
const METHODS: [&str; 30] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "notifications/roots/list_changed",
    "notifications/resources/updated",
    "notifications/tools/list_changed",
];

/// `method` as a label: itself when it is a known MCP method, else [`OTHER`].
pub fn method(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or(OTHER)
}

/// Redis's `maxmemory-policy` values (Redis 7), each a label of its own; anything else is
/// [`OTHER`], and a policy that could not be read is [`UNREAD`].
const MAXMEMORY_POLICIES: [&str; 8] = [
    "noeviction",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
];

/// The label of a `maxmemory-policy` that could not be read (`INFO` refused).
pub const UNREAD: &str = "unknown";

/// A Redis `maxmemory-policy` as a label: itself when Redis knows it, else [`OTHER`].
pub fn maxmemory_policy(policy: &str) -> &'static str {
    MAXMEMORY_POLICIES
        .iter()
        .find(|p| **p == policy)
        .copied()
        .unwrap_or(OTHER)
}

/// A set of interned label values with a cap.
struct Interned {
    values: RwLock<HashSet<&'static str>>,
    /// Serializes inserts, so the cap is exact.
    insert: Mutex<()>,
}

impl Interned {
    fn new() -> Interned {
        Interned {
            values: RwLock::new(HashSet::new()),
            insert: Mutex::new(()),
        }
    }

    /// `value` interned (each distinct value leaked once: the set is capped), or [`OTHER`] once
    /// `max` values are known.
    fn get(&self, value: &str, max: usize) -> &'static str {
        let read = self.values.read();
        if let Some(v) = read.get(value) {
            return v;
        }
        drop(read);
        let _one = self.insert.lock();
        let mut write = self.values.write();
        if let Some(v) = write.get(value) {
            return v;
        }
        if write.len() >= max {
            return OTHER;
        }
        let leaked: &'static str = Box::leak(value.to_owned().into_boxed_str());
        write.insert(leaked);
        leaked
    }
}

fn upstreams() -> &'static Interned {
    static SET: OnceLock<Interned> = OnceLock::new();
    SET.get_or_init(Interned::new)
}

fn tools() -> &'static Interned {
    static SET: OnceLock<Interned> = OnceLock::new();
    SET.get_or_init(Interned::new)
}

static MAX_TOOL_LABELS: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_TOOL_LABELS);

/// Sets how many distinct tool names get a label of their own (`metrics.max_tool_labels`); the
/// rest share [`OTHER`]. Names already labelled keep their label.
pub fn set_max_tool_labels(max: usize) {
    MAX_TOOL_LABELS.store(max, Ordering::Relaxed);
}

/// The longest tool name labelled (MCP 2025-11-25, server/tools: names are 1 to 128 characters).
const MAX_TOOL_NAME: usize = 128;

/// An upstream's configured name as a label.
pub fn upstream(name: &str) -> &'static str {
    upstreams().get(name, MAX_UPSTREAM_LABELS)
}

/// A tool name as a label: itself for the first [`set_max_tool_labels`] distinct names of tools
/// that exist (`exists`: the call reached the tool, it answered a result), then [`OTHER`]. A name
/// no tool answered to (a client's made-up name) gets a label only when an earlier call of it
/// did; one over 128 bytes never does. So clients can neither grow the series nor use up the
/// cap before the real tools.
pub fn tool(name: &str, exists: bool) -> &'static str {
    if name.len() > MAX_TOOL_NAME {
        return OTHER;
    }
    if exists {
        return tools().get(name, MAX_TOOL_LABELS.load(Ordering::Relaxed));
    }
    tools().get(name, 0)
}

/// A JSON-RPC error code as a label: the code for one in the range JSON-RPC reserves
/// (-32768 to -32000: the protocol's and MCP's codes), else [`OTHER`] (an upstream's own codes are
/// unbounded).
pub fn code(code: i64) -> String {
    if (-32768..=-32000).contains(&code) {
        code.to_string()
    } else {
        OTHER.to_owned()
    }
}

tokio::task_local! {
    /// The upstream the running request reached, noted by [`note_upstream`].
    static REACHED: std::cell::Cell<&'static str>;
}

/// Runs `work` with a slot that [`note_upstream`] fills; returns its output and the upstream
/// label: the one upstream it reached, `*` for several (a merged list), `""` for none.
pub async fn reaching_upstream<F: std::future::Future>(work: F) -> (F::Output, &'static str) {
    REACHED
        .scope(std::cell::Cell::new(""), async move {
            let out = work.await;
            (out, REACHED.with(std::cell::Cell::get))
        })
        .await
}

/// Notes that the current request reached upstream `label` (from [`upstream`]). Outside
/// [`reaching_upstream`] it does nothing.
pub fn note_upstream(label: &'static str) {
    let _ = REACHED.try_with(|slot| {
        let now = slot.get();
        if now.is_empty() {
            slot.set(label);
        } else if now != label {
            slot.set("*");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method("tools/call"), "tools/call");
        assert_eq!(method("made/up"), OTHER);
    }

    #[test]
    fn made_up_and_long_tool_names_share_other() {
        assert_eq!(tool(&"x".repeat(129), true), OTHER);
        assert_eq!(tool("never-answered-name", false), OTHER);
        assert_eq!(tool("answered-name", true), "answered-name");
        assert_eq!(tool("answered-name", false), "answered-name");
        assert_eq!(code(-32602), "-32602");
        assert_eq!(code(1000), OTHER);
        assert_eq!(maxmemory_policy("volatile-ttl"), "volatile-ttl");
        assert_eq!(maxmemory_policy("made-up"), OTHER);
    }

    #[test]
    fn tool_labels_stop_at_the_cap() {
        let set = Interned::new();
        assert_eq!(set.get("a", 2), "a");
        assert_eq!(set.get("b", 2), "b");
        assert_eq!(set.get("c", 2), OTHER);
        assert_eq!(set.get("a", 2), "a");
    }

    #[tokio::test]
    async fn the_reached_upstream_is_one_name_or_a_star() {
        let (_, one) = reaching_upstream(async { note_upstream("x") }).await;
        assert_eq!(one, "x");
        let (_, two) = reaching_upstream(async {
            note_upstream("x");
            note_upstream("y");
        })
        .await;
        assert_eq!(two, "*");
        let (_, none) = reaching_upstream(async {}).await;
        assert_eq!(none, "");
    }
}
