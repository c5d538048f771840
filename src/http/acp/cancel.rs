//! `POST /acp/runs/{id}/cancel`.

use actix_web::{HttpResponse, web};

use super::error::AcpError;
use super::replay::{load_run, replay};
use super::wire::RunStatus;
use crate::app::AppState;
use crate::auth::TenantAuth;
use crate::error::ApiError;
use crate::model::{Content, HistoryMessage, TenantId};
use crate::store::AcpRun;

/// `POST /acp/runs/{id}/cancel`: stops a created or running run; an awaiting one ends
/// with its pending calls answered as cancelled, so the session can go on. 403 for a run
/// that already ended.
pub async fn cancel_run(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let id = path.into_inner();
    let run = load_run(&state, &tenant, &id).await?;
    let (renderer, _) = replay(&state, &run).await?;
    match renderer.status() {
        RunStatus::Created | RunStatus::InProgress => {
            state
                .engine
                .cancel_turn(&tenant, &run.session_id, run.last_turn())
                .await?;
        }
        RunStatus::Awaiting => cancel_awaiting(&state, &tenant, &run).await?,
        status => {
            return Err(AcpError::forbidden(
                "run_ended",
                format!("Run in terminal status {status} can't be cancelled"),
            ));
        }
    }
    let run = load_run(&state, &tenant, &id).await?;
    let (renderer, _) = replay(&state, &run).await?;
    Ok(HttpResponse::Accepted().json(renderer.run()))
}

async fn cancel_awaiting(
    state: &AppState,
    tenant: &TenantId,
    run: &AcpRun,
) -> Result<(), AcpError> {
    let pending = state
        .engine
        .pending_tool_calls(tenant, &run.session_id)
        .await?;
    let answers: Vec<HistoryMessage> = pending
        .iter()
        .map(|call| HistoryMessage::Tool {
            tool_call_id: call.id.clone(),
            content: Content::Text("Tool call cancelled: the client cancelled the run".into()),
        })
        .collect();
    state
        .store
        .cancel_awaiting_acp_run(tenant, run, crate::model::now(), &answers)
        .await?;
    Ok(())
}
