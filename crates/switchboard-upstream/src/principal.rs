//! [`Principal`]: who a request runs as, as the node's authentication layer established it.
//!
//! The node builds one per request (from a verified JWT, an API key, or [`Principal::anonymous`]
//! when authorization is off) and hands it to the upstream in
//! [`crate::RequestContext::principal`], so per-principal rules (authorization policy, rate
//! limits) see the caller of this request, with the scopes of this request's credential.
//!
//! Sources: MCP 2025-11-25, basic/authorization (access tokens, scopes); MCP 2025-11-25 security
//! best practices, Session Hijacking (sessions bound to the user).

use std::sync::{Arc, LazyLock};

/// The text of the principal every request runs as when authorization is off.
pub const ANONYMOUS: &str = "anonymous";

/// The id of [`Principal::internal`]: not JSON, so no credential's id (a JWT's
/// `["<iss>","<sub>"]`, an API key's `{"api_key":"<name>"}`) and not [`ANONYMOUS`] can equal it.
pub const INTERNAL: &str = "(internal)";

/// The caller of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The text a session is bound to (stored in the session record at `initialize` and compared
    /// on every load): [`ANONYMOUS`], or JSON whose shape names the kind of credential and
    /// whose values name who it is (a JWT: the array `["<iss>","<sub>"]`; an API key: the object
    /// `{"api_key":"<name>"}`), so no two credentials share one.
    pub id: String,
    /// The name per-principal rules match: a JWT's `sub`, an API key's configured principal,
    /// or [`ANONYMOUS`].
    pub name: String,
    /// The scopes the request's credential grants (a JWT's `scope`/`scp`, an API key's
    /// configured scopes); empty when authorization is off.
    pub scopes: Vec<String>,
}

static ANONYMOUS_PRINCIPAL: LazyLock<Arc<Principal>> = LazyLock::new(|| {
    Arc::new(Principal {
        id: ANONYMOUS.to_owned(),
        name: ANONYMOUS.to_owned(),
        scopes: Vec::new(),
    })
});

static INTERNAL_PRINCIPAL: LazyLock<Arc<Principal>> = LazyLock::new(|| {
    Arc::new(Principal {
        id: INTERNAL.to_owned(),
        name: INTERNAL.to_owned(),
        scopes: Vec::new(),
    })
});

impl Principal {
    /// The principal of the node's own requests, which the per-principal policy never restricts
    /// ([`crate::policy`]): the `tools/list` a node reads for its 2026-07-28 `Mcp-Param-*` checks,
    /// and a forwarded request on its owner node (the origin applied the rules). Only node code
    /// creates it; the auth layer never yields it, and nothing it fetches reaches a client as is.
    pub fn internal() -> Arc<Principal> {
        INTERNAL_PRINCIPAL.clone()
    }

    /// Whether this is [`Principal::internal`].
    pub fn is_internal(&self) -> bool {
        self.id == INTERNAL
    }

    /// The principal of every request when authorization is off (one shared value).
    pub fn anonymous() -> Arc<Principal> {
        ANONYMOUS_PRINCIPAL.clone()
    }

    /// Whether this is [`Principal::anonymous`].
    pub fn is_anonymous(&self) -> bool {
        self.id == ANONYMOUS
    }

    /// Whether the credential grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_is_shared_and_has_no_scopes() {
        let a = Principal::anonymous();
        assert!(Arc::ptr_eq(&a, &Principal::anonymous()));
        assert!(a.is_anonymous());
        assert!(!a.has_scope("mcp:tools"));
        let alice = Principal {
            id: r#"["https://as.example","alice"]"#.into(),
            name: "alice".into(),
            scopes: vec!["mcp:tools".into()],
        };
        assert!(!alice.is_anonymous());
        assert!(alice.has_scope("mcp:tools"));
    }
}
