//! Resources, prompts and completions.

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::{ctx, send, FakePeer};
use crate::upstream::RpcError;

async fn ask(method: &str, params: Value) -> Result<Value, RpcError> {
    send(method, params, ctx(&FakePeer::quiet(), None)).await
}

#[tokio::test]
async fn the_greeting_resource() {
    let list = ask("resources/list", json!({})).await.unwrap();
    assert_eq!(list["resources"].as_array().unwrap().len(), 1);
    assert_eq!(list["resources"][0]["uri"], "demo://greeting");
    assert_eq!(list["resources"][0]["mimeType"], "text/plain");
    let read = ask("resources/read", json!({"uri": "demo://greeting"}))
        .await
        .unwrap();
    assert_eq!(
        read,
        json!({"contents": [{"uri": "demo://greeting", "mimeType": "text/plain",
                             "text": "Hello from the Switchboard demo server!"}]})
    );
    assert_eq!(
        ask("resources/templates/list", json!({})).await.unwrap(),
        json!({"resourceTemplates": []})
    );
}

#[tokio::test]
async fn unknown_resources_are_not_found() {
    let err = ask("resources/read", json!({"uri": "demo://nope"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::RESOURCE_NOT_FOUND);
    assert_eq!(err.message, "Resource not found");
    assert_eq!(err.data, Some(json!({"uri": "demo://nope"})));
    let err = ask("resources/read", json!({})).await.unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    let err = ask("resources/subscribe", json!({"uri": "demo://nope"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::RESOURCE_NOT_FOUND);
}

#[tokio::test]
async fn subscriptions_are_acknowledged() {
    let uri = json!({"uri": "demo://greeting"});
    assert_eq!(
        ask("resources/subscribe", uri.clone()).await.unwrap(),
        json!({})
    );
    assert_eq!(ask("resources/unsubscribe", uri).await.unwrap(), json!({}));
    assert_eq!(
        ask("resources/unsubscribe", json!({"uri": "demo://nope"}))
            .await
            .unwrap(),
        json!({})
    );
    assert_eq!(
        ask("resources/unsubscribe", json!({}))
            .await
            .unwrap_err()
            .code,
        codes::INVALID_PARAMS
    );
}

#[tokio::test]
async fn the_greet_prompt() {
    let list = ask("prompts/list", json!({})).await.unwrap();
    assert_eq!(list["prompts"][0]["name"], "greet");
    assert_eq!(
        list["prompts"][0]["arguments"],
        json!([{"name": "name", "description": "Who to greet.", "required": true}])
    );
    let got = ask(
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    )
    .await
    .unwrap();
    assert_eq!(
        got["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Please greet Ada warmly, in one sentence."}}])
    );
}

#[tokio::test]
async fn prompt_errors_are_invalid_params() {
    let err = ask("prompts/get", json!({"name": "greet"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    assert!(err.message.contains("`name`"));
    let err = ask(
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": 5}}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    let err = ask("prompts/get", json!({"name": "shout", "arguments": {}}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    assert!(err.message.contains("shout"));
}

/// The completion values for `value` of `argument` of `reference`.
async fn complete(reference: Value, argument: &str, value: &str) -> Vec<Value> {
    let params = json!({"ref": reference, "argument": {"name": argument, "value": value}});
    let result = ask("completion/complete", params).await.unwrap();
    assert_eq!(result["completion"]["hasMore"], false);
    assert_eq!(
        result["completion"]["total"],
        result["completion"]["values"].as_array().unwrap().len()
    );
    result["completion"]["values"].as_array().unwrap().clone()
}

#[tokio::test]
async fn completes_names_for_the_greet_prompt_only() {
    let greet = json!({"type": "ref/prompt", "name": "greet"});
    assert_eq!(
        complete(greet.clone(), "name", "a").await,
        [json!("Ada"), json!("Alan"), json!("Alice")]
    );
    assert_eq!(
        complete(greet.clone(), "name", "GR").await,
        [json!("Grace")]
    );
    assert_eq!(complete(greet.clone(), "name", "").await.len(), 10);
    assert!(complete(greet, "other", "a").await.is_empty());
    assert!(
        complete(json!({"type": "ref/prompt", "name": "shout"}), "name", "a")
            .await
            .is_empty()
    );
    assert!(complete(
        json!({"type": "ref/resource", "uri": "demo://greeting"}),
        "name",
        "a"
    )
    .await
    .is_empty());
    let err = ask(
        "completion/complete",
        json!({"argument": {"name": "name", "value": ""}}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
}
