//! `GET /`: what this server is and where to go; `GET /openapi.json` and `GET /docs`: the
//! API description, and a page that browses it. The page and its assets are embedded in the
//! binary and reference nothing but this server (relative URLs, relative redirects), so it
//! works offline and behind a path prefix.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::openapi::{self, schemas as doc};
use crate::http::error::ApiError;

const PAGE: &str = include_str!("docs/index.html");

/// The page's assets: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "docs.js",
        "text/javascript; charset=utf-8",
        include_str!("docs/docs.js"),
    ),
    (
        "docs.css",
        "text/css; charset=utf-8",
        include_str!("docs/docs.css"),
    ),
];

/// A page and its assets: no script or style from anywhere but this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// Where to go from here: a browser (asking for HTML) is sent to the console (or, when it
/// is off, to `/docs`); any other client gets a small JSON index of the server's entry
/// points.
#[utoipa::path(get, path = "/", tag = "documentation",
    responses(
        (status = 200, description = "The server's name, version and entry points",
            content_type = "application/json", body = Object,
            example = json!({"name": "agentry", "version": "0.1.0", "console": "/console/",
                "docs": "/docs", "openapi": "/openapi.json", "meta": "/meta",
                "protocols": {"aap": "/", "agentscope": "/agentscope", "acp": "/acp",
                    "a2a": "/a2a/{agent}"}})),
        (status = 303, description = "To the console (`Accept: text/html`)",
            headers(("Location" = String, description = "The console, relative to `/`"))),
    ))]
pub async fn get_index(req: HttpRequest, state: web::Data<crate::app::AppState>) -> HttpResponse {
    let console = &state.settings().console;
    let console = console
        .enabled
        .then(|| format!("{}/", console.path.trim_end_matches('/')));
    let wants_html = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if wants_html {
        let target = console.as_deref().unwrap_or("/docs");
        return HttpResponse::SeeOther()
            .insert_header((header::LOCATION, target.trim_start_matches('/')))
            .finish();
    }
    HttpResponse::Ok().json(json!({
        "name": "agentry",
        "version": env!("CARGO_PKG_VERSION"),
        "console": console,
        "docs": "/docs",
        "openapi": "/openapi.json",
        "meta": "/meta",
        "health": "/healthz",
        "protocols": {
            "aap": "/",
            "agentscope": "/agentscope",
            "acp": "/acp",
            "a2a": "/a2a/{agent}",
        },
    }))
}

/// `/docs/` → `/docs`, where the page's relative URLs resolve.
#[utoipa::path(get, path = "/docs/", tag = "documentation",
    responses((status = 308, description = "To the page at `/docs`",
        headers(("Location" = String, description = "`../docs`")))))]
pub async fn redirect_to_docs() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header((header::LOCATION, "../docs"))
        .finish()
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "documentation",
    responses((status = 200, description = "The OpenAPI 3.1 description of every route",
        content_type = "application/json", body = Object)))]
pub async fn get_openapi() -> HttpResponse {
    openapi::json_response()
}

/// A page that browses this document.
#[utoipa::path(get, path = "/docs", tag = "documentation",
    responses((status = 200, description = "An HTML page", content_type = "text/html", body = String)))]
pub async fn get_docs() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(PAGE)
}

/// The page's script and style sheet.
#[utoipa::path(get, path = "/docs/{asset}", tag = "documentation",
    params(("asset" = String, Path, description = "`docs.js` or `docs.css`")),
    responses(
        (status = 200, description = "The asset", content(("text/javascript"), ("text/css"))),
        (status = 404, description = "No such asset", body = doc::ErrorBody),
    ))]
pub async fn get_docs_asset(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (_, content_type, content) = ASSETS
        .iter()
        .find(|(name, _, _)| *name == path.as_str())
        .ok_or_else(|| ApiError::not_found("asset"))?;
    Ok(HttpResponse::Ok()
        .content_type(*content_type)
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(*content))
}
