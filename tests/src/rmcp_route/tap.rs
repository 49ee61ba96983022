//! The recording tap behind [`crate::rmcp_route`]: a task reads an SSE body, records every JSON
//! message into the router's shared state, and forwards the events to rmcp through a channel. It
//! can cut the stream after k messages (closing the connection and handing rmcp a stream error),
//! and can keep reading after rmcp lets go, to see when the server ends the stream.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use parking_lot::Mutex;
use rmcp::transport::streamable_http_client::SseError;
use serde_json::Value;
use sse_stream::Sse;
use tokio::sync::mpsc;

use super::{SseBox, State};

/// How a tapped SSE stream ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The server ended the body cleanly.
    Closed,
    /// The body failed (e.g. the server reset the connection).
    Error(String),
    /// The test cut it (see [`crate::rmcp_route::RoutedHttp::arm_cut`]).
    Cut,
    /// rmcp dropped it and it was not held, so the tap closed the connection.
    Released,
}

/// What one SSE stream carried.
#[derive(Clone, Debug)]
pub struct StreamLog {
    /// The sequence number of the request that opened it.
    pub seq: usize,
    /// The node that served it.
    pub node: usize,
    /// Every event with a JSON `data` field: its SSE id and the message, in arrival order.
    pub messages: Vec<(Option<String>, Value)>,
    /// Every SSE id seen (priming events included), in order.
    pub event_ids: Vec<String>,
    /// How it ended, once it has, and when.
    pub end: Option<(StreamEnd, Instant)>,
}

impl StreamLog {
    /// The messages with JSON-RPC `method`.
    pub fn with_method(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .map(|(_, m)| m)
            .filter(|m| m["method"] == method)
            .collect()
    }
}

/// Where to record and what to do.
pub(crate) struct TapOptions {
    pub(crate) seq: usize,
    pub(crate) node: usize,
    /// Cut after this many JSON messages.
    pub(crate) cut: Option<usize>,
    /// Keep reading after rmcp drops its end.
    pub(crate) hold: bool,
}

/// Starts the tap task and returns the stream rmcp reads.
pub(crate) fn tap(state: Arc<Mutex<State>>, opts: TapOptions, source: SseBox) -> SseBox {
    let index = {
        let mut s = state.lock();
        s.streams.push(StreamLog {
            seq: opts.seq,
            node: opts.node,
            messages: Vec::new(),
            event_ids: Vec::new(),
            end: None,
        });
        s.streams.len() - 1
    };
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(run(state, index, opts, source, tx));
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
    .boxed()
}

type Tx = mpsc::Sender<Result<Sse, SseError>>;

async fn run(state: Arc<Mutex<State>>, index: usize, opts: TapOptions, mut source: SseBox, tx: Tx) {
    let mut forwarding = true;
    let mut messages = 0usize;
    let end = loop {
        let item = tokio::select! {
            item = source.next() => item,
            _ = tx.closed(), if forwarding => {
                if !opts.hold {
                    break StreamEnd::Released;
                }
                forwarding = false;
                continue;
            }
        };
        let sse = match item {
            None => break StreamEnd::Closed,
            Some(Err(e)) => {
                let text = e.to_string();
                if forwarding {
                    let _ = tx.send(Err(e)).await;
                }
                break StreamEnd::Error(text);
            }
            Some(Ok(sse)) => sse,
        };
        let message: Option<Value> = sse
            .data
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .and_then(|d| serde_json::from_str(d).ok());
        {
            let mut s = state.lock();
            let log = &mut s.streams[index];
            if let Some(id) = &sse.id {
                log.event_ids.push(id.clone());
            }
            if let Some(m) = &message {
                log.messages.push((sse.id.clone(), m.clone()));
            }
        }
        let counted = message.is_some();
        if forwarding && tx.send(Ok(sse)).await.is_err() {
            if !opts.hold {
                break StreamEnd::Released;
            }
            forwarding = false;
        }
        messages += usize::from(counted);
        if counted && opts.cut == Some(messages) {
            let cut = std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "connection cut by the test",
            );
            let _ = tx.send(Err(SseError::Body(Box::new(cut)))).await;
            break StreamEnd::Cut;
        }
    };
    drop(source);
    state.lock().streams[index].end = Some((end, Instant::now()));
}
