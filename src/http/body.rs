//! Request body, query and path extraction that fails with our JSON errors.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{FromRequest, HttpRequest, web};
use serde::de::DeserializeOwned;

use crate::http::error::{ApiError, ErrorCode};

/// JSON bodies: any or no Content-Type is accepted (real clients send none); errors render
/// as `invalid_json`, `payload_too_large`.
pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .content_type_required(false)
        .error_handler(|error: JsonPayloadError, _req: &HttpRequest| {
            match error {
                JsonPayloadError::OverflowKnownLength { .. }
                | JsonPayloadError::Overflow { .. } => {
                    ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
                }
                JsonPayloadError::Deserialize(e) => ApiError::new(
                    ErrorCode::InvalidJson,
                    format!("request body is not valid JSON: {e}"),
                ),
                other => ApiError::new(
                    ErrorCode::InvalidJson,
                    format!("cannot read the request body: {other}"),
                ),
            }
            .into()
        })
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|error: QueryPayloadError, _req: &HttpRequest| {
        ApiError::new(
            ErrorCode::InvalidQuery,
            format!("invalid query string: {error}"),
        )
        .into()
    })
}

/// A query string parsed into `T`; a parameter that does not parse is `invalid_query`
/// naming it, what it must be and what was sent (`from: must be an RFC 3339 time … (got
/// "yesterday")`).
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T> Query<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Query<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned> FromRequest for Query<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(parse_query(req.query_string()).map(Query))
    }
}

/// Parses a query string as `Query` does.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let deserializer =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let field = error.path().to_string();
        let inner = error.inner().to_string();
        let sent = form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| *name == field)
            .map(|(_, value)| value.into_owned());
        let message = match (std_parse_failure(&inner), sent) {
            (Some(expected), Some(sent)) => format!("must be {expected} (got `{sent}`)"),
            _ => describe(&inner),
        };
        ApiError {
            field: Some(field.clone()),
            ..ApiError::new(ErrorCode::InvalidQuery, format!("{field}: {message}"))
        }
    })
}

/// A time in a query string: RFC 3339, refused with an example of the form.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub chrono::DateTime<chrono::Utc>);

impl<'de> serde::Deserialize<'de> for Rfc3339 {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Time;

        impl serde::de::Visitor<'_> for Time {
            type Value = Rfc3339;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an RFC 3339 time such as 2026-11-01T00:00:00Z")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Rfc3339, E> {
                chrono::DateTime::parse_from_rfc3339(text)
                    .map(|time| Rfc3339(time.with_timezone(&chrono::Utc)))
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Str(text), &self))
            }
        }

        deserializer.deserialize_str(Time)
    }
}

/// What a number parameter must be, when the standard library refused its text.
fn std_parse_failure(message: &str) -> Option<&'static str> {
    match message {
        "invalid digit found in string"
        | "cannot parse integer from empty string"
        | "number too large to fit in target type"
        | "number too small to fit in target type" => Some("a whole number"),
        "invalid float literal" => Some("a number"),
        "provided string was not `true` or `false`" => Some("`true` or `false`"),
        _ => None,
    }
}

/// A deserializer's message in the API's words: what a field must be and what was sent,
/// with JSON's names for types (an object, an array), never a type of the server's own.
fn describe(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        return match rest.split_once("`, ") {
            Some((_, "there are no fields")) | None => "is not a known field".to_owned(),
            Some((_, expected)) => format!("is not a known field; {expected}"),
        };
    }
    if message.starts_with("missing field `") {
        return "is required".to_owned();
    }
    let mismatch = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "));
    if let Some((got, expected)) = mismatch.and_then(|rest| rest.split_once(", expected ")) {
        return format!("must be {} (got {})", json_terms(expected), json_terms(got));
    }
    let variant = message.strip_prefix("unknown variant `");
    if let Some((got, expected)) = variant.and_then(|rest| rest.split_once("`, expected ")) {
        return format!("must be {expected} (got `{got}`)");
    }
    message.to_owned()
}

/// serde's name for an expected type, in JSON's terms.
fn json_terms(expected: &str) -> &str {
    match expected {
        "a map" | "map" => "an object",
        "string or map" => "a string or an object",
        "a sequence" | "sequence" => "an array",
        "unit value" => "null",
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative whole number",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "a boolean" | "bool" => "true or false",
        other if other.starts_with("struct ") || other.contains("tagged enum") => "an object",
        other if other.starts_with("tuple") => "an array",
        other => other,
    }
}

/// Path parameters that do not parse name nothing that exists.
pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|_error: PathError, _req: &HttpRequest| {
        ApiError::new(ErrorCode::NotFound, "not found").into()
    })
}

/// Deserializes a JSON document into `T`, naming the path of the first field that does not
/// fit (`agent.options.model: must be a string (got integer `1`)`).
pub fn parse_json<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let message = error.inner().to_string();
        // serde reports a missing field at its parent; name the field itself.
        let missing = message.strip_prefix("missing field `");
        let named = missing.and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), named) {
            (".", Some(name)) => name.to_owned(),
            (".", None) => "body".to_owned(),
            (_, Some(name)) => format!("{path}.{name}"),
            (_, None) => path,
        };
        let message = match missing {
            Some(_) => "is required".to_owned(),
            None => describe(&message),
        };
        ApiError::invalid(field, message)
    })
}

/// A body that may be empty (then `T::default()`), else JSON parsed as `parse_json` does.
pub fn parse_optional_json<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("request body is not valid JSON: {e}"),
        )
    })?;
    parse_json(value)
}
