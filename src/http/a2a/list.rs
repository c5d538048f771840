//! ListTasks: the tenant's tasks of one agent, filtered by context, state and status time,
//! newest status change first, in pages with an opaque token (the last task's status time
//! and id).

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::error::A2aError;
use super::ops::Call;
use super::params::{self, Params};
use super::tasks;
use super::wire::{Shown, State};
use crate::engine::SessionRef;
use crate::engine::{RunCursor, RunFilter, ViewParts};
use crate::model::{RunId, RunStatus};

const DEFAULT_PAGE: i64 = 50;
const MAX_PAGE: i64 = 100;

/// The run statuses a task state stands for.
fn statuses(state: State) -> Vec<RunStatus> {
    match state {
        State::Submitted => vec![RunStatus::Created],
        State::Working => vec![RunStatus::Running],
        State::InputRequired => vec![RunStatus::Awaiting],
        State::Completed => vec![RunStatus::Completed],
        State::Failed => vec![RunStatus::Failed, RunStatus::Interrupted],
        State::Canceled => vec![RunStatus::Cancelled],
    }
}

fn encode_token(cursor: &RunCursor) -> String {
    let raw = format!("{}:{}", cursor.updated_at.timestamp_micros(), cursor.id);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_token(token: &str) -> Option<RunCursor> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let (micros, id) = std::str::from_utf8(&raw).ok()?.split_once(':')?;
    Some(RunCursor {
        updated_at: DateTime::from_timestamp_micros(micros.parse().ok()?)
            .filter(crate::model::is_storable)?,
        id: id.parse::<RunId>().ok()?,
    })
}

pub async fn list_tasks(call: &Call, params: &Params) -> Result<Value, A2aError> {
    params::check_tenant(params, &call.tenant)?;
    let page_size = params::integer(params, "pageSize", 1..=MAX_PAGE)?.unwrap_or(DEFAULT_PAGE);
    let history_length = params::history_length(params)?;
    let include_artifacts = params::boolean(params, "includeArtifacts")?.unwrap_or(false);
    let cursor = match params::string(params, "pageToken")? {
        None => None,
        Some(token) => Some(
            decode_token(token)
                .ok_or_else(|| A2aError::invalid("pageToken", "is not a token this server gave"))?,
        ),
    };
    let state =
        match params::string(params, "status")? {
            None => None,
            Some(name) => Some(State::parse(name).ok_or_else(|| {
                A2aError::invalid("status", format!("`{name}` is not a task state"))
            })?),
        };
    let updated_since = match params::string(params, "statusTimestampAfter")? {
        None => None,
        Some(raw) => {
            let at = DateTime::parse_from_rfc3339(raw)
                .map_err(|_| {
                    A2aError::invalid("statusTimestampAfter", "must be an RFC 3339 timestamp")
                })?
                .with_timezone(&Utc);
            if !crate::model::is_storable(&at) {
                return Err(A2aError::invalid(
                    "statusTimestampAfter",
                    "must be between the years 1 and 9999",
                ));
            }
            Some(at)
        }
    };
    let mut filter = RunFilter {
        agent: Some(call.agent.name().to_owned()),
        session: None,
        statuses: state.map(statuses).unwrap_or_default(),
        updated_since,
    };
    let empty = || json!({"tasks": [], "nextPageToken": "", "pageSize": page_size, "totalSize": 0});
    if let Some(key) = params::string(params, "contextId")? {
        let found = match SessionRef::parse(key) {
            Some(reference) => {
                call.state
                    .engine()
                    .find_session(&call.tenant, &reference)
                    .await?
            }
            None => None,
        };
        match found {
            Some(session) => filter.session = Some(session.id),
            None => return Ok(empty()),
        }
    }
    let (runs, total) = call
        .state
        .engine()
        .list_runs(&call.tenant, &filter, cursor, page_size as u32 + 1)
        .await?;
    let more = runs.len() > page_size as usize;
    let page = &runs[..runs.len().min(page_size as usize)];
    let shown = Shown {
        history_length,
        artifacts: include_artifacts,
    };
    // The page's runs, sessions, events and messages: one read each for the whole page.
    let ids: Vec<RunId> = page.iter().map(|listed| listed.id).collect();
    let parts = ViewParts {
        messages: history_length != Some(0),
        ..ViewParts::EVENTS
    };
    let views = call
        .state
        .engine()
        .run_views(&call.tenant, &ids, parts)
        .await?;
    let tasks_out: Vec<Value> = views
        .iter()
        .map(|view| tasks::snapshot(view).to_json(call.version, shown))
        .collect();
    let next = match (more, page.last()) {
        (true, Some(last)) => encode_token(&RunCursor {
            updated_at: last.updated_at,
            id: last.id,
        }),
        _ => String::new(),
    };
    Ok(json!({
        "tasks": tasks_out,
        "nextPageToken": next,
        "pageSize": page_size,
        "totalSize": total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_strangers_are_refused() {
        let cursor = RunCursor {
            updated_at: DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap(),
            id: RunId::generate(),
        };
        assert_eq!(decode_token(&encode_token(&cursor)), Some(cursor));
        for bad in ["", "x", "MTIz", "bm90OmE"] {
            assert_eq!(decode_token(bad), None, "{bad}");
        }
    }
}
