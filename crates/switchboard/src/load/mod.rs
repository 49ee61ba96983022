//! Merging the config sources with `figment`: defaults < TOML file < `SWITCHBOARD_<SECTION>__<KEY>`
//! environment variables < flags (`--set section.key=value`, then the named flags).
//!
//! A key is named by its dotted path (`session.max_sessions`); an environment variable spells the
//! path in capitals with `__` for each dot (`SWITCHBOARD_SESSION__MAX_SESSIONS`). Environment
//! and flag values arrive as text and are typed by the key they set: text keys (durations and
//! sizes among them) take the raw string (a TOML string literal is unquoted), list keys take
//! comma-separated items (or a TOML array), other keys take a TOML value (falling back to the
//! raw string, which then fails with a type error naming the key). Every error names the key and
//! where its value came from; a rule that compares keys names the source of each
//! (`cluster.node_ttl left at its default`). An old flat key (`max_sessions`) is answered with its new
//! place ([`crate::config::MOVED`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider, Source};
use serde::Deserialize;

use crate::config::{moved_to, Config, MOVED};

/// Prefix of the environment variables that set config keys (`SWITCHBOARD_SESSION__IDLE_TTL`).
pub const ENV_PREFIX: &str = "SWITCHBOARD_";
/// Between the sections of a key's path in an environment variable's name (a dot in the path).
pub const ENV_SEPARATOR: &str = "__";
/// Environment variable naming the TOML config file when `--config` is not given.
pub const CONFIG_FILE_ENV: &str = "SWITCHBOARD_CONFIG";

/// Everything a config is merged from. Built by `ConfigArgs::sources` (the `cli` module); tests
/// build it directly so they never touch the process environment.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The TOML file, if any. A named file that does not exist is an error.
    pub file: Option<PathBuf>,
    /// Environment variables (all of them; only `SWITCHBOARD_*` are read).
    pub env: Vec<(String, String)>,
    /// Flag settings in increasing precedence.
    pub overrides: Vec<Override>,
}

/// One key set on the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// How the user wrote it, for error messages (`--listen`, `--set session.max_sessions=5`).
    pub origin: String,
    /// The config key's dotted path (`session.max_sessions`).
    pub key: String,
    /// The value as typed.
    pub raw: String,
}

/// Why no config could be built. The binary prints it and exits with code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The named config file cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// One or more keys are unknown or have bad values; each message names its key.
    #[error("invalid configuration:\n  {}", .0.join("\n  "))]
    Invalid(Vec<String>),
}

/// Merges `sources` into a validated config. `node_id` stays as configured (empty when unset):
/// the random id is picked when a node starts serving ([`Config::resolved`]).
pub fn load(sources: &Sources) -> Result<Config, ConfigError> {
    let figment = merge(sources)?;
    let mut problems = unknown_keys(&figment);
    let config = match figment.extract::<Config>() {
        Ok(config) => config,
        Err(e) => {
            // Unknown keys are already reported above, with their source.
            problems.extend(render(e, !problems.is_empty()));
            return Err(ConfigError::Invalid(problems));
        }
    };
    problems.extend(config.problems().into_iter().map(|p| {
        let from: Vec<String> = p.keys.iter().map(|key| origin_of(&figment, key)).collect();
        match from.as_slice() {
            [one] => format!("{} ({one})", p.message),
            _ => {
                let named = p.keys.iter().zip(&from).map(|(k, f)| format!("{k} {f}"));
                format!("{} ({})", p.message, named.collect::<Vec<_>>().join("; "))
            }
        }
    }));
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// The figment of all sources, in precedence order.
fn merge(sources: &Sources) -> Result<Figment, ConfigError> {
    let kinds = KeyKinds::new();
    let mut figment = Figment::from(Serialized::defaults(Config::default()));
    if let Some(path) = &sources.file {
        // `Toml::file_exact` reads a missing file as empty; a named file must exist.
        if let Err(source) = std::fs::File::open(path) {
            let path = path.clone();
            return Err(ConfigError::File { path, source });
        }
        figment = figment.merge(Toml::file_exact(path));
    }
    for (name, raw) in &sources.env {
        let Some(key) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if is_reserved(key) {
            continue;
        }
        let key = env_key(key);
        let value = kinds.parse(&key, raw);
        figment = figment.merge(Setting::new(
            format!("environment variable {name}"),
            key,
            value,
        ));
    }
    for o in &sources.overrides {
        let value = kinds.parse(&o.key, &o.raw);
        figment = figment.merge(Setting::new(o.origin.clone(), o.key.clone(), value));
    }
    Ok(figment)
}

/// The dotted key an environment variable names, given without the prefix:
/// `SESSION__MAX_SESSIONS` → `session.max_sessions`.
pub fn env_key(name: &str) -> String {
    name.to_ascii_lowercase().replace(ENV_SEPARATOR, ".")
}

/// The environment variable that sets the dotted `key`: `session.max_sessions` →
/// `SWITCHBOARD_SESSION__MAX_SESSIONS`.
pub fn env_name(key: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        key.to_ascii_uppercase().replace('.', ENV_SEPARATOR)
    )
}

