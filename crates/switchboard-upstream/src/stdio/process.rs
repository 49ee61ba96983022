//! Starting, supervising and stopping one child process.
//!
//! A child runs in its own process group (so that wrapper grandchildren, e.g. under `npx` or
//! `uvx`, can be signalled with it) with `kill_on_drop`, and one supervisor task always awaits
//! its exit, so it is reaped and never left a zombie (case C31). Four tasks serve a child: the
//! stdin writer, the stdout reader ([`super::inbound`]), the stderr drain ([`super::stderr`])
//! and the supervisor, which on exit fails every call in flight with -32006
//! "upstream `NAME` exited (…)" (when it exited on its own, followed by its last stderr lines:
//! "; its stderr ended with: …", see [`super::stderr::Tail::last_words`]).
//!
//! Stopping (session ended, shutdown): close stdin, wait the grace period, SIGTERM the process
//! group, wait the grace period again, SIGKILL the group.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::attached::Attached;
use super::conn::{unavailable, Conn};
use super::framing::encode;
use super::{inbound, stderr};
use crate::upstream::RpcError;
use switchboard_telemetry::trace::logged_session;

/// How long the reader may take to deliver the last messages of a child that exited.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// What to run: the command line, the environment and the working directory.
#[derive(Clone)]
pub(crate) struct Spec {
    /// The program (looked up in `PATH` when it has no `/`).
    pub(crate) command: String,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Environment variables set for it, on top of the inherited `PATH` and `HOME`.
    pub(crate) env: BTreeMap<String, String>,
    /// Its working directory (the node's when `None`).
    pub(crate) cwd: Option<PathBuf>,
}

impl std::fmt::Debug for Spec {
    /// Shows the names of the environment variables, never their values (they may be secrets).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// Limits applied to every child.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Longest stdout line, in bytes.
    pub(crate) max_line: usize,
    /// How long each stopping step waits for the child to exit.
    pub(crate) kill_grace: Duration,
}

/// Starts a child and its tasks; the returned connection is not initialized yet.
pub(crate) fn spawn(
    spec: &Spec,
    upstream: Arc<str>,
    label: String,
    shared: bool,
    limits: Limits,
    attached: Arc<Attached>,
) -> Result<Arc<Conn>, RpcError> {
    let mut child = command(spec).spawn().map_err(|e| {
        unavailable(format!(
            "upstream `{upstream}` could not be started (`{}`): {e}",
            spec.command
        ))
    })?;
    let (Some(stdin), Some(stdout), Some(stderr_pipe)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(unavailable(format!(
            "upstream `{upstream}`: the child's pipes are missing"
        )));
    };
    let (conn, outbox) = Conn::new(
        upstream.clone(),
        label.clone(),
        child.id(),
        shared,
        attached,
    );
    tracing::info!(upstream = %upstream, session = %logged_session(&label), pid = ?child.id(), command = %spec.command, "started a stdio child");
    tokio::spawn(write(stdin, outbox, conn.close_stdin.clone()));
    tokio::spawn(inbound::run(conn.clone(), stdout, limits.max_line));
    tokio::spawn(stderr::drain(
        stderr_pipe,
        upstream,
        label,
        conn.stderr_tail.clone(),
    ));
    tokio::spawn(supervise(child, conn.clone(), limits.kill_grace));
    Ok(conn)
}

/// The command with exactly the configured environment plus `PATH` and `HOME`.
fn command(spec: &Spec) -> Command {
    let mut cmd = Command::new(&spec.command);
    cmd.args(&spec.args).env_clear();
    for key in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.envs(&spec.env);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    cmd
}

/// Writes queued messages to the child's stdin, one line each, until asked to close it.
async fn write(
    mut stdin: ChildStdin,
    mut outbox: mpsc::Receiver<Map<String, Value>>,
    close: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            biased;
            _ = close.cancelled() => break,
            message = outbox.recv() => message,
        };
        let Some(message) = message else { break };
        let line = encode(&message);
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

