//! The `[[upstreams]]` tables of the config file: their fields, defaults and checks. The
//! `build` module turns them into the node's upstream.
//!
//! ```toml
//! tool_separator = "__"          # UpstreamsConfig::separator (the binary's key name)
//!
//! [[upstreams]]
//! name = "weather"               # [A-Za-z0-9_-]{1,64}, unique
//! kind = "http"                  # demo | stdio | http | sse
//! url = "https://weather.example/mcp"
//! headers = { Authorization = "Bearer ${WEATHER_TOKEN}" }
//! timeout_ms = 30000
//!
//! [[upstreams]]
//! name = "files"
//! kind = "stdio"
//! prefix = ""                    # no prefix: tools keep their own names
//! command = "mcp-server-filesystem"
//! args = ["/srv/data"]
//! env = { LOG_LEVEL = "warn" }
//! ```
//!
//! No `[[upstreams]]` at all means the built-in demo server alone, unprefixed. Otherwise every
//! listed upstream becomes a member of an [`crate::aggregate::Aggregate`], even a single one, so
//! names always get their prefix.
//!
//! Submodules: `checks`, what serde cannot check ([`UpstreamsConfig::problems`]); `limits`, the
//! defaults of the size and count limits ([`DEFAULT_MAX_LINE_BYTES`],
//! [`DEFAULT_MAX_MESSAGE_BYTES`], [`DEFAULT_MAX_ATTACHED_SESSIONS`]); `restart`, the stdio restart
//! back-off settings ([`RestartPolicy`]); `nameserver`, a `nameservers` entry
//! ([`parse_nameserver`]). None of them imports an upstream kind (`http`, `stdio`, `sse`): those
//! import the config.

pub mod checks;
mod limits;
mod nameserver;
mod restart;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use self::limits::{
    DEFAULT_MAX_ATTACHED_SESSIONS, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_MESSAGE_BYTES,
};
pub use self::nameserver::parse_nameserver;
pub use self::restart::{
    RestartPolicy, DEFAULT_RESTART_BACKOFF_MAX_MS, DEFAULT_RESTART_BACKOFF_MS,
    DEFAULT_RESTART_STABLE_MS,
};
use crate::aggregate::DEFAULT_SEPARATOR;

/// Default per-upstream request timeout, in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// What an upstream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamKind {
    /// The built-in demo server ([`crate::demo::DemoUpstream`]).
    Demo,
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout (MCP 2025-11-25,
    /// basic/transports, stdio).
    Stdio,
    /// A Streamable HTTP server (MCP 2025-03-26 … 2025-11-25, basic/transports).
    Http,
    /// A legacy HTTP+SSE server (MCP 2024-11-05, transports).
    Sse,
}

impl UpstreamKind {
    /// The kind as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamKind::Demo => "demo",
            UpstreamKind::Stdio => "stdio",
            UpstreamKind::Http => "http",
            UpstreamKind::Sse => "sse",
        }
    }
}

/// What a stateful HTTP upstream does when the upstream session a client session is pinned to
/// is gone (its endpoint answered 404 for it, or refuses connections and no longer resolves).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUpstreamLoss {
    /// Initialize a new upstream session (on a live endpoint) and end the request in flight with
    /// a JSON-RPC error saying the upstream's state was lost; the next request runs in the new
    /// upstream session. The client's session id does not change.
    #[default]
    Reinitialize,
    /// End the client's session cluster-wide (as a DELETE would); the request in flight gets a
    /// JSON-RPC error saying so, and every later request 404, so the client starts over.
    EndSession,
}

impl OnUpstreamLoss {
    /// The value as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OnUpstreamLoss::Reinitialize => "reinitialize",
            OnUpstreamLoss::EndSession => "end_session",
        }
    }
}

