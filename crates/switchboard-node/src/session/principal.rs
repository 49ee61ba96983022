//! The principal a request runs as, and the sessions it may use. The authentication layer
//! (`app.rs`, layer 3) sets it for the rest of the request; every session is bound to the
//! principal that created it (MCP 2025-11-25 security best practices, Session Hijacking).

use std::sync::Arc;

use switchboard_upstream::Principal;

/// The principal of every session when authorization is off.
pub use switchboard_upstream::principal::ANONYMOUS;

tokio::task_local! {
    static PRINCIPAL: Arc<Principal>;
}

/// The principal of the request being handled: the one the auth layer set, else
/// [`Principal::anonymous`] (authorization off).
pub fn current() -> Arc<Principal> {
    PRINCIPAL
        .try_with(Clone::clone)
        .unwrap_or_else(|_| Principal::anonymous())
}

/// The text the request's principal binds sessions to ([`Principal::id`]; [`ANONYMOUS`] when
/// authorization is off).
pub fn current_principal() -> String {
    PRINCIPAL
        .try_with(|p| p.id.clone())
        .unwrap_or_else(|_| ANONYMOUS.to_owned())
}

/// Whether the request being handled may use a session bound to `principal`.
pub fn may_use(principal: &str) -> bool {
    PRINCIPAL
        .try_with(|p| p.id == principal)
        .unwrap_or(principal == ANONYMOUS)
}

/// Runs `fut` (the rest of the request) as `principal`.
pub async fn with_principal<F: std::future::Future>(
    principal: Arc<Principal>,
    fut: F,
) -> F::Output {
    PRINCIPAL.scope(principal, fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn principal_runs_with_the_request() {
        assert_eq!(current_principal(), ANONYMOUS);
        assert!(may_use(ANONYMOUS));
        assert!(!may_use(r#"["i","alice"]"#));
        let alice = Arc::new(Principal {
            id: r#"["i","alice"]"#.to_owned(),
            name: "alice".to_owned(),
            scopes: vec!["mcp:tools".to_owned()],
        });
        with_principal(alice, async {
            assert_eq!(current().scopes, ["mcp:tools"]);
            assert_eq!(current_principal(), r#"["i","alice"]"#);
            assert!(may_use(r#"["i","alice"]"#));
            assert!(!may_use(r#"["i","bob"]"#));
            assert!(!may_use(ANONYMOUS));
        })
        .await;
    }
}
