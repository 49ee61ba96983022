//! The revision each upstream negotiated against the client's: [`RevisionWatch`].
//!
//! The node sends an upstream the client's own `initialize` params, and a server that supports
//! another revision answers with that one (MCP 2025-11-25, basic/lifecycle, Version
//! Negotiation). Answers then reach the client shaped for the client's revision
//! (`switchboard_protocol::shaping`, `docs/revisions.md`), and the operator is told: a warning
//! once per upstream session that differs (naming the upstream and both revisions), and the
//! last such pair on the upstream's status in `/upstreamz` ([`RevisionsSeen`]).

use parking_lot::Mutex;
use switchboard_protocol::Revision;
use switchboard_telemetry::trace::logged_session;

use crate::status::{unix_ms, RevisionsSeen};

/// What one upstream negotiated, kept by the upstream (its status reports it).
#[derive(Debug, Default)]
pub struct RevisionWatch {
    last: Mutex<Option<RevisionsSeen>>,
}

impl RevisionWatch {
    /// A new upstream session of `upstream` for client session `session` answered `initialize`
    /// with `upstream_revision`; the client's session negotiated `client`. A difference is
    /// logged (once: this runs once per upstream session) and recorded.
    pub fn negotiated(
        &self,
        upstream: &str,
        session: &str,
        client: Revision,
        upstream_revision: &str,
    ) {
        if client.as_str() == upstream_revision {
            return;
        }
        tracing::warn!(upstream, session = %logged_session(session), client_revision = %client, upstream_revision,
            "the upstream negotiated another revision than the client's session: its answers are shaped for the client's revision (docs/revisions.md)");
        let mut last = self.last.lock();
        let mismatches = last.as_ref().map_or(0, |l| l.mismatches) + 1;
        *last = Some(RevisionsSeen {
            client: client.as_str().to_owned(),
            upstream: upstream_revision.to_owned(),
            at_ms: unix_ms(std::time::SystemTime::now()),
            mismatches,
        });
    }

    /// The last difference seen, if any.
    pub fn seen(&self) -> Option<RevisionsSeen> {
        self.last.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_differences_and_counts_them() {
        let watch = RevisionWatch::default();
        watch.negotiated("ov", "s1", Revision::V2025_06_18, "2025-06-18");
        assert_eq!(watch.seen(), None);
        watch.negotiated("ov", "s1", Revision::V2025_03_26, "2025-06-18");
        watch.negotiated("ov", "s2", Revision::V2024_11_05, "2025-06-18");
        let seen = watch.seen().unwrap();
        assert_eq!(
            (
                seen.client.as_str(),
                seen.upstream.as_str(),
                seen.mismatches
            ),
            ("2024-11-05", "2025-06-18", 2)
        );
    }
}
