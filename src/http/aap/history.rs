//! `GET /sessions/{id}/history?type=full|compacted`.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::session_id;
use super::wire::{HistoryResponse, aap_history};
use crate::app::AppState;
use crate::auth::TenantAuth;
use crate::config::HistoryType;
use crate::error::{ApiError, ErrorCode, OrNotFound};

#[derive(Deserialize)]
pub struct HistoryQuery {
    #[serde(rename = "type")]
    kind: Option<String>,
}

pub async fn get_history(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<HistoryQuery>,
) -> Result<HttpResponse, ApiError> {
    let kind = match query.kind.as_deref() {
        Some("full") => HistoryType::Full,
        Some("compacted") => HistoryType::Compacted,
        Some(other) => {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("type: unknown history type `{other}`; expected full or compacted"),
            ));
        }
        None => {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                "type: required; one of full, compacted",
            ));
        }
    };
    let id = session_id(&path)?;
    let session = state
        .store
        .get_session(&auth.tenant_id, &id)
        .await
        .or_not_found("session")?;
    let declared = state
        .agents
        .get(&session.agent)
        .is_some_and(|agent| agent.declares_history(kind));
    if !declared {
        return Err(ApiError::not_found(&format!(
            "{} history of agent `{}`",
            kind.as_str(),
            session.agent
        )));
    }
    let messages = state.store.list_history(&auth.tenant_id, &id, kind).await?;
    Ok(HttpResponse::Ok().json(HistoryResponse {
        history: BTreeMap::from([(kind.as_str(), aap_history(messages))]),
    }))
}
