//! Where a chat completion runs. Chat Completions clients send the whole conversation
//! every time, so the last user message (or the trailing tool results) is the turn's input
//! and the messages before it are the history the turn continues (the engine's
//! `split_input`, as the AgentScope face splits its input, with a client's several trailing
//! user messages kept as history but the last).
//!
//! - Without an `Agentry-Session` header each request opens a new session of the agent
//!   `model` names, seeded with that history (at most `engine.max_seed_messages` messages).
//! - With one, the session it names (an agentry `sess_…` id, or a key of the client's own
//!   that names a new session on first use) is continued: the repeated history must be the
//!   end of what the session stored, compared as this face writes messages
//!   (`Engine::session_with_history`, as the AgentScope face continues a `session_id`); an
//!   empty history (only the new message) is always accepted.

use actix_web::HttpRequest;
use serde_json::{Value, json};

use super::chat_parse::ChatRequest;
use super::create::model_not_found;
use super::error::OpenAiError;
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::{EngineError, InputMessage, SessionRef, split_input};
use crate::model::{Content, ContentBlock, HistoryMessage, Session, TenantId};

/// The request header naming the session a completion continues (and the response header
/// naming the session it ran in).
pub const SESSION_HEADER: &str = "Agentry-Session";

/// The session the completion runs in, the turn's messages, and how many messages of the
/// request came before them (so the engine's `messages[i]` of the turn is the client's
/// `messages[offset + i]`).
pub struct Placed {
    pub session: Session,
    pub messages: Vec<InputMessage>,
    pub offset: usize,
    pub continued: bool,
}

pub fn session_key(req: &HttpRequest) -> Result<Option<String>, OpenAiError> {
    let Some(value) = req.headers().get(SESSION_HEADER) else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_owned())),
        _ => Err(OpenAiError::invalid(
            SESSION_HEADER,
            "must be a session id or a key of 1-256 printable characters",
        )),
    }
}

fn session_not_found(key: &str) -> OpenAiError {
    OpenAiError::not_found(format!(
        "No session '{key}' found ({SESSION_HEADER} names an agentry session id or a key of \
         the caller's own)"
    ))
}

pub async fn place(
    state: &AppState,
    tenant: &TenantId,
    request: &ChatRequest,
    key: Option<&str>,
) -> Result<Placed, OpenAiError> {
    let engine = state.engine();
    let agent = engine
        .find_agent(Some(tenant), &request.agent)
        .await?
        .ok_or_else(|| model_not_found(&request.model, &engine.agents_listed(Some(tenant))))?;
    let last = request.messages.len() - 1;
    let (history, messages) = split_turn(request.messages.clone()).ok_or_else(|| {
        OpenAiError::invalid(
            format!("messages[{last}]"),
            "the last message must be a user message, or tool messages answering the \
             assistant's tool calls",
        )
    })?;
    let offset = history.len();
    let Some(key) = key else {
        let config = SessionConfigRequest {
            client_tools: request.tools.clone(),
            ..SessionConfigRequest::default()
        };
        let session = engine
            .create_session_on_version(tenant, agent.name(), request.version, config, history)
            .await
            .map_err(history_error)?;
        return Ok(Placed {
            session,
            messages,
            offset,
            continued: false,
        });
    };
    let reference = SessionRef::parse(key).ok_or_else(|| session_not_found(key))?;
    if request.version.is_some() && engine.find_session(tenant, &reference).await?.is_none() {
        return Err(OpenAiError::invalid(
            "model",
            format!(
                "a new session named by {SESSION_HEADER} runs the agent's published version: \
                 name the agent without `@version`"
            ),
        ));
    }
    let session = engine
        .session_with_history(tenant, Some(&reference), agent.name(), history, comparable)
        .await
        .map_err(|e| match e {
            EngineError::NotFound(_) => session_not_found(key),
            // A key no session could be created with.
            EngineError::Invalid(field) if field.field == "session_id" => {
                OpenAiError::invalid(SESSION_HEADER, field.message)
            }
            other => history_error(other),
        })?;
    let version = session.agent_version.map(|(_, v)| v);
    if session.agent != agent.name() || request.version.is_some_and(|v| Some(v) != version) {
        let model = match version {
            Some(v) => format!("{}@{v}", session.agent),
            None => session.agent.clone(),
        };
        return Err(OpenAiError::invalid(
            "model",
            format!("this session runs `{model}`; its model cannot change"),
        ));
    }
    Ok(Placed {
        session,
        messages,
        offset,
        continued: true,
    })
}

