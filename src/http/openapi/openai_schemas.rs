//! The wire shapes of the OpenAI face (`/v1`), whose handlers parse raw JSON and render
//! JSON values.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `POST /v1/responses`.
#[derive(Serialize, ToSchema)]
pub struct OpenAiCreateResponse {
    /// The agent: its name, or `name@version` for a tenant agent's version.
    pub model: String,
    /// A string (one user message) or input items: messages (`user`, `assistant`,
    /// `system`, `developer`; text, `input_image` and `input_file` parts), echoed
    /// `function_call` items, `function_call_output` items, and `mcp_approval_response`
    /// items (`OpenAiMcpApprovalResponse`) answering the previous response's
    /// `mcp_approval_request` items.
    pub input: Value,
    /// Function tools: the response's client tools.
    #[schema(required = false)]
    pub tools: Option<Vec<Value>>,
    /// `auto` only.
    #[schema(required = false)]
    pub tool_choice: Option<String>,
    /// Up to 16 string pairs, kept with the response.
    #[schema(required = false)]
    pub metadata: Option<Map<String, Value>>,
    /// Continue from this response (the latest of its conversation).
    #[schema(required = false)]
    pub previous_response_id: Option<String>,
    /// Continue this conversation (`conv_…`, or a session's `sess_…`), or `{"id": …}`.
    #[schema(required = false)]
    pub conversation: Option<Value>,
    #[schema(required = false)]
    pub stream: Option<bool>,
    #[schema(required = false)]
    pub background: Option<bool>,
    /// Must be `true` (the default).
    #[schema(required = false)]
    pub store: Option<bool>,
    /// Not accepted: an agent's prompt is its instructions.
    #[schema(required = false)]
    pub instructions: Option<String>,
}

/// The Response object.
#[derive(Serialize, ToSchema)]
pub struct OpenAiResponse {
    /// `resp_…`
    pub id: String,
    /// `response`
    pub object: String,
    pub created_at: i64,
    pub completed_at: Option<i64>,
    /// `queued`, `in_progress`, `completed`, `failed`, `incomplete` or `cancelled`.
    pub status: String,
    pub background: bool,
    pub error: Option<Value>,
    pub incomplete_details: Option<Value>,
    pub model: String,
    /// `message`, `reasoning`, `function_call` and `mcp_approval_request`
    /// (`OpenAiMcpApprovalRequest`) items.
    pub output: Vec<Value>,
    pub previous_response_id: Option<String>,
    pub conversation: Option<Value>,
    pub usage: Option<Value>,
    pub metadata: Map<String, Value>,
    pub tools: Vec<Value>,
}

/// An output item: a server tool's call waiting for the client's permission (the
/// response is `completed`; the next one answers it with an `mcp_approval_response`).
#[derive(Serialize, ToSchema)]
pub struct OpenAiMcpApprovalRequest {
    /// `mcp_approval_request`
    #[serde(rename = "type")]
    pub kind: String,
    /// `mcpr_` + the tool call's id.
    pub id: String,
    /// The MCP server's name, or `agentry` for a built-in tool.
    pub server_label: String,
    /// The tool's name (on its server).
    pub name: String,
    /// The call's arguments, a JSON object as text.
    pub arguments: String,
}

/// An input item answering an `mcp_approval_request` of the previous response: approved,
/// the tool runs; denied, the model reads `Tool call denied: <reason>`.
#[derive(Serialize, ToSchema)]
pub struct OpenAiMcpApprovalResponse {
    /// `mcp_approval_response`
    #[serde(rename = "type")]
    pub kind: String,
    /// The `id` of the approval request it answers.
    pub approval_request_id: String,
    pub approve: bool,
    #[schema(required = false)]
    pub reason: Option<String>,
    /// Ignored.
    #[schema(required = false)]
    pub id: Option<String>,
}

/// A deleted object: `{id, object, deleted: true}`.
#[derive(Serialize, ToSchema)]
pub struct OpenAiDeleted {
    pub id: String,
    pub object: String,
    pub deleted: bool,
}

