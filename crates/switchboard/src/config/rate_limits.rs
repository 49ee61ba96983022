//! `[rate_limits]` is the node's own settings struct ([`RateLimitSettings`]); what it needs from
//! the rest of the config: each rate-limited upstream's tool prefix, and the rule that such an
//! upstream exists and has one.

use std::collections::BTreeMap;

use switchboard_node::limits::RateLimitSettings;

use super::Config;

/// Upstream name → the start of its tools' names (`<prefix><separator>`), for the upstreams
/// `rate_limits.upstreams` names that exist and have a prefix.
pub(super) fn tool_prefixes(config: &Config) -> BTreeMap<String, String> {
    let limits = &config.rate_limits.upstreams;
    config
        .upstreams
        .iter()
        .filter(|u| limits.contains_key(&u.name))
        .filter_map(|u| {
            let prefix = u.prefix.as_deref().unwrap_or(&u.name);
            let head = format!("{prefix}{}", config.tool_separator);
            (!prefix.is_empty()).then(|| (u.name.clone(), head))
        })
        .collect()
}

/// The settings as the node gets them: with [`tool_prefixes`] filled in.
pub(super) fn for_node(config: &Config) -> RateLimitSettings {
    RateLimitSettings {
        tool_prefixes: tool_prefixes(config),
        ..config.rate_limits.clone()
    }
}

/// Every problem of `[rate_limits]`, each naming its key.
pub(super) fn problems(config: &Config) -> Vec<String> {
    let mut problems = config.rate_limits.problems();
    for name in config.rate_limits.upstreams.keys() {
        match config.upstreams.iter().find(|u| &u.name == name) {
            None => problems.push(format!(
                "rate_limits.upstreams.{name}: no [[upstreams]] entry is named {name:?}"
            )),
            Some(u) if u.prefix.as_deref() == Some("") => problems.push(format!(
                "rate_limits.upstreams.{name}: the upstream has no prefix (prefix = \"\"), so its tools cannot be told apart; limit its tools with rate_limits.tools instead"
            )),
            Some(_) => {}
        }
    }
    problems
}

/// Paths under `[rate_limits]` named by the operator (a tool, an upstream), which the default
/// config cannot list: `Some(true)` for a section (`rate_limits.principal`, `rate_limits.tools`,
/// `rate_limits.tools.<tool>`, …), `Some(false)` for a limit's `rate` or `burst`, `None` for
/// anything else (an unknown key).
pub(crate) fn open_path(path: &str) -> Option<bool> {
    let rest = path.strip_prefix("rate_limits.")?;
    let parts: Vec<&str> = rest.splitn(3, '.').collect();
    let leaf = |p: &str| (p == "rate" || p == "burst").then_some(false);
    match parts.as_slice() {
        ["principal"] | ["tools" | "upstreams"] | ["tools" | "upstreams", _] => Some(true),
        ["principal", key] => leaf(key),
        ["tools" | "upstreams", _, key] => leaf(key),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::open_path;

    #[test]
    fn operator_named_paths_are_open() {
        assert_eq!(open_path("rate_limits.principal"), Some(true));
        assert_eq!(open_path("rate_limits.principal.rate"), Some(false));
        assert_eq!(open_path("rate_limits.principal.brust"), None);
        assert_eq!(open_path("rate_limits.tools.echo"), Some(true));
        assert_eq!(open_path("rate_limits.tools.echo.burst"), Some(false));
        assert_eq!(open_path("rate_limits.upstreams.w.x"), None);
        assert_eq!(open_path("rate_limits.other"), None);
        assert_eq!(open_path("session.principal"), None);
    }
}
