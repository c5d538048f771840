//! Content types: an answer is `application/json`, or `application/a2a+json` when the request
//! used it (as its `Content-Type` or in `Accept`); a JSON-RPC request must be JSON.

use actix_web::HttpRequest;
use actix_web::HttpResponse;
use actix_web::http::header::{self, HeaderValue};

pub const A2A_JSON: &str = "application/a2a+json";

/// Whether the request named `application/a2a+json`.
pub fn asks_a2a_json(req: &HttpRequest) -> bool {
    [header::CONTENT_TYPE, header::ACCEPT].iter().any(|name| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|t| crate::model::media_type(t.trim()).eq_ignore_ascii_case(A2A_JSON))
            })
    })
}

/// The request's `Content-Type` when it is not JSON (`application/json` or any
/// `application/…+json`); a request without one is taken as JSON.
pub fn not_json(req: &HttpRequest) -> Option<String> {
    let value = req.headers().get(header::CONTENT_TYPE)?;
    let text = value.to_str().unwrap_or("\u{fffd}");
    let media = crate::model::media_type(text).trim().to_ascii_lowercase();
    let json = media == "application/json"
        || media
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"));
    (!json).then(|| text.to_owned())
}

/// A JSON answer labelled `application/a2a+json` when the request used it; other answers
/// (event streams) as they are.
pub fn labelled(a2a_json: bool, mut response: HttpResponse) -> HttpResponse {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let media = crate::model::media_type(v);
            media.eq_ignore_ascii_case("application/json") || media.eq_ignore_ascii_case(A2A_JSON)
        });
    if is_json {
        let value = if a2a_json {
            A2A_JSON
        } else {
            "application/json"
        };
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
    }
    response
}
