//! Request body, query and path extraction that fails with our JSON errors.

use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{HttpRequest, web};
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};

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

/// Path parameters that do not parse name nothing that exists.
pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|_error: PathError, _req: &HttpRequest| {
        ApiError::new(ErrorCode::NotFound, "not found").into()
    })
}

/// Deserializes a JSON document into `T`, naming the path of the first field that does not
/// fit (`agent.options.model: invalid type: integer, expected a string`).
pub fn parse_json<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let message = error.inner().to_string();
        // serde reports a missing field at its parent; name the field itself.
        let missing = message.strip_prefix("missing field `");
        let unknown = message.strip_prefix("unknown field `");
        let named = missing.and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), named) {
            (".", Some(name)) => name.to_owned(),
            (".", None) => "body".to_owned(),
            (_, Some(name)) => format!("{path}.{name}"),
            (_, None) => path,
        };
        let message = match (missing, unknown) {
            (Some(_), _) => "is required".to_owned(),
            (_, Some(_)) => format!("is not a known field ({message})"),
            _ => message,
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
