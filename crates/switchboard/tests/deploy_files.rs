//! The files that configure nodes outside the code agree with the config tree: the example config,
//! the Helm chart's values and templates, the plain Kubernetes manifests, the configuration
//! reference (docs/configuration.md) and the README.
//!
//! `helm` is not needed: the chart's `config:` block is kept in flow style (quoted strings,
//! numbers, `[..]` lists), which reads the same as TOML line by line, so it is loaded through the
//! real config loader. Templates are checked by text for what they must wire up.

use std::path::{Path, PathBuf};

use switchboard::load::{env_key, env_name, Override, ENV_PREFIX};
use switchboard::{load, Config, Sources};

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_file(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// The indented `key: value` lines under the top-level `block:` of a YAML file, comments skipped.
fn yaml_block(text: &str, block: &str, indent: usize) -> Vec<(String, String)> {
    let header = format!("{block}:");
    let pad = " ".repeat(indent);
    text.lines()
        .skip_while(|line| line.trim_end() != header)
        .skip(1)
        .take_while(|line| line.is_empty() || line.starts_with(&pad))
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (key, value) = line.split_once(':').expect("key: value");
            (key.trim().to_owned(), value.trim().to_owned())
        })
        .collect()
}

fn assert_covers(what: &str, present: &[String], except: &[&str]) {
    for key in Config::keys() {
        if !except.contains(&key.as_str()) {
            assert!(present.contains(&key), "{what} lacks config key `{key}`");
        }
    }
}

