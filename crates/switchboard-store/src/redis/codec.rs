//! Conversions between store types and Redis values.

use std::collections::BTreeMap;

use redis::Value;

use crate::error::StoreError;
use crate::model::*;
use crate::rules;
use crate::traits::StoreResult;

/// The record's hash fields (the id is the key, not a field; `lvl` is absent when unset, `subv`
/// and `own` when empty; `fv`
/// is the format it was written in, [`crate::FORMAT`], absent in records of format 1: read
/// alike).
pub(crate) fn record_fields(record: &SessionRecord) -> StoreResult<Vec<(&'static str, String)>> {
    let mut fields = vec![
        ("rev", record.revision.clone()),
        ("init", serde_json::to_string(&record.initialize_params)?),
        (
            "ready",
            if record.initialized { "1" } else { "0" }.to_owned(),
        ),
        ("subs", serde_json::to_string(&record.subscriptions)?),
        ("prn", record.principal.clone()),
        ("ups", serde_json::to_string(&record.upstream_sessions)?),
        ("ct", record.created_ms.to_string()),
        ("fv", crate::FORMAT.to_string()),
    ];
    if !record.owners.is_empty() {
        fields.push(("own", serde_json::to_string(&record.owners)?));
    }
    if let Some(level) = &record.log_level {
        fields.push(("lvl", level.clone()));
    }
    if !record.subscription_upstreams.is_empty() {
        fields.push((
            "subv",
            serde_json::to_string(&record.subscription_upstreams)?,
        ));
    }
    Ok(fields)
}

/// Rebuilds a record from the flat `HGETALL` reply of its hash.
pub(crate) fn record_from_hash(sid: &str, flat: &Value) -> StoreResult<SessionRecord> {
    let items = array(flat)?;
    let mut map = BTreeMap::new();
    for pair in items.chunks(2) {
        if let [k, v] = pair {
            map.insert(string(k)?, string(v)?);
        }
    }
    let field = |name: &str| {
        map.get(name)
            .cloned()
            .ok_or_else(|| corrupt(format!("session {sid}: no field {name}")))
    };
    let ct = field("ct")?;
    Ok(SessionRecord {
        id: sid.to_owned(),
        revision: field("rev")?,
        initialize_params: serde_json::from_str(&field("init")?)?,
        initialized: map.get("ready").is_some_and(|r| r == "1"),
        log_level: map.get("lvl").cloned(),
        subscriptions: serde_json::from_str(map.get("subs").map_or("[]", String::as_str))?,
        subscription_upstreams: serde_json::from_str(map.get("subv").map_or("{}", String::as_str))?,
        principal: field("prn")?,
        upstream_sessions: serde_json::from_str(map.get("ups").map_or("{}", String::as_str))?,
        owners: serde_json::from_str(map.get("own").map_or("{}", String::as_str))?,
        created_ms: ct
            .parse()
            .map_err(|_| corrupt(format!("session {sid}: bad ct {ct:?}")))?,
    })
}

/// The `{position, holder}` reply of the append scripts; nil means "not stored".
pub(crate) fn appended(value: &Value) -> StoreResult<Option<Appended>> {
    if matches!(value, Value::Nil) {
        return Ok(None);
    }
    match array(value)? {
        [pos, holder] => Ok(Some(Appended {
            position: string(pos)?,
            holder: rules::some_holder(string(holder)?),
        })),
        other => Err(corrupt(format!("append reply of {} items", other.len()))),
    }
}

/// Entries of an `XRANGE` reply, taken apart without copying their ids and data.
pub(crate) fn entries(value: Value) -> StoreResult<Vec<LoggedEvent>> {
    let items = into_array(value)?;
    let mut out = Vec::with_capacity(items.len());
    for entry in items {
        let Ok::<[Value; 2], _>([id, fields]) = into_array(entry)?.try_into() else {
            return Err(corrupt("stream entry is not [id, fields]".to_owned()));
        };
        let mut data = None;
        let mut end = false;
        let mut fields = into_array(fields)?.into_iter();
        while let (Some(k), Some(v)) = (fields.next(), fields.next()) {
            match field_name(&k) {
                Some(b"d") => data = Some(into_string(v)?),
                Some(b"e") => end = matches!(field_name(&v), Some(b"1")),
                _ => {}
            }
        }
        let data = data.ok_or_else(|| corrupt("stream entry without data".to_owned()))?;
        out.push(LoggedEvent {
            position: into_string(id)?,
            data,
            end,
        });
    }
    Ok(out)
}

/// [`array`], owned.
fn into_array(value: Value) -> StoreResult<Vec<Value>> {
    match value {
        Value::Array(items) | Value::Set(items) => Ok(items),
        Value::Nil => Ok(Vec::new()),
        other => Err(corrupt(format!("expected an array, got {other:?}"))),
    }
}

/// [`string`], owned: a bulk string's bytes become the `String` without a copy.
fn into_string(value: Value) -> StoreResult<String> {
    match value {
        Value::BulkString(b) => String::from_utf8(b).map_err(|e| corrupt(e.to_string())),
        other => string(&other),
    }
}

/// The bytes of a short string reply (a stream entry's field name or flag), if it is one.
fn field_name(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The items of an array reply (nil counts as empty).
pub(crate) fn array(value: &Value) -> StoreResult<&[Value]> {
    match value {
        Value::Array(items) | Value::Set(items) => Ok(items),
        Value::Nil => Ok(&[]),
        other => Err(corrupt(format!("expected an array, got {other:?}"))),
    }
}

/// A string reply.
pub(crate) fn string(value: &Value) -> StoreResult<String> {
    match value {
        Value::BulkString(b) => String::from_utf8(b.clone()).map_err(|e| corrupt(e.to_string())),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Okay => Ok("OK".to_owned()),
        Value::Int(i) => Ok(i.to_string()),
        other => Err(corrupt(format!("expected a string, got {other:?}"))),
    }
}

/// An integer reply.
pub(crate) fn int(value: &Value) -> StoreResult<i64> {
    match value {
        Value::Int(i) => Ok(*i),
        other => string(other)?
            .parse()
            .map_err(|_| corrupt(format!("expected an integer, got {other:?}"))),
    }
}

fn corrupt(what: String) -> StoreError {
    StoreError::Corrupt(what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn record_round_trips_through_hash_fields() {
        let record = SessionRecord {
            id: "abc".into(),
            revision: "2025-11-25".into(),
            initialize_params: json!({"capabilities": {"roots": {}}, "clientInfo": {"name": "x"}})
                .into(),
            initialized: true,
            log_level: Some("debug".into()),
            subscriptions: vec!["file:///a".into()],
            subscription_upstreams: BTreeMap::from([("file:///a".to_owned(), "u".to_owned())]),
            principal: "anonymous".into(),
            upstream_sessions: BTreeMap::from([("u".to_owned(), "s1".to_owned())]),
            owners: BTreeMap::from([("u".to_owned(), "n1".to_owned())]),
            created_ms: 17,
        };
        let flat: Vec<Value> = record_fields(&record)
            .unwrap()
            .into_iter()
            .flat_map(|(k, v)| [bulk(k), bulk(&v)])
            .collect();
        assert_eq!(
            record_from_hash("abc", &Value::Array(flat)).unwrap(),
            record
        );
    }

    #[test]
    fn missing_required_fields_are_corrupt() {
        let flat = Value::Array(vec![bulk("rev"), bulk("x")]);
        assert!(matches!(
            record_from_hash("abc", &flat),
            Err(StoreError::Corrupt(_))
        ));
    }
}
