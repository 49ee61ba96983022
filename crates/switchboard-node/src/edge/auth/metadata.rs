//! What a client needs to find the authorization server, derived from config only so every node
//! answers byte for byte the same: the RFC 9728 protected-resource metadata document, where it
//! lives, and the `WWW-Authenticate` challenges (RFC 6750 §3) that point at it.
//!
//! Sources: RFC 9728 §3 (metadata document; §3.1 path-inserted well-known URL), §5.1
//! (`resource_metadata` in `WWW-Authenticate`); RFC 6750 §3, §3.1 (challenge syntax, error codes);
//! MCP 2025-11-25, basic/authorization (Protected Resource Metadata Discovery Requirements, Scope
//! Selection Strategy, Runtime Insufficient Scope Errors).

use serde_json::{json, Value};

use super::AuthSettings;

/// The RFC 9728 well-known suffix.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// Splits an absolute `scheme://authority/path` URL into (`scheme://authority`, `/path`); the path
/// is `""` when there is none. `None` when there is no `scheme://`.
pub fn split_url(url: &str) -> Option<(&str, &str)> {
    let scheme_end = url.find("://")? + 3;
    let path_start = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    Some((&url[..path_start], &url[path_start..]))
}

/// The path of the metadata document for `resource_url`, on the resource's host: the well-known
/// suffix inserted before the resource's path (RFC 9728 §3.1). A path of `/` alone is the
/// "terminating slash following the host component" the RFC drops, so it maps to the bare
/// well-known path; any other path is kept exactly, trailing slash included.
pub fn metadata_path(resource_url: &str) -> String {
    let path = split_url(resource_url).map_or("", |(_, p)| p);
    match path {
        "" | "/" => WELL_KNOWN.to_owned(),
        p => format!("{WELL_KNOWN}{p}"),
    }
}

/// The absolute metadata URL for `resource_url`, the value of `resource_metadata` in challenges
/// (RFC 9728 §5.1): `https://gw.example/servers/foo/mcp` →
/// `https://gw.example/.well-known/oauth-protected-resource/servers/foo/mcp`.
pub fn metadata_url(resource_url: &str) -> String {
    let origin = split_url(resource_url).map_or(resource_url, |(o, _)| o);
    format!("{origin}{}", metadata_path(resource_url))
}

/// The paths this node serves the document on: the path-inserted one, and the root well-known
/// path (some clients fetch only the bare URL, C34; one node serves one resource, so the root
/// document cannot be ambiguous). One entry when they coincide.
pub fn served_paths(resource_url: &str) -> Vec<String> {
    let inserted = metadata_path(resource_url);
    let mut paths = vec![inserted];
    if paths[0] != WELL_KNOWN {
        paths.push(WELL_KNOWN.to_owned());
    }
    paths
}

/// The RFC 9728 §2 metadata document: `resource` exactly as configured (never re-normalised, so
/// no trailing-slash mismatch), the authorization servers, the scopes (the configured supported
/// ones, and the required ones when those are not listed: a challenge's `scope` must never name
/// a scope the metadata leaves out), and `header` as the only bearer method (MCP: tokens travel in
/// `Authorization`, never in the query string).
pub fn document(settings: &AuthSettings) -> Value {
    let mut scopes = settings.scopes_supported.clone();
    for s in &settings.required_scopes {
        if !scopes.contains(s) {
            scopes.push(s.clone());
        }
    }
    json!({
        "resource": settings.resource_url,
        "authorization_servers": settings.authorization_servers,
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
    })
}

/// Why a request is challenged (RFC 6750 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChallengeKind<'a> {
    /// No bearer token at all: no `error` attribute.
    Missing,
    /// A token that is malformed, expired, badly signed or not for us: `error="invalid_token"`
    /// with this description.
    InvalidToken(&'a str),
    /// A valid token without every required scope: `error="insufficient_scope"`.
    InsufficientScope,
}

/// The `WWW-Authenticate` value for `kind`. `scope` lists the required scopes (MCP 2025-11-25
/// Scope Selection Strategy: name every scope the operation needs) and is left out when none are
/// required. A description is reduced to the characters RFC 6750 §3 allows in it.
pub fn challenge(settings: &AuthSettings, kind: ChallengeKind<'_>) -> String {
    challenge_with(settings, kind, &settings.required_scopes)
}

/// The step-up challenge for an operation that needs `needed` besides `auth.required_scopes`
/// (MCP 2025-11-25, basic/authorization, Scope Challenge Handling): `insufficient_scope`, the
/// union of both as `scope` (so the client asks for every scope the operation needs at once).
pub fn step_up_challenge(settings: &AuthSettings, needed: &[String]) -> String {
    let mut scopes = settings.required_scopes.clone();
    scopes.extend(
        needed
            .iter()
            .filter(|s| !settings.required_scopes.contains(s))
            .cloned(),
    );
    challenge_with(settings, ChallengeKind::InsufficientScope, &scopes)
}

