//! `/schedules`: a tenant's schedules, each an agent started on a cron expression in a time
//! zone, and their run history. The admin API's `/admin/tenants/{tenant_id}/schedules`
//! routes answer the same way (see `admin/schedules.rs`), through the operations here.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::app::AppState;
use crate::engine::{NewSchedule, ScheduleError, SchedulePatch};
use crate::http::Query;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::pagination::{ListQuery, next_cursor};
use crate::http::{TenantAuth, parse_json};
use crate::model::{
    CatchUp, Content, FieldError, Occurrence, Overlap, Schedule, ScheduleId, ServerToolRef,
    SessionId, SessionPolicy, TenantId,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentIn {
    name: String,
    #[serde(default)]
    version: Option<i64>,
    #[serde(default)]
    tools: Option<Vec<ServerToolRef>>,
    #[serde(default)]
    options: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateSchedule {
    #[serde(default)]
    name: Option<String>,
    agent: AgentIn,
    cron: String,
    #[serde(default)]
    time_zone: Option<String>,
    input: Content,
    #[serde(default)]
    session_policy: Option<String>,
    #[serde(default)]
    overlap: Option<String>,
    #[serde(default)]
    catch_up: Option<String>,
    #[serde(default)]
    catch_up_limit: Option<u32>,
    #[serde(default)]
    starts_at: Option<DateTime<Utc>>,
    #[serde(default)]
    ends_at: Option<DateTime<Utc>>,
    #[serde(default)]
    enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateSchedule {
    #[serde(default, deserialize_with = "present")]
    name: Option<Option<String>>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    input: Option<Content>,
    #[serde(default)]
    overlap: Option<String>,
    #[serde(default)]
    catch_up: Option<String>,
    #[serde(default)]
    catch_up_limit: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    starts_at: Option<Option<DateTime<Utc>>>,
    #[serde(default, deserialize_with = "present")]
    ends_at: Option<Option<DateTime<Utc>>>,
    #[serde(default)]
    enabled: Option<bool>,
}

/// A field that is present, `null` or not.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A schedule as the API shows it.
#[derive(Serialize)]
struct ScheduleView {
    id: ScheduleId,
    name: Option<String>,
    agent: AgentView,
    cron: String,
    time_zone: String,
    input: Content,
    session_policy: SessionPolicy,
    session_id: Option<SessionId>,
    overlap: Overlap,
    catch_up: CatchUp,
    catch_up_limit: u32,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    enabled: bool,
    paused_reason: Option<String>,
    next_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Serialize)]
struct AgentView {
    name: String,
    version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ServerToolRef>>,
    options: BTreeMap<String, String>,
}

impl From<Schedule> for ScheduleView {
    fn from(s: Schedule) -> Self {
        ScheduleView {
            id: s.id,
            name: s.name,
            agent: AgentView {
                name: s.agent,
                version: s.agent_version,
                tools: s.server_tools,
                options: s.options,
            },
            cron: s.cron,
            time_zone: s.time_zone,
            input: s.input,
            session_policy: s.session_policy,
            session_id: s.session_id,
            overlap: s.overlap,
            catch_up: s.catch_up,
            catch_up_limit: s.catch_up_limit,
            starts_at: s.starts_at,
            ends_at: s.ends_at,
            enabled: s.enabled,
            paused_reason: s.paused_reason,
            next_at: s.next_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

#[derive(Serialize)]
struct ScheduleList {
    schedules: Vec<ScheduleView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

#[derive(Serialize)]
struct RunList {
    runs: Vec<Occurrence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

impl From<ScheduleError> for ApiError {
    fn from(error: ScheduleError) -> Self {
        match error {
            ScheduleError::Invalid(field) => field.into(),
            ScheduleError::NotFound(what) => ApiError::not_found(what),
            ScheduleError::TooMany(_) => ApiError::new(ErrorCode::Conflict, error.to_string()),
            ScheduleError::Engine(engine) => engine.into(),
            ScheduleError::Store(store) => store.into(),
        }
    }
}

fn schedule_id(raw: &str) -> Result<ScheduleId, ApiError> {
    raw.parse().map_err(|_| ApiError::not_found("schedule"))
}

/// A policy's name read into its type, naming the field and its choices when it is not one.
fn choice<T: std::str::FromStr>(
    field: &str,
    value: Option<String>,
    choices: &str,
) -> Result<Option<T>, FieldError> {
    value
        .map(|v| {
            v.parse()
                .map_err(|_| FieldError::new(field, format!("must be one of {choices}")))
        })
        .transpose()
}

/// The operations behind both the tenant's and the admin's routes, once the tenant is known.
pub(super) mod ops {
    use super::*;

    pub async fn create(
        state: &AppState,
        tenant: &TenantId,
        body: Value,
    ) -> Result<HttpResponse, ApiError> {
        let request: CreateSchedule = parse_json(body)?;
        let new = NewSchedule {
            name: request.name,
            agent: request.agent.name,
            agent_version: request.agent.version,
            server_tools: request.agent.tools,
            options: request.agent.options.unwrap_or_default(),
            cron: request.cron,
            time_zone: request.time_zone.unwrap_or_else(|| "UTC".into()),
            input: request.input,
            session_policy: choice("session_policy", request.session_policy, "new, fixed")?
                .unwrap_or(SessionPolicy::New),
            overlap: choice("overlap", request.overlap, "skip, queue")?.unwrap_or(Overlap::Skip),
            catch_up: choice("catch_up", request.catch_up, "none, latest, up_to")?
                .unwrap_or(CatchUp::Latest),
            catch_up_limit: request.catch_up_limit.unwrap_or(1),
            starts_at: request.starts_at,
            ends_at: request.ends_at,
            enabled: request.enabled.unwrap_or(true),
        };
        let schedule = state.schedules().create(tenant, new).await?;
        tracing::info!(tenant_id = %tenant, schedule_id = %schedule.id, "schedule created");
        Ok(HttpResponse::Created().json(ScheduleView::from(schedule)))
    }

    pub async fn list(
        state: &AppState,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<HttpResponse, ApiError> {
        let cursor = query.cursor()?;
        let (schedules, more) = state.schedules().list(tenant, cursor.page()).await?;
        let next = next_cursor(&schedules, more, |s| s.id.to_string());
        Ok(HttpResponse::Ok().json(ScheduleList {
            schedules: schedules.into_iter().map(ScheduleView::from).collect(),
            next,
        }))
    }

    pub async fn get(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
    ) -> Result<HttpResponse, ApiError> {
        let schedule = state.schedules().get(tenant, &schedule_id(id)?).await?;
        Ok(HttpResponse::Ok().json(ScheduleView::from(schedule)))
    }

    pub async fn update(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
        body: Value,
    ) -> Result<HttpResponse, ApiError> {
        let id = schedule_id(id)?;
        let request: UpdateSchedule = parse_json(body)?;
        let patch = SchedulePatch {
            name: request.name,
            cron: request.cron,
            time_zone: request.time_zone,
            input: request.input,
            overlap: choice("overlap", request.overlap, "skip, queue")?,
            catch_up: choice("catch_up", request.catch_up, "none, latest, up_to")?,
            catch_up_limit: request.catch_up_limit,
            starts_at: request.starts_at,
            ends_at: request.ends_at,
            enabled: request.enabled,
        };
        let schedule = state.schedules().update(tenant, &id, patch).await?;
        tracing::info!(tenant_id = %tenant, schedule_id = %id, "schedule updated");
        Ok(HttpResponse::Ok().json(ScheduleView::from(schedule)))
    }

    pub async fn delete(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
    ) -> Result<HttpResponse, ApiError> {
        let id = schedule_id(id)?;
        state.schedules().delete(tenant, &id).await?;
        tracing::info!(tenant_id = %tenant, schedule_id = %id, "schedule deleted");
        Ok(HttpResponse::NoContent().finish())
    }

    pub async fn run(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
    ) -> Result<HttpResponse, ApiError> {
        let id = schedule_id(id)?;
        let run = state.schedules().run_now(tenant, &id).await?;
        tracing::info!(tenant_id = %tenant, schedule_id = %id, occurrence_id = %run.id, "schedule run now");
        Ok(HttpResponse::Accepted().json(run))
    }

    pub async fn list_runs(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
        query: &ListQuery,
    ) -> Result<HttpResponse, ApiError> {
        let id = schedule_id(id)?;
        let cursor = query.cursor()?;
        let (runs, more) = state
            .schedules()
            .list_runs(tenant, &id, cursor.page())
            .await?;
        let next = next_cursor(&runs, more, |r| r.id.to_string());
        Ok(HttpResponse::Ok().json(RunList { runs, next }))
    }
}

#[utoipa::path(post, path = "/schedules", tag = "schedules", operation_id = "create_schedule",
    security(("tenant" = [])),
    request_body = crate::http::openapi::schedule_schemas::CreateSchedule,
    responses(
        (status = 201, description = "The schedule, with its next occurrence", body = crate::http::openapi::schedule_schemas::ScheduleView),
        (status = 400, description = "A field is wrong (named in `field`): the cron expression, its time zone, an expression firing more often than `schedules.min_interval_seconds`, the agent, an option, a policy", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The tenant has as many schedules as allowed (`schedules.max_per_tenant`)", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn create_schedule(
    auth: TenantAuth,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    ops::create(&state, &auth.tenant_id, body.into_inner()).await
}

#[utoipa::path(get, path = "/schedules", tag = "schedules", operation_id = "list_schedules",
    security(("tenant" = [])),
    params(crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The tenant's schedules, newest first, a page at a time", body = crate::http::openapi::schedule_schemas::ScheduleList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_schedules(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    ops::list(&state, &auth.tenant_id, &query).await
}

#[utoipa::path(get, path = "/schedules/{schedule_id}", tag = "schedules", operation_id = "get_schedule",
    security(("tenant" = [])),
    params(("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    responses(
        (status = 200, description = "The schedule", body = crate::http::openapi::schedule_schemas::ScheduleView),
        (status = 404, description = "No such schedule", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_schedule(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::get(&state, &auth.tenant_id, &path).await
}

#[utoipa::path(patch, path = "/schedules/{schedule_id}", tag = "schedules", operation_id = "update_schedule",
    security(("tenant" = [])),
    params(("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    request_body = crate::http::openapi::schedule_schemas::UpdateSchedule,
    responses(
        (status = 200, description = "The schedule after the change, its next occurrence computed again", body = crate::http::openapi::schedule_schemas::ScheduleView),
        (status = 400, description = "A field is wrong (named in `field`)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such schedule", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn update_schedule(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    ops::update(&state, &auth.tenant_id, &path, body.into_inner()).await
}

#[utoipa::path(delete, path = "/schedules/{schedule_id}", tag = "schedules", operation_id = "delete_schedule",
    security(("tenant" = [])),
    params(("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    responses(
        (status = 204, description = "Deleted, with its run history; turns it started run on"),
        (status = 404, description = "No such schedule", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn delete_schedule(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::delete(&state, &auth.tenant_id, &path).await
}

#[utoipa::path(post, path = "/schedules/{schedule_id}/run", tag = "schedules", operation_id = "run_schedule",
    security(("tenant" = [])),
    params(("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    responses(
        (status = 202, description = "The occurrence (kind `manual`): started, waiting, or not started with its reason", body = crate::http::openapi::schedule_schemas::ScheduleRun),
        (status = 404, description = "No such schedule", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn run_schedule(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::run(&state, &auth.tenant_id, &path).await
}

#[utoipa::path(get, path = "/schedules/{schedule_id}/runs", tag = "schedules", operation_id = "list_schedule_runs",
    security(("tenant" = [])),
    params(("schedule_id" = String, Path, description = "A schedule id (`sched_…`)"), crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The schedule's occurrences, newest first, a page at a time", body = crate::http::openapi::schedule_schemas::ScheduleRunList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such schedule", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_schedule_runs(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    ops::list_runs(&state, &auth.tenant_id, &path, &query).await
}
