//! The fuzz targets of `fuzz/` (issue 16) from `cargo test --workspace`:
//! - every file of `fuzz/corpus/<target>/` (the seeds, and every input a fuzz run found worth
//!   keeping, crashes included once fixed) replayed through the target's function, so the corpus
//!   is a regression test without cargo-fuzz;
//! - when `cargo fuzz` is installed, the targets built once in the dev profile (`--dev`: no
//!   optimization, so the build from scratch stays short; at most `BUILD_LIMIT`), then each
//!   fuzzed for a bounded time (`SWITCHBOARD_FUZZ_SECONDS`, default 10 s each), on stable through
//!   `RUSTC_BOOTSTRAP=1` and without a sanitizer (the product forbids `unsafe`, so what is fuzzed
//!   for is panics). Without cargo-fuzz it prints `SKIPPED`, or fails when `CI` is set
//!   (`.ci/run` installs it). Longer runs by hand: `cd fuzz && cargo fuzz run <target>`.

#[allow(dead_code, missing_docs)]
#[path = "../../fuzz/src/lib.rs"]
mod targets;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use switchboard_tests::peers;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("fuzz")
}

/// The corpus files of `target`, sorted.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_replays_through_its_target() {
    let mut total = 0;
    for target in targets::TARGETS {
        let files = corpus(target);
        assert!(!files.is_empty(), "fuzz/corpus/{target} has no seeds");
        for file in &files {
            let data = std::fs::read(file).expect("read corpus file");
            let outcome = std::panic::catch_unwind(|| targets::run(target, &data));
            assert!(outcome.is_ok(), "{target} panicked on {}", file.display());
        }
        total += files.len();
        eprintln!("{target}: {} corpus files replayed", files.len());
    }
    eprintln!("{total} corpus files replayed");
}

/// Whether `cargo fuzz` runs here.
fn cargo_fuzz_installed() -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The longest the fuzz targets' build may take (from scratch on a 2-core CI machine: every
/// dependency of the product, in the dev profile).
const BUILD_LIMIT: Duration = Duration::from_secs(1200);

#[test]
fn every_fuzz_target_runs_a_bounded_time_without_a_crash() {
    let test = "every_fuzz_target_runs_a_bounded_time_without_a_crash";
    if !peers::available_or_skip(test, &[("cargo-fuzz", cargo_fuzz_installed())]) {
        return;
    }
    let seconds: u64 = std::env::var("SWITCHBOARD_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = std::env::var_os("SWITCHBOARD_FUZZ_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| fuzz_dir().join("target"));
    let fuzz = |args: &[&str]| {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(fuzz_dir())
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_TARGET_DIR", &target_dir)
            .arg("fuzz")
            .args(args)
            .args(["--dev", "--sanitizer", "none"]);
        cmd
    };
    eprintln!("building the fuzz targets (cargo fuzz build --dev, at most {BUILD_LIMIT:?})");
    let built = peers::run_bounded(&mut fuzz(&["build"]), BUILD_LIMIT, "cargo fuzz build");
    assert!(
        built.status.success(),
        "cargo fuzz build failed ({}):\n{}",
        built.status,
        tail(&built.stderr, 60)
    );
    for target in targets::TARGETS {
        let scratch = switchboard_tests::temp::TempDir::new("sb-fuzz-corpus");
        for file in corpus(target) {
            let name = file.file_name().expect("file name");
            std::fs::copy(&file, scratch.path().join(name)).expect("copy seed");
        }
        let mut cmd = fuzz(&["run", target]);
        cmd.arg(scratch.path())
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg("-rss_limit_mb=2048")
            .arg("-print_final_stats=1");
        // Built above: the run only starts the binary (cargo checks it is fresh).
        let limit = Duration::from_secs(seconds + 120);
        let out = peers::run_bounded(&mut cmd, limit, target);
        let stats: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.starts_with("stat::") || l.starts_with("Done "))
            .collect();
        assert!(
            out.status.success(),
            "cargo fuzz run {target} failed ({}):\n{}",
            out.status,
            tail(&out.stderr, 60)
        );
        eprintln!("{target}: {}", stats.join(" | "));
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
