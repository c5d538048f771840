//! `POST /auth/token`: client credentials for a bearer token (JSON or form body).

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};

use crate::app::AppState;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas as doc;

#[derive(Deserialize)]
struct TokenRequest {
    #[serde(default)]
    grant_type: Option<String>,
    client_id: String,
    client_secret: String,
}

#[derive(Serialize)]
struct TokenResponse {
    access_token: String,
    token_type: &'static str,
    expires_in: u64,
}

/// Exchanges client credentials for a tenant bearer token.
#[utoipa::path(post, path = "/auth/token", tag = "authentication", operation_id = "login",
    request_body(description = "Client credentials", content(
        (doc::TokenRequest = "application/json"),
        (doc::TokenRequest = "application/x-www-form-urlencoded"),
    )),
    responses(
        (status = 200, description = "A bearer token", body = doc::TokenResponse),
        (status = 400, description = "The body is not valid JSON or form, or a field is wrong", body = doc::ErrorBody),
        (status = 401, description = "Unknown client or wrong secret", body = doc::ErrorBody),
        (status = 403, description = "The tenant is suspended", body = doc::ErrorBody),
        (status = 429, description = "Too many failed attempts", body = doc::ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds before another attempt may succeed"))),
    ))]
pub async fn issue_token(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    // `curl -d '{…}'` labels JSON as a form: the body's first byte decides.
    let is_form = req.headers().get(CONTENT_TYPE).is_some_and(|v| {
        v.as_bytes()
            .starts_with(b"application/x-www-form-urlencoded")
    }) && body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{');
    let request: TokenRequest = if is_form {
        serde_urlencoded::from_bytes(&body).map_err(|e| {
            ApiError::new(ErrorCode::InvalidRequest, format!("invalid form body: {e}"))
        })?
    } else {
        let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                ErrorCode::InvalidJson,
                format!("request body is not valid JSON: {e}"),
            )
        })?;
        super::parse_json(value)?
    };
    if let Some(grant) = request.grant_type.as_deref()
        && grant != "client_credentials"
    {
        return Err(ApiError::invalid(
            "grant_type",
            "only `client_credentials` is supported",
        ));
    }
    let address = super::forwarded::client_ip(&req, state.settings());
    let signed = state
        .admin()
        .login(
            state.tokens(),
            &state.settings().auth,
            state.login_limits(),
            &request.client_id,
            &request.client_secret,
            address,
        )
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-store"))
        .json(TokenResponse {
            access_token: signed.token,
            token_type: "Bearer",
            expires_in: state.settings().auth.token_ttl_seconds,
        }))
}
