//! The listen streams open on this node and the local fan-out to them.
//!
//! Each listener has a bounded queue (`stateless.listen_queue` notifications). Delivery never waits: a
//! listener whose queue is full is a slow reader, and it is *ended*, not allowed to hold others
//! back and not fed a stream with holes in it: it leaves the registry (logged and counted as
//! `switchboard_listen_lagged_total`), its stream sends what was already queued, then the
//! closing result, and the client re-listens (and re-reads what it caches). At most
//! `stateless.max_listeners` streams are open per node; past it `subscriptions/listen` is refused.
//!
//! A listener leaves the registry when its [`Listening`] drops (its stream ended for any
//! reason), so a closed stream leaves nothing behind.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::{json, Value};
use switchboard_protocol::{meta, RequestId};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

pub mod filter;

use crate::telemetry;
use filter::Filter;

/// The registry of one node.
#[derive(Clone)]
pub struct Listeners {
    max: usize,
    queue: usize,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    entries: HashMap<u64, Entry>,
}

struct Entry {
    id: RequestId,
    filter: Filter,
    principal: String,
    tx: mpsc::Sender<Value>,
}

/// A listener's place in the registry; dropping it removes the listener.
pub struct Listening {
    key: u64,
    inner: Arc<Mutex<Inner>>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.inner.lock().entries.remove(&self.key);
        telemetry::listener_closed();
    }
}

impl Listeners {
    /// At most `max` listeners, each queueing at most `queue` notifications (both at least 1).
    pub fn new(max: usize, queue: usize) -> Listeners {
        Listeners {
            max: max.max(1),
            queue: queue.max(1),
            inner: Arc::default(),
        }
    }

    /// Adds a listener of `principal` for subscription `id` with its agreed `filter`; `None` at `stateless.max_listeners`.
    /// Its notifications (already tagged with the subscription id) arrive on the receiver, which
    /// closes when the listener was ended for lagging.
    pub fn register(
        &self,
        id: RequestId,
        filter: Filter,
        principal: String,
    ) -> Option<(Listening, mpsc::Receiver<Value>)> {
        let mut inner = self.inner.lock();
        if inner.entries.len() >= self.max {
            return None;
        }
        let (tx, rx) = mpsc::channel(self.queue);
        let key = inner.next;
        inner.next += 1;
        let entry = Entry {
            id,
            filter,
            principal,
            tx,
        };
        inner.entries.insert(key, entry);
        telemetry::listener_opened();
        let reg = Listening {
            key,
            inner: self.inner.clone(),
        };
        Some((reg, rx))
    }

    /// Open listeners.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Hands server notification `message` to every listener whose filter matches, tagged with
    /// its subscription id; ends listeners whose queue is full. With `principal` set, only that
    /// principal's listeners may get it (`notifications/tasks`). Returns how many got it.
    pub fn publish(&self, message: &Value, principal: Option<&str>) -> usize {
        let mut inner = self.inner.lock();
        let mut ended = Vec::new();
        let mut delivered = 0;
        for (key, entry) in &inner.entries {
            let allowed = principal.is_none_or(|p| p == entry.principal);
            if !allowed || !entry.filter.matches(message) {
                continue;
            }
            match entry.tx.try_send(tagged(message, &entry.id)) {
                Ok(()) => delivered += 1,
                Err(TrySendError::Full(_)) => {
                    telemetry::listener_lagged(&entry.id.key(), self.queue);
                    ended.push(*key);
                }
                // Its stream is ending; its registration removes it.
                Err(TrySendError::Closed(_)) => {}
            }
        }
        for key in ended {
            inner.entries.remove(&key);
        }
        delivered
    }
}

/// `message` with `params._meta["io.modelcontextprotocol/subscriptionId"]` set to `id` (other
/// `_meta` members kept).
pub fn tagged(message: &Value, id: &RequestId) -> Value {
    let mut m = message.clone();
    if !m.get("params").is_some_and(Value::is_object) {
        m["params"] = json!({});
    }
    let params = &mut m["params"];
    if !params.get("_meta").is_some_and(Value::is_object) {
        params["_meta"] = json!({});
    }
    params["_meta"][meta::SUBSCRIPTION_ID] = id.0.clone();
    m
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn updated(uri: &str) -> Value {
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": uri, "_meta": {"x.example/k": 1}}})
    }

    fn subscribed(uri: &str) -> Filter {
        Filter {
            uris: Some(BTreeSet::from([uri.to_owned()])),
            ..Filter::default()
        }
    }

    #[test]
    fn delivers_tagged_to_matching_listeners_only() {
        let l = Listeners::new(10, 4);
        let (_a, mut ra) = l
            .register(RequestId(json!(7)), subscribed("demo://g"), "p".into())
            .unwrap();
        let tools = Filter {
            tools: true,
            ..Filter::default()
        };
        let (_b, mut rb) = l
            .register(RequestId(json!("s")), tools, "p".into())
            .unwrap();
        assert_eq!(l.publish(&updated("demo://g"), None), 1);
        let got = ra.try_recv().unwrap();
        assert_eq!(got["params"]["_meta"][meta::SUBSCRIPTION_ID], 7);
        assert_eq!(got["params"]["_meta"]["x.example/k"], 1, "other _meta kept");
        assert_eq!(got["params"]["uri"], "demo://g");
        assert!(
            rb.try_recv().is_err(),
            "the tools-only listener gets nothing"
        );
        let bare = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        assert_eq!(l.publish(&bare, None), 1);
        assert_eq!(
            rb.try_recv().unwrap()["params"]["_meta"][meta::SUBSCRIPTION_ID],
            "s"
        );
    }

    #[test]
    fn the_cap_holds_and_dropping_a_registration_frees_its_place() {
        let l = Listeners::new(2, 4);
        let a = l
            .register(RequestId(json!(1)), Filter::default(), "p".into())
            .unwrap();
        let _b = l
            .register(RequestId(json!(2)), Filter::default(), "p".into())
            .unwrap();
        assert!(l
            .register(RequestId(json!(3)), Filter::default(), "p".into())
            .is_none());
        drop(a);
        assert_eq!(l.len(), 1);
        assert!(l
            .register(RequestId(json!(3)), Filter::default(), "p".into())
            .is_some());
    }

    #[test]
    fn a_full_listener_is_ended_without_holding_others_back() {
        let l = Listeners::new(10, 2);
        let (_slow, mut slow) = l
            .register(RequestId(json!(1)), subscribed("u"), "p".into())
            .unwrap();
        let (_fast, mut fast) = l
            .register(RequestId(json!(2)), subscribed("u"), "p".into())
            .unwrap();
        for _ in 0..2 {
            assert_eq!(l.publish(&updated("u"), None), 2);
            fast.try_recv().unwrap();
        }
        assert_eq!(
            l.publish(&updated("u"), None),
            1,
            "the slow one is full: ended"
        );
        assert_eq!(l.len(), 1);
        fast.try_recv().unwrap();
        // The ended listener still reads what was queued, then sees its queue closed.
        assert!(slow.try_recv().is_ok() && slow.try_recv().is_ok());
        assert_eq!(
            slow.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
    }
}
