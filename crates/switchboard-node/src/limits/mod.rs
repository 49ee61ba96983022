//! `[rate_limits]`: rate limits per principal, per principal and tool, and per upstream,
//! enforced cluster-wide through the store ([`switchboard_store::rate`], GCRA) in the request's
//! admission round trip ([`admission`]).
//!
//! Which requests count: every JSON-RPC request that runs a method, on every transport, the
//! same way (see docs/limits.md):
//! - `principal`: every request a principal sends: on a session (a POST, each member of a
//!   2025-03-26 batch, a legacy HTTP+SSE message, a WebSocket message: all through
//!   `session::admit`, which calls [`admission::check`]), every 2026-07-28 (stateless) request
//!   ([`admission::without_session`]), and its `initialize`, for each principal on its own
//!   (without authorization every client is `anonymous`, so the limit is then the whole
//!   anonymous traffic's);
//! - `tools.<name>`: `tools/call` of the tool named `<name>` (as the client names it, prefix and
//!   all), per principal;
//! - `upstreams.<name>`: `tools/call` of a tool of that upstream (a name that starts with the
//!   upstream's prefix and the separator), all principals together.
//!
//! Not counted: notifications and responses (they run no method of ours), and a request refused
//! before its admission (a malformed one, a stateless one failing its header checks).
//!
//! The config section is [`RateLimitSettings`]; the defaults below are the only place they are
//! written (no limit at all).

pub(crate) mod admission;

use serde_json::Value;
use switchboard_store::Rate;

pub use crate::config::rate_limits::{OnStoreError, RateLimitSettings, RateSpec};

impl RateSpec {
    /// The burst in effect.
    pub fn burst(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| (self.rate.ceil() as u32).max(1))
    }

    /// The window of the equivalent quota policy in whole seconds, for `RateLimit-Policy`: the
    /// time `burst` requests take at `rate` (rounded up, at least 1).
    pub fn window_secs(&self) -> u64 {
        ((f64::from(self.burst()) / self.rate).ceil() as u64).max(1)
    }

    fn problem(&self, path: &str) -> Option<String> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Some(format!(
                "{path}.rate must be a number of requests per second above 0, got {}",
                self.rate
            ));
        }
        (self.burst == Some(0)).then(|| format!("{path}.burst must be at least 1"))
    }
}

impl RateLimitSettings {
    /// What is wrong with the settings, each naming its dotted key (upstream names are checked
    /// against `[[upstreams]]` by the config crate).
    pub fn problems(&self) -> Vec<String> {
        let principal = self
            .principal
            .iter()
            .map(|s| ("rate_limits.principal".to_owned(), s));
        let tools = self
            .tools
            .iter()
            .map(|(n, s)| (format!("rate_limits.tools.{n}"), s));
        let upstreams = self
            .upstreams
            .iter()
            .map(|(n, s)| (format!("rate_limits.upstreams.{n}"), s));
        let mut problems: Vec<String> = principal
            .chain(tools)
            .chain(upstreams)
            .filter_map(|(path, spec)| spec.problem(&path))
            .collect();
        if self.tools.contains_key("") {
            problems.push("rate_limits.tools: a tool name must not be empty".into());
        }
        problems
    }

    /// Whether any limit is configured.
    pub fn any(&self) -> bool {
        self.principal.is_some() || !self.tools.is_empty() || !self.upstreams.is_empty()
    }

    /// The limits of a request with `method` and body `raw` run as `principal` (see the module
    /// doc), in the order principal, tool, upstream.
    pub fn rates_for(&self, principal: &str, method: &str, raw: &Value) -> Vec<Rate> {
        let mut rates = Vec::new();
        if let Some(spec) = &self.principal {
            rates.push(rate("principal".into(), principal, "p", spec));
        }
        if method != "tools/call" || (self.tools.is_empty() && self.upstreams.is_empty()) {
            return rates;
        }
        let Some(tool) = raw.pointer("/params/name").and_then(Value::as_str) else {
            return rates;
        };
        if let Some(spec) = self.tools.get(tool) {
            rates.push(rate(
                format!("tool:{tool}"),
                principal,
                &format!("t:{tool}"),
                spec,
            ));
        }
        for (upstream, spec) in &self.upstreams {
            let head = self.tool_prefixes.get(upstream);
            if head.is_some_and(|h| tool.starts_with(h.as_str())) {
                let tag = format!("u:{upstream}");
                rates.push(rate(format!("upstream:{upstream}"), &tag, "u", spec));
            }
        }
        rates
    }

    /// The configured limit named `name` (as in [`Rate::name`]).
    pub fn spec_of(&self, name: &str) -> Option<&RateSpec> {
        if name == "principal" {
            return self.principal.as_ref();
        }
        if let Some(tool) = name.strip_prefix("tool:") {
            return self.tools.get(tool);
        }
        self.upstreams.get(name.strip_prefix("upstream:")?)
    }
}

fn rate(name: String, tag: &str, key: &str, spec: &RateSpec) -> Rate {
    Rate::new(&name, tag, key, spec.rate, spec.burst())
}

#[cfg(test)]
mod tests;
