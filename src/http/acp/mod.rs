//! The ACP face (BeeAI Agent Communication Protocol), served under `/acp`: agents as
//! manifests, runs as chains of engine turns, sessions as agentry sessions, errors as
//! `{code, message, data}`.

pub mod agents;
pub mod cancel;
mod convert;
mod error;
pub mod events;
mod history;
mod render;
mod replay;
pub mod resume;
pub mod runs;
pub mod sessions;
pub(in crate::http) mod wire;

pub use error::AcpError;

/// Routes under `/acp` that do not exist: the ACP error body.
pub async fn not_found() -> Result<actix_web::HttpResponse, AcpError> {
    Err(AcpError::not_found("route"))
}

/// Known `/acp` routes asked with a method they do not take: the ACP error body.
pub async fn method_not_allowed() -> Result<actix_web::HttpResponse, AcpError> {
    Err(AcpError::new(
        actix_web::http::StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this route",
    ))
}
