//! The node's periodic work: liveness heartbeat, keeping sessions with open work alive, the
//! reaper pass, and re-reading Redis's `maxmemory-policy` ([`switchboard_store::eviction`]).
//! These keep running while the node drains (its running requests still need a live heartbeat
//! and a session that does not expire) and end with the process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::{interval, MissedTickBehavior};

use switchboard_store::eviction::Lapse;

use crate::state::App;
use crate::telemetry;
use switchboard_telemetry::trace::logged_session;

/// How many `cluster.node_ttl`s without an answered heartbeat fence a node ([`fence`]). One is
/// when the others may take it for dead; a store failover (a Sentinel or Cluster promotion, about
/// 2–2.5 s here with a 1.5 s `node_ttl`) cuts every node off for about that long, and fencing
/// then closed streams whose calls would have finished (the chaos suite's `primary-kill`: 30–42
/// calls ended with -32004 and ~500 extra 503s per 60 s run). At two, a partition still fences
/// the node well before it ends.
const FENCE_AFTER: u32 = 2;

/// Starts every background loop.
pub fn spawn_all(app: &App) {
    let failed = Arc::new(AtomicBool::new(false));
    let last_ok = Arc::new(std::sync::Mutex::new(Instant::now()));
    tokio::spawn(every(app.clone(), app.cfg.heartbeat_interval, move |app| {
        heartbeat(app, failed.clone(), last_ok.clone())
    }));
    tokio::spawn(every(
        app.clone(),
        app.cfg.session_touch_interval,
        keep_alive,
    ));
    tokio::spawn(every(app.clone(), app.cfg.reaper_interval, reap));
    if app.eviction.applies() {
        let period = app.eviction.settings().check_interval;
        tokio::spawn(every(app.clone(), period, |app: App| async move {
            app.eviction.recheck(&*app.store).await
        }));
    }
}

async fn every<F, Fut>(app: App, period: Duration, mut f: F)
where
    F: FnMut(App) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = interval(period.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        f(app.clone()).await;
    }
}

/// Marks this node alive; other nodes fail its requests once it stops. A heartbeat that finds
/// the previous one had lapsed (the node stalled, or could not reach the store, past
/// `cluster.node_ttl`) checks at once what other nodes may have taken over meanwhile
/// ([`crate::cluster::held::check`]). One that finds it gone although the previous heartbeat
/// was answered well within `cluster.node_ttl` is logged and counted as a probable eviction
/// ([`switchboard_store::eviction::Lapse::ProbablyEvicted`]) and checks the same.
///
/// So does the first answered heartbeat after one that failed (`failed`): a heartbeat that timed
/// out may still run later (its commands were already on the connection, e.g. while a network
/// partition held them back), and its `SET` then renews the key that had lapsed meanwhile, so the
/// next heartbeat's `EXISTS` finds it and cannot tell that other nodes took this one for dead.
///
/// A heartbeat not answered within `cluster.node_ttl` counts as failed; once none has been
/// answered for longer than that, the other nodes take this one for dead (they end its
/// requests with -32004 when their clients resume elsewhere, and take over its node-bound
/// upstreams); after [`FENCE_AFTER`] times that it fences itself ([`fence`]) until a heartbeat
/// is answered again.
async fn heartbeat(app: App, failed: Arc<AtomicBool>, last_ok: Arc<std::sync::Mutex<Instant>>) {
    if app.retired.load(Ordering::SeqCst) {
        return;
    }
    let sent = Instant::now();
    let beat = tokio::time::timeout(app.cfg.node_ttl, app.store.heartbeat()).await;
    let beat = beat.unwrap_or_else(|_| {
        Err(switchboard_store::StoreError::Backend(format!(
            "no answer within cluster.node_ttl ({} ms)",
            app.cfg.node_ttl.as_millis()
        )))
    });
    match beat {
        Ok(live) => {
            *last_ok.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            if app.fenced.send_replace(false) {
                tracing::warn!("the store answers this node's heartbeat again: serving again");
            }
            let after_failure = failed.swap(false, Ordering::SeqCst);
            let lapse = app
                .eviction
                .heartbeat_answered(sent, live, app.cfg.node_ttl);
            if lapse == Lapse::ProbablyEvicted {
                // Logged and counted as a probable eviction by the watch; the same check follows.
            } else if !live {
                tracing::warn!("this node's heartbeat had lapsed: other nodes may have found it dead and taken over node-bound upstreams; checking what it holds now");
            } else if after_failure {
                tracing::warn!("this node's heartbeat is answered again after failing: it may have lapsed meanwhile (a late heartbeat can have renewed it) and other nodes taken over node-bound upstreams; checking what it holds now");
            } else {
                return;
            }
            tokio::spawn(async move { crate::cluster::held::check(&app).await });
        }
        Err(e) => {
            failed.store(true, Ordering::SeqCst);
            app.eviction.heartbeat_failed();
            tracing::warn!(error = %e, "liveness heartbeat failed");
            let silent = last_ok.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
            if silent > FENCE_AFTER * app.cfg.node_ttl && !app.fenced.send_replace(true) {
                switchboard_telemetry::metrics::get().counters.fences.inc();
                fence(&app, silent);
            }
        }
    }
}

/// This node has been unable to reach the store for `silent`, longer than [`FENCE_AFTER`] ×
/// `cluster.node_ttl`:
/// every MCP request gets 503 at once, those still waiting for their answer's headers too
/// (`app::not_fenced`), and every client stream held here is
/// closed, so that its client resumes on another node (which ends a request of this node with
/// -32004, or serves the standalone stream from the log) instead of waiting on a stream no event
/// can reach. Calls running here go on: their events and answers are logged if the store comes
/// back while they run. The upstreams stop what another node resumes (GET-stream listeners:
/// `Upstream::fenced`).
fn fence(app: &App, silent: Duration) {
    let sessions = app.hub.sessions();
    tracing::warn!(
        silent_ms = silent.as_millis() as u64,
        streams_of_sessions = sessions.len(),
        "this node has not reached the store for twice cluster.node_ttl: the others take it for dead; refusing requests and closing its client streams until it reaches the store again"
    );
    app.hub.close_all();
    let upstream = app.upstream.clone();
    tokio::spawn(async move { upstream.fenced().await });
}

/// Sessions with an open stream or a running call here do not idle out (their idle clock only
/// starts when the last request finishes). A session that is gone meanwhile is closed here.
async fn keep_alive(app: App) {
    let mut sids = app.hub.sessions();
    sids.extend(app.calls.sessions());
    // The ephemeral sessions of 2026-07-28 requests and task calls are not in the store.
    sids.retain(|sid| !crate::transport::stateless::names::is_local_only(sid));
    sids.sort();
    sids.dedup();
    for sid in sids {
        match app.store.touch(&sid).await {
            Ok(true) => {}
            Ok(false) => {
                app.hub.close_session(&sid);
                app.calls.end_session(&sid);
            }
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(&sid), "could not keep a session alive")
            }
        }
    }
}

/// One reaper pass (the store makes sure only one node does it at a time), then this node's own
/// check of what upstreams hold here ([`crate::cluster::held::check`]): for sessions that no longer exist,
/// or node-bound resources another node owns now.
async fn reap(app: App) {
    match app.store.reap(1000).await {
        Ok(ids) => telemetry::sessions_reaped(ids.len()),
        Err(e) => tracing::warn!(error = %e, "reaper pass failed"),
    }
    crate::cluster::held::check(&app).await;
}
