//! Extractors: a handler that takes `TenantAuth` or `AdminAuth` can only be reached by
//! that kind of caller.

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use tracing_actix_web::RootSpan;

use crate::app::AppState;
use crate::auth::AuthState;
use crate::auth::Principal;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::ratelimit::QuotaHolder;
use crate::model::{Quota, TenantId};

/// A caller holding a valid token of an active tenant.
#[derive(Debug, Clone)]
pub struct TenantAuth {
    pub tenant_id: TenantId,
    /// The token's id (`jti`): who made a change, in records that keep it.
    pub token_id: crate::model::TokenId,
}

/// A caller holding a valid admin token.
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

fn state_of(req: &HttpRequest) -> web::Data<AppState> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .expect("AppState is registered with the app")
}

/// The token of an `Authorization: Bearer …` header, in any casing of the scheme.
pub(super) fn bearer_token(req: &HttpRequest) -> Result<String, ApiError> {
    let header = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::MissingToken,
                "send `Authorization: Bearer <token>`",
            )
        })?;
    let malformed = |what: &str| {
        ApiError::new(
            ErrorCode::InvalidToken,
            format!("the Authorization header {what}: send `Authorization: Bearer <token>`"),
        )
    };
    let value = header
        .to_str()
        .map_err(|_| malformed("holds characters a token never has"))?;
    if value.trim().eq_ignore_ascii_case("bearer") {
        return Err(malformed("names no token after `Bearer`"));
    }
    match value.trim().split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            if token.trim().is_empty() {
                Err(malformed("names no token after `Bearer`"))
            } else {
                Ok(token.trim().to_owned())
            }
        }
        Some(_) => Err(malformed("uses a scheme other than `Bearer`")),
        None => Err(malformed("lacks the `Bearer ` scheme before the token")),
    }
}

/// Who the request's token speaks for, once verified: the stream limit's middleware and the
/// handler's extractor both ask, and the request pays for one verification.
struct Authenticated(Principal);

/// Verifies the request's bearer token and, for tenant tokens, that the tenant is active
/// and the token not revoked. Asked again for the same request, gives the answer of its
/// first success (a refusal is not kept: it is checked again).
pub async fn authenticate(state: &AppState, req: &HttpRequest) -> Result<Principal, ApiError> {
    if let Some(Authenticated(principal)) = req.extensions().get::<Authenticated>() {
        return Ok(principal.clone());
    }
    let token = bearer_token(req)?;
    let principal = state
        .tokens()
        .verify(&token)
        .map_err(|_| ApiError::new(ErrorCode::InvalidToken, "invalid token"))?;
    if let Principal::Tenant {
        tenant_id,
        jti,
        credential,
    } = &principal
    {
        if let Some(span) = req.extensions().get::<RootSpan>() {
            span.record("tenant_id", tracing::field::display(tenant_id));
        }
        match state
            .admin()
            .auth_state(state.auth_cache(), tenant_id, jti, credential.as_ref())
            .await?
        {
            AuthState::Active(own) => state.engine().quotas().observe(tenant_id, own),
            AuthState::Suspended => {
                return Err(ApiError::new(
                    ErrorCode::TenantSuspended,
                    "this tenant is suspended",
                ));
            }
            AuthState::Revoked => {
                return Err(ApiError::new(ErrorCode::InvalidToken, "invalid token"));
            }
        }
    }
    req.extensions_mut()
        .insert(Authenticated(principal.clone()));
    Ok(principal)
}

impl FromRequest for TenantAuth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state_of(&req);
            match authenticate(&state, &req).await? {
                Principal::Tenant { tenant_id, jti, .. } => {
                    req.extensions_mut().insert(QuotaHolder(tenant_id));
                    state
                        .engine()
                        .quotas()
                        .charge(&tenant_id, Quota::RequestsPerMinute)
                        .await?;
                    Ok(TenantAuth {
                        tenant_id,
                        token_id: jti,
                    })
                }
                Principal::Admin => Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "this route takes a tenant token, not an admin token",
                )),
            }
        })
    }
}

impl FromRequest for AdminAuth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state_of(&req);
            match state.tokens().verify(&bearer_token(&req)?) {
                Ok(Principal::Admin) => Ok(AdminAuth),
                Ok(Principal::Tenant { .. }) => Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "this route needs an admin token",
                )),
                Err(_) => Err(ApiError::new(ErrorCode::InvalidToken, "invalid token")),
            }
        })
    }
}

#[cfg(test)]
mod proptests {
    //! Properties of reading the `Authorization` header: any casing of the scheme and any
    //! spacing around the token are accepted; anything else is refused, never a panic.

    use actix_web::test::TestRequest;
    use proptest::prelude::*;

    use super::bearer_token;
    use crate::http::error::ErrorCode;

    fn with_authorization(value: &str) -> actix_web::HttpRequest {
        TestRequest::default()
            .insert_header(("authorization", value))
            .to_http_request()
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn a_bearer_token_is_read_whatever_the_casing_and_spacing(
            upper in prop::collection::vec(any::<bool>(), 6),
            before in " {0,3}",
            after in " {0,3}",
            token in "[!-~]{1,64}",
        ) {
            let scheme: String = "bearer"
                .chars()
                .zip(upper)
                .map(|(c, up)| if up { c.to_ascii_uppercase() } else { c })
                .collect();
            let request = with_authorization(&format!("{scheme} {before}{token}{after}"));
            prop_assert_eq!(bearer_token(&request).ok(), Some(token));
        }

        #[test]
        fn anything_else_is_refused_as_an_invalid_token(value in "[ -~]{0,80}") {
            let request = with_authorization(&value);
            match bearer_token(&request) {
                Ok(token) => {
                    let (scheme, rest) = value.split_once(' ').unwrap();
                    prop_assert!(scheme.eq_ignore_ascii_case("bearer"));
                    prop_assert!(!token.is_empty());
                    prop_assert_eq!(token.as_str(), rest.trim());
                }
                Err(error) => prop_assert_eq!(error.code, ErrorCode::InvalidToken),
            }
        }
    }
}
