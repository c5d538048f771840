//! Schemas of bodies that no single Rust type carries on the wire: error bodies, requests a
//! handler reads as raw JSON and parses field by field, bodies built with `json!`, and the
//! frames of every SSE stream. They exist only for the document; tests check the real
//! bodies against them.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::http::error::ErrorCode;
use crate::model::{
    Content, Credential, CredentialId, RunId, StopReason, TenantId, TokenId, TurnError,
};

// ---- errors ----

/// agentry's error body, on every face but ACP's and on AgentScope's JSON answers.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
    /// The request field at fault, for validation errors.
    #[schema(required = false)]
    pub field: String,
    /// The tenant quota that refused the request, with `quota_exceeded`.
    #[schema(required = false)]
    pub quota: crate::model::Quota,
}

/// AgentScope's answer to a body that is not JSON (as its reference server answers).
#[derive(Serialize, ToSchema)]
pub struct AgentScopeValidationError {
    pub detail: Vec<Map<String, Value>>,
}

// ---- operations ----

#[derive(Serialize, ToSchema)]
pub struct Status {
    /// `ok` (`/healthz`), `ready` (`/readyz`) or `healthy` (`/agentscope/health`).
    pub status: String,
}

/// An empty object.
#[derive(Serialize, ToSchema)]
pub struct Empty {}

// ---- authentication ----

/// Client credentials, as JSON or as an `application/x-www-form-urlencoded` form.
#[derive(Serialize, ToSchema)]
pub struct TokenRequest {
    /// `client_credentials`, the only grant (may be omitted).
    #[schema(required = false, nullable = false)]
    pub grant_type: Option<String>,
    pub client_id: String,
    pub client_secret: String,
}

#[derive(Serialize, ToSchema)]
pub struct TokenResponse {
    /// A tenant bearer token (JWT).
    pub access_token: String,
    /// `Bearer`.
    pub token_type: String,
    pub expires_in: u64,
}

// ---- administration ----

#[derive(Serialize, ToSchema)]
pub struct CreateTenant {
    pub name: String,
}

#[derive(Serialize, ToSchema)]
pub struct UpdateTenant {
    #[schema(required = false, nullable = false)]
    pub name: Option<String>,
    #[schema(required = false, nullable = false)]
    pub status: Option<crate::model::TenantStatus>,
}

#[derive(Serialize, ToSchema)]
pub struct TenantList {
    pub tenants: Vec<crate::model::Tenant>,
    /// The cursor of the next page (`?after=`), when more follow.
    #[schema(required = false, nullable = false)]
    pub next: Option<String>,
}

/// The body is optional.
#[derive(Serialize, ToSchema)]
pub struct CreateCredential {
    #[schema(required = false, nullable = false)]
    pub name: Option<String>,
}

/// A new credential: the only response its secret ever appears in.
#[derive(Serialize, ToSchema)]
pub struct NewCredential {
    pub client_id: CredentialId,
    pub tenant_id: TenantId,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub client_secret: String,
}

#[derive(Serialize, ToSchema)]
pub struct CredentialList {
    pub credentials: Vec<Credential>,
}

/// The body is optional.
#[derive(Serialize, ToSchema)]
pub struct IssueToken {
    /// Lifetime in seconds (the configured default when omitted).
    #[schema(required = false, nullable = false)]
    pub ttl_seconds: Option<u64>,
    #[schema(required = false, nullable = false)]
    pub name: Option<String>,
}

/// A new API token: the only response the token ever appears in.
#[derive(Serialize, ToSchema)]
pub struct IssuedToken {
    /// A tenant bearer token (JWT).
    pub token: String,
    pub jti: TokenId,
    pub tenant_id: TenantId,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Serialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<crate::model::ApiToken>,
}

/// The quotas a tenant is held to.
#[derive(Serialize, ToSchema)]
pub struct QuotaReport {
    pub tenant_id: TenantId,
    /// Every quota's limit in force; `null`: unlimited.
    pub quotas: QuotaValues,
    /// The tenant's own values; `null`: the configured default.
    pub own: QuotaValues,
}

