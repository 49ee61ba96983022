//! The modes beyond `run` and `idle-sessions`, each with its command-line arguments and entry
//! point (the binary only dispatches to [`OpenStreamsArgs::main`], [`ResumeStormArgs::main`] and
//! [`SamplingArgs::main`]):
//! - [`streams`]: `open-streams`, node memory per open idle SSE stream;
//! - [`resume`]: `resume-storm`, replay of a long stream on another node;
//! - [`sampling`]: `sampling`, server-to-client round trips answered on the same or another node.
//!
//! Node RSS and the Redis probe come from [`crate::memory`].

pub mod resume;
pub mod sampling;
pub mod streams;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Writes `json` pretty-printed to `path`, when given.
pub fn write_report(path: Option<&PathBuf>, json: &impl serde::Serialize) -> Result<(), String> {
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// `open-streams` arguments.
#[derive(Args, Debug, Clone)]
pub struct OpenStreamsArgs {
    /// MCP endpoint URL; repeat for several nodes (sessions and streams round robin).
    #[arg(long = "url", required = true)]
    pub urls: Vec<String>,
    /// Streams (one session each) to open.
    #[arg(long)]
    pub count: usize,
    /// Handshakes and GETs in flight at once while opening.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Hold the open streams this long after sampling (Ctrl-C ends it early).
    #[arg(long, default_value_t = 0)]
    pub hold_secs: u64,
    /// Pause before each RSS sample, in ms.
    #[arg(long, default_value_t = 2000)]
    pub settle_ms: u64,
    /// PID of a node whose RSS (VmRSS) is sampled; repeat for several nodes.
    #[arg(long = "node-pid")]
    pub node_pids: Vec<u32>,
    /// Limit on every request, in ms (for a GET: until its priming event).
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

impl OpenStreamsArgs {
    /// Runs the mode and prints (and writes) its report.
    pub async fn main(self) -> Result<(), String> {
        let cfg = streams::StreamsConfig {
            urls: self.urls,
            count: self.count,
            concurrency: self.concurrency,
            hold: Duration::from_secs(self.hold_secs),
            settle: Duration::from_millis(self.settle_ms),
            node_pids: self.node_pids,
            request_timeout: Duration::from_millis(self.timeout_ms),
        };
        let r = streams::open_streams(cfg).await?;
        println!(
            "closed_early={} deleted={} errors={}",
            r.closed_early, r.deleted, r.errors
        );
        write_report(self.report.as_ref(), &r)
    }
}

/// `resume-storm` arguments.
#[derive(Args, Debug, Clone)]
pub struct ResumeStormArgs {
    /// MCP endpoint URL; repeat (at least two, so that every resume goes to another node).
    #[arg(long = "url", required = true)]
    pub urls: Vec<String>,
    /// Clients, each with one session and one call.
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Progress events per call (needs the nodes' `session.max_events_per_stream` above it).
    #[arg(long, default_value_t = 1000)]
    pub events: u64,
    /// The cluster's Redis: wait until every call has finished instead of a fixed pause.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// The cluster's `redis.key_prefix`.
    #[arg(long, default_value = "sb")]
    pub key_prefix: String,
    /// Without --redis-url, the pause between dropping and resuming; with it, the longest wait
    /// for the calls to finish. In ms.
    #[arg(long, default_value_t = 60_000)]
    pub wait_ms: u64,
    /// Limit on every request and on each whole replay, in ms.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

impl ResumeStormArgs {
    /// Runs the mode and prints (and writes) its report.
    pub async fn main(self) -> Result<(), String> {
        if self.urls.len() < 2 {
            eprintln!("warning: one URL: the clients resume on the node they called");
        }
        let cfg = resume::ResumeConfig {
            urls: self.urls,
            clients: self.clients,
            events: self.events,
            redis_url: self.redis_url,
            key_prefix: self.key_prefix,
            wait: Duration::from_millis(self.wait_ms),
            request_timeout: Duration::from_millis(self.timeout_ms),
        };
        let r = resume::resume_storm(cfg).await?;
        println!("{}", r.lines());
        for e in &r.error_samples {
            println!("error: {e}");
        }
        write_report(self.report.as_ref(), &r)
    }
}

/// `sampling` arguments.
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// MCP endpoint URL; give two (URL_A, URL_B) for cross-node answers.
    #[arg(long = "url", required = true)]
    pub urls: Vec<String>,
    /// Virtual clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Length of the measured phase, in seconds.
    #[arg(long, default_value_t = 10)]
    pub duration_secs: u64,
    /// Limit on every whole call, in ms.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

impl SamplingArgs {
    /// Runs the mode and prints (and writes) its report.
    pub async fn main(self) -> Result<(), String> {
        if self.urls.len() < 2 {
            eprintln!("warning: one URL: both variants answer on the same node");
        }
        let cfg = sampling::SamplingConfig {
            urls: self.urls,
            clients: self.clients,
            duration: Duration::from_secs(self.duration_secs),
            request_timeout: Duration::from_millis(self.timeout_ms),
        };
        let r = sampling::sampling(cfg).await?;
        println!("{}", r.lines());
        write_report(self.report.as_ref(), &r)
    }
}
