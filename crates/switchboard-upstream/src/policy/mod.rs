//! Per-principal policy: which upstreams, tools, resources and prompts a request's
//! [`Principal`] may see and use. Applied by the aggregate (`Aggregate`), where names are
//! known: merged lists are filtered, and a call of a denied item gets the same error as a call of
//! an item that does not exist ([`unknown_tool`], [`unknown_prompt`], [`resource_not_found`]).
//!
//! How rules combine, for one principal and one item (an upstream, a tool, a resource, a prompt):
//! 1. The rules that *match* the principal are those whose `principals` (if given) contain its
//!    name (`*` globs) and whose `scopes` (if given) share at least one scope with its credential.
//!    Rule order does not matter.
//! 2. No rule matches: `policy.default` decides (`allow`, or `deny`: nothing is visible).
//! 3. Any matching rule's deny list of the item's kind matches the item: denied (deny wins).
//! 4. Some matching rules have a non-empty allow list of that kind: allowed only when one of those
//!    lists matches the item ("only these"; the lists of several rules add up).
//! 5. Otherwise allowed.
//!
//! Step-up (MCP 2025-11-25, basic/authorization, Scope Challenge Handling): an item hidden from
//! a principal only because it lacks a scope, that is one a rule naming the principal (or no
//! principals) and carrying `scopes` would make visible by naming the item exactly in its allow
//! list, is not "unknown" to it but needs those scopes: [`Policy::lacking_scopes`] names them and the node answers 403 with an
//! `insufficient_scope` challenge, so the client can ask for a wider token and retry. An item a
//! deny list hides stays unknown whatever the scopes. `[policy.methods]` names scopes a method
//! needs outright.
//!
//! A tool, prompt or resource is visible only when its upstream is too. Tools and prompts are
//! named as the client sees them (the upstream's prefix included: `weather__forecast`);
//! resources by URI, templates by their `uriTemplate` text; `*` matches any run of characters
//! (`/` included), nothing else is special.
//!
//! [`Principal::internal`] (the node's own requests) is never restricted, so no rule can hide
//! from the node what it needs for its own checks; a client request never runs as it.
//!
//! Source of the refusal's shape: MCP 2025-11-25 server/tools, Error Handling (unknown tools are
//! -32602); server/resources, Error Handling (-32002 resource not found, `data.uri`).

mod config;

#[cfg(test)]
mod tests;

use serde_json::json;
use switchboard_protocol::codes;

pub use config::{PolicyConfig, PolicyDefault, PolicyRule};

use crate::item::Kind;
use crate::upstream::RpcError;
use crate::Principal;

/// The checked `[policy]` section (see the module doc for how its rules combine).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    config: PolicyConfig,
}

impl Policy {
    /// The policy of a `[policy]` section; errors with every problem of
    /// [`PolicyConfig::problems`] (joined by `; `), `upstreams` being the configured names.
    pub fn new(config: PolicyConfig, upstreams: &[&str]) -> Result<Policy, String> {
        let problems = config.problems(upstreams);
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(Policy { config })
    }

    /// Whether the policy restricts nobody (no rules, default allow).
    pub fn is_off(&self) -> bool {
        self.config.is_off()
    }

    /// What `principal` may see.
    pub fn view(&self, principal: &Principal) -> View<'_> {
        if self.is_off() || principal.is_internal() {
            return View {
                unrestricted: true,
                deny_all: false,
                default: self.config.default,
                rules: Vec::new(),
                wider: Vec::new(),
            };
        }
        let (mut rules, mut wider) = (Vec::new(), Vec::new());
        for rule in &self.config.rules {
            if matches_principal(rule, principal) {
                rules.push(rule);
            } else if !rule.scopes.is_empty() && matches_name(rule, principal) {
                wider.push(rule);
            }
        }
        View {
            unrestricted: false,
            deny_all: rules.is_empty() && self.config.default == PolicyDefault::Deny,
            default: self.config.default,
            rules,
            wider,
        }
    }

    /// The scopes `principal` lacks for request `method` with `params`, if a wider token would
    /// let it through: the scopes `[policy.methods]` names for the method when the credential
    /// grants none of them; else, for `tools/call`, `prompts/get` and `resources/read`, the
    /// scopes of a rule that would make the named item visible ([`View::lacking_scopes`]).
    /// `None`: nothing lacks, or no scope would help (the item is unknown or denied).
    pub fn lacking_scopes(
        &self,
        principal: &Principal,
        method: &str,
        params: &serde_json::Value,
    ) -> Option<Vec<String>> {
        if self.is_off() || principal.is_internal() {
            return None;
        }
        if let Some(scopes) = self.config.methods.get(method) {
            if !scopes.iter().any(|s| principal.has_scope(s)) {
                return Some(scopes.clone());
            }
        }
        let (kind, name) = match method {
            "tools/call" => (Kind::Tool, params.get("name")),
            "prompts/get" => (Kind::Prompt, params.get("name")),
            "resources/read" | "resources/subscribe" => (Kind::Resource, params.get("uri")),
            "completion/complete" => match params.pointer("/ref/type").and_then(|t| t.as_str()) {
                Some("ref/prompt") => (Kind::Prompt, params.pointer("/ref/name")),
                Some("ref/resource") => (Kind::Resource, params.pointer("/ref/uri")),
                _ => return None,
            },
            _ => return None,
        };
        self.view(principal).lacking_scopes(kind, name?.as_str()?)
    }
}