/// A value per quota. In a change (`PATCH`), keys left out keep their value and `null`
/// returns a quota to its configured default.
#[derive(Serialize, ToSchema)]
pub struct QuotaValues {
    pub requests_per_minute: Option<u64>,
    pub turns_per_minute: Option<u64>,
    pub concurrent_turns: Option<u64>,
    pub queued_turns: Option<u64>,
    pub tokens_per_day: Option<u64>,
    pub stored_sessions: Option<u64>,
}

/// What a tenant's turns created in `[from, to)` consumed.
#[derive(Serialize, ToSchema)]
pub struct UsageReport {
    pub tenant_id: TenantId,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub turns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub tool_calls: u64,
    pub wall_ms: u64,
    /// The same per UTC day that has turns, oldest first.
    pub days: Vec<DayUsage>,
}

/// What a tenant's turns created on one UTC day consumed.
#[derive(Serialize, ToSchema)]
pub struct DayUsage {
    /// The day, `YYYY-MM-DD`.
    #[schema(format = Date)]
    pub date: String,
    pub turns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub tool_calls: u64,
    pub wall_ms: u64,
}

/// The quotas the calling tenant is held to and what is left of them.
#[derive(Serialize, ToSchema)]
pub struct TenantQuotaReport {
    pub tenant_id: TenantId,
    /// The limits in force (`null`: unlimited).
    pub quotas: QuotaValues,
    /// What the two counted quotas have used: tokens of today's turns (since 00:00 UTC)
    /// and sessions kept.
    pub used: QuotaUse,
    /// What may still be used of each bounded quota: the per-minute quotas as the
    /// `RateLimit` header reports them, `tokens_per_day` and `stored_sessions` counted now;
    /// `null` for an unlimited quota and for `concurrent_turns` and `queued_turns`.
    pub remaining: QuotaValues,
}

/// What the counted quotas have used.
#[derive(Serialize, ToSchema)]
pub struct QuotaUse {
    pub tokens_per_day: u64,
    pub stored_sessions: u64,
}

// ---- AAP ----

/// A message that starts a turn: a user message, a tool result, or an answer to a tool
/// permission request. A message without `role` is a user message.
#[derive(Serialize, ToSchema)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum InputMessage {
    User {
        content: Content,
    },
    Tool {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        content: Content,
    },
    ToolPermission {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        granted: bool,
        #[schema(required = false)]
        reason: Option<String>,
    },
}

#[derive(Serialize, ToSchema)]
pub struct Delta {
    pub delta: String,
}

