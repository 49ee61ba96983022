//! Builds of the workspace's own programs from inside a test: the node binary ([`crate::node`])
//! and the library-mode examples ([`crate::replicated`]), each built once per test process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs `cargo build ARGS` (with `--release` in release test builds) in the workspace root and
/// returns the directory its outputs land in (`$CARGO_TARGET_DIR` or `target/`, then `debug` or
/// `release`). Panics with cargo's output when the build fails.
pub fn built(args: &[&str]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned();
    let mut cmd = nested_cargo();
    cmd.current_dir(&root).arg("build").args(args);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.stdout(Stdio::null()).output().expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        root.join(target)
    };
    target.join(if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    })
}

/// `$CARGO` (else `cargo`) for a build run from inside a test, without the variables cargo set
/// for the test process itself (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …). Inherited, they change
/// the environment that build scripts' fingerprints record (ring's records
/// `CARGO_MANIFEST_DIR`), so the nested build and a `cargo build` or `cargo test` from a shell
/// would rebuild each other's dependencies every time.
pub fn nested_cargo() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let per_crate = [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_CRATE_NAME",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "OUT_DIR",
        ];
        if per_crate.contains(&name)
            || name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_")
        {
            cmd.env_remove(name);
        }
    }
    cmd
}