fn challenge_with(settings: &AuthSettings, kind: ChallengeKind<'_>, scopes: &[String]) -> String {
    let metadata = metadata_url(&settings.resource_url);
    let scope = scopes.join(" ");
    let mut parts = Vec::new();
    match kind {
        ChallengeKind::Missing => {}
        ChallengeKind::InvalidToken(_) => parts.push(r#"error="invalid_token""#.to_owned()),
        ChallengeKind::InsufficientScope => parts.push(r#"error="insufficient_scope""#.to_owned()),
    }
    if kind == ChallengeKind::Missing {
        parts.push(format!(r#"resource_metadata="{metadata}""#));
        if !scope.is_empty() {
            parts.push(format!(r#"scope="{scope}""#));
        }
    } else {
        if !scope.is_empty() {
            parts.push(format!(r#"scope="{scope}""#));
        }
        parts.push(format!(r#"resource_metadata="{metadata}""#));
    }
    if let ChallengeKind::InvalidToken(why) = kind {
        parts.push(format!(r#"error_description="{}""#, description_chars(why)));
    }
    format!("Bearer {}", parts.join(", "))
}

/// RFC 6750 §3: `error_description` is `%x20-21 / %x23-5B / %x5D-7E` (no `"` or `\`).
fn description_chars(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

/// Whether `s` is an RFC 6749 §3.3 scope-token: `%x21 / %x23-5B / %x5D-7E`, at least one.
pub(super) fn is_scope_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GW: &str = "https://gw.example.test/servers/foo/mcp";

    fn settings(required: &[&str]) -> AuthSettings {
        AuthSettings {
            resource_url: GW.into(),
            authorization_servers: vec!["https://as.example.test/tenant".into()],
            scopes_supported: vec!["mcp:tools".into(), "mcp:admin".into()],
            required_scopes: required.iter().map(|s| s.to_string()).collect(),
            ..AuthSettings::default()
        }
    }

    #[test]
    fn path_inserted_locations() {
        assert_eq!(
            metadata_url(GW),
            "https://gw.example.test/.well-known/oauth-protected-resource/servers/foo/mcp"
        );
        assert_eq!(
            metadata_url("https://gw.example.test"),
            "https://gw.example.test/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("https://gw.example.test/"),
            "https://gw.example.test/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("https://gw.example.test:8443/mcp/"),
            "https://gw.example.test:8443/.well-known/oauth-protected-resource/mcp/"
        );
        assert_eq!(
            served_paths(GW),
            [
                "/.well-known/oauth-protected-resource/servers/foo/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            served_paths("https://gw.example.test/"),
            ["/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn document_keeps_the_resource_exactly() {
        let doc = document(&settings(&[]));
        assert_eq!(
            doc.to_string(),
            r#"{"resource":"https://gw.example.test/servers/foo/mcp","authorization_servers":["https://as.example.test/tenant"],"scopes_supported":["mcp:tools","mcp:admin"],"bearer_methods_supported":["header"]}"#
        );
    }

    #[test]
    fn required_scopes_are_always_published() {
        let mut only_required = settings(&["mcp:call"]);
        only_required.scopes_supported.clear();
        assert_eq!(
            document(&only_required)["scopes_supported"],
            json!(["mcp:call"])
        );
        let listed = document(&settings(&["mcp:tools"]));
        assert_eq!(
            listed["scopes_supported"],
            json!(["mcp:tools", "mcp:admin"])
        );
    }

    #[test]
    fn challenges() {
        let meta = "https://gw.example.test/.well-known/oauth-protected-resource/servers/foo/mcp";
        assert_eq!(
            challenge(&settings(&[]), ChallengeKind::Missing),
            format!(r#"Bearer resource_metadata="{meta}""#)
        );
        let s = settings(&["mcp:tools", "mcp:admin"]);
        assert_eq!(
            challenge(&s, ChallengeKind::Missing),
            format!(r#"Bearer resource_metadata="{meta}", scope="mcp:tools mcp:admin""#)
        );
        assert_eq!(
            challenge(&s, ChallengeKind::InsufficientScope),
            format!(
                r#"Bearer error="insufficient_scope", scope="mcp:tools mcp:admin", resource_metadata="{meta}""#
            )
        );
        assert_eq!(
            challenge(&settings(&[]), ChallengeKind::InvalidToken("bad \"x\"\n\\")),
            format!(
                r#"Bearer error="invalid_token", resource_metadata="{meta}", error_description="bad 'x'?'""#
            )
        );
    }
}
