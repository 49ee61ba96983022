//! The Helm chart (`helm/switchboard`), the plain manifests (`k8s/`) and the `Dockerfile`,
//! checked offline by the Python scripts in `tests/helm` (their venv `tests/helm/.venv` is built
//! from the pinned `tests/helm/requirements.txt` on first use):
//!
//! - `check_chart.py` renders the chart with its defaults and every `helm/switchboard/examples`
//!   file (helm-python-sdk: Helm's Go SDK, no `helm` binary), validates every object against the
//!   Kubernetes 1.30 and 1.35 schemas (kubernetes-validate, strict; ServiceMonitor and HTTPRoute
//!   by `tests/helm/crds.py`), asserts each render's own fields (`tests/helm/assertions.py`),
//!   loads each render's node environment through `switchboard config`, checks that bad values
//!   are refused, validates and loads `k8s/`, and compares the default render with
//!   `tests/helm/golden/default.yaml` (`UPDATE_GOLDEN=1` rewrites it);
//! - `check_dockerfile.py` parses the `Dockerfile` (dockerfile-parse) and checks it against the
//!   chart: multi-stage, slim base, non-root USER, `tini --` entrypoint, `serve`, EXPOSEd ports.
//!
//! Needs `python3` (>= 3.11) with `venv` and `ensurepip`, and PyPI on first use; without them a
//! test prints that it skipped, or fails when `CI` is set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use switchboard_tests::{node, peers};

/// How long one check script may run (the chart's takes a few seconds).
const CHECK_LIMIT: Duration = Duration::from_secs(300);

/// The workspace root, which the scripts take as their first argument.
fn repo_root() -> PathBuf {
    peers::tests_dir()
        .parent()
        .expect("workspace root")
        .to_owned()
}

/// The venv's Python, or `None` (after a `SKIPPED` line) when no venv can be made.
fn venv_python(test: &str) -> Option<PathBuf> {
    let tools = [
        ("python3", peers::on_path("python3")),
        ("python3 venv + ensurepip", peers::python_can_make_venv()),
    ];
    if !peers::available_or_skip(test, &tools) {
        return None;
    }
    Some(peers::ensure_venv(&peers::helm_dir()))
}

/// Runs `tests/helm/<script>` with `args` and returns its stdout; panics with its output when it
/// fails.
fn run_check(python: &Path, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let mut cmd = Command::new(python);
    cmd.arg(peers::helm_dir().join(script)).args(args);
    let out = peers::run_bounded(&mut cmd, CHECK_LIMIT, script);
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    println!("{}", out.stdout);
    out.stdout
}

#[test]
fn chart_renders_validates_and_loads_in_the_node() {
    let Some(python) = venv_python("chart_renders_validates_and_loads_in_the_node") else {
        return;
    };
    let root = repo_root();
    let stdout = run_check(
        &python,
        "check_chart.py",
        &[root.as_os_str(), node::binary().as_os_str()],
    );
    for needle in [
        "ok default: ",
        "ok golden: ",
        "ok ingress-nginx: ",
        "ok gateway-api: ",
        "ok monitoring-hpa: ",
        "ok auth-secrets: ",
        "ok redis-sentinel: ",
        "ok redis-cluster: ",
        "ok networkpolicy: ",
        "ok refused: grace period",
        "ok k8s/: ",
        "chart checks done: ",
    ] {
        assert!(
            stdout.contains(needle),
            "check_chart.py never said `{needle}`"
        );
    }
}

#[test]
fn dockerfile_builds_the_image_the_chart_expects() {
    let Some(python) = venv_python("dockerfile_builds_the_image_the_chart_expects") else {
        return;
    };
    let root = repo_root();
    let stdout = run_check(&python, "check_dockerfile.py", &[root.as_os_str()]);
    assert!(stdout.contains("ok Dockerfile: "), "{stdout}");
}
