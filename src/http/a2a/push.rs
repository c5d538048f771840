//! Push notification configs of a task.

use serde_json::Value;

use super::error::{A2aError, Kind};
use super::ops::Call;
use super::params::Params;

fn not_supported() -> A2aError {
    A2aError::new(
        Kind::PushNotificationNotSupported,
        "push notifications are not supported",
    )
}

pub async fn create(_call: &Call, _params: Params) -> Result<Value, A2aError> {
    Err(not_supported())
}

pub async fn get(_call: &Call, _params: &Params) -> Result<Value, A2aError> {
    Err(not_supported())
}

pub async fn list(_call: &Call, _params: &Params) -> Result<Value, A2aError> {
    Err(not_supported())
}

pub async fn delete(_call: &Call, _params: &Params) -> Result<Value, A2aError> {
    Err(not_supported())
}
