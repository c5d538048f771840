//! The one error type of the HTTP API: a stable code, a message, and for validation
//! errors the field at fault. Every rejection, extractor failures included, renders as
//! `{"error": {"code", "message", "field"?}}`.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::engine::StoreError;
use crate::model::{FieldError, Quota, QuotaExceeded};

/// Every error code the API returns, and its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidRequest,
    InvalidJson,
    InvalidQuery,
    MissingToken,
    InvalidToken,
    InvalidCredentials,
    Forbidden,
    TenantSuspended,
    NotFound,
    MethodNotAllowed,
    Conflict,
    SessionBusy,
    SessionFull,
    RunNotAwaiting,
    RunEnded,
    IdempotencyKeyReused,
    /// `If-Match` names an entity tag the resource no longer has: nothing was changed.
    PreconditionFailed,
    QueueFull,
    QuotaExceeded,
    TooManyRequests,
    TooManyStreams,
    RequestTimeout,
    HeadersTooLarge,
    ShuttingDown,
    PayloadTooLarge,
    UnsupportedMediaType,
    Internal,
    NotImplemented,
    Unavailable,
    /// The database's storage is full: nothing was stored.
    InsufficientStorage,
    /// The database cannot be reached or cannot write now: nothing was stored.
    DatabaseUnavailable,
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(code)) => f.write_str(&code),
            _ => write!(f, "{self:?}"),
        }
    }
}

impl ErrorCode {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidRequest | ErrorCode::InvalidJson | ErrorCode::InvalidQuery => {
                StatusCode::BAD_REQUEST
            }
            ErrorCode::MissingToken | ErrorCode::InvalidToken | ErrorCode::InvalidCredentials => {
                StatusCode::UNAUTHORIZED
            }
            ErrorCode::Forbidden | ErrorCode::TenantSuspended => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Conflict
            | ErrorCode::SessionBusy
            | ErrorCode::SessionFull
            | ErrorCode::RunNotAwaiting
            | ErrorCode::RunEnded => StatusCode::CONFLICT,
            ErrorCode::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            ErrorCode::QueueFull
            | ErrorCode::QuotaExceeded
            | ErrorCode::TooManyRequests
            | ErrorCode::TooManyStreams => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            ErrorCode::Unavailable | ErrorCode::DatabaseUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub field: Option<String>,
    /// Seconds after which a retry may succeed (`Retry-After`).
    pub retry_after: Option<u32>,
    /// The tenant quota that refused the request, named in the body and the RateLimit
    /// headers.
    pub quota: Option<QuotaExceeded>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: ErrorCode,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quota: Option<Quota>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            quota: None,
        }
    }

    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// A 400 `invalid_request` naming the field at fault.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field}: {}", message.into());
        Self {
            code: ErrorCode::InvalidRequest,
            message,
            field: Some(field),
            retry_after: None,
            quota: None,
        }
    }

    /// A 429 `quota_exceeded` naming the tenant's quota, with `Retry-After`.
    pub fn quota_exceeded(refusal: QuotaExceeded) -> Self {
        Self {
            quota: Some(refusal),
            ..Self::new(ErrorCode::QuotaExceeded, refusal.to_string())
                .retry_after(u32::try_from(refusal.retry_after).unwrap_or(u32::MAX))
        }
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    /// Logs the whole cause chain once and answers an opaque 500.
    pub fn internal(error: impl Into<anyhow::Error>) -> Self {
        let error = error.into();
        tracing::error!(error = format!("{error:#}"), "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }
}

impl From<FieldError> for ApiError {
    fn from(error: FieldError) -> Self {
        ApiError::invalid(error.field, error.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => ApiError::new(ErrorCode::NotFound, "not found"),
            // The constraint's name stays in the logs of whoever logs it, never in a response.
            StoreError::Conflict(_) => ApiError::new(ErrorCode::Conflict, "already exists"),
            StoreError::Full(error) => {
                tracing::warn!(%error, "a write was refused: the database's storage is full");
                ApiError::new(
                    ErrorCode::InsufficientStorage,
                    "the database's storage is full: nothing was stored",
                )
                .retry_after(DATABASE_RETRY_AFTER)
            }
            StoreError::Unavailable(why) => {
                tracing::warn!(error = %why, "a request failed: the database is unavailable");
                ApiError::new(
                    ErrorCode::DatabaseUnavailable,
                    "the database is unavailable: nothing was stored; retry later",
                )
                .retry_after(DATABASE_RETRY_AFTER)
            }
            other => ApiError::internal(other),
        }
    }
}

/// The `Retry-After` of a request the database could not take, in seconds.
pub const DATABASE_RETRY_AFTER: u32 = 2;

/// Maps a `NotFound` (the database's or the engine's) to a 404 naming what was missing.
pub trait OrNotFound<T> {
    fn or_not_found(self, what: &str) -> Result<T, ApiError>;
}

impl<T> OrNotFound<T> for Result<T, StoreError> {
    fn or_not_found(self, what: &str) -> Result<T, ApiError> {
        self.map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found(what),
            other => other.into(),
        })
    }
}

