//! The files that configure nodes outside the code agree with the config tree: the example config,
//! the Helm chart's values and templates, the plain Kubernetes manifests and the README.
//!
//! `helm` is not needed: the chart's `config:` block is kept in flow style (quoted strings,
//! numbers, `[..]` lists), which reads the same as TOML line by line, so it is loaded through the
//! real config loader. Templates are checked by text for what they must wire up.

use std::path::{Path, PathBuf};

use switchboard::load::Override;
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
        let line = format!("\n{key} = ");
        assert!(text.contains(&line), "example lacks `{key}`");
        let comment = text.split(&line).next().unwrap().lines().last().unwrap();
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
        &["listen", "redis_url", "node_id"],
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
        key: "listen".into(),
        raw: "0.0.0.0:8080".into(),
    });
    let config = load(&Sources {
        overrides,
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("helm values: {e}"));
    assert!(!config.listen.ip().is_loopback());
    assert!(values.contains("replicaCount: 3"));
}

#[test]
fn helm_templates_wire_what_the_node_needs() {
    let configmap = read("helm/switchboard/templates/configmap.yaml");
    assert!(configmap.contains("SWITCHBOARD_LISTEN: {{ printf \"0.0.0.0:%d\""));
    assert!(configmap.contains("SWITCHBOARD_{{ upper $key }}"));
    let deployment = read("helm/switchboard/templates/deployment.yaml");
    for needle in [
        "name: SWITCHBOARD_REDIS_URL",
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
        !deployment.contains("SWITCHBOARD_NODE_ID"),
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
        .filter_map(|(name, _)| name.strip_prefix("SWITCHBOARD_"))
        .map(str::to_ascii_lowercase)
        .collect();
    assert_covers("k8s ConfigMap", &keys, &["node_id"]);
    let config = load(&Sources {
        env,
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("k8s/switchboard.yaml: {e}"));
    assert_eq!(config.listen.to_string(), "0.0.0.0:8080");
    assert_eq!(config.redis_url, "redis://redis:6379");
    for needle in [
        "path: /readyz",
        "path: /healthz",
        "sessionAffinity: None",
        "enableServiceLinks: false",
    ] {
        assert!(manifest.contains(needle), "k8s manifest lacks `{needle}`");
    }
}

#[test]
fn readme_documents_every_key() {
    let readme = read("README.md");
    for key in Config::keys() {
        assert!(readme.contains(&format!("`{key}`")), "README lacks `{key}`");
        let env = format!("SWITCHBOARD_{}", key.to_uppercase());
        assert!(readme.contains(&env), "README lacks {env}");
    }
    assert!(readme.contains("cargo run --release -p switchboard -- serve"));
    assert!(readme.contains("cargo test --workspace"));
}
