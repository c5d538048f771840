//! `GET /sessions/{id}/history?type=full|compacted`.

use std::collections::BTreeMap;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use utoipa::IntoParams;

use super::PathSession;
use super::wire::{HistoryResponse, aap_history};
use crate::app::AppState;
use crate::config::HistoryType;
use crate::http::Query;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas as doc;
use crate::http::pagination;

/// Messages per page when a client names no `limit`, and the most it may ask for.
pub const DEFAULT_HISTORY_PAGE: u32 = 100;
pub const MAX_HISTORY_PAGE: u32 = 1000;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Which history: `full` or `compacted` (required).
    #[serde(rename = "type")]
    #[param(required = true, pattern = "^(full|compacted)$")]
    kind: Option<String>,
    /// Messages per page, 1 to 1000 (100 when omitted).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `next` cursor of the previous page.
    after: Option<String>,
}

/// A page of the session's history: `limit` messages (100 unless asked, at most 1000)
/// after the `after` cursor, and `next` (also as a `Link: <…>; rel="next"` header) when
/// more follow. A client that sends no cursor gets the first page.
#[utoipa::path(get, path = "/sessions/{session_id}/history", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), HistoryQuery),
    responses(
        (status = 200, description = "A page of the history", body = HistoryResponse,
            headers(("Link" = String, description = "`<…>; rel=\"next\"` when more follow"))),
        (status = 400, description = "A bad `type`, `limit` or `after`", body = doc::ErrorBody),
        (status = 404, description = "No such session, or its agent keeps no history of this type", body = doc::ErrorBody),
    ))]
pub async fn get_history(
    path: PathSession,
    state: web::Data<AppState>,
    query: Query<HistoryQuery>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let agent = state.engine().agent_of(&path.session).await?;
    let declared: Vec<&str> = [HistoryType::Full, HistoryType::Compacted]
        .into_iter()
        .filter(|kind| {
            agent
                .as_ref()
                .is_some_and(|agent| agent.declares_history(*kind))
        })
        .map(HistoryType::as_str)
        .collect();
    let refuse = |problem: String| ApiError {
        field: Some("type".to_owned()),
        ..ApiError::new(
            ErrorCode::InvalidQuery,
            format!(
                "type: {problem}; AAP requires `?type=full` or `?type=compacted` (this \
                 session's agent keeps: {})",
                declared.join(", ")
            ),
        )
    };
    let kind = match query.kind.as_deref() {
        Some("full") => HistoryType::Full,
        Some("compacted") => HistoryType::Compacted,
        Some(other) => return Err(refuse(format!("unknown history type `{other}`"))),
        None => return Err(refuse("is required".to_owned())),
    };
    let limit = query.limit.unwrap_or(DEFAULT_HISTORY_PAGE);
    if !(1..=MAX_HISTORY_PAGE).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("must be between 1 and {MAX_HISTORY_PAGE}"),
        ));
    }
    let offset = match query.after.as_deref() {
        None | Some("") => 0,
        Some(cursor) => pagination::decode(cursor)
            .and_then(|at| at.parse::<i64>().ok())
            .filter(|at| *at > 0)
            .ok_or_else(|| ApiError::invalid("after", "not a cursor this server issued"))?,
    };
    let PathSession { tenant, session } = path;
    let declared = agent.is_some_and(|agent| agent.declares_history(kind));
    if !declared {
        return Err(ApiError::not_found(&format!(
            "{} history of agent `{}`",
            kind.as_str(),
            session.agent
        )));
    }
    let (messages, more) = state
        .engine()
        .history_page(
            &tenant,
            &session.id,
            kind,
            offset,
            i64::from(limit),
            state.settings().limits.history_page_bytes,
        )
        .await?;
    let next = more.then(|| pagination::encode(&(offset + messages.len() as i64).to_string()));
    let mut response = HttpResponse::Ok();
    if let Some(next) = &next {
        let link = format!(
            "<{}?type={}&limit={limit}&after={next}>; rel=\"next\"",
            req.path(),
            kind.as_str()
        );
        response.insert_header((header::LINK, link));
    }
    Ok(response.json(HistoryResponse {
        history: BTreeMap::from([(kind.as_str(), aap_history(messages))]),
        next,
    }))
}