#[derive(Serialize, ToSchema)]
pub struct TextBlock {
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct ThinkingBlock {
    pub thinking: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub tool_call_id: String,
    pub name: String,
    pub input: Map<String, Value>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_call_id: String,
    pub content: Content,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStop {
    pub stop_reason: StopReason,
    /// Why a turn that stopped with `error` failed, was cancelled or was interrupted.
    #[schema(required = false, nullable = false)]
    pub error: Option<TurnError>,
}

// ---- AgentScope ----

/// An AgentScope `AgentRequest`.
#[derive(Serialize, ToSchema)]
pub struct AgentScopeRequest {
    /// The conversation; the last item is a user message or a tool call output. Earlier
    /// items must be the session's stored history (or seed a new session).
    pub input: Vec<AgentScopeInput>,
    /// `false` answers with the final response as JSON; anything else streams.
    #[schema(required = false)]
    pub stream: Option<bool>,
    /// The request id: the response's id, and an idempotency key for the turn.
    #[schema(required = false, max_length = 200, min_length = 1)]
    pub id: Option<String>,
    /// The client's session key (created on first use) or an agentry session id.
    #[schema(required = false, min_length = 1)]
    pub session_id: Option<String>,
    /// An agent name (ignored when it names none).
    #[schema(required = false)]
    pub model: Option<String>,
    #[schema(required = false)]
    pub tools: Option<Vec<AgentScopeTool>>,
}

/// An input item: a `message` (the default type), `reasoning`, a `*_call` or a
/// `*_call_output` (whose `content[0].data` holds `call_id`, `name`, `arguments`/`output`).
#[derive(Serialize, ToSchema)]
pub struct AgentScopeInput {
    /// `message`, `reasoning`, `function_call`, `plugin_call`, `mcp_call`,
    /// `function_call_output`, `plugin_call_output` or `mcp_call_output`.
    #[schema(required = false)]
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `user`, `assistant` or `system`.
    #[schema(required = false)]
    pub role: Option<String>,
    #[schema(required = false)]
    pub content: Option<Vec<AgentScopeInputContent>>,
}

/// A content item: `type` is `text`, `image`, `data`, `audio`, `file`, `refusal` or `video`,
/// with that type's field.
#[derive(Serialize, ToSchema)]
pub struct AgentScopeInputContent {
    #[serde(rename = "type")]
    pub kind: String,
    #[schema(required = false)]
    pub text: Option<String>,
    #[schema(required = false)]
    pub data: Option<Value>,
    #[schema(required = false)]
    pub image_url: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct AgentScopeTool {
    pub function: AgentScopeFunction,
}

#[derive(Serialize, ToSchema)]
pub struct AgentScopeFunction {
    pub name: String,
    #[schema(required = false)]
    pub description: Option<String>,
    /// A JSON schema of the arguments.
    #[schema(required = false)]
    pub parameters: Option<Map<String, Value>>,
}

/// The `data:` of an AgentScope stream frame (`id:` is the event's sequence number): the
/// response, message and content objects as they change, or, for a request refused before
/// its response started, a refusal.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum AgentScopeEvent {
    Response(crate::http::agentscope::wire::ResponseObject),
    Message(crate::http::agentscope::wire::MessageObject),
    Content(crate::http::agentscope::wire::ContentObject),
    Refusal(crate::http::agentscope::wire::RefusalEvent),
}

#[derive(Serialize, ToSchema)]
pub struct AgentScopeMessages {
    pub session_id: String,
    pub messages: Vec<crate::http::agentscope::wire::MessageObject>,
}

// ---- ACP ----

/// `POST /acp/runs`.
#[derive(Serialize, ToSchema)]
pub struct AcpRunCreateRequest {
    pub agent_name: String,
    pub input: Vec<AcpMessageIn>,
    /// A UUID (a session created on first use) or an agentry session id.
    #[schema(required = false)]
    pub session_id: Option<String>,
    /// A forwarded session descriptor; its `id` is read like `session_id`.
    #[schema(required = false)]
    pub session: Option<Map<String, Value>>,
    #[schema(required = false)]
    pub mode: Option<AcpMode>,
}

/// `POST /acp/runs/{run_id}`: the answers to an awaiting run's calls.
#[derive(Serialize, ToSchema)]
pub struct AcpRunResumeRequest {
    pub await_resume: AcpAwaitResume,
    #[schema(required = false)]
    pub mode: Option<AcpMode>,
}

#[derive(Serialize, ToSchema)]
pub struct AcpAwaitResume {
    /// `message`.
    #[schema(required = false)]
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Parts named `/tool_results/<id>` (the result) and `/tool_permissions/<id>`
    /// (`{"granted": bool, "reason"?: string}`).
    pub message: AcpMessageIn,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AcpMode {
    Sync,
    Async,
    Stream,
}

/// A message a client sends: `role` is `user` (the default).
#[derive(Serialize, ToSchema)]
pub struct AcpMessageIn {
    #[schema(required = false)]
    pub role: Option<String>,
    pub parts: Vec<AcpPartIn>,
}

/// A part a client sends: `content` or `content_url`, not both.
#[derive(Serialize, ToSchema)]
pub struct AcpPartIn {
    #[schema(required = false)]
    pub name: Option<String>,
    /// `text/plain` when omitted.
    #[schema(required = false)]
    pub content_type: Option<String>,
    #[schema(required = false)]
    pub content: Option<String>,
    /// `plain` (the default) or `base64`.
    #[schema(required = false)]
    pub content_encoding: Option<String>,
    #[schema(required = false)]
    pub content_url: Option<String>,
    #[schema(required = false)]
    pub metadata: Option<Value>,
}

/// AgentScope's 422: its reference's validation error for a body that is not JSON, or
/// agentry's error body for a request `id` reused with another body.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum AgentScopeUnprocessable {
    Validation(AgentScopeValidationError),
    Error(ErrorBody),
}

// ---- event streams ----
//
// A `text/event-stream` response is described by the schema of one event, as OpenAPI 3.2
// does with `itemSchema`: `event` (the SSE event name, `message` when the frame names
// none), `id`, and `data`, a JSON text whose schema is `contentSchema`.

/// One SSE event: `event` fixed when `name` is given, `id` matching `id_pattern`, `data` a
/// JSON text of `payload`.
fn sse_event(name: Option<&str>, id_pattern: &str, payload: &str) -> Schema {
    let event = match name {
        Some(name) => ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some([name])),
        None => ObjectBuilder::new().schema_type(Type::String),
    };
    let data = ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some("A JSON text"))
        .content_media_type("application/json")
        .content_schema(Some(Ref::from_schema_name(payload)));
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("event", event)
        .property(
            "id",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(id_pattern)),
        )
        .property("data", data)
        .required("data");
    if let Some(name) = name {
        object = object.title(Some(name)).required("event");
    }
    object.build().into()
}

