//! Open event streams: each SSE response holds a slot of its tenant's, of its client
//! address's and of the process's stream budget (its file descriptors less
//! `limits.fd_reserve`) until it ends, so that one tenant or one client cannot take every
//! descriptor and `/healthz`, `/readyz` and the admin API always answer. A request that
//! may answer with a stream takes its slot before its handler runs (a refused turn is never
//! started) and gives it back when the answer is not a stream.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{ResponseError, web};

use crate::app::AppState;
use crate::auth::Principal;
use crate::config::LimitsSettings;
use crate::http::error::{ApiError, ErrorCode};
use crate::model::TenantId;

/// How long a refused client is asked to wait.
const RETRY_AFTER_SECONDS: u32 = 5;

#[derive(Debug, Default)]
struct Counts {
    tenants: HashMap<TenantId, usize>,
    addresses: HashMap<IpAddr, usize>,
    total: usize,
}

/// The open streams per tenant, per client address and in all.
#[derive(Debug)]
pub struct StreamGate {
    per_tenant: usize,
    per_address: usize,
    total: usize,
    counts: Mutex<Counts>,
}

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    Tenant(usize),
    Address(usize),
    Server(usize),
}

impl StreamGate {
    /// `descriptors`: the process's file descriptor limit (the streams get it less the
    /// reserve).
    pub fn new(limits: &LimitsSettings, descriptors: u64) -> StreamGate {
        let budget = descriptors.saturating_sub(limits.fd_reserve).max(1);
        StreamGate {
            per_tenant: limits.max_streams_per_tenant,
            per_address: limits.max_streams_per_address,
            total: usize::try_from(budget).unwrap_or(usize::MAX),
            counts: Mutex::new(Counts::default()),
        }
    }

    /// Streams the process may hold at once.
    pub fn budget(&self) -> usize {
        self.total
    }

    /// A slot for one more stream of `tenant` from `address`, or which limit refused it.
    pub fn open(
        self: &Arc<Self>,
        tenant: Option<TenantId>,
        address: Option<IpAddr>,
    ) -> Result<StreamSlot, Full> {
        let address = address.map(address_key);
        let mut counts = self.counts.lock().expect("stream counts lock");
        if counts.total >= self.total {
            return Err(Full::Server(self.total));
        }
        if let Some(tenant) = &tenant
            && counts.tenants.get(tenant).copied().unwrap_or(0) >= self.per_tenant
        {
            return Err(Full::Tenant(self.per_tenant));
        }
        if let Some(address) = &address
            && counts.addresses.get(address).copied().unwrap_or(0) >= self.per_address
        {
            return Err(Full::Address(self.per_address));
        }
        counts.total += 1;
        if let Some(tenant) = tenant {
            *counts.tenants.entry(tenant).or_default() += 1;
        }
        if let Some(address) = address {
            *counts.addresses.entry(address).or_default() += 1;
        }
        Ok(StreamSlot {
            gate: self.clone(),
            tenant,
            address,
        })
    }

    fn close(&self, tenant: Option<TenantId>, address: Option<IpAddr>) {
        let mut counts = self.counts.lock().expect("stream counts lock");
        counts.total = counts.total.saturating_sub(1);
        if let Some(tenant) = tenant
            && let Some(n) = counts.tenants.get_mut(&tenant)
        {
            *n -= 1;
            if *n == 0 {
                counts.tenants.remove(&tenant);
            }
        }
        if let Some(address) = address
            && let Some(n) = counts.addresses.get_mut(&address)
        {
            *n -= 1;
            if *n == 0 {
                counts.addresses.remove(&address);
            }
        }
    }
}

/// IPv6 clients usually hold a whole /64: they count as one.
fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// One open stream's place; given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    gate: Arc<StreamGate>,
    tenant: Option<TenantId>,
    address: Option<IpAddr>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.gate.close(self.tenant, self.address);
    }
}

/// Whether a route may answer with an event stream.
fn may_stream(method: &Method, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    if *method == Method::GET {
        return path.ends_with("/events") || path.ends_with(":subscribe");
    }
    if *method != Method::POST {
        return false;
    }
    let a2a_rpc = path
        .strip_prefix("/a2a/")
        .is_some_and(|agent| !agent.is_empty() && !agent.contains('/'));
    path.ends_with("/turns")
        || path == "/acp/runs"
        || path.ends_with("/process")
        || path.ends_with(":stream")
        || path.ends_with(":subscribe")
        || a2a_rpc
}

