//! OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`, for every
//! rejection of the `/v1` face. `type` follows the status (`invalid_request_error` for 4xx
//! but 401, 403 and 429, `server_error` for 5xx); `code` is agentry's own error code, or
//! the code OpenAI's clients know for the case (`model_not_found`,
//! `previous_response_not_found`).

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::engine::{EngineError, StoreError};
use crate::http::error::ApiError;
use crate::model::{FieldError, QuotaExceeded};

#[derive(Debug, thiserror::Error)]
#[error("{status}: {message}")]
pub struct OpenAiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
    pub retry_after: Option<u32>,
    pub refusal: Option<QuotaExceeded>,
}

/// The error body (`{"error": {…}}`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = OpenAiErrorBody)]
pub struct ErrorBody {
    pub error: ErrorObject,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = OpenAiErrorObject)]
pub struct ErrorObject {
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `rate_limit_exceeded` or `server_error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl OpenAiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
            refusal: None,
        }
    }

    /// A 400 naming the parameter at fault.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        let param = param.into();
        Self {
            message: format!("{param}: {}", message.into()),
            param: Some(param),
            code: Some("invalid_request".into()),
            ..Self::new(StatusCode::BAD_REQUEST, "")
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message).code("not_found")
    }

    pub fn code(mut self, code: &str) -> Self {
        self.code = Some(code.to_owned());
        self
    }

    pub fn param(mut self, param: &str) -> Self {
        self.param = Some(param.to_owned());
        self
    }

    pub fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_exceeded",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorObject {
                message: self.message.clone(),
                kind: self.kind(),
                param: self.param.clone(),
                code: self.code.clone(),
            },
        }
    }
}

impl ResponseError for OpenAiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        if let Some(refusal) = &self.refusal {
            crate::http::ratelimit::insert_refusal_headers(&mut response, refusal);
        }
        response.json(self.body())
    }
}

impl From<ApiError> for OpenAiError {
    fn from(error: ApiError) -> Self {
        Self {
            status: error.code.status(),
            message: error.message,
            param: error.field,
            code: Some(error.code.to_string()),
            retry_after: error.retry_after,
            refusal: error.quota,
        }
    }
}

impl From<EngineError> for OpenAiError {
    fn from(error: EngineError) -> Self {
        ApiError::from(error).into()
    }
}

impl From<StoreError> for OpenAiError {
    fn from(error: StoreError) -> Self {
        ApiError::from(error).into()
    }
}

impl From<FieldError> for OpenAiError {
    fn from(error: FieldError) -> Self {
        OpenAiError::invalid(error.field, error.message)
    }
}

/// Any rejection actix makes before a handler runs, in this face's shape.
pub async fn not_found() -> Result<HttpResponse, OpenAiError> {
    Err(OpenAiError::not_found(
        "no such route: see /openapi.json for the /v1 routes",
    ))
}

pub async fn method_not_allowed() -> Result<HttpResponse, OpenAiError> {
    Err(OpenAiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this method is not allowed on this route",
    )
    .code("method_not_allowed"))
}