type Schemas = Vec<(String, RefOr<Schema>)>;

fn register<T: ToSchema>(schemas: &mut Schemas) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

/// The events of an AAP stream: the SSE event name says which, `id` is the event's
/// sequence number in the session (send it back as `Last-Event-ID`). Delta mode sends
/// `text_delta` and `thinking_delta`; message mode whole `text` and `thinking` blocks.
pub struct AapStream;

/// AAP's event names and the schema of each one's data.
pub const AAP_EVENTS: [(&str, &str); 8] = [
    ("turn_start", "Empty"),
    ("text_delta", "Delta"),
    ("thinking_delta", "Delta"),
    ("text", "TextBlock"),
    ("thinking", "ThinkingBlock"),
    ("tool_call", "ToolCall"),
    ("tool_result", "ToolResult"),
    ("turn_stop", "TurnStop"),
];

impl PartialSchema for AapStream {
    fn schema() -> RefOr<Schema> {
        let mut one_of = OneOfBuilder::new().description(Some(
            "One event of the stream; `data` holds the object named by `event`",
        ));
        for (name, payload) in AAP_EVENTS {
            one_of = one_of.item(sse_event(Some(name), "^[0-9]+$", payload));
        }
        one_of.into()
    }
}

impl ToSchema for AapStream {
    fn schemas(schemas: &mut Schemas) {
        register::<Empty>(schemas);
        register::<Delta>(schemas);
        register::<TextBlock>(schemas);
        register::<ThinkingBlock>(schemas);
        register::<ToolCall>(schemas);
        register::<ToolResult>(schemas);
        register::<TurnStop>(schemas);
    }
}

/// The events of an AgentScope stream: `data` is the response, a message or a content
/// object as it changes, `id` its sequence number; a request refused before its response
/// started gets one refusal event without an id.
pub struct AgentScopeStream;

impl PartialSchema for AgentScopeStream {
    fn schema() -> RefOr<Schema> {
        sse_event(None, "^[0-9]+$", "AgentScopeEvent").into()
    }
}

impl ToSchema for AgentScopeStream {
    fn schemas(schemas: &mut Schemas) {
        register::<AgentScopeEvent>(schemas);
    }
}

/// The events of an ACP stream: `data` is an ACP event, `id` the frame id (`3`, `3.1`) to
/// resume after.
pub struct AcpStream;

impl PartialSchema for AcpStream {
    fn schema() -> RefOr<Schema> {
        sse_event(None, "^[0-9]+(\\.[0-9]+)?$", "AcpEvent").into()
    }
}

