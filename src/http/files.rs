//! `GET /files/{id}`: a stored part content, to the tenant that owns it, with its type.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::app::AppState;
use crate::auth::TenantAuth;
use crate::error::{ApiError, OrNotFound};
use crate::model::FileId;

pub async fn get_file(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id: FileId = path.parse().map_err(|_| ApiError::not_found("file"))?;
    let file = state
        .store
        .get_file(&auth.tenant_id, &id)
        .await
        .or_not_found("file")?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, file.content_type))
        .insert_header((
            header::CACHE_CONTROL,
            "private, max-age=31536000, immutable",
        ))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(file.data))
}
