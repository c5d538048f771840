//! A2A's errors: a JSON-RPC error object (`code`, `message`, `data` with a
//! `google.rpc.ErrorInfo`) or, over HTTP+JSON, a `google.rpc.Status` body with the matching
//! HTTP status. What A2A has no code for (authentication, quotas, overload, internal
//! failures) is refused at the HTTP layer, in the `google.rpc.Status` shape on both bindings.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{Value, json};

use super::version::Version;
use crate::engine::EngineError;
use crate::engine::StoreError;
use crate::http::error::{ApiError, ErrorCode};
use crate::model::FieldError;

/// The errors A2A defines, and JSON-RPC's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    TaskNotFound,
    TaskNotCancelable,
    UnsupportedOperation,
    ContentTypeNotSupported,
    VersionNotSupported,
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
}

impl Kind {
    pub fn code(self) -> i64 {
        match self {
            Kind::TaskNotFound => -32001,
            Kind::TaskNotCancelable => -32002,
            Kind::UnsupportedOperation => -32004,
            Kind::ContentTypeNotSupported => -32005,
            Kind::VersionNotSupported => -32009,
            Kind::ParseError => -32700,
            Kind::InvalidRequest => -32600,
            Kind::MethodNotFound => -32601,
            Kind::InvalidParams => -32602,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Kind::TaskNotFound => "TASK_NOT_FOUND",
            Kind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            Kind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            Kind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            Kind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            Kind::ParseError => "PARSE_ERROR",
            Kind::InvalidRequest => "INVALID_REQUEST",
            Kind::MethodNotFound => "METHOD_NOT_FOUND",
            Kind::InvalidParams => "INVALID_PARAMS",
        }
    }

    /// The HTTP status (v1.0.1) and gRPC status name of the REST binding.
    fn http(self) -> (StatusCode, &'static str) {
        match self {
            Kind::TaskNotFound => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            Kind::MethodNotFound => (StatusCode::NOT_FOUND, "UNIMPLEMENTED"),
            Kind::ParseError | Kind::InvalidRequest | Kind::InvalidParams => {
                (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT")
            }
            Kind::ContentTypeNotSupported => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            _ => (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    #[error("{message}")]
    Protocol {
        kind: Kind,
        message: String,
        /// The request field at fault, for invalid params.
        field: Option<String>,
    },
    /// Refused at the HTTP layer.
    #[error(transparent)]
    Http(ApiError),
}

impl A2aError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        A2aError::Protocol {
            kind,
            message: message.into(),
            field: None,
        }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        A2aError::Protocol {
            kind: Kind::InvalidParams,
            message: format!("{field}: {}", message.into()),
            field: Some(field),
        }
    }

    pub fn task_not_found(id: &str) -> Self {
        Self::new(Kind::TaskNotFound, format!("task {id} not found"))
    }

    pub fn version_not_supported(raw: &str) -> Self {
        // A version that parses reaches here only for a 1.0 method sent as 0.3.
        let message = if raw.trim().is_empty() {
            "this is an A2A 1.0 method and the request names no A2A version (none means \
             0.3): send the header `A2A-Version: 1.0` (or `?A2A-Version=1.0`)"
                .to_owned()
        } else if raw.trim() == "0.3" {
            format!(
                "this is an A2A 1.0 method and the request names version {raw}: send the \
                 header `A2A-Version: 1.0` (or `?A2A-Version=1.0`)"
            )
        } else {
            format!(
                "A2A version `{raw}` is not supported: send the header `A2A-Version` \
                 (or `?A2A-Version=`) with 1.0 or 0.3"
            )
        };
        Self::new(Kind::VersionNotSupported, message)
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(Kind::UnsupportedOperation, message)
    }

    /// The `google.rpc.ErrorInfo` (and `BadRequest`) details.
    fn details(kind: Kind, field: Option<&str>, message: &str) -> Vec<Value> {
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": kind.reason(),
            "domain": "a2a-protocol.org",
        })];
        if let Some(field) = field {
            details[0]["metadata"] = json!({ "field": field });
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": message}],
            }));
        }
        details
    }

    /// The JSON-RPC error object, when A2A has a code for it (else the HTTP refusal).
    pub fn rpc_error(&self, version: Version) -> Option<Value> {
        let A2aError::Protocol {
            kind,
            message,
            field,
        } = self
        else {
            return None;
        };
        let mut error = json!({"code": kind.code(), "message": message});
        match version {
            Version::V1 => error["data"] = json!(Self::details(*kind, field.as_deref(), message)),
            Version::V03 | Version::V03Rest => {
                if let Some(field) = field {
                    error["data"] = json!({ "field": field });
                }
            }
        }
        Some(error)
    }
}