/// A conversation (a session).
#[derive(Serialize, ToSchema)]
pub struct OpenAiConversation {
    /// `conv_…`
    pub id: String,
    /// `conversation`
    pub object: String,
    pub created_at: i64,
    pub metadata: Value,
}

/// A list page.
#[derive(Serialize, ToSchema)]
pub struct OpenAiList {
    /// `list`
    pub object: String,
    pub data: Vec<Value>,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
    pub has_more: bool,
}

/// `GET /v1/models`.
#[derive(Serialize, ToSchema)]
pub struct OpenAiModelList {
    /// `list`
    pub object: String,
    pub data: Vec<OpenAiModel>,
}

/// A model: an agent's name.
#[derive(Serialize, ToSchema)]
pub struct OpenAiModel {
    pub id: String,
    /// `model`
    pub object: String,
    pub created: i64,
    pub owned_by: String,
}

/// `POST /v1/chat/completions`.
#[derive(Serialize, ToSchema)]
pub struct OpenAiChatCompletionRequest {
    /// The agent: its name, or `name@version` for a tenant agent's version.
    #[schema(min_length = 1, example = "echo")]
    pub model: String,
    /// The conversation: `system`/`developer` (text), `user` (text, `image_url` and `file`
    /// parts), `assistant` (text, `tool_calls`) and `tool` (`tool_call_id`, text) messages.
    /// The trailing user message (or tool messages) is the turn; the ones before are its
    /// history.
    #[schema(min_items = 1, example = json!([{"role": "user", "content": "Hello"}]))]
    pub messages: Vec<OpenAiChatMessage>,
    /// `{"type": "function", "function": {name, description?, parameters?, strict?}}`: the
    /// turn's client tools.
    #[schema(required = false)]
    pub tools: Option<Vec<Value>>,
    #[schema(required = false)]
    pub tool_choice: Option<OpenAiToolChoice>,
    #[schema(required = false)]
    pub stream: Option<bool>,
    /// `{"include_usage": true}`: a last chunk carries the usage (with `stream` only).
    #[schema(required = false)]
    pub stream_options: Option<Value>,
    /// Up to 16 pairs (keys up to 64 characters, values up to 512), kept with the turn.
    #[schema(required = false)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// 1 only.
    #[schema(required = false, minimum = 1, maximum = 1)]
    pub n: Option<u32>,
    /// `false` only.
    #[schema(required = false)]
    pub logprobs: Option<bool>,
    /// `{"type": "text"}` only.
    #[schema(required = false)]
    pub response_format: Option<Value>,
}

/// `auto` only: an agent chooses its tools.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpenAiToolChoice {
    Auto,
}

/// A message's role.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpenAiChatRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

/// One message of a chat.
#[derive(Serialize, ToSchema)]
pub struct OpenAiChatMessage {
    pub role: OpenAiChatRole,
    /// A string or content parts (`null` for an assistant message with `tool_calls`).
    pub content: Option<Value>,
    /// An assistant's tool calls: `{id, type: "function", function: {name, arguments}}`.
    #[schema(required = false)]
    pub tool_calls: Option<Vec<Value>>,
    /// The call a `tool` message answers.
    #[schema(required = false)]
    pub tool_call_id: Option<String>,
}

/// The `chat.completion` object.
#[derive(Serialize, ToSchema)]
pub struct OpenAiChatCompletion {
    /// `chatcmpl-…`
    pub id: String,
    /// `chat.completion`
    pub object: String,
    pub created: i64,
    pub model: String,
    /// One choice: `{index, message: {role, content, refusal, tool_calls?}, finish_reason,
    /// logprobs}`; `finish_reason` is `stop`, `tool_calls`, `length` or `content_filter`.
    pub choices: Vec<Value>,
    /// `{prompt_tokens, completion_tokens, total_tokens}`
    pub usage: Value,
}
