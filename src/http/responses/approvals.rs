//! Server tools that wait for the client's permission, as the Responses API's MCP
//! approvals: the call becomes an `mcp_approval_request` output item, and the client's
//! `mcp_approval_response` input item becomes the engine's permission answer. An approval
//! request's id is the tool call's id with the `mcpr_` prefix, so answering it needs no
//! state of the face's own.

use serde_json::{Map, Value, json};

use super::error::OpenAiError;
use crate::config::split_tool_name;
use crate::engine::InputMessage;

const PREFIX: &str = "mcpr_";
/// The `server_label` of the agent's built-in server tools (an MCP server's tools carry
/// the server's name).
pub const BUILTIN_LABEL: &str = "agentry";

/// A client's answer to an approval request, with the input item it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub item: usize,
    pub call_id: String,
    pub approve: bool,
    pub reason: Option<String>,
}

impl Approval {
    pub fn to_input(&self) -> InputMessage {
        InputMessage::ToolPermission {
            tool_call_id: self.call_id.clone(),
            granted: self.approve,
            reason: self.reason.clone(),
        }
    }
}

pub fn approval_request_id(call_id: &str) -> String {
    format!("{PREFIX}{call_id}")
}

/// The `mcp_approval_request` item of a server tool's call waiting for permission.
pub fn request_item(call_id: &str, name: &str, input: &Map<String, Value>) -> Value {
    let (label, tool) = split_tool_name(name).unwrap_or((BUILTIN_LABEL, name));
    json!({
        "type": "mcp_approval_request",
        "id": approval_request_id(call_id),
        "server_label": label,
        "name": tool,
        "arguments": Value::Object(input.clone()).to_string(),
    })
}

/// An `mcp_approval_response` input item (`at` is `input[i]`).
pub fn parse_response_item(
    item: &Map<String, Value>,
    index: usize,
    at: &str,
) -> Result<Approval, OpenAiError> {
    let call_id = match item.get("approval_request_id") {
        Some(Value::String(id)) => id
            .strip_prefix(PREFIX)
            .filter(|call| !call.is_empty())
            .ok_or_else(|| {
                OpenAiError::invalid(
                    format!("{at}.approval_request_id"),
                    format!(
                        "`{id}` is not an approval request id: answer the `id` of an \
                         mcp_approval_request item (`{PREFIX}…`)"
                    ),
                )
            })?,
        _ => {
            return Err(OpenAiError::invalid(
                format!("{at}.approval_request_id"),
                "is required (a string)",
            ));
        }
    };
    let approve = match item.get("approve") {
        Some(Value::Bool(approve)) => *approve,
        _ => {
            return Err(OpenAiError::invalid(
                format!("{at}.approve"),
                "is required (a boolean)",
            ));
        }
    };
    let reason = match item.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => {
            return Err(OpenAiError::invalid(
                format!("{at}.reason"),
                "must be a string",
            ));
        }
    };
    Ok(Approval {
        item: index,
        call_id: call_id.to_owned(),
        approve,
        reason,
    })
}

/// The engine's refusal of an answer to a call (`input[i].toolCallId`), named as the
/// approval item's own field when item `i` is an approval response.
pub fn named_for_approvals(mut error: OpenAiError, approvals: &[Approval]) -> OpenAiError {
    let Some(param) = error.param.clone() else {
        return error;
    };
    let item = param
        .strip_prefix("input[")
        .and_then(|rest| rest.strip_suffix("].toolCallId"))
        .and_then(|i| i.parse::<usize>().ok());
    if let Some(i) = item
        && approvals.iter().any(|a| a.item == i)
    {
        let named = format!("input[{i}].approval_request_id");
        error.message = error.message.replacen(&param, &named, 1);
        error.param = Some(named);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_request_names_its_server_and_tool() {
        let input = Map::from_iter([("q".to_owned(), json!(1))]);
        let item = request_item("call_1", "docs.search", &input);
        assert_eq!(item["id"], "mcpr_call_1");
        assert_eq!(item["server_label"], "docs");
        assert_eq!(item["name"], "search");
        assert_eq!(item["arguments"], "{\"q\":1}");
        assert_eq!(
            request_item("c", "fetch", &input)["server_label"],
            "agentry"
        );
    }

    #[test]
    fn an_answer_names_the_call_it_approves() {
        let item = json!({"type": "mcp_approval_response", "approval_request_id": "mcpr_c1",
                          "approve": false, "reason": "no"});
        let approval = parse_response_item(item.as_object().unwrap(), 2, "input[2]").unwrap();
        assert_eq!(approval.call_id, "c1");
        assert!(!approval.approve);
        assert_eq!(approval.reason.as_deref(), Some("no"));
        let wrong = json!({"approval_request_id": "c1", "approve": true});
        let error = parse_response_item(wrong.as_object().unwrap(), 0, "input[0]").unwrap_err();
        assert_eq!(error.param.as_deref(), Some("input[0].approval_request_id"));
    }
}
