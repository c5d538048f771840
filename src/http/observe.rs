//! What every response carries and counts: its request id (`Agentry-Request-Id`, made by
//! the server for each request and named in the request's log span), and the HTTP metrics:
//! requests by route template, method and status, their latency, and the event streams
//! open now.

use std::fmt::Display;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{HttpMessage, web};
use tracing_actix_web::RequestId;

use crate::app::AppState;
use crate::http::ratelimit::QuotaHolder;
use crate::metrics::GaugeGuard;

/// The response header naming the request in the server's logs.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("agentry-request-id");

/// The route label of a request no route matched.
const UNMATCHED: &str = "unmatched";

/// The request's route template, matched once per request: the request span and the
/// metrics both name it, and matching walks the routes again each time.
struct MatchedRoute(Option<Rc<str>>);

/// The route template the request's path matches (`/sessions/{session_id}/turns`), if any:
/// looked up in the route table by the first caller, before routing, then kept.
pub(super) fn route_of(req: &ServiceRequest) -> Option<Rc<str>> {
    if let Some(MatchedRoute(route)) = req.extensions().get::<MatchedRoute>() {
        return route.clone();
    }
    let route: Option<Rc<str>> = req.match_pattern().map(Into::into);
    req.extensions_mut().insert(MatchedRoute(route.clone()));
    route
}

/// A method as a label: the ones the API knows by name, any other as `other` (a client
/// may send any token as a method).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    let request_id = req.extensions().get::<RequestId>().copied();
    let metrics = req
        .app_data::<web::Data<AppState>>()
        .map(|state| state.metrics().clone());
    let method = method_label(req.method());
    let route = route_of(&req);
    let route = route.as_deref().unwrap_or(UNMATCHED);
    // The request's database calls share one `database.timeout_ms`.
    let budget = req
        .app_data::<web::Data<AppState>>()
        .map(|state| state.engine().database_timeout());
    let called = next.call(req);
    let called = match budget {
        Some(budget) => crate::engine::with_call_budget(budget, called).await,
        None => called.await,
    };
    let mut response = match called {
        Ok(response) => response.map_into_boxed_body(),
        Err(error) => {
            if let Some(metrics) = &metrics {
                let status = error.as_response_error().status_code().as_u16();
                metrics.http_request(route, method, status, None, started.elapsed());
            }
            return Err(error);
        }
    };
    if let Some(metrics) = metrics {
        let tenant = response
            .request()
            .extensions()
            .get::<QuotaHolder>()
            .map(|holder| holder.0);
        metrics.http_request(
            route,
            method,
            response.status().as_u16(),
            tenant.as_ref().map(|t| t as &dyn Display),
            started.elapsed(),
        );
        let streams = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if streams {
            let open = metrics.sse_connection();
            response = response.map_body(|_, body| BoxBody::new(Counted { body, _open: open }));
        }
    }
    if let Some(id) = request_id
        && let Ok(value) = HeaderValue::from_str(&id.to_string())
    {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    Ok(response)
}

/// A response body counted among the open event streams until it is dropped: when the
/// stream ends or the client leaves.
struct Counted {
    body: BoxBody,
    _open: GaugeGuard,
}

impl MessageBody for Counted {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.body).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_a_client_invents_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::OPTIONS), "OPTIONS");
        let invented = Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&invented), "other");
    }
}