/// How a child's supervision ended.
enum End {
    /// The child exited on its own.
    Exited(std::io::Result<ExitStatus>),
    /// We were asked to stop it.
    Stop,
    /// Its stdout closed first.
    StdoutClosed,
}

/// Awaits the child's end (natural, stdout closed, or asked to stop), reaps it, cleans up its
/// process group, and fails whatever is still in flight.
async fn supervise(mut child: Child, conn: Arc<Conn>, grace: Duration) {
    let pid = child.id();
    let end = tokio::select! {
        biased;
        _ = conn.stop.cancelled() => End::Stop,
        status = child.wait() => End::Exited(status),
        _ = conn.stdout_done.cancelled() => End::StdoutClosed,
    };
    let (status, asked) = match end {
        End::Exited(status) => (status, false),
        End::Stop => (stop(&mut child, &conn, pid, grace).await, true),
        // stdout closed: the child is finishing, or broken; give it the grace period.
        End::StdoutClosed => match tokio::time::timeout(grace, child.wait()).await {
            Ok(status) => (status, false),
            Err(_) => (stop(&mut child, &conn, pid, grace).await, true),
        },
    };
    // Let the reader deliver what the child wrote before exiting. When the pipe stays open,
    // a grandchild holds it: the rest of the group goes too. A child that exited on its own
    // gets the same time for its last stderr lines, which its error quotes.
    let (drained, _) = tokio::join!(
        tokio::time::timeout(DRAIN_AFTER_EXIT, conn.stdout_done.cancelled()),
        async {
            if !asked {
                let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, conn.stderr_tail.closed()).await;
            }
        }
    );
    let drained = drained.is_ok();
    if asked || !drained {
        signal_group(pid, Signal::SIGKILL);
    }
    let status = match status {
        Ok(s) => describe(s),
        Err(e) => format!("wait failed: {e}"),
    };
    let mut message = format!("upstream `{}` exited ({status})", conn.upstream);
    if let Some(words) = conn.stderr_tail.last_words().filter(|_| !asked) {
        message.push_str(&format!("; its stderr ended with: {words}"));
    }
    let error = unavailable(message);
    // A child stopped for a fault of its own (a stdout line over the limit) was already failed.
    let for_us = asked && conn.alive();
    conn.stopped_by_us
        .store(for_us, std::sync::atomic::Ordering::Release);
    if asked {
        tracing::info!(upstream = %conn.upstream, session = %logged_session(&conn.label), pid = ?pid, status, "stopped a stdio child");
    } else {
        let stderr_tail = conn.stderr_tail.lines();
        tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), pid = ?pid, status, ?stderr_tail, "stdio child exited");
    }
    conn.close_stdin.cancel();
    conn.fail_all(error);
}

/// Close stdin, wait; SIGTERM the group, wait; SIGKILL the group. Returns the exit status.
async fn stop(
    child: &mut Child,
    conn: &Conn,
    pid: Option<u32>,
    grace: Duration,
) -> std::io::Result<ExitStatus> {
    conn.close_stdin.cancel();
    if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
        return status;
    }
    signal_group(pid, Signal::SIGTERM);
    if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
        return status;
    }
    tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), pid = ?pid, "stdio child ignored stdin EOF and SIGTERM; killing it");
    signal_group(pid, Signal::SIGKILL);
    child.kill().await?;
    child.wait().await
}

/// Sends `signal` to the process group led by `pid` (the child's own, see `process_group(0)`).
fn signal_group(pid: Option<u32>, signal: Signal) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    // ESRCH (nobody left in the group) is the usual outcome after a clean exit.
    let _ = killpg(Pid::from_raw(pid), signal);
}

/// `exit status 3`, `signal SIGKILL`.
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(s) => format!("signal {s}"),
            Err(_) => format!("signal {signal}"),
        },
        (None, None) => status.to_string(),
    }
}