#[test]
fn example_config_sets_every_key_to_its_default() {
    let config = load(&Sources {
        file: Some(repo_file("examples/switchboard.toml")),
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("examples/switchboard.toml: {e}"));
    let text = read("examples/switchboard.toml");
    for key in Config::keys() {
        let (section, name) = key.rsplit_once('.').unwrap_or(("", &key));
        // The key's section: from its `[section]` header to the next header.
        let body = match section {
            "" => text.split("\n[").next().unwrap(),
            _ => text
                .split(&format!("\n[{section}]\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("example lacks [{section}]"))
                .split("\n[")
                .next()
                .unwrap(),
        };
        let line = format!("\n{name} = ");
        assert!(body.contains(&line), "example lacks `{key}`");
        let comment = body.split(&line).next().unwrap().lines().last().unwrap();
        assert!(
            comment.starts_with("# "),
            "`{key}` has no comment line above it"
        );
    }
    assert_eq!(config, Config::default());
}

#[test]
fn helm_values_config_block_loads() {
    let values = read("helm/switchboard/values.yaml");
    let block = yaml_block(&values, "config", 2);
    let keys: Vec<String> = block.iter().map(|(k, _)| k.clone()).collect();
    assert_covers(
        "helm values config",
        &keys,
        &[
            "http.listen",
            "redis.url",
            "cluster.node_id",
            "metrics.listen",
        ],
    );
    let mut overrides: Vec<Override> = block
        .iter()
        .map(|(key, raw)| Override {
            origin: format!("helm values config.{key}"),
            key: key.clone(),
            raw: raw.clone(),
        })
        .collect();
    overrides.push(Override {
        origin: "chart".into(),
        key: "http.listen".into(),
        raw: "0.0.0.0:8080".into(),
    });
    let config = load(&Sources {
        overrides,
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("helm values: {e}"));
    assert!(!config.http.listen.ip().is_loopback());
    assert!(values.contains("replicaCount: 3"));
    assert_eq!(
        config,
        deployed(config.http.listen, ""),
        "helm values restate the defaults except the deployment's own keys"
    );
}

/// The defaults with what a deployment sets on purpose: a listener on every interface, its
/// Redis, JSON logs. The deployment files list every other key at its default, so a changed
/// default must be changed there too.
fn deployed(listen: std::net::SocketAddr, redis_url: &str) -> Config {
    let mut config = Config::default();
    config.http.listen = listen;
    config.redis.url = redis_url.into();
    config.log.format = switchboard::LogFormat::Json;
    config
}

#[test]
fn helm_templates_wire_what_the_node_needs() {
    let configmap = read("helm/switchboard/templates/configmap.yaml");
    assert!(configmap.contains("SWITCHBOARD_HTTP__LISTEN: {{ printf \"0.0.0.0:%d\""));
    assert!(configmap.contains("SWITCHBOARD_{{ $key | replace \".\" \"__\" | upper }}"));
    let deployment = read("helm/switchboard/templates/deployment.yaml");
    for needle in [
        "name: SWITCHBOARD_REDIS__URL",
        "secretKeyRef:",
        "path: /readyz",
        "path: /healthz",
        "terminationGracePeriodSeconds:",
        "configMapRef:",
        "enableServiceLinks: false",
    ] {
        assert!(deployment.contains(needle), "deployment lacks `{needle}`");
    }
    assert!(
        !deployment.contains("SWITCHBOARD_CLUSTER__NODE_ID"),
        "node ids must be per process"
    );
    let service = read("helm/switchboard/templates/service.yaml");
    assert!(service.contains("sessionAffinity: None"));
    for file in ["configmap", "deployment", "service", "pdb", "_helpers"] {
        let ext = if file == "_helpers" { "tpl" } else { "yaml" };
        let text = read(&format!("helm/switchboard/templates/{file}.{ext}"));
        assert!(
            !text.contains('\t'),
            "{file}: tabs are not YAML indentation"
        );
    }
}

#[test]
fn k8s_configmap_loads_as_environment() {
    let manifest = read("k8s/switchboard.yaml");
    let env: Vec<(String, String)> = yaml_block(&manifest, "data", 2)
        .into_iter()
        .map(|(name, value)| {
            let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
            (name, value.expect("quoted value").to_owned())
        })
        .collect();
    let keys: Vec<String> = env
        .iter()
        .filter_map(|(name, _)| name.strip_prefix(ENV_PREFIX))
        .map(env_key)
        .collect();
    assert_covers("k8s ConfigMap", &keys, &["cluster.node_id"]);
    let config = load(&Sources {
        env,
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("k8s/switchboard.yaml: {e}"));
    assert_eq!(config.http.listen.to_string(), "0.0.0.0:8080");
    assert_eq!(config.redis.url, "redis://redis:6379");
    assert_eq!(
        config,
        deployed(config.http.listen, "redis://redis:6379"),
        "the ConfigMap restates the defaults except the deployment's own keys"
    );
    for needle in [
        "path: /readyz",
        "path: /healthz",
        "sessionAffinity: None",
        "enableServiceLinks: false",
    ] {
        assert!(manifest.contains(needle), "k8s manifest lacks `{needle}`");
    }
}

/// The rows of the key tables in docs/configuration.md: `` | `section.key` | type | `default` | ... | ``.
fn documented_keys(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let key = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let default = cells.get(3)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((key.to_owned(), default.to_owned()))
        })
        .filter(|(key, _)| !key.contains(' '))
        .collect()
}

#[test]
fn configuration_reference_documents_every_key_with_its_default() {
    let doc = read("docs/configuration.md");
    let documented = documented_keys(&doc);
    let defaults = Config::defaults();
    let keys: Vec<&String> = documented.iter().map(|(k, _)| k).collect();
    let expected: Vec<&String> = defaults.keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len(), "a key is documented twice");
    assert_eq!(
        sorted, expected,
        "docs/configuration.md keys differ from the code's"
    );
    for (key, default) in &documented {
        let value = defaults[key].to_string();
        assert_eq!(default, &value, "docs/configuration.md: default of `{key}`");
        assert!(doc.contains(&env_name(key)), "docs lack {}", env_name(key));
    }
    for (old, new) in switchboard::config::MOVED {
        if old != new {
            assert!(
                doc.contains(&format!("| `{old}` | `{new}` |")),
                "docs/configuration.md: moved-keys table lacks `{old}`"
            );
        }
    }
}

#[test]
fn readme_points_to_the_configuration_reference() {
    let readme = read("README.md");
    assert!(readme.contains("docs/configuration.md"));
    assert!(readme.contains("cargo run --release -p switchboard -- serve"));
    assert!(readme.contains("cargo test --workspace"));
}
