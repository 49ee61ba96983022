//! The command line: subcommands and the flags that set config keys.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::load::{Override, Sources, CONFIG_FILE_ENV};

/// Switchboard: a session-routing cluster for the Model Context Protocol.
#[derive(Debug, Parser)]
#[command(name = "switchboard", version, about, long_about = None)]
pub struct Cli {
    /// What to do (default: `serve`).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Where the config comes from.
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The subcommands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Run a node until SIGTERM or Ctrl-C (the default).
    Serve,
    /// Print the effective merged config tree as TOML sections and exit.
    Config,
}

/// Flags that choose the config file and set keys; they take precedence over the file and the
/// `SWITCHBOARD_*` environment. The named flags win over `--set` for the same key.
#[derive(Clone, Debug, Default, Args)]
pub struct ConfigArgs {
    /// TOML config file (default: $SWITCHBOARD_CONFIG, else none).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Listen address, e.g. 0.0.0.0:8080 (key `http.listen`).
    #[arg(long, global = true, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Redis URL; empty means the embedded memory store (key `redis.url`).
    #[arg(long, global = true, value_name = "URL")]
    pub redis_url: Option<String>,
    /// This node's id, unique per process (key `cluster.node_id`).
    #[arg(long, global = true, value_name = "ID")]
    pub node_id: Option<String>,
    /// Session idle timeout, e.g. 30m (key `session.idle_ttl`).
    #[arg(long, global = true, value_name = "DURATION")]
    pub idle_ttl: Option<String>,
    /// Log filter: a level or tracing directives (key `log.level`).
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Log format (key `log.format`).
    #[arg(long, global = true, value_name = "FORMAT", value_parser = ["text", "json"])]
    pub log_format: Option<String>,
    /// Set any key by its dotted path (session.max_sessions=5); VALUE is read as TOML, else as a
    /// string; lists take a,b,c. Repeatable.
    #[arg(long = "set", global = true, value_name = "KEY=VALUE", value_parser = parse_set)]
    pub set: Vec<(String, String)>,
}

impl ConfigArgs {
    /// The sources to merge: these flags, the given environment, and the config file named by
    /// `--config` or `SWITCHBOARD_CONFIG`.
    pub fn sources(&self, env: Vec<(String, String)>) -> Sources {
        let file = self.config.clone().or_else(|| {
            env.iter()
                .find(|(name, value)| name == CONFIG_FILE_ENV && !value.is_empty())
                .map(|(_, value)| PathBuf::from(value))
        });
        Sources {
            file,
            env,
            overrides: self.overrides(),
        }
    }

    /// The keys set by flags, lowest precedence first.
    pub fn overrides(&self) -> Vec<Override> {
        let mut out: Vec<Override> = self
            .set
            .iter()
            .map(|(key, raw)| Override {
                origin: format!("--set {key}={}", shown(key, raw)),
                key: key.clone(),
                raw: raw.clone(),
            })
            .collect();
        let named = [
            ("--listen", "http.listen", &self.listen),
            ("--redis-url", "redis.url", &self.redis_url),
            ("--node-id", "cluster.node_id", &self.node_id),
            ("--idle-ttl", "session.idle_ttl", &self.idle_ttl),
            ("--log-level", "log.level", &self.log_level),
            ("--log-format", "log.format", &self.log_format),
        ];
        for (flag, key, value) in named {
            if let Some(raw) = value {
                out.push(Override {
                    origin: flag.to_owned(),
                    key: key.to_owned(),
                    raw: raw.clone(),
                });
            }
        }
        out
    }
}

/// A `--set` value as error messages name it: `***` for a password key, a URL's password
/// hidden ([`crate::config::redact_url`]).
fn shown(key: &str, raw: &str) -> String {
    if key.ends_with("password") {
        return "***".into();
    }
    crate::config::redact_url(raw)
}

/// `key=value` → (`key`, `value`); the key is trimmed and must not be empty.
fn parse_set(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("expected KEY=VALUE, got `{arg}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_is_the_default_and_flags_work_on_both_sides() {
        let cli = Cli::try_parse_from(["switchboard"]).unwrap();
        assert_eq!(cli.command, None);
        let cli = Cli::try_parse_from(["switchboard", "--listen", "0.0.0.0:1", "serve"]).unwrap();
        assert_eq!(cli.command, Some(Command::Serve));
        assert_eq!(cli.config.listen.as_deref(), Some("0.0.0.0:1"));
        let cli = Cli::try_parse_from([
            "switchboard",
            "config",
            "--set",
            "session.max_sessions=7",
            "--set",
            "http.allowed_hosts=a,b",
            "--node-id",
            "n1",
        ])
        .unwrap();
        assert_eq!(cli.command, Some(Command::Config));
        let keys: Vec<_> = cli.config.overrides().into_iter().map(|o| o.key).collect();
        assert_eq!(
            keys,
            [
                "session.max_sessions",
                "http.allowed_hosts",
                "cluster.node_id"
            ]
        );
    }

    #[test]
    fn a_set_origin_shows_no_secret() {
        let cli = Cli::try_parse_from([
            "switchboard",
            "--set",
            "redis.url=http://:secret@127.0.0.1:16401",
            "--set",
            "redis.sentinel_password=sentpw",
        ])
        .unwrap();
        let origins: Vec<_> = cli
            .config
            .overrides()
            .into_iter()
            .map(|o| o.origin)
            .collect();
        assert_eq!(
            origins,
            [
                "--set redis.url=http://:***@127.0.0.1:16401",
                "--set redis.sentinel_password=***"
            ]
        );
    }

    #[test]
    fn set_needs_key_and_equals() {
        assert!(Cli::try_parse_from(["switchboard", "--set", "novalue"]).is_err());
        assert!(Cli::try_parse_from(["switchboard", "--set", "=x"]).is_err());
        let cli =
            Cli::try_parse_from(["switchboard", "--set", "redis.url=redis://h/0?a=b"]).unwrap();
        assert_eq!(
            cli.config.set,
            [("redis.url".into(), "redis://h/0?a=b".into())]
        );
    }

    #[test]
    fn config_file_from_flag_or_env() {
        let env = vec![(CONFIG_FILE_ENV.to_owned(), "/env.toml".to_owned())];
        let args = ConfigArgs::default();
        assert_eq!(args.sources(env.clone()).file, Some("/env.toml".into()));
        let args = ConfigArgs {
            config: Some("/flag.toml".into()),
            ..ConfigArgs::default()
        };
        assert_eq!(args.sources(env).file, Some("/flag.toml".into()));
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
