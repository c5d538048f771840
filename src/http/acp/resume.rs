//! `POST /acp/runs/{id}`: an awaiting run's calls answered in a new turn of the run.
//! The resume message's parts carry the answers: `/tool_results/<id>` (the result) and
//! `/tool_permissions/<id>` (`{"granted": bool, "reason"?: string}`).

use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::convert::{parse_part, parts_of};
use super::error::AcpError;
use super::render::{TOOL_PERMISSIONS, TOOL_RESULTS};
use super::replay::{Cursor, load_run};
use super::runs::{parse_body, parse_mode, respond};
use super::wire::{ErrorObject as AcpErrorBody, RunObject, RunStatus};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::{EngineError, InputMessage, PendingCall, TurnRequest};
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{Content, ContentBlock, ContentEncoding, Part, StreamMode};

/// `POST /acp/runs/{id}`: answers an awaiting run's calls in a new turn of the run.
#[utoipa::path(post, path = "/acp/runs/{run_id}", tag = "ACP", operation_id = "acp_resume_run",
    security(("tenant" = [])),
    params(("run_id" = String, Path, description = "A run id: its UUID, or `run_…`")),
    request_body = crate::http::openapi::schemas::AcpRunResumeRequest,
    responses(
        (status = 200, description = "`sync`: the run once it stopped again; `stream`: its events as SSE",
            content((RunObject = "application/json"), (crate::http::openapi::schemas::AcpStream = "text/event-stream"))),
        (status = 202, description = "`async`: the run as it resumed", body = RunObject),
        (status = 403, description = "The run does not await answers", body = AcpErrorBody),
        (status = 400, description = "The session ids disagree, or the body cannot be read", body = AcpErrorBody),
        (status = 404, description = "No such agent, session or run", body = AcpErrorBody),
        (status = 409, description = "The session is running another turn", body = AcpErrorBody),
        (status = 422, description = "The body is not a valid request", body = AcpErrorBody),
        (status = 429, description = "Too many turns are waiting", body = AcpErrorBody),
        (status = 503, description = "The server is shutting down", body = AcpErrorBody),
    ))]
pub async fn resume_run(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let id = path.into_inner();
    let run = load_run(&state, &tenant, &id).await?;
    let request = parse_body(body)?;
    let mode = parse_mode(&request)?;
    let message = match request.get("await_resume") {
        Some(Value::Object(resume)) => match resume.get("type") {
            None | Some(Value::Null) => resume.get("message"),
            Some(Value::String(kind)) if kind == "message" => resume.get("message"),
            Some(_) => {
                return Err(AcpError::invalid(
                    "await_resume.type",
                    "only `message` resumes are known",
                ));
            }
        },
        _ => None,
    }
    .filter(|m| m.is_object())
    .ok_or_else(|| AcpError::invalid("await_resume.message", "is required"))?;
    // As the reference: the body is checked first, then whether the run awaits.
    let not_awaiting = |status: crate::model::RunStatus| {
        AcpError::forbidden(
            "run_not_awaiting",
            format!(
                "Run {id} has no await request (its status is {})",
                RunStatus::from(status)
            ),
        )
    };
    if run.status != crate::model::RunStatus::Awaiting {
        return Err(not_awaiting(run.status));
    }
    let session = state
        .engine()
        .get_session(&tenant, &run.session_id)
        .await
        .map_err(AcpError::from)?;
    let agent = state
        .engine()
        .agent_of(&session)
        .await?
        .ok_or_else(|| AcpError::from(EngineError::AgentUnavailable))?;
    let pending = state
        .engine()
        .pending_tool_calls(&tenant, &run.session_id)
        .await?;
    let answers = parse_resume(message, &pending, |name| agent.has_server_tool(name))?;
    let (run, started) = state
        .engine()
        .resume_run(
            &tenant,
            &run.id,
            TurnRequest {
                agent_name: None,
                agent: SessionConfigRequest::default(),
                messages: answers,
                stream: StreamMode::Delta,
                idempotency_key: None,
                fingerprint: TurnRequest::fingerprint_of(&Value::Object(request.clone())),
            },
        )
        .await
        .map_err(|e| match e {
            EngineError::Invalid(field) => AcpError::invalid("await_resume.message", field.message),
            EngineError::RunNotAwaiting(status) => not_awaiting(status),
            other => other.into(),
        })?;
    let turn = started.turn.id;
    respond(&state, &run, started, mode, Cursor::Turn(turn)).await
}