/// One `[[upstreams]]` table. Fields for other kinds than the upstream's are refused by
/// [`UpstreamConfig::problems`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Unique name, `[A-Za-z0-9_-]{1,64}`; appears in logs and errors, and is the default prefix.
    pub name: String,
    /// `demo`, `stdio`, `http` or `sse`.
    pub kind: UpstreamKind,
    /// Namespace of the upstream's tools and prompts (`<prefix><separator><name>`). Absent: the
    /// name. `""`: no prefix (names pass unchanged; the first unprefixed upstream listing a name
    /// owns it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How long one request may take, in ms (default 60000); then the client gets -32005 naming
    /// the upstream. Enforced by the upstream kinds that talk to a server (stdio, http, sse); for
    /// per-session stdio and sse it bounds the whole request wherever it runs (forwarded to the
    /// owner node, and run again on a live node after the owner stopped; see `placement`). For
    /// every kind, the demo included, it also bounds how long a call's messages may wait for the
    /// store (a Redis promotion or restart), counted from the call's start; past it the call
    /// ends with -32603 naming the store.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// stdio: the program to run (looked up in `PATH` when it has no `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: environment variables set for it, on top of the node's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: its working directory (default: the node's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// stdio: one child for all sessions instead of one per session (default false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared: bool,
    /// stdio: after the second failed start in a row, how long the next start waits, in ms
    /// (default 500, more than 0); each further failure doubles it, with jitter, up to
    /// `restart_backoff_max_ms`. Meanwhile calls that need a new child fail at once with -32006
    /// and `data.retry_after_ms` (the `stdio` module doc, restart back-off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_backoff_ms: Option<u64>,
    /// stdio: the longest wait between two starts of a crash-looping child, in ms (default
    /// 30000; at least `restart_backoff_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_backoff_max_ms: Option<u64>,
    /// stdio: how long a child must run before its start counts as a success, in ms (default
    /// 10000, more than 0). A child that exits on its own sooner is a failed start; one that ran
    /// this long resets the back-off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_stable_ms: Option<u64>,
    /// stdio with `shared = true`: the most client sessions attached to the shared child on one
    /// node (default 10000, more than 0), which receive its list changes and log messages
    /// outside calls; past it the least recently active session is detached (it gets no more
    /// of them until its next request there attaches it again, with the resource subscriptions
    /// it had made through the child, which are kept for at most this many detached sessions;
    /// logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attached_sessions: Option<u64>,
    /// stdio: the longest line the child may write on stdout, in bytes, its newline not counted
    /// (default [`DEFAULT_MAX_LINE_BYTES`], 16 MiB; at least 1). A longer line fails the calls in
    /// flight with -32006 naming the upstream and this limit, and stops the child (the stream
    /// cannot be resynchronised); the session's next request starts a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_line_bytes: Option<u64>,
    /// http/sse: the server's URL (`http://` or `https://`): the MCP endpoint (http) or the SSE
    /// endpoint (sse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// http/sse: headers sent with every request. A value may reference environment variables as
    /// `${VAR}`, expanded when the node starts ([`UpstreamConfig::expanded`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// http/sse: the largest message the server may send, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_BYTES`], 32 MiB; at least 1): a JSON answer body, one SSE event (its
    /// lines included), an error body. A larger one is not read further: the call fails with
    /// -32006 naming the upstream and this limit (a broken response stream is not resumed, since
    /// the same event would come again), and a legacy SSE connection is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u64>,
    /// http: the protocol revision the server speaks when it is not a session-era server:
    /// `"2026-07-28"` makes every request a self-contained stateless one
    /// (`http::modern::ModernHttpUpstream`). Absent (default): the session era
    /// (`initialize`, `Mcp-Session-Id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// http: the server keeps nothing per session (or its replicas share it), so its requests
    /// may be spread over its endpoints freely (default false): no pin, no cookie binding, and a
    /// session it forgot (404) is initialized again and the request retried once, transparently.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stateless: bool,
    /// http (not `stateless`): what happens when a client session's upstream session is lost
    /// (its endpoint answered 404 for it, or refuses connections and no longer resolves):
    /// `"reinitialize"` (default) or `"end_session"` ([`OnUpstreamLoss`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_upstream_loss: Option<OnUpstreamLoss>,
    /// http: the URL's host is resolved again to its endpoints at most this often, in ms
    /// (default 5000), when a new upstream session picks one; at once when a pinned endpoint
    /// refuses a connection. Must be > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_interval_ms: Option<u64>,
    /// http: the DNS servers that resolve the URL's host (`"ip"` for port 53, or `"ip:port"`);
    /// empty (default): the system's configuration (`/etc/resolv.conf`, `/etc/hosts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// http: at most this many endpoints of a resolution are used (default 64; the lowest
    /// addresses); the rest get no session. Must be > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_endpoints: Option<usize>,
    /// http: at most this many bytes of cookies (the `Cookie` header's length) kept per upstream
    /// session for balancer affinity (default 4096); a cookie past it is not kept (a warning
    /// names the upstream). 0: no cookies are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cookie_bytes: Option<usize>,
}

