//! What the HTTP providers share: retries before the first token, and error summaries that
//! never carry a key or a raw body.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::ProviderError;
use crate::agents::template::render_url;
use crate::config::HttpProviderSettings;
use crate::tools::fetch::is_internal;

/// A short, key-free account of a failed response: its status and the API's own message.
pub fn summarize(status: reqwest::StatusCode, body: &str, key: &str) -> String {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v["error"]["message"]
                .as_str()
                .or(v["message"].as_str())
                .map(str::to_owned)
        })
        .unwrap_or_default();
    // Redacted before it is cut: a cut could leave a prefix of the key behind.
    let detail = if key.is_empty() {
        detail
    } else {
        detail.replace(key, "***")
    };
    let detail: String = detail.chars().take(200).collect();
    if detail.is_empty() {
        format!("the model provider answered {status}")
    } else {
        format!("the model provider answered {status}: {detail}")
    }
}

/// A provider's endpoint for a request: its base URL rendered with the session's options,
/// each checked for the part of the URL it fills and percent-encoded in a path or query,
/// then `path`; and whether an option chose the host.
pub fn endpoint(
    settings: &HttpProviderSettings,
    options: &BTreeMap<String, String>,
    path: &str,
) -> Result<(String, bool), ProviderError> {
    let (base, templated_host) =
        render_url(&settings.base_url, options).map_err(|reason| ProviderError {
            message: format!("the model provider's base URL cannot be built: {reason}"),
        })?;
    Ok((
        format!("{}{path}", base.trim_end_matches('/')),
        templated_host,
    ))
}

/// Refuses a host a session's option chose when it resolves to an internal address
/// (loopback, private, link-local, …, as `http_fetch` refuses them), unless the agent
/// allows it: a tenant must not point the operator's key at the operator's network.
pub async fn check_chosen_host(url: &str, allowed: bool) -> Result<(), ProviderError> {
    let refuse = |why: &str| ProviderError {
        message: format!("the model provider's address, chosen by a session option, {why}"),
    };
    if allowed {
        return Ok(());
    }
    let url = reqwest::Url::parse(url).map_err(|_| refuse("is not a valid URL"))?;
    let host = url.host_str().ok_or_else(|| refuse("has no host"))?;
    let port = url.port_or_known_default().unwrap_or(443);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| refuse("does not resolve"))?
        .collect();
    if addresses.is_empty() || addresses.iter().any(|a| is_internal(a.ip())) {
        return Err(refuse(
            "is inside the network, which this agent does not allow",
        ));
    }
    Ok(())
}

fn retryable(status: reqwest::StatusCode) -> bool {
    status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// Sends the request built by `request`, retrying connection errors, timeouts, 429 and 5xx
/// with exponential backoff up to `retries` times. Other failures end at once.
pub async fn send_with_retries(
    request: impl Fn() -> reqwest::RequestBuilder,
    timeout: Duration,
    retries: u32,
    key: &str,
) -> Result<reqwest::Response, ProviderError> {
    let fail = |message: String| ProviderError { message };
    // The host and port only: a URL's path or query may hold a key.
    let provider = request()
        .build()
        .ok()
        .and_then(|built| {
            let url = built.url();
            let host = url.host_str()?.to_owned();
            Some(match url.port_or_known_default() {
                Some(port) => format!("the model provider at {host}:{port}"),
                None => format!("the model provider at {host}"),
            })
        })
        .unwrap_or_else(|| "the model provider".to_owned());
    let mut attempt = 0;
    loop {
        let outcome = tokio::time::timeout(timeout, request().send()).await;
        let error = match outcome {
            Err(_) => format!("{provider} did not answer in time"),
            Ok(Err(e)) if e.is_connect() => format!("{provider} could not be reached"),
            Ok(Err(e)) if e.is_timeout() => format!("{provider} did not answer in time"),
            Ok(Err(_)) => return Err(fail(format!("the request to {provider} failed"))),
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) => {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                let summary = summarize(status, &text, key);
                if !retryable(status) {
                    return Err(fail(summary));
                }
                summary
            }
        };
        if attempt >= retries {
            return Err(fail(error));
        }
        attempt += 1;
        tracing::warn!(attempt, error = %error, "retrying the model provider");
        tokio::time::sleep(Duration::from_millis(250 * 2u64.pow(attempt.min(5)))).await;
    }
}

/// The next SSE event's data, waiting at most `timeout`; `None` when the stream ends.
pub async fn next_data<S, E>(
    events: &mut S,
    timeout: Duration,
) -> Result<Option<String>, ProviderError>
where
    S: futures_util::Stream<Item = Result<eventsource_stream::Event, E>> + Unpin,
{
    use futures_util::StreamExt;
    let fail = |message: &str| ProviderError {
        message: message.to_owned(),
    };
    match tokio::time::timeout(timeout, events.next()).await {
        Err(_) => Err(fail("the model provider stopped sending in time")),
        Ok(None) => Ok(None),
        Ok(Some(Err(_))) => Err(fail("the model provider's stream broke off")),
        Ok(Some(Ok(event))) => Ok(Some(event.data)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_near_the_cut_leaves_no_prefix_behind() {
        let key = "sk-SUPERSECRETKEY0123456789";
        for padding in 180..200 {
            let message = format!("{} key={key} rest", "x".repeat(padding));
            let body = serde_json::json!({"error": {"message": message}}).to_string();
            let summary = summarize(reqwest::StatusCode::UNAUTHORIZED, &body, key);
            assert!(!summary.contains(&key[..4]), "{padding}: {summary}");
        }
    }
}
