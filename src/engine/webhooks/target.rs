//! Where a delivery may go: `https://` URLs (and `http://` when the operator allows it)
//! whose every address is outside the network (not loopback, private, link-local,
//! unique-local, multicast or unspecified), unless the operator allows the host. A name is
//! resolved and its addresses checked at each delivery, never at registration.

use std::net::SocketAddr;

use crate::config::WebhooksSettings;
use crate::tools::fetch::is_internal;

/// The longest endpoint URL accepted.
const MAX_URL_BYTES: usize = 2048;

/// A URL checked for its form (not yet for its addresses).
#[derive(Debug, Clone)]
pub struct Target {
    pub url: reqwest::Url,
    pub host: String,
    pub port: u16,
}

/// Checks a URL's form: scheme, host, no credentials, no fragment.
pub fn parse_target(url: &str, settings: &WebhooksSettings) -> Result<Target, String> {
    if url.len() > MAX_URL_BYTES {
        return Err(format!("must be at most {MAX_URL_BYTES} bytes"));
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| format!("`{url}` is not a URL"))?;
    match parsed.scheme() {
        "https" => {}
        "http" if settings.allow_http => {}
        "http" => {
            return Err(format!(
                "`{url}`: only https:// URLs are accepted (an operator can allow http:// with \
                 webhooks.allow_http)"
            ));
        }
        _ => return Err(format!("`{url}`: only https:// URLs are accepted")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!("`{url}`: credentials in the URL are not accepted"));
    }
    if parsed.fragment().is_some() {
        return Err(format!("`{url}`: a fragment is not accepted"));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("`{url}` has no host"))?
        .to_owned();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| format!("`{url}` has no port"))?;
    Ok(Target {
        url: parsed,
        host,
        port,
    })
}

/// Resolves the target and checks every address; the address to connect to.
pub async fn resolve_target(
    target: &Target,
    settings: &WebhooksSettings,
) -> Result<SocketAddr, String> {
    let bare = target.host.trim_matches(['[', ']']);
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((bare, target.port))
        .await
        .map_err(|_| format!("`{}` cannot be resolved", target.host))?
        .collect();
    let first = *addresses
        .first()
        .ok_or_else(|| format!("`{}` cannot be resolved", target.host))?;
    if settings.allows(&target.host, target.port) || settings.allows(bare, target.port) {
        return Ok(first);
    }
    if addresses.iter().any(|a| is_internal(a.ip())) {
        return Err(format!(
            "`{}` resolves to an internal address; an operator can allow it in \
             webhooks.allow_targets",
            target.host
        ));
    }
    Ok(first)
}

/// Checks a URL as an endpoint's target with what is known without DNS: its form, and a
/// host written as an address (or `localhost`) must not be internal. A name's addresses
/// are checked at each delivery, so an endpoint can be registered while DNS is down or
/// before its name exists.
pub fn check_target(url: &str, settings: &WebhooksSettings) -> Result<Target, String> {
    let target = parse_target(url, settings)?;
    let bare = target.host.trim_matches(['[', ']']);
    if settings.allows(&target.host, target.port) || settings.allows(bare, target.port) {
        return Ok(target);
    }
    let internal = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => is_internal(ip),
        Err(_) => {
            let name = bare.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    };
    if internal {
        return Err(format!(
            "`{}` is an internal address; an operator can allow it in webhooks.allow_targets",
            target.host
        ));
    }
    Ok(target)
}