impl ToSchema for AcpStream {
    fn schemas(schemas: &mut Schemas) {
        register::<crate::http::acp::wire::EventObject>(schemas);
    }
}

// ---- webhooks ----
//
// `/webhooks` and `/admin/tenants/{tenant_id}/webhooks` (`http/webhooks.rs`): the handlers
// parse raw JSON into private types and answer `engine::CreatedEndpoint`,
// `engine::RotatedSecret`, `model::Endpoint` and `model::WebhookDelivery`, described here.

/// An event type an endpoint can be sent.
#[derive(Serialize, ToSchema)]
pub enum WebhookEventType {
    #[serde(rename = "turn.completed")]
    TurnCompleted,
    #[serde(rename = "turn.failed")]
    TurnFailed,
    #[serde(rename = "turn.cancelled")]
    TurnCancelled,
    #[serde(rename = "turn.interrupted")]
    TurnInterrupted,
    /// The turn stopped on tool calls the client runs or on permission requests.
    #[serde(rename = "turn.awaiting_input")]
    TurnAwaitingInput,
    /// A run took a new status when its turn stopped.
    #[serde(rename = "run.status_changed")]
    RunStatusChanged,
    /// A schedule's occurrence started its turn.
    #[serde(rename = "schedule.run.started")]
    ScheduleRunStarted,
    /// A schedule's occurrence's turn ended well (completed, or awaiting input).
    #[serde(rename = "schedule.run.finished")]
    ScheduleRunFinished,
    /// A schedule's occurrence failed: its turn failed, was cancelled or interrupted, or it
    /// was refused (a quota, its agent gone, an error).
    #[serde(rename = "schedule.run.failed")]
    ScheduleRunFailed,
}

/// How a delivery proves where it comes from: Standard Webhooks signatures
/// (`webhook-id`, `webhook-timestamp`, `webhook-signature`) made with the endpoint's
/// secret, or the secret as a bearer token.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookAuth {
    Signature,
    Bearer,
}

/// pending → delivered | failed; a replay makes either pending again.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookDeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

/// `POST /webhooks`: a new endpoint. Unknown fields are refused.
#[derive(Serialize, ToSchema)]
pub struct CreateWebhook {
    /// An HTTPS URL (plain HTTP only where `webhooks.allow_http` allows it); internal
    /// addresses are refused unless `webhooks.allow_targets` names them.
    pub url: String,
    /// At most 512 characters.
    #[schema(required = false, max_length = 512)]
    pub description: Option<String>,
    /// The event types to send; absent: all of them (an empty list is refused).
    #[schema(required = false, nullable = false, min_items = 1)]
    pub event_types: Option<Vec<WebhookEventType>>,
}

/// `PATCH /webhooks/{endpoint_id}`: the fields to change, the others unchanged; `enabled:
/// true` re-enables an endpoint disabled by failures (and clears `disabled_reason`).
/// Unknown fields are refused.
#[derive(Serialize, ToSchema)]
pub struct UpdateWebhook {
    /// Checked as on creation.
    #[schema(required = false, nullable = false)]
    pub url: Option<String>,
    /// At most 512 characters; `null` removes it.
    #[schema(required = false, max_length = 512)]
    pub description: Option<String>,
    /// An empty list is refused.
    #[schema(required = false, nullable = false, min_items = 1)]
    pub event_types: Option<Vec<WebhookEventType>>,
    #[schema(required = false, nullable = false)]
    pub enabled: Option<bool>,
}

