//! MCP log levels and the client capabilities server-to-client requests need: facts of the
//! protocol that every transport of the node checks the same way.
//!
//! Spec: MCP 2025-11-25, server/utilities/logging (the eight RFC 5424 severities, lowest first)
//! and client/* (sampling, elicitation, roots).

/// RFC 5424 severities in ascending order, as MCP `logging` names them.
const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Whether `level` is a valid MCP log level (`debug` … `emergency`).
pub fn is_log_level(level: &str) -> bool {
    LEVELS.contains(&level)
}

/// The rank of `level` among the MCP log levels, `debug` = 0 … `emergency` = 7; an unknown
/// level ranks as `debug`.
pub fn severity(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(0)
}

/// The client capability a server-to-client method needs (`sampling/createMessage` →
/// `sampling`, `elicitation/create` → `elicitation`, `roots/list` → `roots`), `None` for others.
pub fn required_capability(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_and_capabilities() {
        assert!(severity("error") > severity("info"));
        assert!(is_log_level("warning") && !is_log_level("verbose"));
        assert_eq!(
            required_capability("sampling/createMessage"),
            Some("sampling")
        );
        assert_eq!(required_capability("ping"), None);
    }
}
