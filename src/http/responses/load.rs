//! A stored response: its turn, its session and its labels, and the Response object
//! rendered from its events.

use std::collections::HashSet;

use serde_json::Value;

use super::error::OpenAiError;
use super::ids::{parse_response_id, response_id};
use super::labels::ResponseLabels;
use super::render::{Identity, Renderer, function_tools};
use crate::app::AppState;
use crate::engine::Deltas;
use crate::model::{Session, TenantId, ToolSpec, Turn};

/// How many events one read of the log brings.
const PAGE: i64 = 1000;

pub struct Loaded {
    pub turn: Turn,
    pub session: Session,
    pub identity: Identity,
    pub labels: ResponseLabels,
}

pub fn response_not_found(id: &str) -> OpenAiError {
    OpenAiError::not_found(format!("No response with id '{id}' found."))
}

/// The tenant's response `id` names; another tenant's is not found.
pub async fn load(state: &AppState, tenant: &TenantId, id: &str) -> Result<Loaded, OpenAiError> {
    let turn = parse_response_id(id).ok_or_else(|| response_not_found(id))?;
    let turn = state
        .engine()
        .find_turn(tenant, &turn)
        .await?
        .ok_or_else(|| response_not_found(id))?;
    let session = match state.engine().get_session(tenant, &turn.session_id).await {
        Err(e) if e.is_not_found() => return Err(response_not_found(id)),
        other => other?,
    };
    let labels = ResponseLabels::from_map(state.engine().turn_labels(tenant, &turn.id).await?);
    if labels.deleted {
        return Err(response_not_found(id));
    }
    let identity = identity(&turn, &session, labels.clone(), None);
    Ok(Loaded {
        turn,
        session,
        identity,
        labels,
    })
}

/// Who the response is; `tools` overrides the session's client tools (a request that just
/// replaced them).
pub fn identity(
    turn: &Turn,
    session: &Session,
    labels: ResponseLabels,
    tools: Option<&[ToolSpec]>,
) -> Identity {
    let tools = tools.unwrap_or(&session.client_tools);
    let model = labels.model.unwrap_or_else(|| match session.agent_version {
        Some((_, version)) => format!("{}@{version}", session.agent),
        None => session.agent.clone(),
    });
    Identity {
        id: response_id(&turn.id),
        turn: turn.id,
        created_at: turn.created_at.timestamp(),
        model,
        background: labels.background,
        metadata: labels.metadata,
        previous_response_id: labels.previous_response_id,
        conversation: labels.conversation,
        tools: function_tools(tools),
        client_tools: tools.iter().map(|t| t.name.clone()).collect::<HashSet<_>>(),
    }
}

/// The Response object as the log has it now.
pub async fn snapshot(state: &AppState, loaded: &Loaded) -> Result<Value, OpenAiError> {
    let mut renderer = Renderer::new(loaded.identity.clone());
    let mut after = -1;
    loop {
        let events = state
            .engine()
            .list_events(
                &loaded.turn.tenant_id,
                &loaded.turn.session_id,
                Some(&loaded.turn.id),
                after,
                PAGE,
                Deltas::Merged,
            )
            .await?;
        for event in &events {
            renderer.render(event);
        }
        match events.last() {
            Some(last) if events.len() as i64 >= PAGE => after = last.seq,
            _ => break,
        }
    }
    renderer.settle(loaded.turn.status);
    Ok(renderer.snapshot())
}