/// A webhook endpoint (its secret is never shown again after creation or rotation): the
/// tenant's, or a run's own (`run_id`), registered through a protocol face and sent in its
/// payload `format`.
#[derive(Serialize, ToSchema)]
pub struct WebhookEndpoint {
    /// `wh_…`
    pub id: String,
    pub tenant_id: TenantId,
    /// The URL as checked and normalized.
    pub url: String,
    #[schema(required = true)]
    pub description: Option<String>,
    pub event_types: Vec<WebhookEventType>,
    pub auth: WebhookAuth,
    pub enabled: bool,
    /// Why failures disabled it.
    #[schema(required = true)]
    pub disabled_reason: Option<String>,
    /// Until when deliveries are also signed with the secret a rotation replaced.
    #[schema(required = true)]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The run whose status changes a run's own endpoint is sent (and only those); `null`
    /// for the tenant's endpoints.
    #[schema(required = true)]
    pub run_id: Option<RunId>,
    /// The payload format a run's own endpoint is sent in; `null` for the tenant's
    /// endpoints (the JSON body above).
    #[schema(required = true)]
    pub format: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A new endpoint and its secret (`whsec_…`), shown only here.
#[derive(Serialize, ToSchema)]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub endpoint: WebhookEndpoint,
    /// `whsec_…`: keep it, it is not shown again.
    pub secret: String,
}

#[derive(Serialize, ToSchema)]
pub struct WebhookList {
    /// Newest first.
    pub endpoints: Vec<WebhookEndpoint>,
    /// The cursor of the next page (`?after=`), when more follow.
    #[schema(required = false, nullable = false)]
    pub next: Option<String>,
}

/// A rotation's new secret, shown only here.
#[derive(Serialize, ToSchema)]
pub struct RotatedWebhookSecret {
    /// `whsec_…`: keep it, it is not shown again.
    pub secret: String,
    /// Until when deliveries are signed with the replaced secret too.
    pub previous_secret_expires_at: DateTime<Utc>,
}

/// One message to one endpoint, with its attempts so far.
#[derive(Serialize, ToSchema)]
pub struct WebhookDelivery {
    /// The message id (`msg_…`): the `webhook-id` header of every attempt.
    pub id: String,
    /// `wh_…`
    pub endpoint_id: String,
    /// The event type (`turn.completed`, …).
    pub event_type: String,
    pub status: WebhookDeliveryStatus,
    pub attempts: i64,
    #[schema(required = true)]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// The HTTP status of the last attempt, when it got one.
    #[schema(required = true)]
    pub last_status: Option<i64>,
    #[schema(required = true)]
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Serialize, ToSchema)]
pub struct WebhookDeliveryList {
    /// Newest first.
    pub deliveries: Vec<WebhookDelivery>,
    /// The cursor of the next page (`?after=`), when more follow.
    #[schema(required = false, nullable = false)]
    pub next: Option<String>,
}

// ---- A2A ----

/// An A2A object in ProtoJSON (a card, a JSON-RPC request or response, a task, a page of
/// tasks, a push config): its shape is the A2A specification's, by version.
pub struct A2aObject;

impl PartialSchema for A2aObject {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "An A2A object, as the A2A specification (1.0 or 0.3) defines it",
            ))
            .build()
            .into()
    }
}

impl ToSchema for A2aObject {}

/// A2A's REST error body: a `google.rpc.Status`.
#[derive(Serialize, ToSchema)]
pub struct A2aStatus {
    pub error: A2aStatusDetail,
}

#[derive(Serialize, ToSchema)]
pub struct A2aStatusDetail {
    /// The HTTP status.
    pub code: u16,
    /// The gRPC status name (`NOT_FOUND`, `FAILED_PRECONDITION`, …).
    pub status: String,
    pub message: String,
    /// `google.rpc.ErrorInfo` (with A2A's `reason`) and `google.rpc.BadRequest` details.
    #[schema(required = false)]
    pub details: Vec<serde_json::Value>,
}

/// The events of an A2A stream: `data` is a `StreamResponse` (1.0), the bare event (0.3)
/// or, over JSON-RPC, a JSON-RPC response holding one; `id` the frame id (`3`, `3.1`) to
/// resume after with `Last-Event-ID`.
pub struct A2aStream;

impl PartialSchema for A2aStream {
    fn schema() -> RefOr<Schema> {
        sse_event(None, "^[0-9]+(\\.[0-9]+)?$", "A2aObject").into()
    }
}

impl ToSchema for A2aStream {
    fn schemas(schemas: &mut Schemas) {
        register::<A2aObject>(schemas);
    }
}
