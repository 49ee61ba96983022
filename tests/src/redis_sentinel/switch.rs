//! A graceful failover (case C37's Sentinel variant): `SENTINEL FAILOVER`, which promotes the
//! replica while the old primary stays up. The sentinels kill the pub/sub clients of both
//! servers (`CLIENT KILL TYPE pubsub`) and demote the old primary seconds later (see
//! [`SentinelGroup::wait_replica_of`]); until then it still accepts writes.

use std::time::{Duration, Instant};

use super::SentinelGroup;
use crate::eventually::eventually_ok;

/// What [`SentinelGroup::graceful_failover`] saw.
#[derive(Clone, Debug)]
pub struct Switch {
    /// The primary before.
    pub old: u16,
    /// The primary every running sentinel names now.
    pub new: u16,
    /// When the switch was first seen (every sentinel naming `new`, `new` answering `ROLE` as
    /// `master`): within one 50 ms poll of the sentinels' `+switch-master`.
    pub seen_at: Instant,
    /// From the command to then.
    pub took: Duration,
}

/// How long a sentinel may refuse the command (`NOGOODSLAVE` while it has not yet seen the
/// replica's `INFO`, `INPROG`) before the failover is given up.
const ACCEPT_LIMIT: Duration = Duration::from_secs(15);

impl SentinelGroup {
    /// Sends `SENTINEL FAILOVER <master name>` to the first running sentinel (again, at most
    /// for 15 s, while it refuses: `NOGOODSLAVE`, `INPROG`), then waits (at most `limit`) until
    /// every running sentinel names another primary and that one answers `ROLE` as `master`
    /// ([`Self::wait_promotion`]). Panics when the command is never accepted or at the limit.
    pub fn graceful_failover(&self, limit: Duration) -> Switch {
        let old = self.primary_port();
        let sentinel = *self
            .running_sentinels()
            .first()
            .expect("a running sentinel");
        let name = self.master_name().to_owned();
        let started = Instant::now();
        eventually_ok(
            "a sentinel to accept SENTINEL FAILOVER",
            ACCEPT_LIMIT,
            || {
                self.query_port::<()>(sentinel, &["SENTINEL", "FAILOVER", &name])
                    .map_err(|e| format!("sentinel:{sentinel}: {e}"))
            },
        );
        let (new, _) = self.wait_promotion(old, limit);
        Switch {
            old,
            new,
            seen_at: Instant::now(),
            took: started.elapsed(),
        }
    }
}
