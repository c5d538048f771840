//! `POST /acp/runs/{id}/cancel`.

use actix_web::{HttpResponse, web};

use super::error::AcpError;
use super::replay::{load_run, replay};
use super::wire::{ErrorObject as AcpErrorBody, RunObject, RunStatus};
use crate::app::AppState;
use crate::engine::EngineError;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

/// `POST /acp/runs/{id}/cancel`: stops a created or running run; an awaiting one ends
/// with its pending calls answered as cancelled, so the session can go on. 403 for a run
/// that already ended.
#[utoipa::path(post, path = "/acp/runs/{run_id}/cancel", tag = "ACP", operation_id = "acp_cancel_run",
    security(("tenant" = [])),
    params(("run_id" = String, Path, description = "A run id: its UUID, or `run_…`")),
    responses(
        (status = 202, description = "The run, cancelled", body = RunObject),
        (status = 403, description = "The run has already ended", body = AcpErrorBody),
        (status = 404, description = "No such run of this tenant", body = AcpErrorBody),
    ))]
pub async fn cancel_run(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let run = load_run(&state, &tenant, &path).await?;
    let run = match state.engine().cancel_run(&tenant, &run.id).await {
        Ok(run) => run,
        Err(EngineError::RunEnded(status)) => {
            return Err(AcpError::forbidden(
                "run_ended",
                format!(
                    "Run in terminal status {} can't be cancelled",
                    RunStatus::from(status)
                ),
            ));
        }
        Err(other) => return Err(other.into()),
    };
    let (renderer, _) = replay(&state, &run).await?;
    Ok(HttpResponse::Accepted().json(renderer.run()))
}
