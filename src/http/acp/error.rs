//! ACP's error body, `{code, message, data}`, for every rejection on this face: 400 and
//! 422 are `invalid_input`, 404 `not_found`, anything else `server_error`, as the
//! reference maps them, but 401, which is agentry's `missing_token` or `invalid_token`
//! (acp-sdk takes any code string). A request that fails validation is 422, as the reference answers
//! it. `data` carries agentry's own code (and the field at fault).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{Value, json};

use super::wire::ErrorObject;
use crate::engine::EngineError;
use crate::engine::StoreError;
use crate::http::error::ApiError;
use crate::model::{FieldError, QuotaExceeded};

#[derive(Debug, thiserror::Error)]
#[error("{status}: {message}")]
pub struct AcpError {
    pub status: StatusCode,
    pub message: String,
    pub data: Option<Value>,
    /// A tenant quota's refusal: `Retry-After` and the RateLimit headers.
    pub refusal: Option<QuotaExceeded>,
}

/// The reference's code for an HTTP status.
pub fn code_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "invalid_input",
        404 => "not_found",
        _ => "server_error",
    }
}

impl AcpError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            data: None,
            refusal: None,
        }
    }

    /// A 422 `invalid_input` naming what is at fault: the request failed validation.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: format!("{field}: {}", message.into()),
            data: Some(json!({"code": "invalid_request", "field": field})),
            refusal: None,
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("{} not found", what.into()))
    }

    /// The message with what the client can do about it appended (`…; the agents here: …`).
    pub fn hint(mut self, hint: &str) -> Self {
        self.message = format!("{}; {hint}", self.message);
        self
    }

    /// A 403 with agentry's reason in `data.code`.
    pub fn forbidden(code: &str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
            data: Some(json!({"code": code})),
            refusal: None,
        }
    }

    pub fn body(&self) -> ErrorObject {
        // The reference has no code for a refused token; agentry's own says what to fix.
        let unauthenticated = (self.status == StatusCode::UNAUTHORIZED).then(|| {
            match self.data.as_ref().and_then(|data| data["code"].as_str()) {
                Some("missing_token") => "missing_token",
                _ => "invalid_token",
            }
        });
        ErrorObject {
            code: unauthenticated.unwrap_or_else(|| code_for(self.status)),
            message: self.message.clone(),
            data: self.data.clone(),
        }
    }
}

impl ResponseError for AcpError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            response.insert_header(("WWW-Authenticate", "Bearer"));
        }
        if let Some(refusal) = &self.refusal {
            response.insert_header(("Retry-After", refusal.retry_after.to_string()));
            crate::http::ratelimit::insert_refusal_headers(&mut response, refusal);
        }
        response.json(self.body())
    }
}

impl From<ApiError> for AcpError {
    fn from(error: ApiError) -> Self {
        let status = error.code.status();
        let mut data = json!({"code": error.code});
        if let Some(field) = &error.field {
            data["field"] = json!(field);
        }
        if let Some(refusal) = &error.quota {
            data["quota"] = json!(refusal.quota);
        }
        Self {
            status,
            message: error.message,
            data: Some(data),
            refusal: error.quota,
        }
    }
}

impl From<EngineError> for AcpError {
    fn from(error: EngineError) -> Self {
        ApiError::from(error).into()
    }
}

impl From<StoreError> for AcpError {
    fn from(error: StoreError) -> Self {
        ApiError::from(error).into()
    }
}

impl From<FieldError> for AcpError {
    fn from(error: FieldError) -> Self {
        AcpError::invalid(error.field, error.message)
    }
}

/// Maps a `NotFound` (the database's or the engine's) to a 404 naming what was missing.
pub trait OrAcpNotFound<T> {
    fn or_acp_not_found(self, what: &str) -> Result<T, AcpError>;
}

impl<T> OrAcpNotFound<T> for Result<T, EngineError> {
    fn or_acp_not_found(self, what: &str) -> Result<T, AcpError> {
        self.map_err(|e| match e {
            e if e.is_not_found() => AcpError::not_found(what),
            other => other.into(),
        })
    }
}

impl<T> OrAcpNotFound<T> for Result<T, StoreError> {
    fn or_acp_not_found(self, what: &str) -> Result<T, AcpError> {
        self.map_err(|e| match e {
            StoreError::NotFound => AcpError::not_found(what),
            other => other.into(),
        })
    }
}
