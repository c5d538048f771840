//! `Agentry-Trace-Id`: the trace a request's span belongs to, on every response while
//! traces are exported (see README "Tracing"), so that a client can find a turn's trace.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;

pub const TRACE_ID_HEADER: HeaderName = HeaderName::from_static("agentry-trace-id");

pub async fn trace_id_header(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let trace = crate::traces::current_traceparent()
        .as_deref()
        .and_then(crate::traces::trace_id_of);
    let mut response = next.call(req).await?.map_into_boxed_body();
    if let Some(trace) = trace
        && let Ok(value) = HeaderValue::from_str(&trace)
    {
        response.headers_mut().insert(TRACE_ID_HEADER, value);
    }
    Ok(response)
}
