//! rmcp's store traits as this crate implements them ([`StoreSessions`], [`StoreEvents`]), each
//! case against the memory store and against a private `redis-server`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::{InitializeRequestParams, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{
    EventStore, ServerSseMessage, SessionState, SessionStore,
};
use serde_json::{json, Value};
use switchboard_protocol::SessionId;
use switchboard_rmcp::{StoreEvents, StoreSessions};
use switchboard_tests::eventually::eventually;

use common::{Env, Kind, WAIT};

every_backend!(
    sessions_store_load_and_delete,
    ids_not_issued_here_are_unknown,
    replay_after_an_event_id_is_that_streams_later_events,
    an_abandoned_scope_leaves_no_key,
);

fn init_params(client: &str) -> InitializeRequestParams {
    serde_json::from_value(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}},
        "clientInfo": {"name": client, "version": "1"},
    }))
    .expect("initialize params")
}

fn note(text: &str) -> ServerSseMessage {
    let message: ServerJsonRpcMessage = serde_json::from_value(json!({
        "jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": text},
    }))
    .expect("a notification");
    ServerSseMessage::from_message(message)
}

fn data_of(event: &ServerSseMessage) -> Value {
    let message = event.message.as_ref().expect("a message");
    serde_json::to_value(&**message).expect("json")["params"]["data"].clone()
}

async fn sessions_store_load_and_delete(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let sessions = StoreSessions::new(env.store("a").await);
    let sid = SessionId::generate().to_string();
    sessions
        .store(&sid, &SessionState::new(init_params("one")))
        .await
        .expect("stored");
    // Another replica's view loads it.
    let other = StoreSessions::new(env.store("b").await);
    let state = other.load(&sid).await.expect("load").expect("present");
    assert_eq!(state.initialize_params.client_info.name, "one");
    // Storing again (rmcp does after the manager created it) changes nothing.
    sessions
        .store(&sid, &SessionState::new(init_params("two")))
        .await
        .expect("stored again");
    let state = other.load(&sid).await.expect("load").expect("present");
    assert_eq!(state.initialize_params.client_info.name, "one");
    assert!(env.keys_of(&sid).await > 0);

    other.delete(&sid).await.expect("deleted");
    assert!(sessions.load(&sid).await.expect("load").is_none());
    assert_eq!(env.keys_of(&sid).await, 0, "a deleted session keeps no key");
}

async fn ids_not_issued_here_are_unknown(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let sessions = StoreSessions::new(env.store("a").await);
    for id in [
        "",
        "not-ours",
        "{x}",
        "0f8fad5b-d9cb-469f-a165-70867728950e",
    ] {
        assert!(sessions.load(id).await.expect("load").is_none(), "{id:?}");
    }
    let never = SessionId::generate().to_string();
    assert!(sessions.load(&never).await.expect("load").is_none());
    let events = StoreEvents::new(env.store("a").await);
    assert!(events.replay_events_after("get_0-0").await.is_err());
    assert!(events
        .store_event("no-uuid-here", &note("x"))
        .await
        .is_err());
}

async fn replay_after_an_event_id_is_that_streams_later_events(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let events = Arc::new(StoreEvents::new(env.store("a").await));
    let (one, two) = (
        "0f8fad5b-d9cb-469f-a165-70867728950e",
        "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    );
    let priming = events
        .store_event(one, &ServerSseMessage::priming("x", Duration::from_secs(3)))
        .await
        .expect("priming id");
    let mut ids = Vec::new();
    for i in 1..=5 {
        ids.push(
            events
                .store_event(one, &note(&format!("one {i}")))
                .await
                .expect("stored"),
        );
        events
            .store_event(two, &note(&format!("two {i}")))
            .await
            .expect("stored");
    }
    let replayed: Vec<ServerSseMessage> = events
        .replay_events_after(&ids[1])
        .await
        .expect("replay")
        .collect()
        .await;
    let data: Vec<Value> = replayed.iter().map(data_of).collect();
    assert_eq!(data, vec![json!("one 3"), json!("one 4"), json!("one 5")]);
    let replayed_ids: Vec<String> = replayed.iter().filter_map(|e| e.event_id.clone()).collect();
    assert_eq!(replayed_ids, ids[2..].to_vec(), "events keep their ids");

    // Another replica replays the same, and from the priming id, everything.
    let other = StoreEvents::new(env.store("b").await);
    let all: Vec<ServerSseMessage> = other
        .replay_events_after(&priming)
        .await
        .expect("replay")
        .collect()
        .await;
    assert_eq!(all.len(), 5);
    assert_eq!(data_of(&all[0]), json!("one 1"));
    let last: Vec<ServerSseMessage> = other
        .replay_events_after(&ids[4])
        .await
        .expect("replay")
        .collect()
        .await;
    assert!(last.is_empty(), "nothing after the newest event");
}

async fn an_abandoned_scope_leaves_no_key(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(1));
    let store = env.store("a").await;
    let events = StoreEvents::new(store.clone());
    let stream = "0f8fad5b-d9cb-469f-a165-70867728950e";
    events
        .store_event(stream, &note("left behind"))
        .await
        .expect("stored");
    let scope = "0f8fad5bd9cb469fa16570867728950e";
    assert!(env.keys_of(scope).await > 0);
    eventually("the abandoned scope to leave no key", WAIT, || async {
        store.reap(100).await.expect("reaper pass");
        (env.keys_of(scope).await == 0).then_some(())
    })
    .await;
}
