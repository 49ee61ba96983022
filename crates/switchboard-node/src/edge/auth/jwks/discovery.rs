//! OIDC discovery of the JWKS URL (`auth.oidc_discovery`): the `jwks_uri` of the issuer's
//! `{issuer}/.well-known/openid-configuration` document, whose `issuer` must be exactly
//! `auth.issuer` (OpenID Connect Discovery 1.0 §4, §4.3). The same bounds as a key-set fetch
//! apply (timeout, [`super::MAX_BYTES`]); `jwks_uri` must be `https://` (or `http://` on
//! loopback).

use serde::Deserialize;

/// Where the discovery document of `issuer` is (a trailing `/` of the issuer is not doubled).
pub fn document_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// The `jwks_uri` of discovery document `body`, checked against `issuer`.
pub fn jwks_uri(body: &[u8], issuer: &str) -> Result<String, String> {
    #[derive(Deserialize)]
    struct Document {
        issuer: String,
        jwks_uri: Option<String>,
    }
    let doc: Document = serde_json::from_slice(body)
        .map_err(|e| format!("the discovery document is not one: {e}"))?;
    if doc.issuer != issuer {
        return Err(format!(
            "the discovery document names issuer `{}`, not auth.issuer",
            doc.issuer
        ));
    }
    let uri = doc
        .jwks_uri
        .ok_or("the discovery document has no jwks_uri")?;
    if let Some(why) = super::super::settings::url_problem(&uri, "") {
        return Err(format!("its jwks_uri {why}"));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://as.example.test/tenant";

    #[test]
    fn the_jwks_uri_of_the_right_issuer() {
        assert_eq!(
            document_url("https://as.example.test/tenant/"),
            "https://as.example.test/tenant/.well-known/openid-configuration"
        );
        let doc = |issuer: &str, uri: &str| {
            serde_json::json!({"issuer": issuer, "jwks_uri": uri}).to_string()
        };
        let ok = doc(ISSUER, "https://as.example.test/keys");
        assert_eq!(
            jwks_uri(ok.as_bytes(), ISSUER).unwrap(),
            "https://as.example.test/keys"
        );
        let foreign = doc("https://evil.example", "https://evil.example/keys");
        assert!(jwks_uri(foreign.as_bytes(), ISSUER)
            .unwrap_err()
            .contains("not auth.issuer"));
        let plain = doc(ISSUER, "http://as.example.test/keys");
        assert!(jwks_uri(plain.as_bytes(), ISSUER).is_err());
        let none = serde_json::json!({"issuer": ISSUER}).to_string();
        assert!(jwks_uri(none.as_bytes(), ISSUER)
            .unwrap_err()
            .contains("no jwks_uri"));
        assert!(jwks_uri(b"<html>", ISSUER).is_err());
    }
}
