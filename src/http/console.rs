//! The browser console: one page and its assets, built from `console/` into `console/dist`
//! and embedded in the binary. It is a client of the public API like any other (it reaches
//! the API through a relative URL, so it works behind a path prefix) and is served with a
//! policy that lets it load and run nothing but what this server sends.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};

use crate::config::ConsoleSettings;
use crate::http::error::ApiError;

const PAGE: &str = include_str!("../../console/dist/index.html");

/// Where the page says the API is; replaced by the relative URL of the server's root.
const API_BASE_MARK: &str = "%AGENTRY_API_BASE%";

/// The assets under `{path}/assets/`: name, content type, content.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/dist/assets/console.js"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/dist/assets/console.css"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_bytes!("../../console/dist/assets/favicon.svg"),
    ),
];

/// Scripts, styles and connections to this server only; nothing inline, no frames, no
/// forms posted elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; font-src 'self'; manifest-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page as served: its API base filled in once.
struct Page(web::Bytes);

/// Registers the console's routes under `settings.path`, unless it is disabled.
pub fn configure(cfg: &mut web::ServiceConfig, settings: &ConsoleSettings) {
    if !settings.enabled {
        return;
    }
    let page = Page(PAGE.replace(API_BASE_MARK, &settings.api_base()).into());
    let path = settings.path.as_str();
    cfg.service(
        web::scope(path)
            .app_data(web::Data::new(page))
            .service(web::resource("").get(redirect_to_page))
            .service(web::resource("/").get(get_page))
            .service(web::resource("/assets/{asset}").get(get_asset)),
    );
}

/// `{path}` → `{path}/`, so that the page's relative URLs resolve under it.
async fn redirect_to_page(request: HttpRequest) -> HttpResponse {
    let last = request.path().rsplit('/').next().unwrap_or_default();
    HttpResponse::PermanentRedirect()
        .insert_header((header::LOCATION, format!("{last}/")))
        .finish()
}

async fn get_page(page: web::Data<Page>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(page.0.clone())
}

async fn get_asset(name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (_, content_type, content) = ASSETS
        .iter()
        .find(|(asset, _, _)| *asset == name.as_str())
        .ok_or_else(|| ApiError::not_found("asset"))?;
    Ok(HttpResponse::Ok()
        .content_type(*content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(*content))
}
