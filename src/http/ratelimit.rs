//! The tenant's rate quotas on the wire: the `RateLimit-Policy` and `RateLimit` response
//! headers of the IETF draft (draft-ietf-httpapi-ratelimit-headers), one list item per
//! quota that bounds the tenant, named after the quota:
//!
//! ```text
//! RateLimit-Policy: "requests_per_minute";q=600;w=60, "turns_per_minute";q=60;w=60
//! RateLimit: "requests_per_minute";r=97;t=1, "turns_per_minute";r=9;t=1
//! ```
//!
//! `q` is the quota, `w` the window it is given for in seconds, `r` how many may be used now
//! and `t` the seconds until all of them are back (the per-minute quotas are paced, see
//! `engine::quotas`). With several processes, `r` is what this process knows: it may lag by
//! the units other processes hold.

use actix_web::HttpMessage;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpResponseBuilder, web};

use crate::app::AppState;
use crate::model::{QuotaExceeded, QuotaStanding, TenantId};

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Put in a request's extensions once a tenant token was accepted: its response carries the
/// tenant's rate quotas.
#[derive(Debug, Clone, Copy)]
pub struct QuotaHolder(pub TenantId);

/// The two header values for `standings`.
fn header_values(standings: &[QuotaStanding]) -> (String, String) {
    let policy = standings
        .iter()
        .map(|s| format!("\"{}\";q={};w={}", s.quota, s.limit, s.window))
        .collect::<Vec<_>>()
        .join(", ");
    let current = standings
        .iter()
        .map(|s| format!("\"{}\";r={};t={}", s.quota, s.remaining, s.reset))
        .collect::<Vec<_>>()
        .join(", ");
    (policy, current)
}

/// The headers of a refusal: the quota that refused, nothing left of it until `retry_after`.
pub fn insert_refusal_headers(response: &mut HttpResponseBuilder, refusal: &QuotaExceeded) {
    let policy = match refusal.quota.window_seconds() {
        Some(window) => format!("\"{}\";q={};w={window}", refusal.quota, refusal.limit),
        None => format!("\"{}\";q={}", refusal.quota, refusal.limit),
    };
    let current = format!("\"{}\";r=0;t={}", refusal.quota, refusal.retry_after);
    response.insert_header((RATELIMIT_POLICY, policy));
    response.insert_header((RATELIMIT, current));
}

/// Adds the tenant's rate quotas to every response of a request made with its token,
/// unless a refusal already named its quota.
pub async fn rate_limit_headers(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut response = next.call(request).await?;
    if response.headers().contains_key(RATELIMIT) {
        return Ok(response);
    }
    let holder = response
        .request()
        .extensions()
        .get::<QuotaHolder>()
        .copied();
    let Some(QuotaHolder(tenant)) = holder else {
        return Ok(response);
    };
    let Some(state) = response
        .request()
        .app_data::<web::Data<AppState>>()
        .cloned()
    else {
        return Ok(response);
    };
    let standings = state.engine().quotas().standings(&tenant);
    if standings.is_empty() {
        return Ok(response);
    }
    let (policy, current) = header_values(&standings);
    if let (Ok(policy), Ok(current)) = (
        HeaderValue::from_str(&policy),
        HeaderValue::from_str(&current),
    ) {
        let headers = response.headers_mut();
        headers.insert(RATELIMIT_POLICY, policy);
        headers.insert(RATELIMIT, current);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Quota;

    #[test]
    fn standings_are_written_as_draft_list_items() {
        let standings = [
            QuotaStanding {
                quota: Quota::RequestsPerMinute,
                limit: 600,
                remaining: 598,
                reset: 41,
                window: 60,
            },
            QuotaStanding {
                quota: Quota::TokensPerDay,
                limit: 100_000,
                remaining: 0,
                reset: 3600,
                window: 86_400,
            },
        ];
        let (policy, current) = header_values(&standings);
        assert_eq!(
            policy,
            "\"requests_per_minute\";q=600;w=60, \"tokens_per_day\";q=100000;w=86400"
        );
        assert_eq!(
            current,
            "\"requests_per_minute\";r=598;t=41, \"tokens_per_day\";r=0;t=3600"
        );
    }
}
