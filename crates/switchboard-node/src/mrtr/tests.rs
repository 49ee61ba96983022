use super::*;

fn settled(retry: Retry) -> Inputs {
    match retry {
        Retry::Run(inputs) => inputs,
        Retry::Resume(r) => panic!("not a re-run: {r:?}"),
    }
}

fn known(ask: Ask) -> Option<Value> {
    match ask {
        Ask::Answer(v) => Some(v),
        _ => None,
    }
}

fn ring() -> KeyRing {
    KeyRing::new(&[[7; KEY_LEN]])
}

fn call(args: Value) -> Value {
    json!({"name": "sample", "arguments": args, "_meta": {"x": 1}})
}

/// Round 1 of `params`: asks one sampling question; returns the key and the result.
fn first_round(params: &Value, principal: &str) -> (String, Value) {
    let inputs =
        settled(Inputs::from_request(&ring(), "tools/call", params, principal, false).unwrap());
    let q = json!({"messages": [], "maxTokens": 5});
    assert_eq!(
        known(inputs.answer_or_ask("sampling/createMessage", &q)),
        None
    );
    let result = inputs
        .input_required(&ring(), &MrtrSettings::default(), principal)
        .unwrap()
        .unwrap();
    let key = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    assert_eq!(result["resultType"], "input_required");
    assert_eq!(
        result["inputRequests"][&key]["method"],
        "sampling/createMessage"
    );
    (key, result)
}

fn retry(params: &Value, result: &Value, responses: Value) -> Value {
    let mut p = params.clone();
    p["requestState"] = result["requestState"].clone();
    p["inputResponses"] = responses;
    p
}

#[test]
fn a_retry_meets_its_answer_and_asks_again_when_it_is_missing() {
    let params = call(json!({"prompt": "hi"}));
    let (key, result) = first_round(&params, "alice");
    assert!(
        key.starts_with("createMessage-") && key.ends_with("-1"),
        "{key}"
    );
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "yo"}});
    // Member order and _meta do not matter for the request digest.
    let mut reordered = json!({"arguments": {"prompt": "hi"}, "name": "sample"});
    reordered["_meta"] = json!({"other": true});
    let p = retry(&reordered, &result, json!({&key: answer}));
    let inputs = settled(Inputs::from_request(&ring(), "tools/call", &p, "alice", false).unwrap());
    let q = json!({"maxTokens": 5, "messages": []});
    assert_eq!(
        known(inputs.answer_or_ask("sampling/createMessage", &q)),
        Some(answer)
    );
    // The same question asked a second time is a new question.
    assert_eq!(
        known(inputs.answer_or_ask("sampling/createMessage", &q)),
        None
    );
    let again = inputs
        .input_required(&ring(), &MrtrSettings::default(), "alice")
        .unwrap()
        .unwrap();
    assert!(again["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| k.ends_with("-2")));
    // A retry without the response gets the same question again.
    let p = retry(&params, &result, json!({}));
    let inputs = settled(Inputs::from_request(&ring(), "tools/call", &p, "alice", false).unwrap());
    assert_eq!(
        known(inputs.answer_or_ask("sampling/createMessage", &q)),
        None
    );
}

#[test]
fn states_are_bound_to_principal_request_expiry_and_key() {
    let params = call(json!({"prompt": "hi"}));
    let (key, result) = first_round(&params, "alice");
    let ok = json!({&key: {"content": {"type": "text", "text": "x"}}});
    let p = retry(&params, &result, ok.clone());
    let e = |method: &str, p: &Value, who: &str| {
        Inputs::from_request(&ring(), method, p, who, false).err()
    };
    assert_eq!(
        e("tools/call", &p, "mallory"),
        Some(RetryError::OtherPrincipal)
    );
    assert_eq!(
        e("prompts/get", &p, "alice"),
        Some(RetryError::OtherRequest)
    );
    let other_args = retry(&call(json!({"prompt": "bye"})), &result, ok.clone());
    assert_eq!(
        e("tools/call", &other_args, "alice"),
        Some(RetryError::OtherRequest)
    );
    let mut forged = p.clone();
    forged["requestState"] = json!(format!("{}A", result["requestState"].as_str().unwrap()));
    assert!(matches!(
        e("tools/call", &forged, "alice"),
        Some(RetryError::Seal(_))
    ));
    let other_key = KeyRing::new(&[[8; KEY_LEN]]);
    assert_eq!(
        Inputs::from_request(&other_key, "tools/call", &p, "alice", false).err(),
        Some(RetryError::Seal(SealError::UnknownKey))
    );
    let mut bad = p.clone();
    bad["inputResponses"] = json!({&key: "text"});
    assert_eq!(
        e("tools/call", &bad, "alice"),
        Some(RetryError::BadResponses)
    );
    let settings = MrtrSettings {
        state_ttl: Duration::ZERO,
        ..MrtrSettings::default()
    };
    let inputs =
        settled(Inputs::from_request(&ring(), "tools/call", &params, "alice", false).unwrap());
    inputs.answer_or_ask("roots/list", &json!({}));
    let expired = inputs
        .input_required(&ring(), &settings, "alice")
        .unwrap()
        .unwrap();
    let p = retry(&params, &expired, json!({}));
    assert_eq!(e("tools/call", &p, "alice"), Some(RetryError::Expired));
}

#[test]
fn oversized_states_are_refused_and_upstreams_never_see_retry_members() {
    let params = call(json!({"prompt": "hi"}));
    let inputs = settled(Inputs::from_request(&ring(), "tools/call", &params, "a", false).unwrap());
    inputs.answer_or_ask("roots/list", &json!({}));
    let tiny = MrtrSettings {
        max_state_bytes: 10,
        ..MrtrSettings::default()
    };
    assert!(inputs.input_required(&ring(), &tiny, "a").unwrap().is_err());
    let p = json!({"name": "x", "requestState": "s", "inputResponses": {}});
    assert_eq!(upstream_params(p), json!({"name": "x"}));
    let p = json!({"name": "x", "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": 7
    }});
    assert_eq!(
        upstream_params(p),
        json!({"name": "x", "_meta": {"progressToken": 7}})
    );
    let p = json!({"_meta": {"io.modelcontextprotocol/logLevel": "info"}});
    assert_eq!(upstream_params(p), json!({}));
    let none = settled(Inputs::from_request(&ring(), "tools/call", &params, "a", false).unwrap());
    assert!(none
        .input_required(&ring(), &MrtrSettings::default(), "a")
        .is_none());
}

