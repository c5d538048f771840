//! Reading an operation's parameters: a JSON object (JSON-RPC `params`, a REST body) or the
//! same names from a REST query string, where numbers and booleans arrive as text.

use serde_json::{Map, Value};

use super::error::{A2aError, Kind};
use crate::model::TenantId;

pub type Params = Map<String, Value>;

/// `params` as an object (absent: empty).
pub fn object(params: Option<Value>) -> Result<Params, A2aError> {
    match params {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(object)) => Ok(object),
        Some(_) => Err(A2aError::new(Kind::InvalidParams, "params must be an object")),
    }
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
            format!("must be a whole number from {} to {}", range.start(), range.end()),
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
