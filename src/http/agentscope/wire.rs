//! The AgentScope Runtime Agent API's objects as they go on the wire: every declared field
//! present (nulls included) and in the reference's order, so clients that compare
//! byte-for-byte or validate strictly see what they expect.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// `{"code", "message"}` of a failed response.
#[derive(Debug, Clone, Serialize, PartialEq, ToSchema)]
#[schema(as = AgentScopeError)]
pub struct ErrorObject {
    pub code: String,
    pub message: String,
}

/// An `AgentResponse` (`object: "response"`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentScopeResponse)]
pub struct ResponseObject {
    pub sequence_number: Option<u64>,
    pub object: &'static str,
    pub status: &'static str,
    pub error: Option<ErrorObject>,
    pub id: String,
    pub created_at: i64,
    pub completed_at: Option<i64>,
    pub output: Option<Vec<MessageObject>>,
    pub usage: Option<Value>,
    pub session_id: String,
}

/// A `Message` (`object: "message"`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentScopeMessage)]
pub struct MessageObject {
    pub sequence_number: Option<u64>,
    pub object: &'static str,
    pub status: &'static str,
    pub error: Option<ErrorObject>,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    pub content: Option<Vec<ContentObject>>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub usage: Option<Value>,
    pub metadata: Option<Value>,
}

/// A content item (`object: "content"`) with the fields of its type after the common ones.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentScopeContent)]
pub struct ContentObject {
    pub sequence_number: Option<u64>,
    pub object: &'static str,
    pub status: Option<&'static str>,
    pub error: Option<ErrorObject>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub index: Option<u32>,
    pub delta: Option<bool>,
    pub msg_id: Option<String>,
    #[serde(flatten)]
    pub body: ContentBody,
}

/// The type-specific fields of a content item.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentScopeContentBody)]
#[serde(untagged)]
pub enum ContentBody {
    Text {
        text: String,
    },
    Data {
        data: Value,
    },
    Image {
        image_url: Option<String>,
    },
    Audio {
        data: Option<String>,
        format: Option<String>,
    },
    File {
        file_url: Option<String>,
        file_id: Option<String>,
        filename: Option<String>,
        file_data: Option<String>,
    },
    Refusal {
        refusal: String,
    },
    Video {
        video_url: Option<String>,
    },
}

impl ContentBody {
    pub fn kind(&self) -> &'static str {
        match self {
            ContentBody::Text { .. } => "text",
            ContentBody::Data { .. } => "data",
            ContentBody::Image { .. } => "image",
            ContentBody::Audio { .. } => "audio",
            ContentBody::File { .. } => "file",
            ContentBody::Refusal { .. } => "refusal",
            ContentBody::Video { .. } => "video",
        }
    }
}

impl ContentObject {
    /// A content item as it appears inside a completed message or a history read.
    pub fn whole(body: ContentBody) -> Self {
        Self {
            sequence_number: None,
            object: "content",
            status: None,
            error: None,
            kind: body.kind(),
            index: None,
            delta: Some(false),
            msg_id: None,
            body,
        }
    }
}

/// The error event a request gets when it is refused before its response starts (the
/// reference's `{"error": "..."}`, with agentry's code beside it).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AgentScopeRefusalEvent)]
pub struct RefusalEvent {
    pub error: String,
    pub code: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_serializes_in_the_reference_order_with_nulls() {
        let content = ContentObject {
            sequence_number: Some(3),
            object: "content",
            status: Some("in_progress"),
            error: None,
            kind: "text",
            index: Some(0),
            delta: Some(true),
            msg_id: Some("msg_1".into()),
            body: ContentBody::Text {
                text: "Hello".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&content).unwrap(),
            r#"{"sequence_number":3,"object":"content","status":"in_progress","error":null,"type":"text","index":0,"delta":true,"msg_id":"msg_1","text":"Hello"}"#
        );
    }
}
