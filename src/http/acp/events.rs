//! `GET /acp/runs/{id}/events`.

use actix_web::{HttpRequest, HttpResponse, web};

use super::error::AcpError;
use super::replay::{Cursor, identity, load_run, replay, sse_response, stream};
use super::wire::{ErrorObject as AcpErrorBody, EventList};
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::cursor::ResumeFrom;
use crate::http::error::ApiError;
use crate::http::frame_id::FrameId;

/// `GET /acp/runs/{id}/events`: `{"events": [...]}` as the reference answers; with
/// `Accept: text/event-stream`, the events as SSE (replayed, then live until the run stops
/// or awaits). `?after=` or `Last-Event-ID` (a frame id, `3` or `3.1`) skip what a
/// client already has: the frames up to and including that one.
#[utoipa::path(get, path = "/acp/runs/{run_id}/events", tag = "ACP", operation_id = "acp_run_events",
    security(("tenant" = [])),
    params(("run_id" = String, Path, description = "A run id: its UUID, or `run_…`"),
        ("after" = Option<String>, Query, description = "Skip the frames up to and including this frame id (`3`, `3.1`)"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this frame (wins over `after`)")),
    responses(
        (status = 200, description = "The run's events; as SSE with `Accept: text/event-stream` (replayed, then live until the run stops or awaits)",
            content((EventList = "application/json"), (crate::http::openapi::schemas::AcpStream = "text/event-stream"))),
        (status = 404, description = "No such run of this tenant", body = AcpErrorBody),
        (status = 422, description = "A cursor that is not a frame id", body = AcpErrorBody),
    ))]
pub async fn run_events(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    resume: ResumeFrom,
    req: HttpRequest,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let run = load_run(&state, &tenant, &path).await?;
    let after = resume
        .parse::<FrameId>()
        .map_err(|bad| AcpError::invalid(bad.field, "must be a frame id (`3`, `3.1`)"))?
        .unwrap_or(FrameId::START);
    let wants_stream = req
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if wants_stream {
        let identity = identity(&state, &run).await?;
        let frames = stream(&state, &run, identity, None, Cursor::After(after));
        return Ok(sse_response(&state, frames).await);
    }
    let (_, events) = replay(&state, &run).await?;
    let events: Vec<_> = events
        .into_iter()
        .filter(|(id, _)| *id > after)
        .map(|(_, event)| event)
        .collect();
    Ok(HttpResponse::Ok().json(EventList { events }))
}
