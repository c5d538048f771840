//! What the tenant, credential, token and login operations can refuse, independent of
//! HTTP: the HTTP layer maps each to its status and code.

use crate::model::FieldError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(String),
    #[error("invalid client_id or client_secret")]
    InvalidCredentials,
    #[error("this tenant is suspended")]
    TenantSuspended,
    /// Refused for now; worth trying again after `retry_after` seconds.
    #[error("{message}")]
    TooManyAttempts {
        message: &'static str,
        retry_after: u32,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(&'static str),
}

/// Maps a store `NotFound` to the thing that was missing.
pub(super) fn or_missing(what: &'static str) -> impl Fn(StoreError) -> AuthError {
    move |error| match error {
        StoreError::NotFound => AuthError::NotFound(what),
        other => AuthError::Store(other),
    }
}
