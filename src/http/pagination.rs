//! Opaque list cursors and the `?after=&limit=` query every list route takes.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use crate::engine::Page;
use crate::http::error::{ApiError, ErrorCode};

pub const DEFAULT_LIMIT: u32 = 50;
pub const MAX_LIMIT: u32 = 200;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// The `next` cursor of the previous page.
    pub after: Option<String>,
    /// Items per page, 1 to 200 (50 when omitted).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
}

/// A decoded `ListQuery`.
pub struct Cursor {
    after: Option<uuid::Uuid>,
    limit: u32,
}

impl ListQuery {
    pub fn cursor(&self) -> Result<Cursor, ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("limit: must be between 1 and {MAX_LIMIT}"),
            ));
        }
        let after = match self.after.as_deref() {
            None | Some("") => None,
            Some(cursor) => Some(decode(cursor).and_then(|id| item_uuid(&id)).ok_or_else(
                || {
                    ApiError::new(
                        ErrorCode::InvalidQuery,
                        "after: not a cursor this server issued",
                    )
                },
            )?),
        };
        Ok(Cursor { after, limit })
    }
}

impl Cursor {
    pub fn page(&self) -> Page {
        Page {
            after: self.after,
            limit: self.limit,
        }
    }
}

/// The cursor that continues after the item with this id.
pub fn encode(last_id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{last_id}"))
}

/// The id a cursor continues after.
pub fn decode(cursor: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.strip_prefix("v1:").map(str::to_owned)
}

/// `next` for a page: the last item's cursor when more follow.
pub fn next_cursor<T>(items: &[T], more: bool, id: impl Fn(&T) -> String) -> Option<String> {
    if more {
        items.last().map(|last| encode(&id(last)))
    } else {
        None
    }
}

/// The UUID of a listed item's id (`prefix_` and 32 hex digits), which lists sort by.
fn item_uuid(id: &str) -> Option<uuid::Uuid> {
    let (_, hex) = id.rsplit_once('_')?;
    if hex.len() != 32 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    uuid::Uuid::try_parse(hex).ok()
}

#[cfg(test)]
mod proptests;
