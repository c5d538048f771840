//! `GET /sessions/{id}/parts?glob=…`: the named message parts of a session's history, the
//! message body's `list(glob)`, a page of the history at a time (`next` names the page
//! after it: a page may hold no part and still have a next).

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::PathSession;
use crate::app::AppState;
use crate::config::HistoryType;
use crate::http::Query;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::history_page::{HistoryPageQuery, next_cursor};
use crate::http::openapi::schemas as doc;
use crate::model::{ContentBlock, HistoryMessage, Part, PartGlob};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PartsQuery {
    /// Only parts whose name matches this glob (`*`, `**`, `{a,b}`).
    glob: Option<String>,
}

#[derive(Serialize, ToSchema)]
struct PartsResponse {
    parts: Vec<ListedPart>,
    /// The cursor (`after`) of the next page of the history; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ListedPart {
    /// The message's position in the full history.
    position: usize,
    /// `system`, `user`, `assistant` or `tool`.
    role: &'static str,
    #[serde(flatten)]
    part: Part,
}

#[utoipa::path(get, path = "/sessions/{session_id}/parts", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), PartsQuery, HistoryPageQuery),
    responses(
        (status = 200, description = "The named parts, in history order", body = PartsResponse),
        (status = 400, description = "A bad glob", body = doc::ErrorBody),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
    ))]
pub async fn list_parts(
    path: PathSession,
    state: web::Data<AppState>,
    query: Query<PartsQuery>,
    page: Query<HistoryPageQuery>,
) -> Result<HttpResponse, ApiError> {
    let (offset, limit) = page.resolve()?;
    let glob = match query.glob.as_deref() {
        None => None,
        Some(pattern) => Some(
            PartGlob::new(pattern)
                .map_err(|e| ApiError::new(ErrorCode::InvalidQuery, format!("glob: {e}")))?,
        ),
    };
    let (history, more) = state
        .engine()
        .history_page(
            &path.tenant,
            &path.session.id,
            HistoryType::Full,
            offset,
            limit,
            state.settings().limits.history_page_bytes,
        )
        .await?;
    let next = more.then(|| next_cursor(offset, history.len()));
    let parts = history
        .into_iter()
        .enumerate()
        .flat_map(|(i, message)| {
            let position = offset as usize + i;
            let role = match &message {
                HistoryMessage::System { .. } => "system",
                HistoryMessage::User { .. } => "user",
                HistoryMessage::Assistant { .. } => "assistant",
                HistoryMessage::Tool { .. } => "tool",
            };
            let parts: Vec<Part> = message
                .content()
                .map(|c| {
                    c.blocks()
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Part(part) if part.name.is_some() => Some(part.clone()),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            parts.into_iter().map(move |part| ListedPart {
                position,
                role,
                part,
            })
        })
        .filter(|listed| match (&glob, &listed.part.name) {
            (Some(glob), Some(name)) => glob.is_match(name),
            _ => true,
        })
        .collect();
    Ok(HttpResponse::Ok().json(PartsResponse { parts, next }))
}
