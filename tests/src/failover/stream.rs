//! The listening side of a failover client: its session's standalone GET stream, held until told
//! to stop and resumed with `Last-Event-ID` on the next node whenever it ends or is refused;
//! then [`replay`] reads the whole log back and [`count`] compares it with what arrived live.
//!
//! Event ids are `<stream>_<position>` with the position a Redis stream entry id (`<ms>-<seq>`),
//! so the order of two events of one stream is the order of their positions.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use super::{check_503, Stop};
use crate::client::McpClient;
use crate::sse::SseStream;

/// How long one read waits before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(200);

/// One event with an id and a JSON message, as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    /// Its `id`.
    pub id: String,
    /// When it arrived.
    pub at: Instant,
}

/// Everything one held stream saw.
#[derive(Clone, Debug, Default)]
pub struct StreamLog {
    /// The events with a JSON message, in arrival order, over every (re)open.
    pub events: Vec<Received>,
    /// The id of the first event of the first open (its priming event): a replay from it holds
    /// the whole log.
    pub first_id: Option<String>,
    /// Opens answered 200 (the first included).
    pub opens: usize,
    /// Streams that ended while the client was still reading (each then resumed).
    pub closes: usize,
    /// Reopens answered 404: the session was lost.
    pub sessions_lost: usize,
    /// Resumes refused with 400 or 410 (unknown or trimmed `Last-Event-ID`); the client then
    /// opens the standalone stream afresh, without one.
    pub resumes_refused: usize,
    /// Opens answered 503.
    pub unavailable: usize,
    /// Other statuses of an open.
    pub other_statuses: Vec<u16>,
    /// The 503s without a JSON-RPC error body or `Retry-After`.
    pub bad_503: Vec<String>,
    /// The longest time an open stream went without an event, a keep-alive comment or its end.
    pub max_silence: Duration,
}

/// Holds the standalone stream of `client`'s session, first on `urls[first]`, then each reopen
/// on the next node, until `stop` or a 404, adding 1 to `received` per event with a message.
/// Waits 100 ms after a refused open.
pub async fn hold(
    client: McpClient,
    urls: Vec<String>,
    first: usize,
    stop: Stop,
    received: Arc<AtomicUsize>,
) -> StreamLog {
    let mut log = StreamLog::default();
    let mut last_id: Option<String> = None;
    let mut attempt = first;
    while !stop.is_set() {
        let url = &urls[attempt % urls.len()];
        attempt += 1;
        let reply = client.get_stream(url, last_id.as_deref()).await;
        match reply.status {
            StatusCode::OK => {
                log.opens += 1;
                read(reply.sse(), &stop, &mut log, &mut last_id, &received).await;
                continue;
            }
            StatusCode::NOT_FOUND => {
                log.sessions_lost += 1;
                break;
            }
            StatusCode::BAD_REQUEST | StatusCode::GONE => {
                log.resumes_refused += 1;
                last_id = None;
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                log.unavailable += 1;
                log.bad_503.extend(check_503(reply).await);
            }
            other => log.other_statuses.push(other.as_u16()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    log
}

/// Reads one open stream until it ends or `stop`, noting events and silences.
async fn read(
    mut stream: SseStream,
    stop: &Stop,
    log: &mut StreamLog,
    last_id: &mut Option<String>,
    received: &AtomicUsize,
) {
    let mut last_sign = Instant::now();
    while !stop.is_set() {
        let event = stream.next_event(POLL).await;
        if let Some(&t) = stream.comment_times().last() {
            last_sign = last_sign.max(t);
        }
        if let Some(event) = &event {
            last_sign = last_sign.max(event.at);
        }
        log.max_silence = log.max_silence.max(last_sign.elapsed());
        let Some(event) = event else {
            if stream.is_ended() {
                log.closes += usize::from(!stop.is_set());
                return;
            }
            continue;
        };
        let Some(id) = event.id.clone() else { continue };
        if log.first_id.is_none() {
            log.first_id = Some(id.clone());
        }
        *last_id = Some(id.clone());
        if event.json().is_some() {
            log.events.push(Received { id, at: event.at });
            received.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The ids of the events with a JSON message that a resume from `from` on `url` replays: the
/// log after `from`, read until 1 s passes without an event (at most 10 s).
///
/// # Errors
/// The resume was not answered 200 (the status as text).
pub async fn replay(client: &McpClient, url: &str, from: &str) -> Result<Vec<String>, String> {
    let reply = client.get_stream(url, Some(from)).await;
    if reply.status != StatusCode::OK {
        return Err(format!("resume from {from} on {url}: {}", reply.status));
    }
    let mut stream = reply.sse();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ids = Vec::new();
    while Instant::now() < deadline {
        let Some(event) = stream.next_event(Duration::from_secs(1)).await else {
            break;
        };
        if let (Some(id), Some(_)) = (event.id.clone(), event.json()) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// How the events that arrived live compare with the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Events that arrived live (duplicates included).
    pub received: usize,
    /// Live events missing from the log's replay: received, then lost on resume.
    pub lost: usize,
    /// Events in the log, no later than the last one received, that never arrived live.
    pub skipped: usize,
    /// Events that arrived a second time.
    pub duplicated: usize,
    /// Events that arrived after a later event of their stream.
    pub out_of_order: usize,
}

/// `(stream, (ms, seq))` of an event id `<stream>_<ms>-<seq>`; `None` when it is not one.
fn position(id: &str) -> Option<(&str, (u64, u64))> {
    let (stream, position) = id.rsplit_once('_')?;
    let (ms, seq) = position.split_once('-').unwrap_or((position, "0"));
    Some((stream, (ms.parse().ok()?, seq.parse().ok()?)))
}

/// Counts `live` (in arrival order) against `replayed` (the log from the first event on).
pub fn count(live: &[Received], replayed: &[String]) -> Counts {
    let mut counts = Counts {
        received: live.len(),
        ..Counts::default()
    };
    let mut seen = HashSet::new();
    let mut newest: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for event in live {
        if !seen.insert(event.id.as_str()) {
            counts.duplicated += 1;
            continue;
        }
        let Some((stream, at)) = position(&event.id) else {
            continue;
        };
        let top = newest.entry(stream).or_insert(at);
        if at < *top {
            counts.out_of_order += 1;
        }
        *top = (*top).max(at);
    }
    let logged: HashSet<&str> = replayed.iter().map(String::as_str).collect();
    counts.lost = seen.iter().filter(|id| !logged.contains(*id)).count();
    counts.skipped = replayed
        .iter()
        .filter(|id| !seen.contains(id.as_str()))
        .filter_map(|id| position(id))
        .filter(|(stream, at)| newest.get(stream).is_some_and(|top| at <= top))
        .count();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(ids: &[&str]) -> Vec<Received> {
        let at = Instant::now();
        ids.iter()
            .map(|id| Received {
                id: (*id).to_owned(),
                at,
            })
            .collect()
    }

    #[test]
    fn counts_lost_skipped_duplicated_and_out_of_order() {
        let got = live(&["0_5-0", "0_6-0", "0_6-0", "0_9-0", "0_8-0"]);
        let log: Vec<String> = ["0_5-0", "0_7-0", "0_8-0", "0_9-0", "0_12-0"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let counts = count(&got, &log);
        assert_eq!(
            counts,
            Counts {
                received: 5,
                lost: 1,
                skipped: 1,
                duplicated: 1,
                out_of_order: 1,
            }
        );
    }
}
