//! A replica's periodic work, the same in the gateway node and library mode (periods from
//! [`Timing`](crate::Timing)):
//!
//! - heartbeat (every `heartbeat`): marks this replica alive, so others do not end its
//!   requests; the result goes to [`StoreHealth`], the [`EvictionWatch`] and the replica's own
//!   [`Replica::beat`] (the node fences itself on it);
//! - keep-alive (every `keep_alive`): sessions with a stream open or a call running here do not
//!   idle out; one that is gone meanwhile is closed here ([`Replica::session_gone`]);
//! - reaper (every `reaper`; the store lets one replica at a time do the work): removes what is
//!   left of expired sessions and tells every replica they ended;
//! - Redis's `maxmemory-policy` (every `eviction.check_interval`; not on the memory store): read
//!   again, a change logged ([`switchboard_store::eviction`]).
//!
//! They run until `stop` fires (library mode: when the replica stops, not when it starts to
//! drain, since calls still running need a live heartbeat and sessions that do not expire; the
//! node: with the process).
//!
//! [`EvictionWatch`]: switchboard_store::eviction::EvictionWatch

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_store::StoreResult;
use switchboard_telemetry::trace::logged_session;
use tokio::time::{interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::health::StoreHealth;
use crate::replica::{Beat, Replica};

/// Sessions reaped per pass at most.
pub const REAP_LIMIT: usize = 1000;

/// Subscribes this replica's bus inbox and sends its first heartbeat (both in place before it
/// serves anything), then starts the inbox ([`crate::inbox::listen`]), a first reaper pass and
/// the loops, which run until `stop` fires (each first after one period).
///
/// # Errors
/// The store refused the subscription or the first heartbeat.
pub async fn start<R: Replica>(replica: Arc<R>, stop: CancellationToken) -> StoreResult<()> {
    let inbox = replica.store().subscribe().await?;
    let ttl = replica.timing().node_ttl;
    let sent = Instant::now();
    let live = replica.store().heartbeat().await?;
    replica.eviction().heartbeat_answered(sent, live, ttl);
    replica.health().answered(true, ttl);
    tokio::spawn(crate::inbox::listen(replica.clone(), inbox, stop.clone()));
    let timing = replica.timing();
    if replica.eviction().applies() {
        let period = replica.eviction().settings().check_interval;
        tokio::spawn(every(
            replica.clone(),
            period,
            stop.clone(),
            |r: Arc<R>| async move {
                r.eviction().recheck(&**r.store()).await;
            },
        ));
    }
    tokio::spawn(every(
        replica.clone(),
        timing.heartbeat,
        stop.clone(),
        heartbeat,
    ));
    tokio::spawn(every(
        replica.clone(),
        timing.keep_alive,
        stop.clone(),
        keep_alive,
    ));
    let reaper = |r: Arc<R>| async move {
        reap(r.clone()).await;
        r.reaped().await;
    };
    // A first pass at once (what expired while no replica ran), then every period.
    tokio::spawn(reaper(replica.clone()));
    tokio::spawn(every(replica, timing.reaper, stop, reaper));
    Ok(())
}

async fn every<R, F, Fut>(replica: Arc<R>, period: Duration, stop: CancellationToken, mut f: F)
where
    F: FnMut(Arc<R>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut tick = interval(period.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => f(replica.clone()).await,
            () = stop.cancelled() => return,
        }
    }
}

/// One heartbeat: not answered within `node_ttl` counts as failed. Recorded in the replica's
/// [`StoreHealth`] and eviction watch, then handed to [`Replica::beat`].
pub async fn heartbeat<R: Replica>(replica: Arc<R>) {
    if replica.retired() {
        return;
    }
    let ttl = replica.timing().node_ttl;
    let sent = Instant::now();
    let health: &StoreHealth = replica.health();
    let beat = match tokio::time::timeout(ttl, replica.store().heartbeat()).await {
        Ok(Ok(live)) => {
            let lapse = replica.eviction().heartbeat_answered(sent, live, ttl);
            let after_failure = health.answered(live, ttl);
            Beat::Answered {
                live,
                after_failure,
                lapse,
            }
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "liveness heartbeat failed");
            failed(&*replica)
        }
        Err(_) => {
            tracing::warn!(
                node_ttl_ms = ttl.as_millis() as u64,
                "liveness heartbeat not answered within node_ttl"
            );
            failed(&*replica)
        }
    };
    replica.beat(beat).await;
}

fn failed(replica: &dyn Replica) -> Beat {
    replica.eviction().heartbeat_failed();
    replica.health().failed();
    Beat::Failed {
        silent: replica.health().silent_for(),
    }
}

/// Sessions with an open stream or a running call here do not idle out (their idle clock only
/// starts when the last request finishes). A session that is gone meanwhile is closed here.
pub async fn keep_alive<R: Replica>(replica: Arc<R>) {
    let mut sids = replica.hub().sessions();
    sids.extend(replica.calls().sessions());
    sids.retain(|sid| replica.is_stored(sid));
    sids.sort();
    sids.dedup();
    for sid in sids {
        match replica.store().touch(&sid).await {
            Ok(true) => {}
            Ok(false) => replica.session_gone(&sid).await,
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(&sid), "could not keep a session alive");
            }
        }
    }
}

/// One reaper pass (the store makes sure only one replica does the work at a time).
pub async fn reap<R: Replica>(replica: Arc<R>) {
    match replica.store().reap(REAP_LIMIT).await {
        Ok(ids) => {
            switchboard_telemetry::metrics::get()
                .counters
                .sessions_reaped
                .inc_by(ids.len() as u64);
            if !ids.is_empty() {
                tracing::info!(count = ids.len(), "expired sessions reaped");
            }
        }
        Err(e) => tracing::warn!(error = %e, "reaper pass failed"),
    }
}
