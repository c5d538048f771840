//! `GET /usage` and `GET /quotas`: the calling tenant's own consumption (in total and per
//! day) and the quotas it is held to with what is left of them. The admin API reports the
//! same usage of any tenant through [`usage_report`].

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::app::AppState;
use crate::engine::{DayUsage, UsageTotals};
use crate::http::Query;
use crate::http::TenantAuth;
use crate::http::body::Rfc3339;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas as doc;
use crate::model::{Quota, TenantId};

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// Turns created at or after this time (RFC 3339; default: the beginning).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<Rfc3339>,
    /// Turns created before this time (RFC 3339; default: now).
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<Rfc3339>,
}

#[derive(Serialize)]
pub struct UsageReport {
    tenant_id: String,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    #[serde(flatten)]
    totals: UsageTotals,
    /// The same, per UTC day with turns, oldest first.
    days: Vec<DayUsage>,
}

/// What the tenant's turns created in `[from, to)` consumed, in total and per day.
pub async fn usage_report(
    state: &AppState,
    tenant: TenantId,
    query: &UsageQuery,
) -> Result<UsageReport, ApiError> {
    let from = query.from.map_or(DateTime::UNIX_EPOCH, |t| t.0);
    let to = query.to.map_or_else(crate::model::now, |t| t.0);
    for (name, at) in [("from", from), ("to", to)] {
        if !crate::model::is_storable(&at) {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("{name}: must be between the years 1 and 9999"),
            ));
        }
    }
    if from >= to {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "from: must be before to",
        ));
    }
    let days = state.engine().usage_by_day(&tenant, from, to).await?;
    let totals = days
        .iter()
        .fold(UsageTotals::default(), |sum, day| UsageTotals {
            turns: sum.turns + day.totals.turns,
            input_tokens: sum.input_tokens + day.totals.input_tokens,
            output_tokens: sum.output_tokens + day.totals.output_tokens,
            tool_calls: sum.tool_calls + day.totals.tool_calls,
            wall_ms: sum.wall_ms + day.totals.wall_ms,
        });
    Ok(UsageReport {
        tenant_id: tenant.to_string(),
        from,
        to,
        totals,
        days,
    })
}

/// The calling tenant's consumption: turns created in `[from, to)`.
#[utoipa::path(get, path = "/usage", tag = "tenant",
    security(("tenant" = [])),
    params(UsageQuery),
    responses(
        (status = 200, description = "The tenant's consumption", body = doc::UsageReport),
        (status = 400, description = "A bad `from` or `to`", body = doc::ErrorBody),
    ))]
pub async fn get_usage(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: Query<UsageQuery>,
) -> Result<HttpResponse, ApiError> {
    let report = usage_report(&state, auth.tenant_id, &query).await?;
    Ok(HttpResponse::Ok().json(report))
}

/// The quotas the calling tenant is held to, and what is left of them.
#[utoipa::path(get, path = "/quotas", tag = "tenant",
    security(("tenant" = [])),
    responses(
        (status = 200, description = "The tenant's quotas", body = doc::TenantQuotaReport),
    ))]
pub async fn get_quotas(
    auth: TenantAuth,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let tenant = auth.tenant_id;
    let book = state.engine().quotas();
    let quotas = book.of(&tenant);
    let today = Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc();
    let tokens_today = state.engine().tokens_since(&tenant, today).await?;
    let sessions = state.engine().count_sessions(&tenant).await?;
    let mut remaining: Map<String, Value> = Quota::ALL
        .into_iter()
        .map(|quota| (quota.as_str().to_owned(), Value::Null))
        .collect();
    for standing in book.standings(&tenant) {
        remaining.insert(
            standing.quota.as_str().to_owned(),
            json!(standing.remaining),
        );
    }
    for (quota, used) in [
        (Quota::TokensPerDay, tokens_today),
        (Quota::StoredSessions, sessions),
    ] {
        if let Some(limit) = quotas.limit(quota) {
            remaining.insert(quota.as_str().to_owned(), json!(limit.saturating_sub(used)));
        }
    }
    Ok(HttpResponse::Ok().json(json!({
        "tenant_id": tenant,
        "quotas": quotas.to_map(),
        "used": {"tokens_per_day": tokens_today, "stored_sessions": sessions},
        "remaining": remaining,
    })))
}
