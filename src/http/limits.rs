//! Limits on what a client may hold the server up with: request heads larger than
//! [`MAX_HEADER_BYTES`] get `431 headers_too_large`, and a body that has not fully arrived
//! `server.body_read_timeout_seconds` after its head gets `408 request_timeout` and the
//! connection is closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::ConnectionType;
use actix_web::middleware::Next;
use actix_web::{HttpMessage, ResponseError, web};
use futures_util::StreamExt;

use crate::app::AppState;
use crate::http::error::{ApiError, ErrorCode};

/// Largest request head (header names and values) answered by the application. The HTTP
/// layer itself refuses heads over 128 KiB with a bare `431` before any application code
/// runs.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

pub async fn request_limits(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let head_bytes: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if head_bytes > MAX_HEADER_BYTES {
        let error = ApiError::new(
            ErrorCode::HeadersTooLarge,
            format!("request headers are larger than {MAX_HEADER_BYTES} bytes"),
        );
        return Ok(req.into_response(closing(error.error_response())));
    }
    let timeout = req
        .app_data::<web::Data<AppState>>()
        .map_or(Duration::from_secs(30), |state| {
            Duration::from_secs(state.settings().server.body_read_timeout_seconds)
        });
    let timed_out = Arc::new(AtomicBool::new(false));
    let payload = req.take_payload();
    req.set_payload(with_deadline(payload, timeout, timed_out.clone()));
    let response = next.call(req).await?;
    if timed_out.load(Ordering::Relaxed) {
        let error = ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} seconds",
                timeout.as_secs()
            ),
        );
        let (request, _) = response.into_parts();
        return Ok(ServiceResponse::new(
            request,
            closing(error.error_response()),
        ));
    }
    Ok(response.map_into_boxed_body())
}

fn closing(mut response: actix_web::HttpResponse) -> actix_web::HttpResponse {
    response
        .head_mut()
        .set_connection_type(ConnectionType::Close);
    response
}

/// The payload, failing once `timeout` has passed before its end.
fn with_deadline(payload: Payload, timeout: Duration, timed_out: Arc<AtomicBool>) -> Payload {
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = async_stream::stream! {
        let mut payload = payload;
        loop {
            match tokio::time::timeout_at(deadline, payload.next()).await {
                Ok(Some(chunk)) => yield chunk,
                Ok(None) => break,
                Err(_) => {
                    timed_out.store(true, Ordering::Relaxed);
                    yield Err(PayloadError::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "request body timed out",
                    )));
                    break;
                }
            }
        }
    };
    Payload::Stream {
        payload: Box::pin(stream),
    }
}
