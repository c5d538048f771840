//! Cross-origin requests from browsers (`server.cors_allowed_origins`). A preflight from an
//! allowed origin is answered here, for every route; one from another origin gets 403. A
//! response to an allowed origin names it and exposes the headers clients read. Credentials
//! are never allowed (clients send bearer tokens, not cookies), so `*` is safe as configured.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, ResponseError, web};

use crate::app::AppState;
use crate::http::error::{ApiError, ErrorCode};

/// Methods the API answers.
const METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
/// Request headers a page may send.
const ALLOWED_HEADERS: &str =
    "Authorization, Content-Type, Accept, Idempotency-Key, Last-Event-ID, Agentry-Session";
/// Response headers a page may read.
const EXPOSED_HEADERS: &str = "Agentry-Turn-Id, Agentry-Session, Agentry-Request-Id, Location, \
     Retry-After, RateLimit, RateLimit-Policy";
/// How long a browser may keep a preflight's answer (seconds).
const MAX_AGE: &str = "600";

/// The `Access-Control-Allow-Origin` value for `origin`, if it is allowed.
fn allowed(origins: &[String], origin: &str) -> Option<HeaderValue> {
    if origins.iter().any(|o| o == "*") {
        return Some(HeaderValue::from_static("*"));
    }
    origins
        .iter()
        .any(|o| o.eq_ignore_ascii_case(origin))
        .then(|| HeaderValue::from_str(origin).ok())
        .flatten()
}

fn add_vary(headers: &mut HeaderMap) {
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

pub async fn cors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(origin) = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_owned)
    else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let allow = req
        .app_data::<web::Data<AppState>>()
        .and_then(|state| allowed(&state.settings().server.cors_allowed_origins, &origin));
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let response = match allow {
            Some(allow) => {
                let mut response = HttpResponse::new(StatusCode::NO_CONTENT);
                let headers = response.headers_mut();
                headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
                headers.insert(
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    HeaderValue::from_static(METHODS),
                );
                headers.insert(
                    header::ACCESS_CONTROL_ALLOW_HEADERS,
                    HeaderValue::from_static(ALLOWED_HEADERS),
                );
                headers.insert(
                    header::ACCESS_CONTROL_MAX_AGE,
                    HeaderValue::from_static(MAX_AGE),
                );
                add_vary(headers);
                response
            }
            None => {
                let mut response = ApiError::new(
                    ErrorCode::Forbidden,
                    "this origin may not call the API from a browser (server.cors_allowed_origins)",
                )
                .error_response();
                add_vary(response.headers_mut());
                response
            }
        };
        return Ok(req.into_response(response));
    }
    let mut response = next.call(req).await?.map_into_boxed_body();
    let headers = response.headers_mut();
    if let Some(allow) = allow {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED_HEADERS),
        );
    }
    add_vary(headers);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_origins_are_allowed_and_star_allows_all() {
        let origins = vec!["https://app.example.com".to_owned()];
        assert_eq!(
            allowed(&origins, "https://app.example.com").unwrap(),
            "https://app.example.com"
        );
        assert!(allowed(&origins, "https://evil.example.com").is_none());
        assert!(allowed(&origins, "http://app.example.com").is_none());
        assert!(allowed(&[], "https://app.example.com").is_none());
        assert_eq!(
            allowed(&["*".to_owned()], "https://any.example").unwrap(),
            "*"
        );
    }
}
