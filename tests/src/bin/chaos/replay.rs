//! The end-of-run check of a session's standalone stream log: every event the client received
//! live must still be in the log, so that a client resuming later would get it too. An event
//! delivered live but gone from the log was acknowledged and then lost by Redis (writes to a
//! demoted primary, an evicted key), which a live reader alone cannot see.
//!
//! The client resumes its standalone stream once more through the balancer, with
//! `Last-Event-ID` set to the first event the stream ever sent, and reads the replay until it
//! holds still.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use switchboard_tests::client::McpClient;

/// How long the replay may take in all.
const REPLAY_LIMIT: Duration = Duration::from_secs(20);

/// A replay that sends nothing for this long is complete.
const QUIET: Duration = Duration::from_millis(1500);

/// What the replay found.
pub struct Replayed {
    /// Events received live whose ids the replay did not hold.
    pub gone: u64,
    /// The first of them, or why the replay could not run.
    pub example: Option<String>,
}

/// Replays the standalone stream of `client`'s session from `first` (the id of its first event)
/// and counts the ids of `live` (events with data received after `first`) it lacks.
pub async fn check_log(
    client: &McpClient,
    url: &str,
    first: &str,
    live: &BTreeSet<String>,
) -> Replayed {
    let headers = client
        .session_headers()
        .set("Accept", "text/event-stream")
        .set("Last-Event-ID", first);
    let deadline = Instant::now() + REPLAY_LIMIT;
    let mut replayed = BTreeSet::new();
    let mut stream = loop {
        match client.try_send(Method::GET, url, &headers, None).await {
            Ok(reply) if reply.status == StatusCode::OK => break reply.sse(),
            Ok(reply) if Instant::now() >= deadline => {
                return not_run(format!("replay GET {}", reply.status.as_u16()));
            }
            Err(e) if Instant::now() >= deadline => return not_run(format!("replay GET: {e}")),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    while Instant::now() < deadline {
        let Some(event) = stream.next_event(QUIET).await else {
            break;
        };
        if let (Some(id), Some(data)) = (event.id, event.data) {
            if !data.is_empty() {
                replayed.insert(id);
            }
        }
    }
    let missing: Vec<&String> = live
        .iter()
        .filter(|id| id.as_str() != first && !replayed.contains(*id))
        .collect();
    Replayed {
        gone: missing.len() as u64,
        example: missing.first().map(|id| {
            format!(
                "{} events received live are gone from the log (first {id}, last {}; {} \
                 replayed)",
                missing.len(),
                missing.last().map_or("", |l| l.as_str()),
                replayed.len()
            )
        }),
    }
}

fn not_run(why: String) -> Replayed {
    Replayed {
        gone: 0,
        example: Some(format!("the log check could not run: {why}")),
    }
}
