//! `http_fetch`: GET a URL with size and time limits, refusing addresses inside the
//! network (loopback, private, link-local, …) unless the operator allows their host.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;

use crate::config::ToolsSettings;

pub use crate::model::is_internal;

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
