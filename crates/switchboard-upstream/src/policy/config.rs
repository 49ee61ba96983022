//! The `[policy]` config section: its fields, defaults and load-time checks ([`PolicyConfig`]).
//!
//! ```toml
//! [policy]
//! default = "allow"            # or "deny": a principal no rule matches sees nothing
//!
//! [[policy.rules]]
//! principals = ["bob"]         # JWT `sub`, API key principal name, or "anonymous"; `*` globs
//! deny_tools = ["add"]         # tool names as the client sees them (prefixed); `*` globs
//! deny_upstreams = ["weather"] # configured upstream names
//!
//! [[policy.rules]]
//! scopes = ["calc:write"]      # a token with this scope also sees `add`; one without it
//! allow_tools = ["add"]        # gets 403 insufficient_scope for it (step-up), not "unknown"
//!
//! [policy.methods]
//! "resources/read" = ["files:read"]  # the method needs one of these scopes
//! ```
//!
//! How rules combine is documented on [`super::Policy`].

use serde::{Deserialize, Serialize};

/// Longest tool or prompt name pattern: MCP's longest tool name (2025-11-25, server/tools, Tool
/// Names; the aggregate's `names::MAX_TOOL_NAME_LEN`, not imported so that this leaf module does
/// not depend on the aggregate that uses it).
const MAX_TOOL_NAME_LEN: usize = 128;

/// What a principal that no rule matches may see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyDefault {
    /// Everything (the default).
    #[default]
    Allow,
    /// Nothing: every list is empty and every call is refused as unknown.
    Deny,
}

/// `[policy]`: per-principal allow and deny lists. Empty (no rules, `default = "allow"`): off,
/// every principal sees everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// `policy.default`: for a principal no rule matches (default `"allow"`).
    pub default: PolicyDefault,
    /// `[[policy.rules]]` tables, file only; order does not matter (see [`super::Policy`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PolicyRule>,
    /// `[policy.methods]`: JSON-RPC methods (exact names, e.g. `"resources/read"`) and the
    /// scopes each needs: a request of such a method whose credential grants none of them is
    /// refused 403 with an `insufficient_scope` challenge naming them (step-up, see
    /// [`super::Policy::lacking_scopes`]).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub methods: std::collections::BTreeMap<String, Vec<String>>,
}

/// One `[[policy.rules]]` table: who it is for (`principals` and/or `scopes`; at least one) and
/// its lists. Every list defaults to empty; an empty allow list means "no allow list".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyRule {
    /// Principal names ([`crate::Principal::name`]: a JWT's `sub`, an API key's principal,
    /// `anonymous` when authorization is off); `*` matches any run of characters.
    pub principals: Vec<String>,
    /// Scopes: the rule applies when the credential grants at least one (exact match).
    pub scopes: Vec<String>,
    /// Only these configured upstreams (by `[[upstreams]].name`; `demo` without tables).
    pub allow_upstreams: Vec<String>,
    /// Never these upstreams.
    pub deny_upstreams: Vec<String>,
    /// Only these tools, named as the client sees them (with the upstream's prefix); `*` globs.
    pub allow_tools: Vec<String>,
    /// Never these tools.
    pub deny_tools: Vec<String>,
    /// Only these resources: URI patterns (`*` globs, e.g. `file:///public/*`), matched against a
    /// resource's `uri` and a template's `uriTemplate` text.
    pub allow_resources: Vec<String>,
    /// Never these resources.
    pub deny_resources: Vec<String>,
    /// Only these prompts, named as the client sees them; `*` globs.
    pub allow_prompts: Vec<String>,
    /// Never these prompts.
    pub deny_prompts: Vec<String>,
}

impl PolicyConfig {
    /// Whether the section is off: no rules and `default = "allow"`.
    pub fn is_off(&self) -> bool {
        self.rules.is_empty() && self.methods.is_empty() && self.default == PolicyDefault::Allow
    }

    /// Every problem of the section, each naming its dotted key (`policy.rules[1].deny_upstreams`):
    /// a rule without `principals` or `scopes`; an empty pattern or scope; a tool or prompt pattern
    /// that is not 1–128 of `A-Z a-z 0-9 _ - .` and `*`; an upstream not among `upstreams` (the
    /// configured names, or `demo` when none is configured).
    pub fn problems(&self, upstreams: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let at = |key: &str| format!("policy.rules[{i}].{key}");
            if rule.principals.is_empty() && rule.scopes.is_empty() {
                out.push(format!(
                    "policy.rules[{i}] names neither `principals` nor `scopes`: say who it is for \
                     (`principals = [\"*\"]` for everyone)"
                ));
            }
            for (key, list) in [
                ("principals", &rule.principals),
                ("scopes", &rule.scopes),
                ("allow_resources", &rule.allow_resources),
                ("deny_resources", &rule.deny_resources),
            ] {
                if list.iter().any(String::is_empty) {
                    out.push(format!("{} holds an empty string", at(key)));
                }
            }
            for (key, list) in [
                ("allow_tools", &rule.allow_tools),
                ("deny_tools", &rule.deny_tools),
                ("allow_prompts", &rule.allow_prompts),
                ("deny_prompts", &rule.deny_prompts),
            ] {
                for name in list.iter().filter(|n| !is_name_pattern(n)) {
                    out.push(format!(
                        "{} `{name}` must be 1 to {MAX_TOOL_NAME_LEN} characters of A-Z a-z 0-9 _ - . \
                         and `*` (a name as the client sees it, prefix included)",
                        at(key)
                    ));
                }
            }
            for (key, list) in [
                ("allow_upstreams", &rule.allow_upstreams),
                ("deny_upstreams", &rule.deny_upstreams),
            ] {
                for name in list.iter().filter(|n| !upstreams.contains(&n.as_str())) {
                    out.push(format!(
                        "{} names `{name}`, which is not a configured upstream (known: {})",
                        at(key),
                        upstreams.join(", ")
                    ));
                }
            }
        }
        for (method, scopes) in &self.methods {
            if method.is_empty() || scopes.is_empty() || scopes.iter().any(String::is_empty) {
                out.push(format!(
                    "policy.methods.\"{method}\" must name a method and at least one non-empty scope"
                ));
            }
        }
        out
    }
}

/// Whether `text` is a tool or prompt name pattern: tool-name characters and `*`.
fn is_name_pattern(text: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'))
}
