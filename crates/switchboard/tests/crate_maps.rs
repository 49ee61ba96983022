//! The maps of the code stay true: each workspace crate's `lib.rs` opening doc names every
//! top-level module the crate declares and every workspace crate it depends on, and
//! `docs/architecture.md`'s crate table has a row for each crate (issue 33).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The workspace's crates under `crates/`: (name, folder).
fn crates() -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(repo().join("crates"))
        .expect("crates/")
        .filter_map(|e| {
            let dir = e.ok()?.path();
            dir.join("Cargo.toml").exists().then_some(dir)
        })
        .map(|dir| (package_name(&read(&dir.join("Cargo.toml"))), dir))
        .collect();
    found.sort();
    found
}

fn package_name(manifest: &str) -> String {
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("a package name")
        .to_owned()
}

/// The `switchboard*` crates in the `[dependencies]` table of a manifest.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut inside = false;
    let mut deps = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if !inside || !line.starts_with("switchboard") {
            continue;
        }
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        deps.push(name);
    }
    deps
}

/// The top-level modules `lib.rs` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`), not
/// inline test modules.
fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .map(str::trim)
        .filter(|l| l.ends_with(';'))
        .filter_map(|l| {
            let rest = l.strip_prefix("pub ").unwrap_or(l);
            let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
            rest.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect()
}

/// The crate doc of `lib.rs`: its leading `//!` lines.
fn crate_doc(lib: &str) -> String {
    lib.lines()
        .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `doc` names `name` as code: `` `name` ``, `` [`name`] ``, `` `name/` ``,
/// `` `name::…` `` or `` [`mod@name`] ``.
fn names(doc: &str, name: &str) -> bool {
    [
        format!("`{name}`"),
        format!("`{name}/"),
        format!("`{name}::"),
        format!("`mod@{name}`"),
    ]
    .iter()
    .any(|form| doc.contains(form.as_str()))
}

#[test]
fn every_lib_rs_map_names_its_modules_and_its_workspace_dependencies() {
    let mut missing = Vec::new();
    for (name, dir) in crates() {
        let lib_path = dir.join("src/lib.rs");
        if !lib_path.exists() {
            continue;
        }
        let lib = read(&lib_path);
        let doc = crate_doc(&lib);
        for module in declared_modules(&lib) {
            if !names(&doc, &module) {
                missing.push(format!("{name}: module `{module}` not in the lib.rs map"));
            }
        }
        for dep in workspace_dependencies(&read(&dir.join("Cargo.toml"))) {
            if !names(&doc, &dep) {
                missing.push(format!("{name}: depends on `{dep}`, not named in lib.rs"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_architecture_table_has_a_row_per_crate() {
    let doc = read(&repo().join("docs/architecture.md"));
    let missing: Vec<String> = crates()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| !doc.contains(&format!("| `{name}` |")))
        .collect();
    assert!(missing.is_empty(), "no row for {missing:?}");
}

#[test]
fn the_checks_read_what_they_should() {
    let lib = "//! - [`a`]: x\n//! `b/`\n\nmod a;\npub mod b;\npub(crate) mod c;\n#[cfg(test)]\nmod tests {}\n";
    assert_eq!(declared_modules(lib), ["a", "b", "c"]);
    let doc = crate_doc(lib);
    assert!(names(&doc, "a") && names(&doc, "b") && !names(&doc, "c"));
    let manifest = "[dependencies]\nswitchboard-store.workspace = true\nserde = \"1\"\n\n[dev-dependencies]\nswitchboard-tests = { path = \"x\" }\n";
    assert_eq!(workspace_dependencies(manifest), ["switchboard-store"]);
}
