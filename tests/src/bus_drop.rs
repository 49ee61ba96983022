//! Cutting nodes off the bus for a while (case C37, the chaos suite's `bus-drop`): their pub/sub
//! connections are killed (`CLIENT KILL TYPE pubsub`) and their reconnection is held off by
//! lowering `maxclients` to the number of clients left, until [`HeldOff::release`] (or drop)
//! restores it. The admin connection that does it is opened first, so it stays.
//!
//! In Redis Cluster a node's subscriptions ride on its command connections (RESP3), so there the
//! node loses its commands to that server too while held off.

use std::time::{Duration, Instant};

use redis::Connection;

use crate::eventually::always_for;

/// A Redis whose pub/sub clients were killed and which refuses new connections until released.
pub struct HeldOff {
    admin: Connection,
    port: u16,
    maxclients: String,
    released: bool,
    since: Instant,
}

/// Kills the pub/sub clients of the Redis on 127.0.0.1:`port` (with `password`, if any) and
/// refuses every new connection until the result is released. Returns how many it killed.
///
/// # Panics
/// When the Redis does not answer, or `CONFIG` is refused.
pub fn hold_off(port: u16, password: Option<&str>) -> (HeldOff, i64) {
    let url = match password {
        Some(pw) => format!("redis://:{pw}@127.0.0.1:{port}/"),
        None => format!("redis://127.0.0.1:{port}/"),
    };
    let mut admin = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("admin connection to redis:{port}: {e}"));
    admin
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let (_, maxclients): (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query(&mut admin)
        .unwrap_or_else(|e| panic!("CONFIG GET maxclients on redis:{port}: {e}"));
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut admin)
        .expect("CLIENT LIST");
    let total = clients.lines().filter(|l| !l.trim().is_empty()).count();
    let pubsub = clients
        .lines()
        .filter(|l| l.split(' ').any(is_subscriber_field))
        .count();
    // Room for exactly the clients that stay: none of the killed ones gets back in.
    let room = total.saturating_sub(pubsub).max(1);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(room)
        .query::<()>(&mut admin)
        .unwrap_or_else(|e| panic!("CONFIG SET maxclients on redis:{port}: {e}"));
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap_or_else(|e| panic!("CLIENT KILL TYPE pubsub on redis:{port}: {e}"));
    let held = HeldOff {
        admin,
        port,
        maxclients,
        released: false,
        since: Instant::now(),
    };
    (held, killed)
}

/// Whether a `CLIENT LIST` field says the client subscribes to something (`sub=`, `psub=`,
/// `ssub=` above 0).
fn is_subscriber_field(field: &str) -> bool {
    ["sub=", "psub=", "ssub="].iter().any(|p| {
        field
            .strip_prefix(p)
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    })
}

impl HeldOff {
    /// When the pub/sub clients were killed.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Subscribers of the classic channel `channel` now (`PUBSUB NUMSUB`, over the admin
    /// connection: the one connection the Redis keeps while it refuses new ones). Panics when
    /// the Redis does not answer.
    pub fn numsub(&mut self, channel: &str) -> i64 {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut self.admin)
            .unwrap_or_else(|e| panic!("PUBSUB NUMSUB on redis:{}: {e}", self.port));
        n
    }

    /// Keeps the clients out until `until` (a bounded wait that is also the check that the
    /// drop is in effect): every 50 ms asserts that none of `channels` has a subscriber, and
    /// panics the first time one does. Returns at once when `until` has passed.
    pub async fn away_until(&mut self, until: Instant, channels: &[String]) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let what = format!("no subscriber of {channels:?} while held off");
        always_for(&what, left, || {
            let none = channels.iter().all(|c| self.numsub(c) == 0);
            async move { none }
        })
        .await;
    }

    /// Lets clients connect again (restores `maxclients`).
    pub fn release(mut self) {
        self.restore();
    }

    fn restore(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        let restored = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(&self.maxclients)
            .query::<()>(&mut self.admin);
        if let Err(e) = restored {
            eprintln!("could not restore maxclients on redis:{}: {e}", self.port);
        }
    }
}

impl Drop for HeldOff {
    fn drop(&mut self) {
        self.restore();
    }
}
