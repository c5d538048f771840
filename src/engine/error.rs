//! What the engine can refuse, independent of any protocol's error shape.

use crate::model::FieldError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("secret options cannot be decrypted: {0}")]
    Sealed(#[from] crate::crypto::SealError),
}
