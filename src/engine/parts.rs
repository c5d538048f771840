//! Inline part contents over the configured size are stored once per session and passed
//! on as a URL agentry serves (`/files/{id}`), so history and events stay small.

use base64::Engine as _;

use super::error::{EngineError, InputError};
use super::input::InputMessage;
use crate::model::{Content, ContentBlock, ContentEncoding, SessionId, TenantId};
use crate::store::Store;

/// The path under which stored part contents are served.
pub fn file_url(id: &crate::model::FileId) -> String {
    format!("/files/{id}")
}

/// Checks base64 contents and moves large inline contents of the messages into files.
pub(super) async fn store_large_parts(
    store: &Store,
    tenant: &TenantId,
    session: &SessionId,
    limit: usize,
    messages: &mut [InputMessage],
) -> Result<(), EngineError> {
    for (i, message) in messages.iter_mut().enumerate() {
        if let InputMessage::User { content } | InputMessage::ToolResult { content, .. } = message {
            store_content(store, tenant, session, limit, content, i).await?;
        }
    }
    Ok(())
}

async fn store_content(
    store: &Store,
    tenant: &TenantId,
    session: &SessionId,
    limit: usize,
    content: &mut Content,
    message: usize,
) -> Result<(), EngineError> {
    let Content::Blocks(blocks) = content else {
        return Ok(());
    };
    for (j, block) in blocks.iter_mut().enumerate() {
        let ContentBlock::Part(part) = block else {
            continue;
        };
        let Some(inline) = &part.content else {
            continue;
        };
        let bytes = match part.content_encoding {
            ContentEncoding::Plain => inline.as_bytes().to_vec(),
            ContentEncoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(inline)
                .map_err(|_| {
                    EngineError::InvalidInput(InputError {
                        message,
                        part: Some(j),
                        field: format!("messages[{message}].content[{j}].content"),
                        reason: "is not valid base64 (content_encoding is base64)".into(),
                        detail: "is not valid base64 (content_encoding is base64)".into(),
                        unsupported_type: false,
                    })
                })?,
        };
        if bytes.len() <= limit {
            continue;
        }
        let id = store
            .insert_file(tenant, session, &part.content_type, &bytes)
            .await?;
        part.content = None;
        part.content_encoding = ContentEncoding::Plain;
        part.content_url = Some(file_url(&id));
    }
    Ok(())
}