/// A `google.rpc.Status` body.
fn status_body(status: StatusCode, name: &str, message: &str, details: Vec<Value>) -> Value {
    let mut error = json!({"code": status.as_u16(), "status": name, "message": message});
    if !details.is_empty() {
        error["details"] = json!(details);
    }
    json!({ "error": error })
}

/// The gRPC status name of an HTTP-layer refusal.
fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 | 415 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 | 501 => "UNIMPLEMENTED",
        408 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

impl ResponseError for A2aError {
    fn status_code(&self) -> StatusCode {
        match self {
            A2aError::Protocol { kind, .. } => kind.http().0,
            A2aError::Http(error) => error.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            A2aError::Protocol {
                kind,
                message,
                field,
            } => {
                let (status, name) = kind.http();
                let details = Self::details(*kind, field.as_deref(), message);
                HttpResponse::build(status).json(status_body(status, name, message, details))
            }
            A2aError::Http(error) => {
                // agentry's headers (WWW-Authenticate, Retry-After, RateLimit), A2A's body.
                let status = error.status_code();
                let body = status_body(status, status_name(status), &error.message, Vec::new());
                let mut response = error.error_response().set_body(body.to_string());
                response.headers_mut().insert(
                    actix_web::http::header::CONTENT_TYPE,
                    actix_web::http::header::HeaderValue::from_static("application/json"),
                );
                response.map_into_boxed_body()
            }
        }
    }
}

impl From<ApiError> for A2aError {
    fn from(error: ApiError) -> Self {
        match error.code {
            ErrorCode::InvalidRequest | ErrorCode::InvalidQuery => A2aError::Protocol {
                kind: Kind::InvalidParams,
                message: error.message,
                field: error.field,
            },
            ErrorCode::InvalidJson => A2aError::new(Kind::ParseError, error.message),
            ErrorCode::NotFound => A2aError::new(Kind::TaskNotFound, error.message),
            _ => A2aError::Http(error),
        }
    }
}

impl From<FieldError> for A2aError {
    fn from(error: FieldError) -> Self {
        A2aError::invalid(error.field, error.message)
    }
}

impl From<StoreError> for A2aError {
    fn from(error: StoreError) -> Self {
        ApiError::from(error).into()
    }
}

impl From<EngineError> for A2aError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Invalid(field) => field.into(),
            EngineError::InvalidInput(input) => A2aError::invalid(input.field, input.reason),
            EngineError::NotFound(what) => {
                A2aError::new(Kind::TaskNotFound, format!("{what} not found"))
            }
            EngineError::SessionBusy => A2aError::unsupported(
                "the context is running another task; wait for it to stop, or cancel it",
            ),
            EngineError::RunNotAwaiting(status) => A2aError::unsupported(format!(
                "the task does not wait for input (its run is {status})"
            )),
            EngineError::RunEnded(status) => A2aError::new(
                Kind::TaskNotCancelable,
                format!("the task has ended (its run is {status})"),
            ),
            EngineError::AgentUnavailable => {
                A2aError::unsupported("the context's agent is no longer configured")
            }
            other => ApiError::from(other).into(),
        }
    }
}
