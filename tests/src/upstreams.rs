//! Upstream definitions for the nodes' `[[upstreams]]` config tables, and [`start_cluster`]: a
//! cluster whose every node reads them from one config file.
//!
//! The nodes take `[[upstreams]]` only from a config file (no flag or environment variable sets
//! a table): the file reaches each node as `--config` ([`ClusterOptions::config_file`]).

use std::path::PathBuf;

use crate::cluster::{Cluster, ClusterOptions};
use crate::temp::TempDir;

/// One upstream MCP server behind the cluster.
#[derive(Clone, Debug)]
pub struct Upstream {
    name: String,
    fields: Vec<(&'static str, Field)>,
}

#[derive(Clone, Debug)]
enum Field {
    Text(String),
    List(Vec<String>),
    /// A TOML value written as is (a number, a boolean).
    Raw(String),
}

impl Upstream {
    /// A stdio upstream: `command args…`, one child per client session.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Upstream {
        let args = args.iter().map(|a| (*a).to_owned()).collect();
        Upstream::new(name, "stdio")
            .with("command", Field::Text(command.to_owned()))
            .with("args", Field::List(args))
    }

    /// A built-in demo server.
    pub fn demo(name: &str) -> Upstream {
        Upstream::new(name, "demo")
    }

    /// A Streamable HTTP upstream at `url`.
    pub fn http(name: &str, url: &str) -> Upstream {
        Upstream::new(name, "http").with("url", Field::Text(url.to_owned()))
    }

    /// A legacy HTTP+SSE upstream whose SSE endpoint is `url`.
    pub fn sse(name: &str, url: &str) -> Upstream {
        Upstream::new(name, "sse").with("url", Field::Text(url.to_owned()))
    }

    /// The protocol revision of an `http` upstream that is not a session-era server
    /// (`"2026-07-28"`: stateless requests).
    pub fn revision(self, revision: &str) -> Upstream {
        self.with("revision", Field::Text(revision.to_owned()))
    }

    /// The tool/prompt name prefix (`""`: names unchanged; default: the upstream's name).
    pub fn prefix(self, prefix: &str) -> Upstream {
        self.with("prefix", Field::Text(prefix.to_owned()))
    }

    /// Sets field `key` to a TOML number or boolean (`restart_backoff_ms`, `shared`).
    pub fn set(self, key: &'static str, value: impl std::fmt::Display) -> Upstream {
        self.with(key, Field::Raw(value.to_string()))
    }

    fn new(name: &str, kind: &str) -> Upstream {
        Upstream {
            name: name.to_owned(),
            fields: vec![("kind", Field::Text(kind.to_owned()))],
        }
    }

    fn with(mut self, key: &'static str, value: Field) -> Upstream {
        self.fields.retain(|(k, _)| *k != key);
        self.fields.push((key, value));
        self
    }

    fn pairs(&self) -> Vec<String> {
        let mut out = vec![format!("name = {}", quote(&self.name))];
        for (key, value) in &self.fields {
            let value = match value {
                Field::Text(t) => quote(t),
                Field::Raw(v) => v.clone(),
                Field::List(items) => {
                    let items: Vec<String> = items.iter().map(|i| quote(i)).collect();
                    format!("[{}]", items.join(", "))
                }
            };
            out.push(format!("{key} = {value}"));
        }
        out
    }
}

/// The path of the stdio fixture server (`crates/switchboard-upstream/tests/fixtures/
/// stdio_server.py`, standard library only; its docstring lists the tools).
pub fn stdio_fixture() -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    dir.join("../crates/switchboard-upstream/tests/fixtures/stdio_server.py")
        .to_string_lossy()
        .into_owned()
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The same upstreams as `[[upstreams]]` tables of a config file.
pub fn config_file_toml(upstreams: &[Upstream]) -> String {
    upstreams
        .iter()
        .map(|u| format!("[[upstreams]]\n{}\n", u.pairs().join("\n")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cluster started by [`start_cluster`], with the config file its nodes read.
pub struct ConfiguredCluster {
    /// The nodes and their Redis.
    pub cluster: Cluster,
    config: TempDir,
}

impl ConfiguredCluster {
    /// The config file every node was started with.
    pub fn config_path(&self) -> PathBuf {
        self.config.path().join("switchboard.toml")
    }
}

/// Starts `n` nodes (with `options` as `--set` flags) whose config file lists exactly
/// `upstreams`; no upstreams: no config file (the built-in demo server).
pub fn start_cluster(
    n: usize,
    upstreams: &[Upstream],
    options: ClusterOptions,
) -> ConfiguredCluster {
    let config = TempDir::new("sb-config");
    let path = config.path().join("switchboard.toml");
    std::fs::write(&path, config_file_toml(upstreams)).expect("write switchboard.toml");
    let options = if upstreams.is_empty() {
        options
    } else {
        options.config_file(&path)
    };
    let cluster = Cluster::start(n, options);
    ConfiguredCluster { cluster, config }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_upstream_tables() {
        let ups = [
            Upstream::stdio("fixture", "node", &["a \"b\".mjs", "stdio"]).prefix(""),
            Upstream::http("web", "http://127.0.0.1:1/mcp").set("timeout_ms", 500),
        ];
        assert_eq!(
            config_file_toml(&ups),
            "[[upstreams]]\nname = \"fixture\"\nkind = \"stdio\"\ncommand = \"node\"\n\
             args = [\"a \\\"b\\\".mjs\", \"stdio\"]\nprefix = \"\"\n\n\
             [[upstreams]]\nname = \"web\"\nkind = \"http\"\nurl = \"http://127.0.0.1:1/mcp\"\ntimeout_ms = 500\n"
        );
    }
}
