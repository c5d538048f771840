//! `GET /files/{id}`: a stored part content, to the tenant that owns it, with its type.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::{ApiError, OrNotFound};
use crate::model::FileId;

/// A stored part's content, served with the content type it was stored with.
#[utoipa::path(get, path = "/files/{file_id}", tag = "AAP",
    security(("tenant" = [])),
    params(("file_id" = String, Path, description = "A file id (`file_…`), from a part's `contentUrl`")),
    responses(
        (status = 200, description = "The content, with its stored content type", content(("*/*"))),
        (status = 404, description = "No such file of this tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_file(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id: FileId = path.parse().map_err(|_| ApiError::not_found("file"))?;
    let file = state
        .engine()
        .get_file(&auth.tenant_id, &id)
        .await
        .or_not_found("file")?;
    // The type came from a client: one that is not a valid header value is served as bytes.
    let content_type = header::HeaderValue::from_str(&file.content_type)
        .unwrap_or(header::HeaderValue::from_static("application/octet-stream"));
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, content_type))
        .insert_header((
            header::CACHE_CONTROL,
            "private, max-age=31536000, immutable",
        ))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        // Uploaded HTML or SVG must not run as agentry's own pages.
        .insert_header(("Content-Security-Policy", "default-src 'none'; sandbox"))
        .body(file.data))
}