#[tokio::test]
async fn park_mode_waits_for_answers_and_asks_again_what_stays_open() {
    let params = call(json!({"prompt": "hi"}));
    let inputs = settled(Inputs::from_request(&ring(), "tools/call", &params, "a", true).unwrap());
    assert!(inputs.parking());
    let Ask::Wait(first) = inputs.answer_or_ask("roots/list", &json!({})) else {
        panic!("park mode waits");
    };
    let Ask::Wait(second) = inputs.answer_or_ask("elicitation/create", &json!({"m": 1})) else {
        panic!("park mode waits");
    };
    inputs.asked().await;
    let asked = inputs.take_asked();
    assert_eq!(asked.len(), 2);
    let sealed = inputs
        .result(
            &ring(),
            &MrtrSettings::default(),
            "a",
            &asked,
            Some(("node-1", "p1")),
        )
        .unwrap();
    // The parked state names the node and park; a retry resumes instead of re-running.
    let mut retry = params.clone();
    retry["requestState"] = sealed["requestState"].clone();
    let roots_key = asked[0].0.clone();
    retry["inputResponses"] = json!({&roots_key: {"roots": []}, "stray": {"x": 1}});
    let Retry::Resume(resume) =
        Inputs::from_request(&ring(), "tools/call", &retry, "a", true).unwrap()
    else {
        panic!("a parked state resumes");
    };
    assert_eq!(
        (resume.node.as_str(), resume.park.as_str()),
        ("node-1", "p1")
    );
    assert_eq!(
        resume.answers.len(),
        1,
        "only asked keys count: {:?}",
        resume.answers
    );
    // Delivering answers one question and puts the other back as asked.
    inputs.deliver(&resume.answers);
    assert_eq!(first.await.unwrap(), json!({"roots": []}));
    inputs.asked().await;
    let again = inputs.take_asked();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1["method"], "elicitation/create");
    drop(inputs);
    assert!(second.await.is_err(), "dropped with the run");
}
