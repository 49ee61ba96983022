//! A session's standalone `GET` stream, held open for the whole run and resumed through the
//! balancer with `Last-Event-ID` each time it drops (kill -9, a drain closing it, Redis gone);
//! it records every `notify` event in arrival order.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use switchboard_tests::client::McpClient;
use switchboard_tests::sse::SseStream;
use tokio::task::JoinHandle;

use crate::call::kind;
use crate::check::{check_standalone, NotifyCall, Standalone, StandaloneReport};
use crate::report::Counts;

/// How long a read waits before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(200);

/// What the reader task and its owner share.
#[derive(Default)]
struct Shared {
    events: Mutex<Vec<Standalone>>,
    /// The id of the first event the stream sent (its priming event), and the ids of every
    /// event with data since, whichever connection brought them.
    ids: Mutex<(Option<String>, BTreeSet<String>)>,
    opened: AtomicBool,
    session_lost: AtomicBool,
    stop: AtomicBool,
}

/// What [`StandaloneReader::finish`] returns.
pub struct Finished {
    /// The sequence check of the `notify` events.
    pub report: StandaloneReport,
    /// The reader's own counts (resumes, errors, live-event delays).
    pub counts: Counts,
    /// The id of the first event the stream sent.
    pub first_id: Option<String>,
    /// The ids of every event with data received.
    pub live_ids: BTreeSet<String>,
}

/// The running reader of one session's standalone stream.
pub struct StandaloneReader {
    shared: Arc<Shared>,
    task: JoinHandle<Counts>,
}

impl StandaloneReader {
    /// Opens the stream of `client`'s session at `url` (the balancer) and keeps reading it.
    pub fn spawn(client: McpClient, url: String) -> StandaloneReader {
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(hold(client, url, Arc::clone(&shared)));
        StandaloneReader { shared, task }
    }