/// What one principal may see (from [`Policy::view`]).
pub struct View<'a> {
    unrestricted: bool,
    deny_all: bool,
    default: PolicyDefault,
    /// The rules that match the principal.
    rules: Vec<&'a PolicyRule>,
    /// Rules with `scopes` that would match it with one of them (its name matches).
    wider: Vec<&'a PolicyRule>,
}

impl View<'_> {
    /// Whether nothing is hidden from this principal.
    pub fn is_unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Whether item `name` of `kind` is visible (the upstream it belongs to aside: see
    /// [`View::allows_in`]).
    pub fn allows(&self, kind: Kind, name: &str) -> bool {
        if self.unrestricted {
            return true;
        }
        if self.deny_all {
            return false;
        }
        if self
            .rules
            .iter()
            .any(|r| any_matches(lists(r, kind).1, name))
        {
            return false;
        }
        let mut allow_lists = self
            .rules
            .iter()
            .map(|r| lists(r, kind).0)
            .filter(|l| !l.is_empty())
            .peekable();
        allow_lists.peek().is_none() || allow_lists.any(|l| any_matches(l, name))
    }

    /// The scopes of a rule that would make hidden item `name` of `kind` visible, were the
    /// principal's credential to grant one of them (step-up); `None` when the item is visible,
    /// or no such rule exists (hidden by a deny list, or by nothing a scope changes). Only a
    /// rule that names the item exactly in its allow list counts: from a `*` pattern the policy
    /// cannot tell a name that exists from one that does not, and a challenge for a made-up
    /// name would tell the caller which names a deny list hides from it.
    pub fn lacking_scopes(&self, kind: Kind, name: &str) -> Option<Vec<String>> {
        if self.allows(kind, name) {
            return None;
        }
        let names_it = |rule: &PolicyRule| lists(rule, kind).0.iter().any(|p| p == name);
        self.wider.iter().filter(|r| names_it(r)).find_map(|extra| {
            let mut rules = self.rules.clone();
            rules.push(extra);
            let widened = View {
                unrestricted: false,
                deny_all: false,
                default: self.default,
                rules,
                wider: Vec::new(),
            };
            widened.allows(kind, name).then(|| extra.scopes.clone())
        })
    }

    /// Whether item `name` of `kind` of upstream `upstream` is visible: both the upstream and the
    /// item are.
    pub fn allows_in(&self, upstream: &str, kind: Kind, name: &str) -> bool {
        self.allows(Kind::Upstream, upstream) && self.allows(kind, name)
    }
}

/// A rule's allow and deny lists of `kind`.
fn lists(rule: &PolicyRule, kind: Kind) -> (&[String], &[String]) {
    match kind {
        Kind::Upstream => (&rule.allow_upstreams, &rule.deny_upstreams),
        Kind::Tool => (&rule.allow_tools, &rule.deny_tools),
        Kind::Resource => (&rule.allow_resources, &rule.deny_resources),
        Kind::Prompt => (&rule.allow_prompts, &rule.deny_prompts),
    }
}

fn matches_principal(rule: &PolicyRule, principal: &Principal) -> bool {
    let by_scope = rule.scopes.is_empty() || rule.scopes.iter().any(|s| principal.has_scope(s));
    matches_name(rule, principal) && by_scope
}

fn matches_name(rule: &PolicyRule, principal: &Principal) -> bool {
    rule.principals.is_empty() || any_matches(&rule.principals, &principal.name)
}

fn any_matches(patterns: &[String], text: &str) -> bool {
    patterns.iter().any(|p| glob(p, text))
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters (none included)
/// and every other character only itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The answer to `tools/call` of a tool the caller may not see or that does not exist: -32602
/// `unknown tool: <name>` with `data.name` (the demo server's and the aggregate's own answer).
pub fn unknown_tool(name: &str) -> RpcError {
    RpcError {
        data: Some(json!({"name": name})),
        ..RpcError::invalid_params(format!("unknown tool: {name}"))
    }
}

/// As [`unknown_tool`], for `prompts/get` and `ref/prompt` completions: `unknown prompt: <name>`.
pub fn unknown_prompt(name: &str) -> RpcError {
    RpcError {
        data: Some(json!({"name": name})),
        ..RpcError::invalid_params(format!("unknown prompt: {name}"))
    }
}

/// The answer to a by-URI request for a resource the caller may not see or that nobody has:
/// -32002 `Resource not found` with `data.uri`.
pub fn resource_not_found(uri: &str) -> RpcError {
    RpcError {
        data: Some(json!({"uri": uri})),
        ..RpcError::new(codes::RESOURCE_NOT_FOUND, "Resource not found")
    }
}
