//! Reading an operation's parameters: a JSON object (JSON-RPC `params`, a REST body) or the
//! same names from a REST query string, where numbers and booleans arrive as text.

use serde_json::{Map, Value};

use super::error::{A2aError, Kind};
use crate::model::TenantId;

pub type Params = Map<String, Value>;

/// `params` as an object (absent: empty), its field names as `proto_names` leaves them.
pub fn object(params: Option<Value>) -> Result<Params, A2aError> {
    match params {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(object)) => proto_names(object),
        Some(_) => Err(A2aError::new(
            Kind::InvalidParams,
            "params must be an object",
        )),
    }
}

/// Fields whose values are free-form (`google.protobuf.Struct` or `Value`): their keys are
/// the client's own.
const FREE_FORM: [&str; 3] = ["metadata", "data", "params"];

/// ProtoJSON parsers take a field's proto name (`task_id`) as well as its JSON name
/// (`taskId`): every field name is read as its JSON name, at every depth but inside
/// free-form values. A field sent under both names is refused.
pub fn proto_names(object: Params) -> Result<Params, A2aError> {
    let mut out = Map::with_capacity(object.len());
    for (key, value) in object {
        let free_form = FREE_FORM.contains(&key.as_str());
        let name = json_name(&key);
        let value = if free_form {
            value
        } else {
            json_names_in(value)?
        };
        if out.insert(name.clone(), value).is_some() {
            return Err(A2aError::invalid(
                name.clone(),
                "is sent twice, under its JSON name and its proto name",
            ));
        }
    }
    Ok(out)
}

fn json_names_in(value: Value) -> Result<Value, A2aError> {
    Ok(match value {
        Value::Object(object) => Value::Object(proto_names(object)?),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(json_names_in)
                .collect::<Result<_, _>>()?,
        ),
        other => other,
    })
}

/// A proto field name's JSON name: `task_id` → `taskId`; a JSON name stays as it is.
fn json_name(name: &str) -> String {
    if !name.contains('_') {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

pub fn string<'a>(params: &'a Params, key: &str) -> Result<Option<&'a str>, A2aError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(A2aError::invalid(key, "must be a string")),
    }
}

pub fn required<'a>(params: &'a Params, key: &str) -> Result<&'a str, A2aError> {
    string(params, key)?.ok_or_else(|| A2aError::invalid(key, "is required"))
}

/// A whole number (or its text) in `range`.
pub fn integer(
    params: &Params,
    key: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<Option<i64>, A2aError> {
    let number = match params.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => None,
    };
    match number {
        Some(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(A2aError::invalid(
            key,
            format!(
                "must be a whole number from {} to {}",
                range.start(),
                range.end()
            ),
        )),
    }
}

pub fn boolean(params: &Params, key: &str) -> Result<Option<bool>, A2aError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" => Ok(Some(true)),
        Some(Value::String(s)) if s == "false" => Ok(Some(false)),
        Some(_) => Err(A2aError::invalid(key, "must be true or false")),
    }
}

/// `historyLength`: at least 0.
pub fn history_length(params: &Params) -> Result<Option<usize>, A2aError> {
    Ok(integer(params, "historyLength", 0..=i64::from(u32::MAX))?.map(|n| n as usize))
}

/// A `tenant` the caller sent must be its own: another tenant is as unknown as a missing
/// one.
pub fn check_tenant(params: &Params, tenant: &TenantId) -> Result<(), A2aError> {
    match string(params, "tenant")? {
        Some(named) if named != tenant.to_string() => Err(A2aError::new(
            Kind::TaskNotFound,
            format!("tenant {named} not found"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(value: Value) -> Result<Value, A2aError> {
        match value {
            Value::Object(object) => proto_names(object).map(Value::Object),
            _ => unreachable!(),
        }
    }

    #[test]
    fn proto_names_read_as_json_names_but_free_form_values_keep_theirs() {
        let sent = json!({"task_id": "t", "push_notification_config": {"url": "u",
            "authentication": {"schemes": ["Bearer"]}},
            "message": {"message_id": "m", "reference_task_ids": ["a"],
                "parts": [{"media_type": "text/plain", "data": {"my_key": 1},
                    "metadata": {"x_y": 2}}]},
            "metadata": {"keep_me": true}, "historyLength": 3});
        assert_eq!(
            names(sent).unwrap(),
            json!({"taskId": "t", "pushNotificationConfig": {"url": "u",
                "authentication": {"schemes": ["Bearer"]}},
                "message": {"messageId": "m", "referenceTaskIds": ["a"],
                    "parts": [{"mediaType": "text/plain", "data": {"my_key": 1},
                        "metadata": {"x_y": 2}}]},
                "metadata": {"keep_me": true}, "historyLength": 3})
        );
        assert!(names(json!({"task_id": "a", "taskId": "b"})).is_err());
        assert!(names(json!({"taskId": "b", "task_id": "a"})).is_err());
    }
}