    /// Waits (at most `limit`) until the first stream answered 200; whether it did.
    pub async fn wait_open(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.shared.opened.load(Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// The id of the first event received (the replay's starting point) and the ids of every
    /// event with data received since.
    pub fn ids(&self) -> (Option<String>, BTreeSet<String>) {
        self.shared.ids.lock().expect("ids lock").clone()
    }

    /// Whether a reopen answered 404.
    pub fn session_lost(&self) -> bool {
        self.shared.session_lost.load(Ordering::SeqCst)
    }

    /// Waits (at most `limit`) until every event of `calls` has arrived (the check finds nothing
    /// lost), stops reading and returns the check with the reader's own counts and its
    /// [`StandaloneReader::ids`].
    pub async fn finish(self, calls: &[NotifyCall], limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        loop {
            let report = self.check(calls);
            if report.counts.lost == 0 || Instant::now() >= deadline || self.session_lost() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        let report = self.check(calls);
        let ids = self.ids();
        let counts = self.task.await.unwrap_or_else(|e| {
            let mut c = Counts::default();
            c.error(format!("standalone reader failed: {e}"));
            c
        });
        Finished {
            report,
            counts,
            first_id: ids.0,
            live_ids: ids.1,
        }
    }

    fn check(&self, calls: &[NotifyCall]) -> StandaloneReport {
        let events = self.shared.events.lock().expect("events lock").clone();
        check_standalone(&events, calls)
    }
}

/// Opens and reopens the stream until told to stop or the session is gone.
async fn hold(client: McpClient, url: String, shared: Arc<Shared>) -> Counts {
    let mut counts = Counts::default();
    let mut last_id: Option<String> = None;
    while !shared.stop.load(Ordering::SeqCst) {
        let mut headers = client.session_headers().set("Accept", "text/event-stream");
        if let Some(id) = &last_id {
            headers = headers.set("Last-Event-ID", id);
        } else if shared.opened.load(Ordering::SeqCst) {
            counts.error("GET reopened without Last-Event-ID");
        }
        match client.try_send(Method::GET, &url, &headers, None).await {
            Ok(reply) if reply.status == StatusCode::OK => {
                shared.opened.store(true, Ordering::SeqCst);
                let live = Live {
                    since_ms: unix_ms(),
                    counts: &mut counts,
                };
                read(reply.sse(), &shared, &mut last_id, live).await;
                if !shared.stop.load(Ordering::SeqCst) {
                    counts.resumes += 1;
                }
                continue;
            }
            Ok(reply) if reply.status == StatusCode::NOT_FOUND => {
                counts.sessions_lost += 1;
                crate::check::note(
                    &mut counts.examples,
                    format!("standalone GET 404 (Last-Event-ID {last_id:?})"),
                );
                shared.session_lost.store(true, Ordering::SeqCst);
                break;
            }
            Ok(reply) => counts.error(format!("GET {}", reply.status.as_u16())),
            Err(e) => counts.error(kind("GET", &e)),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    counts
}

/// Where one open stream's live-event delays go: events logged at or after `since_ms` (Unix
/// ms, when the stream answered 200) count as live.
struct Live<'a> {
    since_ms: u64,
    counts: &'a mut Counts,
}

impl Live<'_> {
    /// Counts event `id`'s delay when it is live: from its log position's timestamp (positions
    /// are `<redis ms>-<seq>`, ids `<stream>_<position>`) to now.
    fn observe(&mut self, id: &str) {
        let Some(logged) = logged_ms(id) else { return };
        if logged < self.since_ms {
            return;
        }
        let delay = Duration::from_millis(unix_ms().saturating_sub(logged));
        self.counts.live_events += 1;
        self.counts.live_delay_max = self.counts.live_delay_max.max(delay);
        if delay > crate::report::LIVE_DELAY_LIMIT {
            let what = format!(
                "live event {id} arrived {} ms after it was logged (at Unix ms {logged})",
                delay.as_millis()
            );
            crate::check::note(&mut self.counts.examples, what);
        }
    }
}

/// The Redis timestamp (ms) of event id `<stream>_<ms>-<seq>`.
fn logged_ms(id: &str) -> Option<u64> {
    let (_, position) = id.rsplit_once('_')?;
    position.split_once('-')?.0.parse().ok()
}

/// Milliseconds since the Unix epoch (Redis runs on the same clock: loopback).
fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.unwrap_or_default().as_millis() as u64
}

/// Reads one stream until it ends or the reader is told to stop.
async fn read(
    mut stream: SseStream,
    shared: &Shared,
    last_id: &mut Option<String>,
    mut live: Live<'_>,
) {
    while !shared.stop.load(Ordering::SeqCst) {
        let Some(event) = stream.next_event(POLL).await else {
            if stream.is_ended() {
                return;
            }
            continue;
        };
        if let Some(id) = &event.id {
            *last_id = Some(id.clone());
            let mut ids = shared.ids.lock().expect("ids lock");
            ids.0.get_or_insert_with(|| id.clone());
            if event.data.as_deref().is_some_and(|d| !d.is_empty()) {
                live.observe(id);
                ids.1.insert(id.clone());
            }
        }
        let Some(msg) = event.json() else { continue };
        let parsed = match msg["method"].as_str() {
            Some("notifications/message") => {
                let data = &msg["params"]["data"];
                match (data["seq"].as_u64(), data["of"].as_u64()) {
                    (Some(seq), Some(of)) => Some(Standalone::Message {
                        seq,
                        of,
                        call: tag_of(&data["tag"]),
                    }),
                    _ => None,
                }
            }
            Some("notifications/resources/updated") => Some(Standalone::Updated {
                call: tag_of(&msg["params"]["_meta"]["tag"]),
            }),
            _ => None,
        };
        if let Some(event) = parsed {
            shared.events.lock().expect("events lock").push(event);
        }
    }
}

/// The call index a `notify` tag names (the client tags each call with its index).
fn tag_of(tag: &serde_json::Value) -> Option<usize> {
    tag.as_str().and_then(|t| t.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::logged_ms;

    #[test]
    fn an_event_id_names_when_it_was_logged() {
        assert_eq!(
            logged_ms("ussrgoks4pik_1764000000123-0"),
            Some(1_764_000_000_123)
        );
        assert_eq!(logged_ms("a_b_17-3"), Some(17));
        assert_eq!(logged_ms("nounderscore"), None);
    }
}
