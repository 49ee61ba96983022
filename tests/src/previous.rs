//! The previous release's node binary, for rolling upgrades (issue 32): old and new nodes on one
//! Redis. Built once per test process from [`PREVIOUS_RELEASE`], a commit of this repository's
//! history, exported with `git archive` into `<target>/previous/src` and built with
//! `cargo build -p switchboard` into `<target>/previous`.
//!
//! So as not to build every dependency a second time, the previous build's target directory is
//! first seeded with hard links to this build's dependency artifacts (`deps`, `build`,
//! `.fingerprint`; not the workspace's own crates' outputs, which rustc writes anew rather than
//! in place, so the links are never written through). Cargo then compiles only the workspace's
//! crates of that commit: about 20–40 s here instead of minutes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::cargo_build::nested_cargo;

/// The commit the nodes roll from: the last one that landed before bus format 2 (the release
/// whose nodes wrote no format version). Move it forward when a release changes what nodes
/// write to Redis again, so the test always rolls from the release before.
pub const PREVIOUS_RELEASE: &str = "265d611482c2733985303c97274ccfe4154a33ad";

/// The previous release's `switchboard` binary (built on first use; `$SWITCHBOARD_PREVIOUS_BIN`
/// skips the build), or `None` when this clone's history lacks [`PREVIOUS_RELEASE`] and it
/// cannot be fetched from `origin` (a shallow clone): the callers then print that they skipped.
/// Panics with git's or cargo's output when the build fails.
pub fn binary() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Ok(path) = std::env::var("SWITCHBOARD_PREVIOUS_BIN") {
                return Some(PathBuf::from(path));
            }
            let root = root();
            if !has_commit(&root) {
                eprintln!(
                    "SKIPPED: the previous release ({PREVIOUS_RELEASE}) is not in this clone's \
                     history and could not be fetched (a shallow clone?): the rolling-upgrade \
                     tests need it"
                );
                return None;
            }
            Some(build(&root))
        })
        .as_deref()
}

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

/// Whether the repository holds [`PREVIOUS_RELEASE`], fetching it from `origin` once if not.
fn has_commit(root: &Path) -> bool {
    let present = || {
        Command::new("git")
            .current_dir(root)
            .args(["cat-file", "-e", &format!("{PREVIOUS_RELEASE}^{{commit}}")])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if present() {
        return true;
    }
    let _ = Command::new("git")
        .current_dir(root)
        .args(["fetch", "--quiet", "origin", PREVIOUS_RELEASE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    present()
}

fn build(root: &Path) -> PathBuf {
    let root = root.to_owned();
    let target = target_dir(&root);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let previous = target.join("previous");
    let src = previous.join("src");
    if !src.join("Cargo.toml").exists() {
        export(&root, &src);
    }
    seed(&target.join(profile), &previous.join(profile));
    let mut cmd = nested_cargo();
    cmd.current_dir(&src)
        .env("CARGO_TARGET_DIR", &previous)
        .args(["build", "--locked", "-p", "switchboard"]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.stdout(Stdio::null()).output().expect("run cargo build");
    assert!(
        out.status.success(),
        "building the previous release ({PREVIOUS_RELEASE}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    previous.join(profile).join("switchboard")
}

/// `$CARGO_TARGET_DIR` or `<root>/target`, absolute.
fn target_dir(root: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    if target.is_absolute() {
        target
    } else {
        root.join(target)
    }
}

/// Writes the tree of [`PREVIOUS_RELEASE`] to `src` (`git archive | tar -x`).
fn export(root: &Path, src: &Path) {
    std::fs::create_dir_all(src).expect("create the previous release's source dir");
    let archive = Command::new("git")
        .current_dir(root)
        .args(["archive", "--format=tar", PREVIOUS_RELEASE])
        .output()
        .expect("run git archive");
    assert!(
        archive.status.success(),
        "git archive {PREVIOUS_RELEASE} failed (is the repository's history here?):\n{}",
        String::from_utf8_lossy(&archive.stderr)
    );
    let mut tar = Command::new("tar")
        .current_dir(src)
        .args(["-x", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("run tar");
    {
        use std::io::Write;
        let mut stdin = tar.stdin.take().expect("tar's stdin");
        stdin
            .write_all(&archive.stdout)
            .expect("feed the archive to tar");
    }
    assert!(tar.wait().expect("wait for tar").success(), "tar failed");
}

/// Hard-links this build's `deps`, `build` and `.fingerprint` (of profile dir `from`) into
/// `to`, once (`cp -al`, which links every file and makes new directories).
fn seed(from: &Path, to: &Path) {
    if to.exists() || !from.exists() {
        return;
    }
    std::fs::create_dir_all(to).expect("create the previous release's target dir");
    for dir in ["deps", "build", ".fingerprint"] {
        if !from.join(dir).exists() {
            continue;
        }
        let linked = Command::new("cp")
            .arg("-al")
            .arg(from.join(dir))
            .arg(to.join(dir))
            .status()
            .expect("run cp -al");
        assert!(linked.success(), "cp -al {dir} failed");
    }
}