/// A resume message's parts as answers to the pending calls: `/tool_results/<id>` (the
/// result) and `/tool_permissions/<id>` (`{"granted": bool, "reason"?: string}`). A
/// message that names no answer answers the one pending client call with its text.
pub fn parse_resume(
    message: &Value,
    pending: &[PendingCall],
    is_server_tool: impl Fn(&str) -> bool,
) -> Result<Vec<InputMessage>, AcpError> {
    let at = "await_resume.message";
    let mut answers = Vec::new();
    let mut others = Vec::new();
    for (j, part) in parts_of(message, at)?.iter().enumerate() {
        let at = format!("{at}.parts[{j}]");
        let part = parse_part(part, &at)?;
        let name = part.name.clone().unwrap_or_default();
        if let Some(id) = name.strip_prefix(TOOL_RESULTS) {
            answers.push(InputMessage::ToolResult {
                tool_call_id: id.to_owned(),
                content: result_content(part),
            });
        } else if let Some(id) = name.strip_prefix(TOOL_PERMISSIONS) {
            let answer: Value = part
                .content
                .as_deref()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or(Value::Null);
            let granted = answer
                .get("granted")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    AcpError::invalid(
                        format!("{at} (`{name}`)"),
                        "a permission is JSON {\"granted\": true|false, \"reason\"?: \"…\"}",
                    )
                })?;
            answers.push(InputMessage::ToolPermission {
                tool_call_id: id.to_owned(),
                granted,
                reason: answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        } else {
            others.push((at, part));
        }
    }
    if answers.is_empty() {
        return match (pending, others.as_slice()) {
            ([call], parts) if !is_server_tool(&call.name) => {
                let text: String = parts
                    .iter()
                    .filter_map(|(_, p)| p.content.as_deref())
                    .collect();
                Ok(vec![InputMessage::ToolResult {
                    tool_call_id: call.id.clone(),
                    content: Content::Text(text),
                }])
            }
            _ => Err(AcpError::invalid(
                at,
                format!(
                    "answer each awaited call with a part named {TOOL_RESULTS}<id> (a result) \
                     or {TOOL_PERMISSIONS}<id> (a permission)"
                ),
            )),
        };
    }
    if let Some((at, _)) = others.first() {
        return Err(AcpError::invalid(
            at.clone(),
            format!("a resume carries only {TOOL_RESULTS}<id> and {TOOL_PERMISSIONS}<id> parts"),
        ));
    }
    Ok(answers)
}

/// A result part as a tool message's content: its text, or the part itself.
fn result_content(part: Part) -> Content {
    match (&part.content, part.content_encoding, &part.content_url) {
        (Some(text), ContentEncoding::Plain, None) => Content::Text(text.clone()),
        _ => Content::Blocks(vec![ContentBlock::Part(Part { name: None, ..part })]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    #[test]
    fn resume_parts_answer_pending_calls() {
        let call = |id: &str, name: &str| PendingCall {
            id: id.into(),
            name: name.into(),
            input: Map::new(),
        };
        let message = json!({"parts": [
            {"name": "/tool_results/c1", "content": "sunny"},
            {"name": "tool_permissions/c2", "content_type": "application/json",
             "content": "{\"granted\": false, \"reason\": \"no\"}"}
        ]});
        let answers = parse_resume(
            &message,
            &[call("c1", "weather"), call("c2", "clock")],
            |n| n == "clock",
        )
        .unwrap();
        assert_eq!(
            answers,
            [
                InputMessage::ToolResult {
                    tool_call_id: "c1".into(),
                    content: Content::Text("sunny".into())
                },
                InputMessage::ToolPermission {
                    tool_call_id: "c2".into(),
                    granted: false,
                    reason: Some("no".into())
                }
            ]
        );
        let plain = json!({"parts": [{"content": "42"}]});
        let answers = parse_resume(&plain, &[call("c1", "weather")], |_| false).unwrap();
        assert_eq!(
            answers,
            [InputMessage::ToolResult {
                tool_call_id: "c1".into(),
                content: Content::Text("42".into())
            }]
        );
        assert!(parse_resume(&plain, &[call("a", "x"), call("b", "y")], |_| false).is_err());
    }
}