/// `SWITCHBOARD_*` variables that are not config keys, given without the prefix: the config file
/// (`SWITCHBOARD_CONFIG`), the test harness's binary path (`SWITCHBOARD_BIN`), and the service
/// links Kubernetes injects into pods for a Service named `switchboard` (`SWITCHBOARD_SERVICE_HOST`,
/// `SWITCHBOARD_PORT_80_TCP`, ...). Every other `SWITCHBOARD_*` variable must name a key.
pub fn is_reserved(name: &str) -> bool {
    matches!(name, "CONFIG" | "BIN" | "PORT")
        || name.starts_with("SERVICE_")
        || name.starts_with("PORT_")
}

/// One key from one place (an environment variable or a flag), as a figment provider so errors
/// about the key name that place.
struct Setting {
    origin: String,
    key: String,
    value: Value,
}

impl Setting {
    fn new(origin: String, key: String, value: Value) -> Setting {
        Setting { origin, key, value }
    }
}

impl Provider for Setting {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.origin.clone())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let dict = match figment::util::nest(&self.key, self.value.clone()) {
            Value::Dict(_, dict) => dict,
            _ => Dict::new(),
        };
        Ok(Profile::Default.collect(dict))
    }
}

/// The shape of each key's default value, which decides how text is typed.
struct KeyKinds(BTreeMap<String, Shape>);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Text,
    List,
    Other,
}

impl KeyKinds {
    fn new() -> KeyKinds {
        let shapes = Config::defaults().into_iter().map(|(key, value)| {
            let shape = match value {
                toml::Value::String(_) => Shape::Text,
                toml::Value::Array(_) => Shape::List,
                _ => Shape::Other,
            };
            (key, shape)
        });
        KeyKinds(shapes.collect())
    }

    /// Types the text `raw` given to `key` (see the module doc).
    fn parse(&self, key: &str, raw: &str) -> Value {
        let shape = self.0.get(key).copied().unwrap_or(Shape::Other);
        let parsed = match shape {
            Shape::Text => match toml_value(raw) {
                Some(toml::Value::String(s)) => toml::Value::String(s),
                _ => toml::Value::String(raw.to_owned()),
            },
            Shape::List if !raw.trim_start().starts_with('[') => toml::Value::Array(
                raw.split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(|item| toml::Value::String(item.to_owned()))
                    .collect(),
            ),
            Shape::List | Shape::Other => {
                toml_value(raw).unwrap_or_else(|| toml::Value::String(raw.to_owned()))
            }
        };
        Value::serialize(&parsed).unwrap_or_else(|_| Value::from(raw.to_owned()))
    }
}

/// `raw` read as one TOML value (`5`, `"x"`, `["a", "b"]`), if it is one.
fn toml_value(raw: &str) -> Option<toml::Value> {
    toml::Value::deserialize(toml::de::ValueDeserializer::new(raw.trim())).ok()
}

/// Keys present in any source that the config does not have, each named with its source: an
/// old flat key with its new place, another with the nearest known key when one is close.
fn unknown_keys(figment: &Figment) -> Vec<String> {
    let Ok(merged) = figment.extract::<Dict>() else {
        // An unreadable source (e.g. a TOML syntax error) is reported by the full extraction.
        return Vec::new();
    };
    let known = Config::keys();
    let tables = Config::TABLES.iter().filter_map(|key| {
        // Tables (`[[upstreams]]`) come from the file only.
        let from = figment
            .find_metadata(key)
            .filter(|_| merged.contains_key(*key))?;
        let in_file = matches!(from.source, Some(Source::File(_)));
        (!in_file).then(|| {
            format!(
                "`{key}` can only be set in the config file ({})",
                describe(from)
            )
        })
    });
    let tables: Vec<String> = tables.collect();
    let mut unknown = Vec::new();
    stray_paths("", &merged, &known, &mut unknown);
    unknown
        .into_iter()
        .map(|key| {
            let from = figment
                .find_metadata(&key)
                .map(|m| format!(" ({})", describe(m)))
                .unwrap_or_default();
            if let Some(moved) = moved_to(&key) {
                let new = MOVED
                    .iter()
                    .find(|(old, _)| *old == key)
                    .map(|(_, new)| *new);
                let variable = new
                    .filter(|_| from.contains("environment variable"))
                    .map(|new| format!("; its variable is now {}", env_name(new)))
                    .unwrap_or_default();
                return format!("{moved}{from}{variable}");
            }
            let hint = closest(&key, &known)
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            format!("unknown config key `{key}`{from}{hint}")
        })
        .chain(tables)
        .collect()
}

