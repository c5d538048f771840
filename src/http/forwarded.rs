//! Who is asking and under which address they reached us: forwarding headers
//! (`Forwarded`, `X-Forwarded-For`, `X-Forwarded-Host`, `X-Forwarded-Proto`) count only when
//! the TCP peer is one of `server.trusted_proxies`, and only an `http`/`https` scheme and a
//! well-formed `host[:port]` are ever written into a URL.

use std::net::{IpAddr, SocketAddr};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderName};
use actix_web::middleware::Next;
use actix_web::{HttpRequest, web};

use crate::app::AppState;
use crate::config::{IpNet, Settings};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

fn is_trusted(proxies: &[IpNet], ip: IpAddr) -> bool {
    proxies.iter().any(|net| net.contains(ip))
}

fn peer_is_trusted(req: &HttpRequest, proxies: &[IpNet]) -> bool {
    req.peer_addr()
        .is_some_and(|peer| is_trusted(proxies, peer.ip()))
}

/// Removes forwarding headers an untrusted peer sent, before anything (request logging
/// included) reads them.
pub async fn strip_untrusted(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let trusted = req.app_data::<web::Data<AppState>>().is_some_and(|state| {
        peer_is_trusted(req.request(), &state.settings().server.trusted_proxies)
    });
    if !trusted {
        let headers = req.headers_mut();
        for name in [
            header::FORWARDED,
            X_FORWARDED_FOR,
            X_FORWARDED_HOST,
            X_FORWARDED_PROTO,
        ] {
            headers.remove(name);
        }
    }
    next.call(req).await
}

/// `scheme://host[:port]` of absolute URLs: `server.public_url` when set, else what a
/// trusted proxy forwards, else the address the connection reached. Never the request's
/// bare `Host`: a cache in front that does not key on it could serve one client's choice
/// to everyone.
pub fn base_url(req: &HttpRequest, settings: &Settings) -> String {
    let public = settings.server.public_base();
    if !public.is_empty() {
        return public.to_owned();
    }
    let proxies = &settings.server.trusted_proxies;
    let headers = req.headers();
    let forwarded = peer_is_trusted(req, proxies).then(|| first_forwarded(headers));
    let (forwarded_proto, forwarded_host) = forwarded.unwrap_or_default();
    let scheme = forwarded_proto
        .or_else(|| forwarded.and(first_value(headers, &X_FORWARDED_PROTO)))
        .map(|s| s.to_ascii_lowercase())
        .filter(|s| s == "http" || s == "https")
        .unwrap_or_else(|| {
            if req.app_config().secure() {
                "https"
            } else {
                "http"
            }
            .to_owned()
        });
    let host = forwarded_host
        .filter(|h| is_host(h))
        .or_else(|| {
            forwarded
                .and(first_value(headers, &X_FORWARDED_HOST))
                .filter(|h| is_host(h))
        })
        .map_or_else(|| req.app_config().local_addr().to_string(), str::to_owned);
    format!("{scheme}://{host}")
}

/// The client's address: the TCP peer, or when that is a trusted proxy, the nearest
/// address in its `Forwarded: for=` or `X-Forwarded-For` chain that is not itself a
/// trusted proxy (a client can write anything at the far end of the chain).
pub fn client_ip(req: &HttpRequest, settings: &Settings) -> Option<IpAddr> {
    let proxies = &settings.server.trusted_proxies;
    let peer = req.peer_addr()?.ip();
    if !is_trusted(proxies, peer) {
        return Some(peer);
    }
    let headers = req.headers();
    let chain: Vec<&str> = if headers.contains_key(header::FORWARDED) {
        all_values(headers, &header::FORWARDED)
            .flat_map(|element| element.split(';'))
            .filter_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                key.trim().eq_ignore_ascii_case("for").then(|| value.trim())
            })
            .collect()
    } else {
        all_values(headers, &X_FORWARDED_FOR).collect()
    };
    let mut nearest = peer;
    for hop in chain.iter().rev() {
        match parse_node(hop) {
            Some(ip) if is_trusted(proxies, ip) => nearest = ip,
            Some(ip) => return Some(ip),
            None => break,
        }
    }
    Some(nearest)
}

/// Comma-separated values over every instance of a header, trimmed.
fn all_values<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn first_value<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    all_values(headers, name).next()
}

/// `proto` and `host` of the first (client-side) element of `Forwarded`.
fn first_forwarded(headers: &HeaderMap) -> (Option<&str>, Option<&str>) {
    let Some(element) = first_value(headers, &header::FORWARDED) else {
        return (None, None);
    };
    let mut proto = None;
    let mut host = None;
    for pair in element.split(';') {
        if let Some((key, value)) = pair.split_once('=') {
            let value = value.trim().trim_matches('"');
            match key.trim().to_ascii_lowercase().as_str() {
                "proto" => proto = Some(value),
                "host" => host = Some(value),
                _ => {}
            }
        }
    }
    (proto, host)
}

/// An address of a forwarding chain: `1.2.3.4`, `1.2.3.4:5`, `2001:db8::1`,
/// `"[2001:db8::1]:4711"`.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim().trim_matches('"');
    node.parse::<IpAddr>()
        .ok()
        .or_else(|| node.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            node.strip_prefix('[')
                .and_then(|rest| rest.split_once(']'))
                .and_then(|(ip, _)| ip.parse().ok())
        })
}

/// `host[:port]`: a DNS name, an IPv4 address or a bracketed IPv6 address, and a port.
fn is_host(value: &str) -> bool {
    let (host, port) = match value.strip_prefix('[') {
        Some(rest) => {
            return match rest.split_once(']') {
                Some((ip, after)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => {
                    after.is_empty() || after.strip_prefix(':').is_some_and(is_port)
                }
                _ => false,
            };
        }
        None => match value.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        },
    };
    port.is_none_or(is_port) && is_dns_name(host)
}

fn is_port(port: &str) -> bool {
    port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// Letters, digits and hyphens in dot-separated labels (IPv4 addresses included).
fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_names_or_addresses_with_an_optional_port() {
        for good in [
            "api.example",
            "api.example:8443",
            "localhost",
            "127.0.0.1:8080",
            "[::1]",
            "[2001:db8::1]:443",
            "xn--bcher-kva.example",
        ] {
            assert!(is_host(good), "{good}");
        }
        for bad in [
            "",
            "evil.example/path",
            "a@b",
            "host:",
            "host:0",
            "host:99999",
            "host:80:80",
            "[::1",
            "[::1]x",
            "[nope]:80",
            "-bad.example",
            "a..b",
            "javascript:alert(1)",
            "evil example",
        ] {
            assert!(!is_host(bad), "{bad}");
        }
    }

    #[test]
    fn chain_nodes_parse_with_or_without_ports() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(parse_node("203.0.113.9"), ip("203.0.113.9"));
        assert_eq!(parse_node("203.0.113.9:4711"), ip("203.0.113.9"));
        assert_eq!(parse_node("2001:db8::1"), ip("2001:db8::1"));
        assert_eq!(parse_node("\"[2001:db8::1]:4711\""), ip("2001:db8::1"));
        assert_eq!(parse_node("unknown"), None);
    }
}
