//! `POST /acp/runs/{id}/cancel`.

use actix_web::{HttpResponse, web};

use super::error::AcpError;
use super::replay::{load_run, replay};
use super::wire::RunStatus;
use crate::app::AppState;
use crate::engine::EngineError;
use crate::error::ApiError;
use crate::http::TenantAuth;

/// `POST /acp/runs/{id}/cancel`: stops a created or running run; an awaiting one ends
/// with its pending calls answered as cancelled, so the session can go on. 403 for a run
/// that already ended.
pub async fn cancel_run(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let run = load_run(&state, &tenant, &path).await?;
    let run = match state.engine.cancel_run(&tenant, &run.id).await {
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