impl<T> OrNotFound<T> for Result<T, crate::engine::EngineError> {
    fn or_not_found(self, what: &str) -> Result<T, ApiError> {
        use crate::engine::EngineError;
        self.map_err(|e| match e {
            EngineError::Store(StoreError::NotFound) | EngineError::NotFound(_) => {
                ApiError::not_found(what)
            }
            other => other.into(),
        })
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        if matches!(self.code, ErrorCode::MissingToken | ErrorCode::InvalidToken) {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if let Some(seconds) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        if let Some(refusal) = &self.quota {
            super::ratelimit::insert_refusal_headers(&mut response, refusal);
        }
        response.json(ErrorBody {
            error: ErrorObject {
                code: self.code,
                message: &self.message,
                field: self.field.as_deref(),
                quota: self.quota.map(|q| q.quota),
            },
        })
    }
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(error: crate::auth::AuthError) -> Self {
        use crate::auth::AuthError;
        match error {
            AuthError::Invalid(field) => field.into(),
            AuthError::NotFound(what) => ApiError::not_found(what),
            AuthError::Conflict(message) => ApiError::new(ErrorCode::Conflict, message),
            AuthError::InvalidCredentials => ApiError::new(
                ErrorCode::InvalidCredentials,
                "invalid client_id or client_secret",
            ),
            AuthError::TenantSuspended => {
                ApiError::new(ErrorCode::TenantSuspended, "this tenant is suspended")
            }
            AuthError::TooManyAttempts {
                message,
                retry_after,
            } => ApiError::new(ErrorCode::TooManyRequests, message).retry_after(retry_after),
            AuthError::Store(store) => store.into(),
            AuthError::Internal(what) => ApiError::internal(anyhow::anyhow!(what)),
        }
    }
}

impl From<crate::engine::EngineError> for ApiError {
    fn from(error: crate::engine::EngineError) -> Self {
        use crate::engine::EngineError;
        match error {
            EngineError::Invalid(field) => field.into(),
            EngineError::InvalidInput(input) => ApiError::invalid(input.field, input.reason),
            EngineError::NotFound(what) => ApiError::not_found(what),
            EngineError::Store(store) => store.into(),
            EngineError::Sealed(sealed) => ApiError::internal(sealed),
            EngineError::SessionBusy => ApiError::new(
                ErrorCode::SessionBusy,
                "the session is running another turn; retry when it ends",
            )
            .retry_after(1),
            full @ EngineError::SessionFull { .. } => ApiError::new(
                ErrorCode::SessionFull,
                format!("{full}; start a new session"),
            ),
            EngineError::IdempotencyMismatch => ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was already used with a different request body",
            ),
            EngineError::QueueFull => ApiError::new(
                ErrorCode::QueueFull,
                "too many turns are waiting; retry later",
            )
            .retry_after(1),
            EngineError::QuotaExceeded(refusal) => ApiError::quota_exceeded(refusal),
            EngineError::ShuttingDown => {
                ApiError::new(ErrorCode::ShuttingDown, "the server is shutting down").retry_after(5)
            }
            EngineError::AgentUnavailable => ApiError::new(
                ErrorCode::Conflict,
                "the session's agent is no longer configured on this server",
            ),
            EngineError::RunNotAwaiting(status) => ApiError::new(
                ErrorCode::RunNotAwaiting,
                format!("the run does not await answers (its status is {status})"),
            ),
            EngineError::HistoryMismatch => ApiError::invalid(
                "messages",
                "the messages before the last one are not this session's stored history; \
                 send only the new message, or the history as it is stored",
            ),
            EngineError::RunEnded(status) => ApiError::new(
                ErrorCode::RunEnded,
                format!("the run has ended (its status is {status})"),
            ),
            awaiting @ EngineError::AwaitingInput { .. } => {
                ApiError::invalid("messages", awaiting.to_string())
            }
            EngineError::WrongAgent { owner } => ApiError::invalid(
                "agent",
                format!("the session belongs to agent `{owner}`; a session's agent cannot change"),
            ),
            EngineError::NoAnswer => ApiError::invalid(
                "messages",
                "answer each pending call with its result or permission",
            ),
            EngineError::UnexpectedPart { part } => ApiError::invalid(
                format!("messages[0].content[{part}]"),
                "a resume carries answers, or the text that answers the single pending call",
            ),
        }
    }
}
