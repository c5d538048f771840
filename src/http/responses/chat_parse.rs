//! A `POST /v1/chat/completions` body, parsed into what the engine is asked: the agent
//! (`model`, as in `/v1/responses`), the messages as history messages (`chat_messages`),
//! client tools, and how the reply is sent. Parameters that tune a model's sampling are accepted and left to the
//! agent's configuration, as `/v1/responses` does; those whose meaning the agent cannot
//! honour are refused, naming them.

use serde_json::{Map, Value};

use super::chat_messages::parse_messages;
use super::error::OpenAiError;
use super::parse::{parse_function_tools, parse_metadata, parse_model};
use crate::model::{HistoryMessage, ToolSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// As the client wrote it.
    pub model: String,
    pub agent: String,
    pub version: Option<i64>,
    pub messages: Vec<HistoryMessage>,
    /// `None` when the request names no tools.
    pub tools: Option<Vec<ToolSpec>>,
    pub metadata: Map<String, Value>,
    pub stream: bool,
    pub include_usage: bool,
}

fn flag(body: &Map<String, Value>, key: &str) -> Result<Option<bool>, OpenAiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(OpenAiError::invalid(key, "must be a boolean")),
    }
}

fn unsupported(param: &str, why: &str) -> OpenAiError {
    OpenAiError::invalid(param, format!("not supported: {why}")).code("unsupported_parameter")
}

/// Refuses the parameters whose meaning an agent cannot honour.
fn refuse_unsupported(body: &Map<String, Value>) -> Result<(), OpenAiError> {
    let given = |key: &str| body.get(key).filter(|v| !v.is_null());
    match given("n") {
        None => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(_) => return Err(unsupported("n", "an agent writes one choice (n must be 1)")),
    }
    if flag(body, "logprobs")? == Some(true) {
        return Err(unsupported(
            "logprobs",
            "agents do not report log probabilities",
        ));
    }
    if given("top_logprobs").is_some_and(|v| v.as_u64() != Some(0)) {
        return Err(unsupported(
            "top_logprobs",
            "agents do not report log probabilities",
        ));
    }
    if let Some(format) = given("response_format") {
        let kind = format.get("type").and_then(Value::as_str);
        if kind != Some("text") {
            return Err(unsupported(
                "response_format",
                "an agent's output format is its configuration (only `{\"type\": \"text\"}`)",
            ));
        }
    }
    if given("audio").is_some() {
        return Err(unsupported("audio", "agents answer in text"));
    }
    if let Some(modalities) = given("modalities") {
        let text_only = modalities
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m.as_str() == Some("text")));
        if !text_only {
            return Err(unsupported("modalities", "agents answer in text only"));
        }
    }
    if given("functions").is_some() || given("function_call").is_some() {
        let param = if given("functions").is_some() {
            "functions"
        } else {
            "function_call"
        };
        return Err(unsupported(param, "deprecated: send `tools` instead"));
    }
    if given("web_search_options").is_some() {
        return Err(unsupported(
            "web_search_options",
            "an agent's tools are its configuration",
        ));
    }
    match given("stop") {
        None => {}
        Some(Value::Array(stops)) if stops.is_empty() => {}
        Some(_) => {
            return Err(unsupported(
                "stop",
                "an agent's turn ends when the agent ends it",
            ));
        }
    }
    match given("tool_choice") {
        None => {}
        Some(Value::String(choice)) if choice == "auto" => {}
        Some(_) => {
            return Err(OpenAiError::invalid(
                "tool_choice",
                "only `auto` is supported: an agent chooses its tools",
            ));
        }
    }
    Ok(())
}

pub fn parse_chat(body: &Map<String, Value>) -> Result<ChatRequest, OpenAiError> {
    let model = match body.get("model") {
        Some(Value::String(model)) => model.as_str(),
        None | Some(Value::Null) => {
            return Err(OpenAiError::invalid(
                "model",
                "is required: the name of an agent",
            ));
        }
        Some(_) => return Err(OpenAiError::invalid("model", "must be a string")),
    };
    let (agent, version) = parse_model(model)?;
    refuse_unsupported(body)?;
    let stream = flag(body, "stream")?.unwrap_or(false);
    let include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(_) if !stream => {
            return Err(OpenAiError::invalid(
                "stream_options",
                "is only allowed when `stream` is true",
            ));
        }
        Some(Value::Object(options)) => match options.get("include_usage") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(OpenAiError::invalid(
                    "stream_options.include_usage",
                    "must be a boolean",
                ));
            }
        },
        Some(_) => {
            return Err(OpenAiError::invalid("stream_options", "must be an object"));
        }
    };
    Ok(ChatRequest {
        model: model.to_owned(),
        agent,
        version,
        messages: parse_messages(body.get("messages"))?,
        tools: parse_tools(body.get("tools"))?,
        metadata: parse_metadata(body.get("metadata"))?,
        stream,
        include_usage,
    })
}

/// `tools: [{"type": "function", "function": {name, description?, parameters?, strict?}}]`.
fn parse_tools(value: Option<&Value>) -> Result<Option<Vec<ToolSpec>>, OpenAiError> {
    parse_function_tools(value, nested_fields)
}

/// A chat tool's fields are under `function`, whose name must not be empty.
fn nested_fields(
    tool: &Map<String, Value>,
    at: String,
) -> Result<(&Map<String, Value>, String, String), OpenAiError> {
    let Some(function) = tool.get("function").and_then(Value::as_object) else {
        return Err(OpenAiError::invalid(
            format!("{at}.function"),
            "is required (an object)",
        ));
    };
    let at = format!("{at}.function");
    let name = match function.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => {
            return Err(OpenAiError::invalid(
                format!("{at}.name"),
                "is required (a non-empty string)",
            ));
        }
    };
    Ok((function, at, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn parameters_an_agent_cannot_honour_are_named() {
        let base = json!({"model": "echo", "messages": [{"role": "user", "content": "x"}]});
        for (key, value) in [
            ("n", json!(2)),
            ("logprobs", json!(true)),
            ("response_format", json!({"type": "json_object"})),
            ("audio", json!({"voice": "alloy", "format": "wav"})),
            ("stop", json!(["\n"])),
            ("tool_choice", json!("required")),
            ("stream_options", json!({"include_usage": true})),
        ] {
            let mut request = base.clone();
            request[key] = value;
            let error = parse_chat(&body(request)).unwrap_err();
            assert_eq!(error.param.as_deref(), Some(key), "{error}");
        }
        let mut harmless = base.clone();
        for (key, value) in [
            ("n", json!(1)),
            ("temperature", json!(0.2)),
            ("seed", json!(7)),
            ("user", json!("u")),
            ("store", json!(false)),
            ("response_format", json!({"type": "text"})),
            ("max_completion_tokens", json!(100)),
        ] {
            harmless[key] = value;
        }
        assert!(parse_chat(&body(harmless)).is_ok());
    }

    #[test]
    fn bad_messages_are_named_by_index() {
        let error = parse_chat(&body(json!({"model": "echo", "messages": [
            {"role": "user", "content": "x"},
            {"role": "tool", "content": "y"}
        ]})))
        .unwrap_err();
        assert_eq!(error.param.as_deref(), Some("messages[1].tool_call_id"));
    }
}
