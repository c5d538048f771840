//! `GET /runs`: the calling tenant's runs (ACP runs and A2A tasks: the engine keeps both as
//! runs), most recently changed first, each with its session, agent and turns.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::app::AppState;
use crate::engine::{RunCursor, RunFilter, ViewParts};
use crate::http::Query;
use crate::http::TenantAuth;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas as doc;
use crate::http::pagination;
use crate::model::{RunId, RunStatus};

const DEFAULT_LIMIT: u32 = 20;
const MAX_LIMIT: u32 = 100;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// The `next` cursor of the previous page.
    after: Option<String>,
    /// Runs per page, 1 to 100 (20 when omitted).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// Only runs in this status.
    #[param(value_type = Option<RunStatus>)]
    status: Option<String>,
}

/// A run as listed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    /// `run_…`: the ACP run id and the A2A task id.
    run_id: String,
    session_id: String,
    agent: String,
    status: RunStatus,
    /// Its turns, oldest first.
    turns: Vec<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    runs: Vec<RunInfo>,
    /// The cursor of the next page, absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

fn encode(cursor: &RunCursor) -> String {
    pagination::encode(&format!(
        "{}:{}",
        cursor.updated_at.timestamp_micros(),
        cursor.id
    ))
}

fn decode(raw: &str) -> Option<RunCursor> {
    let text = pagination::decode(raw)?;
    let (micros, id) = text.split_once(':')?;
    Some(RunCursor {
        updated_at: DateTime::from_timestamp_micros(micros.parse().ok()?)
            .filter(crate::model::is_storable)?,
        id: id.parse::<RunId>().ok()?,
    })
}

/// The tenant's runs, most recently changed first, a page at a time.
#[utoipa::path(get, path = "/runs", tag = "AAP",
    security(("tenant" = [])),
    params(RunsQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        (status = 400, description = "A bad `after`, `limit` or `status`", body = doc::ErrorBody),
    ))]
pub async fn list_runs(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: Query<RunsQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("limit: must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let cursor = match query.after.as_deref() {
        None | Some("") => None,
        Some(raw) => Some(decode(raw).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidQuery,
                "after: not a cursor this server issued",
            )
        })?),
    };
    let statuses = match query.status.as_deref() {
        None => Vec::new(),
        Some(name) => vec![name.parse::<RunStatus>().map_err(|_| {
            ApiError::new(
                ErrorCode::InvalidQuery,
                "status: must be one of created, running, awaiting, completed, failed, \
                 cancelled, interrupted",
            )
        })?],
    };
    let filter = RunFilter {
        agent: None,
        session: None,
        statuses,
        updated_since: None,
    };
    let tenant = auth.tenant_id;
    let (listed, _) = state
        .engine()
        .list_runs(&tenant, &filter, cursor, limit + 1)
        .await?;
    let more = listed.len() > limit as usize;
    let page = &listed[..listed.len().min(limit as usize)];
    // The page's runs and sessions: one read each, whatever the page's size.
    let ids: Vec<RunId> = page.iter().map(|item| item.id).collect();
    let views = state
        .engine()
        .run_views(&tenant, &ids, ViewParts::ROW)
        .await?;
    let runs: Vec<RunInfo> = views
        .into_iter()
        .map(|view| RunInfo {
            run_id: view.run.id.to_string(),
            session_id: view.run.session_id.to_string(),
            agent: view.session.agent,
            status: view.run.status,
            turns: view.run.turns.iter().map(ToString::to_string).collect(),
            created_at: view.run.created_at,
            updated_at: view.run.updated_at,
        })
        .collect();
    let next = match (more, page.last()) {
        (true, Some(last)) => Some(encode(&RunCursor {
            updated_at: last.updated_at,
            id: last.id,
        })),
        _ => None,
    };
    Ok(HttpResponse::Ok().json(RunList { runs, next }))
}
