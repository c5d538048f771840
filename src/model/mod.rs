//! The engine's vocabulary, shared by every protocol face and the store.

mod address;
mod agent;
mod body;
mod builtin;
mod call_id;
mod event;
mod history;
mod ids;
mod message;
mod nul;
mod quota;
mod run;
mod schedule;
mod session;
mod tenant;
mod turn;
mod webhook;

pub use address::{classify as classify_address, is_internal};
pub use agent::{AgentVersion, TenantAgent};
pub use body::{
    BodySchema, ContentEncoding, Part, PartGlob, SchemaPart, SchemaViolation, check_names,
    check_part_name, media_type,
};
pub use builtin::Builtin;
pub use call_id::{new_call_id, provider_call_id, repeated_call_id};
pub use event::{Event, EventData};
pub use history::{CompactionStrategy, HistoryType};
pub use ids::{
    AgentId, CredentialId, EndpointId, FileId, InvalidId, MessageId, ProcessId, RunId, ScheduleId,
    ScheduleRunId, SessionId, TenantId, TokenId, TurnId,
};
pub use message::{Content, ContentBlock, HistoryMessage, ImageSource};
pub use nul::{NUL_REPLACEMENT, check_no_nul, holds_nul, scrub_nul};
pub use quota::{Quota, QuotaDefaults, QuotaExceeded, QuotaOverrides, QuotaStanding, Quotas};
pub use run::{Run, RunStatus};
pub use schedule::{
    CatchUp, Occurrence, OccurrenceKind, OccurrenceReason, OccurrenceStatus, Overlap, Schedule,
    SessionPolicy,
};
pub use session::{ServerToolRef, Session, ToolSpec};
pub use tenant::{ApiToken, Credential, Tenant, TenantStatus};
pub use turn::{StopReason, StreamMode, Turn, TurnError, TurnStatus, Usage};
pub use webhook::{
    DeliveryAuth, DeliveryStatus, Endpoint, RunEndpoint, WebhookDelivery, WebhookEvent,
};

/// An input that failed validation: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn missing(field: impl Into<String>) -> Self {
        Self::new(field, "is required")
    }
}

/// The SHA-256 digest of `data` in lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The length of `value`'s JSON text, counted as it is written (no text is kept).
pub fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; what does not serialize counts what it wrote.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The current time at the precision both databases store (microseconds), so a value
/// returned on creation equals the value read back.
pub fn now() -> chrono::DateTime<chrono::Utc> {
    use chrono::SubsecRound;
    chrono::Utc::now().trunc_subsecs(6)
}

/// Whether both databases can store and compare a point in time: years 1 to 9999
/// (PostgreSQL's `timestamptz` refuses far dates; SQLite's microseconds overflow beyond).
pub fn is_storable(at: &chrono::DateTime<chrono::Utc>) -> bool {
    use chrono::Datelike;
    (1..=9999).contains(&at.year())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_length_of_the_json_text() {
        let message = HistoryMessage::User {
            content: Content::Text("héllo \"quoted\"\n".into()),
        };
        assert_eq!(
            json_len(&message),
            serde_json::to_string(&message).unwrap().len()
        );
        assert_eq!(json_len(&"x"), 3);
    }

    #[test]
    fn digests_and_media_types_read_as_written_elsewhere() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(media_type("text/plain; charset=utf-8"), "text/plain");
        assert_eq!(media_type("image/png;base64,AAAA"), "image/png");
    }
}
