//! `http_fetch`: GET a URL with size and time limits, refusing addresses inside the
//! network (loopback, private, link-local, …) unless the operator allows their host.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures_util::StreamExt;

use crate::config::ToolsSettings;

/// Whether an address is one a server should not be made to reach for a client.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(v6) {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// The IPv4 address an IPv6 address carries to reach an IPv4 host: IPv4-mapped
/// (`::ffff:0:0/96`), IPv4-translated (`::ffff:0:0:0/96`), IPv4-compatible (`::/96`), NAT64
/// (`64:ff9b::/96`, `64:ff9b:1::/48`) and 6to4 (`2002::/16`).
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = v6.segments();
    let low = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        std::net::Ipv4Addr::new(a, b, c, d)
    };
    let tail = low(s[6], s[7]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => Some(tail),
        // `::` and `::1` are themselves (unspecified, loopback), not IPv4-compatible.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, ..] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(tail),
        // RFC 6052 at /48: the IPv4 address spans bits 48..88, skipping the u octet (64..72).
        [0x64, 0xff9b, 1, ..] => {
            let [_, _, _, _, _, _, a, b, _, c, d, ..] = v6.octets();
            Some(std::net::Ipv4Addr::new(a, b, c, d))
        }
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

/// Fetches `url`; the text is the tool's result or says why not.
pub async fn fetch(url: &str, settings: &ToolsSettings) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|_| format!("`{url}` is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("only http and https URLs can be fetched".into());
    }
    let host = parsed.host_str().ok_or("the URL has no host")?.to_owned();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let allowed = settings
        .http_fetch_allow
        .iter()
        .any(|a| *a == host || *a == format!("{host}:{port}"));
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|_| format!("`{host}` cannot be resolved"))?
        .collect();
    let address = addresses
        .into_iter()
        .find(|a| allowed || !is_internal(a.ip()))
        .ok_or_else(|| {
            format!("`{host}` is an internal address; an operator can allow it in tools.http_fetch_allow")
        })?;
    // Connect to the address just checked, so a second lookup cannot point elsewhere.
    let client = reqwest::Client::builder()
        .resolve(&host, address)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(settings.http_fetch_timeout_seconds))
        .build()
        .map_err(|_| "the fetch could not be prepared".to_owned())?;
    let response = client.get(parsed).send().await.map_err(|e| {
        if e.is_timeout() {
            "the fetch timed out".to_owned()
        } else {
            "the fetch failed".to_owned()
        }
    })?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
        .to_owned();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let limit = settings.http_fetch_max_bytes;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    let mut truncated = false;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| "the response broke off".to_owned())?;
        let room = limit.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let mut result = format!("HTTP {status}\ncontent-type: {content_type}\n");
    if let Some(location) = location {
        result.push_str(&format!("location: {location}\n"));
    }
    result.push('\n');
    result.push_str(&String::from_utf8_lossy(&body));
    if truncated {
        result.push_str(&format!("\n[truncated at {limit} bytes]"));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1:7f00:0:100::",
            "::ffff:0:7f00:1",
            "::ffff:0:a00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "::127.0.0.1",
            "::10.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "64:ff9b::101:101",
            "64:ff9b:1:101:1:100::",
            "2002:101:101::",
            "::ffff:0:101:101",
            "::1.1.1.1",
        ] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }
}
