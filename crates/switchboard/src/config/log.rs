//! `[log]`: what the node logs to stderr and how.

use serde::{Deserialize, Serialize};

/// Logging.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Log filter, a level or `tracing` directives. `RUST_LOG`, when set, replaces it.
    pub level: String,
    /// Log line format, `text` or `json`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A bare word must be a level (a bare word is otherwise read as a target name and silently
/// filters everything else out); anything with `=` or `,` must parse as `tracing` directives.
pub(super) fn check_log_level(filter: &str) -> Option<String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let ok = if filter.contains(['=', ',']) {
        tracing_subscriber::EnvFilter::try_new(filter).is_ok()
    } else {
        LEVELS.contains(&filter.trim().to_ascii_lowercase().as_str())
    };
    (!ok).then(|| {
        format!("log.level `{filter}` is not a level (off, error, warn, info, debug, trace) or tracing directives like `info,switchboard_node=debug`")
    })
}
