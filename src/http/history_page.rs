//! A page of a history-like read (AgentScope session messages, parts listings): `limit`
//! messages at most (1–1000, default 100), cut by `limits.history_page_bytes` too, and
//! `after`, the cursor the previous page gave as `next`.

use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::error::ApiError;
use crate::http::pagination;

pub const DEFAULT_PAGE: u32 = 100;
pub const MAX_PAGE: u32 = 1000;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryPageQuery {
    /// Most messages in the page (1–1000, default 100); a page is also cut at
    /// `limits.history_page_bytes` of stored messages.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The cursor a previous page gave as `next`.
    pub after: Option<String>,
}

impl HistoryPageQuery {
    /// The position of the page's first message and the most messages it holds.
    pub fn resolve(&self) -> Result<(i64, i64), ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::invalid(
                "limit",
                format!("must be between 1 and {MAX_PAGE}"),
            ));
        }
        Ok((decode_offset(self.after.as_deref())?, i64::from(limit)))
    }
}

/// The position a history cursor stands for (none: the beginning).
pub fn decode_offset(after: Option<&str>) -> Result<i64, ApiError> {
    match after {
        None | Some("") => Ok(0),
        Some(cursor) => pagination::decode(cursor)
            .and_then(|at| at.parse::<i64>().ok())
            .filter(|at| *at > 0)
            .ok_or_else(|| ApiError::invalid("after", "not a cursor this server issued")),
    }
}

/// The cursor of the page after one that started at `offset` and held `taken` messages.
pub fn next_cursor(offset: i64, taken: usize) -> String {
    pagination::encode(&(offset + taken as i64).to_string())
}
