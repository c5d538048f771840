//! The Agent Application Protocol v3 face, served at the root.

pub mod events;
pub mod history;
pub mod log;
pub mod meta;
pub mod parts;
mod render;
pub mod sessions;
pub mod turns;
pub(in crate::http) mod wire;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;

use crate::app::AppState;
use crate::engine::SessionRef;
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{Session, SessionId, TenantId};

/// Parses a session id from the path; one that cannot exist is simply not found.
fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    let id = raw.parse().map_err(|_| ApiError::not_found("session"))?;
    crate::telemetry::record_session(&id);
    Ok(id)
}

/// The calling tenant's session that the path's `{session_id}` names. A session that does
/// not exist, or is another tenant's, is AAP's 404; the caller is authenticated first.
pub struct PathSession {
    pub tenant: TenantId,
    pub session: Session,
}

impl FromRequest for PathSession {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let auth = TenantAuth::from_request(req, payload);
        let state = req
            .app_data::<web::Data<AppState>>()
            .cloned()
            .expect("AppState is registered with the app");
        let raw = req
            .match_info()
            .get("session_id")
            .unwrap_or_default()
            .to_owned();
        Box::pin(async move {
            let tenant = auth.await?.tenant_id;
            let id = session_id(&raw)?;
            let session = state
                .engine()
                .find_session(&tenant, &SessionRef::Id(id))
                .await?
                .ok_or_else(|| ApiError::not_found("session"))?;
            Ok(PathSession { tenant, session })
        })
    }
}
