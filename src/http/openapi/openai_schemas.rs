//! The wire shapes of the OpenAI face (`/v1`), whose handlers parse raw JSON and render
//! JSON values.

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
    /// `function_call` items and `function_call_output` items.
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
    /// `message`, `reasoning` and `function_call` items.
    pub output: Vec<Value>,
    pub previous_response_id: Option<String>,
    pub conversation: Option<Value>,
    pub usage: Option<Value>,
    pub metadata: Map<String, Value>,
    pub tools: Vec<Value>,
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
