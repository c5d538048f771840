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
use crate::engine::{EngineError, InputMessage, ResumePart, TurnRequest};
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
    let parts = parse_resume(message)?;
    // As the reference: the body is checked first, then whether the run awaits.
    let (run, started) = state
        .engine()
        .resume_with(
            &tenant,
            &run,
            parts,
            TurnRequest {
                agent_name: None,
                agent: SessionConfigRequest::default(),
                messages: Vec::new(),
                stream: StreamMode::Delta,
                idempotency: None,
            },
        )
        .await
        .map_err(|e| match e {
            EngineError::RunNotAwaiting(status) => AcpError::forbidden(
                "run_not_awaiting",
                format!(
                    "Run {id} has no await request (its status is {})",
                    RunStatus::from(status)
                ),
            ),
            EngineError::NoAnswer => AcpError::invalid(
                "await_resume.message",
                format!(
                    "answer each awaited call with a part named {TOOL_RESULTS}<id> (a result) \
                     or {TOOL_PERMISSIONS}<id> (a permission)"
                ),
            ),
            EngineError::UnexpectedPart { part } => AcpError::invalid(
                format!("await_resume.message.parts[{part}]"),
                format!(
                    "a resume carries only {TOOL_RESULTS}<id> and {TOOL_PERMISSIONS}<id> parts, \
                     or the text that answers the single awaited call"
                ),
            ),
            EngineError::Invalid(field) => AcpError::invalid("await_resume.message", field.message),
            EngineError::InvalidInput(input) => {
                AcpError::invalid("await_resume.message", input.reason)
            }
            other => other.into(),
        })?;
    let turn = started.turn.id;
    respond(&state, &run, started, mode, Cursor::Turn(turn)).await
}

/// A resume message's parts: `/tool_results/<id>` (the result) and
/// `/tool_permissions/<id>` (`{"granted": bool, "reason"?: string}`) are answers, a part
/// with inline text is text, any other part neither; the engine resolves them against the
/// pending calls.
pub fn parse_resume(message: &Value) -> Result<Vec<ResumePart>, AcpError> {
    let at = "await_resume.message";
    let mut out = Vec::new();
    for (j, part) in parts_of(message, at)?.iter().enumerate() {
        let at = format!("{at}.parts[{j}]");
        let part = parse_part(part, &at)?;
        let name = part.name.clone().unwrap_or_default();
        if let Some(id) = name.strip_prefix(TOOL_RESULTS) {
            out.push(ResumePart::Answer(InputMessage::ToolResult {
                tool_call_id: id.to_owned(),
                content: result_content(part),
            }));
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
            out.push(ResumePart::Answer(InputMessage::ToolPermission {
                tool_call_id: id.to_owned(),
                granted,
                reason: answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            }));
        } else {
            out.push(
                match (&part.content, part.content_encoding, &part.content_url) {
                    (Some(text), ContentEncoding::Plain, None) => ResumePart::Text(text.clone()),
                    _ => ResumePart::Other,
                },
            );
        }
    }
    Ok(out)
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
    use serde_json::json;

    #[test]
    fn resume_parts_are_answers_text_or_neither() {
        let message = json!({"parts": [
            {"name": "/tool_results/c1", "content": "sunny"},
            {"name": "tool_permissions/c2", "content_type": "application/json",
             "content": "{\"granted\": false, \"reason\": \"no\"}"},
            {"content": "42"},
            {"content": "AAEC", "content_encoding": "base64"}
        ]});
        assert_eq!(
            parse_resume(&message).unwrap(),
            [
                ResumePart::Answer(InputMessage::ToolResult {
                    tool_call_id: "c1".into(),
                    content: Content::Text("sunny".into())
                }),
                ResumePart::Answer(InputMessage::ToolPermission {
                    tool_call_id: "c2".into(),
                    granted: false,
                    reason: Some("no".into())
                }),
                ResumePart::Text("42".into()),
                ResumePart::Other,
            ]
        );
        let unreadable = json!({"parts": [{"name": "/tool_permissions/c2", "content": "yes"}]});
        assert!(parse_resume(&unreadable).is_err());
    }
}
