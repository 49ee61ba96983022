//! MCP protocol revisions and version negotiation.
//!
//! Source: MCP 2025-11-25, basic/lifecycle (Version Negotiation): when the server does not support
//! the revision a client asks for, it answers with one it does support (its latest) instead of an
//! error.
//!
//! MCP 2026-07-28 (basic/versioning, Protocol Version Negotiation) is stateless: no `initialize`,
//! the version travels with every request and an unsupported one is an error (-32022). It is
//! served only on the stateless path: [`Revision::parse`] and [`Revision::negotiate`] (the
//! session era) never yield it, [`Revision::parse_stateless`] does.

use std::fmt;

/// A dated MCP revision this cluster speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    /// 2024-11-05: HTTP+SSE era (no `Mcp-Session-Id`).
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, batches required.
    V2025_03_26,
    /// 2025-06-18: no batches, `MCP-Protocol-Version` header mandatory.
    V2025_06_18,
    /// 2025-11-25: priming events, `retry`, 403 for a foreign `Origin`.
    V2025_11_25,
    /// 2026-07-28: stateless (no session, `_meta` on every request, `Mcp-Method`/`Mcp-Name`).
    V2026_07_28,
}

impl Revision {
    /// Every session-era revision this build speaks, oldest first (what `initialize` and
    /// `MCP-Protocol-Version` on a session may name).
    pub const ALL: [Revision; 4] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
    ];
    /// The stateless revisions this build serves (MCP 2026-07-28, basic/versioning): the
    /// `data.supported` of -32022 and the `supportedVersions` of `server/discover`.
    pub const STATELESS: [Revision; 1] = [Revision::V2026_07_28];
    /// The newest session-era revision we speak; the answer to a request for an unknown one.
    pub const LATEST: Revision = Revision::V2025_11_25;
    /// What a request without `MCP-Protocol-Version` and without other knowledge is taken to be
    /// (MCP 2025-06-18, basic/transports, Protocol Version Header).
    pub const DEFAULT_WITHOUT_HEADER: Revision = Revision::V2025_03_26;

    /// The revision's date string as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parses an exact session-era revision string; `None` for anything else (2026-07-28
    /// included: it has no sessions).
    pub fn parse(s: &str) -> Option<Revision> {
        Revision::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Parses an exact stateless revision string (MCP 2026-07-28, basic/versioning); `None` for
    /// anything else.
    pub fn parse_stateless(s: &str) -> Option<Revision> {
        Revision::STATELESS.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this revision is stateless (no `initialize`, no session; MCP 2026-07-28).
    pub fn is_stateless(self) -> bool {
        self >= Revision::V2026_07_28
    }

    /// Version negotiation for `initialize`: echo a supported revision, otherwise offer our latest.
    pub fn negotiate(requested: Option<&str>) -> Revision {
        requested
            .and_then(Revision::parse)
            .unwrap_or(Revision::LATEST)
    }

    /// Whether JSON-RPC batches are accepted (MCP 2025-03-26 only; removed in 2025-06-18).
    pub fn accepts_batches(self) -> bool {
        self == Revision::V2025_03_26
    }

    /// Whether SSE streams start with a priming event and carry `retry` (MCP 2025-11-25,
    /// basic/transports, Sending Messages item 6). Older clients crash on empty `data`.
    pub fn primes_streams(self) -> bool {
        self >= Revision::V2025_11_25
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_offers_latest_otherwise() {
        assert_eq!(
            Revision::negotiate(Some("2025-06-18")),
            Revision::V2025_06_18
        );
        assert_eq!(Revision::negotiate(Some("2099-01-01")), Revision::LATEST);
        assert_eq!(Revision::negotiate(None), Revision::LATEST);
        assert_eq!(
            Revision::negotiate(Some("2024-11-05")),
            Revision::V2024_11_05
        );
    }

    #[test]
    fn era_rules() {
        assert!(Revision::V2025_03_26.accepts_batches());
        assert!(!Revision::V2025_06_18.accepts_batches());
        assert!(Revision::V2025_11_25.primes_streams());
        assert!(!Revision::V2025_06_18.primes_streams());
        assert_eq!(Revision::parse("not-a-version"), None);
    }

    #[test]
    fn stateless_revision_is_never_negotiated_by_initialize() {
        assert_eq!(Revision::parse("2026-07-28"), None);
        assert_eq!(
            Revision::negotiate(Some("2026-07-28")),
            Revision::V2025_11_25
        );
        assert_eq!(
            Revision::parse_stateless("2026-07-28"),
            Some(Revision::V2026_07_28)
        );
        assert_eq!(Revision::parse_stateless("2025-11-25"), None);
        assert!(Revision::V2026_07_28.is_stateless() && !Revision::LATEST.is_stateless());
    }
}
