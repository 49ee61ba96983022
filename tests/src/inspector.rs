//! The MCP Inspector (`@modelcontextprotocol/inspector`, pinned in `tests/inspector`, run on that
//! project's Node 22): its CLI mode run to completion with `--format json`, its web UI (backend
//! proxy and page on free loopback ports) as a peer process killed by PID on drop, and the
//! headless-Chromium driver of that UI (`tests/inspector/web_ui.mjs`, playwright-core with
//! Debian's `chromium`).
//!
//! Every run gets a fresh `HOME` (the Inspector keeps `~/.mcp-inspector` there), secrets in
//! memory only, no browser opened, and no proxy for loopback.

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use serde_json::Value;

use crate::daemon::find_binary;
use crate::peers::{inspector_dir, inspector_node, run_bounded, PeerProcess};
use crate::ports::free_ports;
use crate::temp::TempDir;

/// How long one CLI invocation may take (about 1 s each here).
const CLI_LIMIT: Duration = Duration::from_secs(60);
/// How long the web UI may take to listen.
const WEB_START_LIMIT: Duration = Duration::from_secs(30);
/// How long the browser scenario may take (about 6 s here).
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// Debian's Chromium (`apt-get install chromium`): `$CHROMIUM`, else `chromium` on `PATH`, as an
/// absolute path (what playwright-core needs). `None` when none runs.
pub fn chromium_binary() -> Option<String> {
    let found = find_binary("CHROMIUM", "chromium", "--version")?;
    if found.contains('/') {
        return Some(found);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(&found))
        .find(|candidate| candidate.is_file())
        .map(|candidate| candidate.display().to_string())
}

/// The environment every Inspector process gets: its own `HOME`, secrets in memory, no browser
/// opened, no proxy between it and the loopback cluster.
fn isolate(cmd: &mut Command, home: &Path) {
    cmd.current_dir(inspector_dir())
        .env("HOME", home)
        .env("MCP_INSPECTOR_SECRET_STORE", "memory")
        .env("MCP_AUTO_OPEN_ENABLED", "false")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost");
}

/// What one `mcp-inspector --cli … --format json` printed.
#[derive(Debug)]
pub struct CliOutput {
    /// Its exit status (0: done; 5: the tool returned `isError: true`).
    pub status: ExitStatus,
    /// Its stdout as JSON (`{"result": …}`), `Value::Null` when it was not JSON.
    pub json: Value,
    /// Everything on stderr.
    pub stderr: String,
}

/// Runs the Inspector's CLI against `url` with `args` (`--method …`), JSON output.
pub fn cli(url: &str, args: &[&str]) -> CliOutput {
    let home = TempDir::new("sb-inspector-home");
    let launcher = inspector_dir()
        .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let mut cmd = Command::new(inspector_node());
    isolate(&mut cmd, home.path());
    cmd.arg(launcher)
        .args(["--cli", url, "--format", "json"])
        .args(args);
    let what = format!("mcp-inspector --cli {}", args.join(" "));
    let out = run_bounded(&mut cmd, CLI_LIMIT, &what);
    CliOutput {
        status: out.status,
        json: serde_json::from_str(out.stdout.trim()).unwrap_or(Value::Null),
        stderr: out.stderr,
    }
}

/// The Inspector's web UI, launched for one Streamable HTTP server, killed by PID on drop.
pub struct InspectorWeb {
    process: PeerProcess,
    port: u16,
    token: String,
    _home: TempDir,
}

impl InspectorWeb {
    /// Starts `mcp-inspector --web` for the Streamable HTTP server at `server_url`: the page and
    /// its backend on one free port (`CLIENT_PORT`), the MCP Apps sandbox and app origin on two
    /// more (the defaults 6275 and 6276 are fixed ports), an API token of its own, the default
    /// origin allow-list (the page's loopback origins). Waits until the page's port listens.
    pub fn start(server_url: &str) -> InspectorWeb {
        let home = TempDir::new("sb-inspector-web");
        let ports = free_ports(3);
        let token = format!("sb-test-{}", ports[0]);
        let launcher = inspector_dir()
            .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
        let mut cmd = Command::new(inspector_node());
        isolate(&mut cmd, home.path());
        cmd.env("CLIENT_PORT", ports[0].to_string())
            .env("MCP_SANDBOX_PORT", ports[1].to_string())
            .env("MCP_APP_ORIGIN_PORT", ports[2].to_string())
            .env("MCP_INSPECTOR_API_TOKEN", &token)
            .env("HOST", "127.0.0.1")
            .env_remove("DANGEROUSLY_OMIT_AUTH")
            .env_remove("ALLOWED_ORIGINS")
            .arg(launcher)
            .args(["--web", "--transport", "http", "--server-url", server_url]);
        let mut process = PeerProcess::spawn("inspector-web", &mut cmd);
        process.wait_for_port(ports[0], WEB_START_LIMIT);
        InspectorWeb {
            process,
            port: ports[0],
            token,
            _home: home,
        }
    }

    /// The page's URL with its API token (`?MCP_INSPECTOR_API_TOKEN=…`).
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/?MCP_INSPECTOR_API_TOKEN={}",
            self.port, self.token
        )
    }

    /// The page's URL without the token.
    pub fn bare_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Everything the Inspector printed so far.
    pub fn log(&self) -> String {
        self.process.log_text()
    }
}

/// Runs `web_ui.mjs` in headless `chromium`: opens `page_url`, connects, lists the tools, calls
/// `echo` with `echo_text` and saves a screenshot at `screenshot`. Returns its JSON summary (the
/// script's stdout), or panics with its output when it printed none.
pub fn drive_web_ui(page_url: &str, chromium: &str, screenshot: &Path, echo_text: &str) -> Value {
    let home = TempDir::new("sb-chromium-home");
    let mut cmd = Command::new(inspector_node());
    isolate(&mut cmd, home.path());
    cmd.env("CHROMIUM", chromium)
        .arg("web_ui.mjs")
        .arg(page_url)
        .arg(screenshot)
        .arg(echo_text);
    let out = run_bounded(&mut cmd, BROWSER_LIMIT, "node web_ui.mjs");
    out.json_summary("web_ui.mjs")
}