/// The request's history and the turn's input: the trailing tool results, or the last
/// user message (with the messages the engine's `split_input` trails before it, a
/// client's earlier user messages and tool results, kept as history).
fn split_turn(messages: Vec<HistoryMessage>) -> Option<(Vec<HistoryMessage>, Vec<InputMessage>)> {
    let (mut history, mut input) = split_input(messages)?;
    if matches!(input.last(), Some(InputMessage::User { .. })) && input.len() > 1 {
        let last = input.pop()?;
        history.extend(input.iter().filter_map(InputMessage::to_history));
        input = vec![last];
    }
    Some((history, input))
}

/// History messages as a Chat Completions client holds them: thinking left out, an
/// assistant's text joined, its tool calls by id, name and arguments.
fn comparable(messages: &[HistoryMessage]) -> Vec<Value> {
    let content = |content: &Content| match content {
        Content::Text(text) => json!(text),
        Content::Blocks(blocks) => match blocks.as_slice() {
            [ContentBlock::Text { text }] => json!(text),
            _ => json!(blocks),
        },
    };
    messages
        .iter()
        .map(|message| match message {
            HistoryMessage::System { content } => json!(["system", content]),
            HistoryMessage::User { content: c } => json!(["user", content(c)]),
            HistoryMessage::Tool {
                tool_call_id,
                content: c,
            } => json!(["tool", tool_call_id, content(c)]),
            HistoryMessage::Assistant { content } => {
                let (mut text, mut calls) = (String::new(), Vec::new());
                match content {
                    Content::Text(t) => text.push_str(t),
                    Content::Blocks(blocks) => {
                        for block in blocks {
                            match block {
                                ContentBlock::Text { text: t } => text.push_str(t),
                                ContentBlock::ToolUse {
                                    tool_call_id,
                                    name,
                                    input,
                                } => calls.push(json!([tool_call_id, name, input])),
                                _ => {}
                            }
                        }
                    }
                }
                json!(["assistant", text, calls])
            }
        })
        .collect()
}

/// The engine's refusal of a new session: the agent (`agent.name`, `agent.version`) is the
/// request's `model`; the history's fields are the request's own (`messages`,
/// `messages[i]…`, the history being the request's first messages).
fn history_error(error: EngineError) -> OpenAiError {
    match error {
        EngineError::Invalid(field) if field.field.starts_with("agent") => {
            OpenAiError::invalid("model", field.message)
        }
        EngineError::Invalid(field) => OpenAiError::invalid(field.field, field.message),
        other => other.into(),
    }
}

/// A field the engine named in the turn's messages, as the request's `messages[offset + i]`.
fn reindex(field: &str, offset: usize) -> String {
    let field = field.replace("toolCallId", "tool_call_id");
    let Some(rest) = field.strip_prefix("messages[") else {
        return field;
    };
    match rest.split_once(']') {
        Some((i, tail)) => match i.parse::<usize>() {
            Ok(i) => format!("messages[{}]{tail}", offset + i),
            Err(_) => field.clone(),
        },
        None => field.clone(),
    }
}

pub fn turn_error(error: EngineError, offset: usize) -> OpenAiError {
    match error {
        EngineError::Invalid(field) => {
            OpenAiError::invalid(reindex(&field.field, offset), field.message)
        }
        EngineError::InvalidInput(input) => {
            OpenAiError::invalid(reindex(&input.field, offset), input.reason)
        }
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_the_turn_are_named_as_the_request_numbers_them() {
        assert_eq!(
            reindex("messages[0].toolCallId", 3),
            "messages[3].tool_call_id"
        );
        assert_eq!(
            reindex("messages[1].content[2].url", 4),
            "messages[5].content[2].url"
        );
        assert_eq!(reindex("messages", 4), "messages");
    }
}