fn refusal(full: Full) -> ApiError {
    let message = match full {
        Full::Tenant(n) => {
            format!("this tenant has {n} event streams open, its most; retry when one closes")
        }
        Full::Address(n) => format!(
            "this client address has {n} event streams open, its most; retry when one closes"
        ),
        Full::Server(_) => {
            "the server holds all the event streams it can; retry shortly".to_owned()
        }
    };
    ApiError::new(ErrorCode::TooManyStreams, message).retry_after(RETRY_AFTER_SECONDS)
}

/// Takes a stream slot for requests that may stream; refuses with 429 too_many_streams.
pub async fn limit_streams(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    if !may_stream(req.method(), req.path()) {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let tenant = match super::authenticate(&state, req.request()).await {
        Ok(Principal::Tenant { tenant_id, .. }) => Some(tenant_id),
        // The handler refuses it as it does any other.
        _ => return Ok(next.call(req).await?.map_into_boxed_body()),
    };
    let address = super::forwarded::client_ip(req.request(), state.settings());
    let slot = match state.streams().open(tenant, address) {
        Ok(slot) => slot,
        Err(full) => {
            let response = refusal(full).error_response();
            return Ok(req.into_response(response));
        }
    };
    let response = next.call(req).await?.map_into_boxed_body();
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streaming {
        return Ok(response);
    }
    Ok(response.map_body(|_, body| BoxBody::new(Held { body, _slot: slot })))
}

/// A stream's body, holding its slot until the body ends or the client leaves.
struct Held<B> {
    body: B,
    _slot: StreamSlot,
}

impl<B: MessageBody + Unpin> MessageBody for Held<B> {
    type Error = B::Error;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
}

/// The process's file descriptor limit, its soft limit raised to the hard one when it can
/// be: what the stream budget is made of.
pub fn raise_descriptor_limit() -> u64 {
    #[cfg(unix)]
    {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        match getrlimit(Resource::RLIMIT_NOFILE) {
            Ok((soft, hard)) => {
                if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                    tracing::info!(from = soft, to = hard, "raised the file descriptor limit");
                    return hard;
                }
                soft
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the file descriptor limit");
                1024
            }
        }
    }
    #[cfg(not(unix))]
    {
        1024
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_tenant: usize, per_address: usize, reserve: u64) -> LimitsSettings {
        LimitsSettings {
            history_page_bytes: 1 << 20,
            session_max_messages: 10,
            session_max_bytes: 1 << 20,
            max_streams_per_tenant: per_tenant,
            max_streams_per_address: per_address,
            fd_reserve: reserve,
        }
    }

    #[test]
    fn slots_are_counted_per_tenant_address_and_budget_and_given_back() {
        let gate = Arc::new(StreamGate::new(&limits(2, 3, 1000), 1004));
        assert_eq!(gate.budget(), 4);
        let (a, b) = (TenantId::generate(), TenantId::generate());
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let two: IpAddr = "2001:db8::1".parse().unwrap();
        let first = gate.open(Some(a), Some(one)).unwrap();
        let _second = gate.open(Some(a), Some(one)).unwrap();
        assert_eq!(gate.open(Some(a), Some(two)).unwrap_err(), Full::Tenant(2));
        let _third = gate.open(Some(b), Some(one)).unwrap();
        assert_eq!(gate.open(Some(b), Some(one)).unwrap_err(), Full::Address(3));
        // One /64 is one address.
        let _fourth = gate.open(Some(b), "2001:db8::2".parse().ok()).unwrap();
        assert_eq!(gate.open(None, Some(two)).unwrap_err(), Full::Server(4));
        drop(first);
        assert!(gate.open(Some(a), Some(two)).is_ok());
    }

    #[test]
    fn only_stream_routes_take_a_slot() {
        for (method, path) in [
            (Method::GET, "/sessions/s/events"),
            (Method::GET, "/sessions/s/turns/t/events"),
            (Method::GET, "/acp/runs/r/events"),
            (Method::POST, "/sessions/s/turns"),
            (Method::POST, "/acp/runs"),
            (Method::POST, "/agentscope/process"),
            (Method::POST, "/a2a/echo"),
            (Method::POST, "/a2a/echo/"),
            (Method::POST, "/a2a/echo/message:stream"),
            (Method::GET, "/a2a/echo/tasks/x:subscribe"),
        ] {
            assert!(may_stream(&method, path), "{method} {path}");
        }
        for (method, path) in [
            (Method::GET, "/healthz"),
            (Method::GET, "/sessions/s/history"),
            (Method::POST, "/sessions"),
            (Method::GET, "/admin/tenants"),
            (Method::POST, "/a2a/echo/message:send"),
        ] {
            assert!(!may_stream(&method, path), "{method} {path}");
        }
    }
}