/// A byte count as `usize` (saturating on a platform whose `usize` is narrower).
fn to_usize(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Every upstream of a node and the separator of their namespaces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamsConfig {
    /// Between prefix and name (default `__`): 1–16 of `A-Z a-z 0-9 _ - .`.
    #[serde(default = "default_separator")]
    pub separator: String,
    /// The upstreams, in the order their entries appear in merged lists.
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
    /// `[policy]`: who may see which upstream, tool, resource and prompt ([`crate::policy`]).
    #[serde(default)]
    pub policy: crate::policy::PolicyConfig,
    /// Most pages of one upstream in one walk of a merged list (default 1000, at least 1): past
    /// them, or at a `nextCursor` the upstream gave before in the walk, the list fails with an
    /// error naming the upstream.
    #[serde(default = "default_list_max_pages")]
    pub list_max_pages: u32,
}

fn default_separator() -> String {
    DEFAULT_SEPARATOR.to_owned()
}

fn default_list_max_pages() -> u32 {
    crate::aggregate::DEFAULT_LIST_MAX_PAGES
}

impl Default for UpstreamsConfig {
    fn default() -> Self {
        UpstreamsConfig {
            separator: default_separator(),
            upstreams: Vec::new(),
            policy: crate::policy::PolicyConfig::default(),
            list_max_pages: default_list_max_pages(),
        }
    }
}

impl UpstreamConfig {
    /// An upstream of `kind` named `name` with every other field at its default.
    pub fn new(name: &str, kind: UpstreamKind) -> UpstreamConfig {
        UpstreamConfig {
            name: name.to_owned(),
            kind,
            prefix: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            shared: false,
            restart_backoff_ms: None,
            restart_backoff_max_ms: None,
            restart_stable_ms: None,
            max_attached_sessions: None,
            max_line_bytes: None,
            url: None,
            headers: BTreeMap::new(),
            max_message_bytes: None,
            revision: None,
            stateless: false,
            on_upstream_loss: None,
            resolve_interval_ms: None,
            nameservers: Vec::new(),
            max_endpoints: None,
            max_cookie_bytes: None,
        }
    }

    /// The effective `max_line_bytes` (stdio).
    pub fn line_limit(&self) -> usize {
        to_usize(self.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES))
    }

    /// The effective `max_message_bytes` (http, sse).
    pub fn message_limit(&self) -> usize {
        to_usize(self.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES))
    }

    /// The effective prefix: the configured one, else the name; `None` for `""`.
    pub fn effective_prefix(&self) -> Option<&str> {
        let prefix = self.prefix.as_deref().unwrap_or(&self.name);
        (!prefix.is_empty()).then_some(prefix)
    }

    /// The stdio restart settings with their defaults.
    pub fn restart_policy(&self) -> RestartPolicy {
        let defaults = RestartPolicy::default();
        let ms = std::time::Duration::from_millis;
        RestartPolicy {
            backoff: self.restart_backoff_ms.map_or(defaults.backoff, ms),
            backoff_max: self.restart_backoff_max_ms.map_or(defaults.backoff_max, ms),
            stable: self.restart_stable_ms.map_or(defaults.stable, ms),
        }
    }

    /// stdio, shared: the most sessions attached to the shared child (default
    /// [`DEFAULT_MAX_ATTACHED_SESSIONS`]).
    pub fn max_attached_sessions(&self) -> usize {
        self.max_attached_sessions
            .map_or(DEFAULT_MAX_ATTACHED_SESSIONS, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
    }

    /// A copy with `${VAR}` in header values replaced by `lookup(VAR)`. Errors naming the upstream,
    /// the header and the variable when a variable is not set, and on malformed references.
    pub fn expanded(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<UpstreamConfig, String> {
        let mut out = self.clone();
        for (header, value) in out.headers.iter_mut() {
            *value = expand(value, &lookup)
                .map_err(|e| format!("upstream `{}`: header `{header}`: {e}", self.name))?;
        }
        Ok(out)
    }
}

/// Replaces each `${VAR}` (`VAR` = `[A-Za-z_][A-Za-z0-9_]*`) in `text` by `lookup(VAR)`; a `$`
/// not followed by `{` stays as is. Errors on an unset variable, an unclosed `${` or a bad name.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("unclosed `${{` in `{text}`"))?;
        let var = &after[..close];
        let valid = var
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "`${{{var}}}` is not a valid environment variable reference"
            ));
        }
        let value =
            lookup(var).ok_or_else(|| format!("environment variable `{var}` is not set"))?;
        out.push_str(&value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