/// The dotted paths in `dict` (below `prefix`) that are neither a key nor a section of one.
/// A stray section is reported once, not once per key in it; `[[upstreams]]` is checked by its
/// own type.
fn stray_paths(prefix: &str, dict: &Dict, known: &[String], out: &mut Vec<String>) {
    for (key, value) in dict {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if Config::TABLES.contains(&path.as_str()) || known.contains(&path) {
            continue;
        }
        match (crate::config::open_path(&path), value) {
            (Some(true), Value::Dict(_, inner)) => {
                stray_paths(&path, inner, known, out);
                continue;
            }
            (Some(_), _) => continue,
            (None, _) => {}
        }
        let section = format!("{path}.");
        match value {
            Value::Dict(_, inner) if known.iter().any(|k| k.starts_with(&section)) => {
                stray_paths(&path, inner, known, out);
            }
            // A section given as a plain value: the type error names it.
            _ if known.iter().any(|k| k.starts_with(&section)) => {}
            _ => out.push(path),
        }
    }
}

/// Figment's errors as one message each: `key (source): problem`. Unknown-field errors are
/// skipped when `skip_unknown` (they were reported with a better source).
fn render(error: figment::Error, skip_unknown: bool) -> Vec<String> {
    use figment::error::Kind;
    error
        .into_iter()
        .filter(|e| {
            // Unknown keys inside `[[upstreams]]` (`upstreams.0.prefx`) and `[[policy.rules]]`
            // are not reported above.
            let upstream = in_tables(&e.path);
            !(skip_unknown && !upstream && matches!(e.kind, Kind::UnknownField(..)))
        })
        .map(|e| {
            let from = e.metadata.as_ref().map(describe);
            let nested = in_tables(&e.path);
            match (&e.kind, e.path.join("."), from) {
                (Kind::UnknownField(key, _), path, Some(from)) if nested => {
                    format!("{path} ({from}): unknown key `{key}`")
                }
                (Kind::UnknownField(key, _), _, _) => format!("unknown config key `{key}`"),
                (kind, path, None) if path.is_empty() => problem(kind),
                (kind, path, Some(from)) if path.is_empty() => format!("{from}: {}", problem(kind)),
                (kind, path, None) => format!("{path}: {}", problem(kind)),
                (kind, path, Some(from)) => format!("{path} ({from}): {}", problem(kind)),
            }
        })
        .collect()
}

/// Whether an error's path is inside a table of [`Config::TABLES`] (`upstreams.0`,
/// `policy.rules.1`).
fn in_tables(path: &[String]) -> bool {
    let joined = path.join(".");
    Config::TABLES
        .iter()
        .any(|t| joined.starts_with(&format!("{t}.")))
}

/// What a figment error says about the value: figment's own text, except for a value that is
/// none of the allowed ones, whose list figment quotes twice (``expected ``a` or `b```).
fn problem(kind: &figment::error::Kind) -> String {
    match kind {
        figment::error::Kind::UnknownVariant(found, allowed) => {
            format!("unknown value `{found}`, expected {}", one_of(allowed))
        }
        kind => in_plain_words(&kind.to_string()),
    }
}

/// A figment message with Rust's integer type names (`expected a nonzero u64`) said the way the
/// configuration docs say them.
fn in_plain_words(message: &str) -> String {
    let mut out = message.to_owned();
    for ty in ["u64", "usize", "u32", "u16", "u8"] {
        out = out
            .replace(&format!("a nonzero {ty}"), "an integer greater than 0")
            .replace(
                &format!("expected {ty}"),
                "expected an integer of at least 0",
            );
    }
    out
}

/// `` `a` ``, `` `a` or `b` ``, `` `a`, `b` or `c` ``.
fn one_of(allowed: &[&str]) -> String {
    let quoted: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
    match quoted.split_last() {
        None => "nothing".to_owned(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Where the merged value of `key` came from: `in FILE`, `from ORIGIN` or `left at its default` (the
/// built-in defaults are the only source given as Rust code).
fn origin_of(figment: &Figment, key: &str) -> String {
    match figment.find_metadata(key) {
        Some(m) if !matches!(m.source, Some(Source::Code(_))) => describe(m),
        _ => "left at its default".to_owned(),
    }
}

/// `in FILE` or `from ORIGIN`.
fn describe(metadata: &Metadata) -> String {
    match &metadata.source {
        Some(Source::File(path)) => format!("in {}", path.display()),
        _ => format!("from {}", metadata.name),
    }
}

/// The known key nearest to `key` by edit distance (Levenshtein, over characters), when it is
/// close enough to be a typo; the first of equally near keys.
fn closest<'a>(key: &str, known: &'a [String]) -> Option<&'a String> {
    known
        .iter()
        .map(|k| (strsim::levenshtein(key, k), k))
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests;
