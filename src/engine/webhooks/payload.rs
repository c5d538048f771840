//! What an attempt sends: the body and the headers that prove where it comes from. A
//! tenant's endpoint gets the neutral JSON body, signed with its secret (or the secret as a
//! bearer token); a run's own endpoint gets the body its payload format renders, signed
//! with its token, with the `Authorization` it asked for.

use chrono::{DateTime, Utc};

use super::{Webhooks, credentials_context, seal_context, sign};
use crate::model::{DeliveryAuth, MessageId};
use crate::store::Outbound;

/// A payload format a face registers: renders a queued message's body.
pub trait PayloadFormat: Send + Sync + std::fmt::Debug {
    /// The body of one message: the same bytes at every attempt. `token` is the endpoint's
    /// token (so a format may echo it in a header of its protocol).
    fn render(&self, message: &OutboundMessage<'_>, token: &str) -> Result<Payload, String>;
}

/// A queued message, as a payload format reads it.
#[derive(Debug, Clone, Copy)]
pub struct OutboundMessage<'a> {
    pub message_id: &'a MessageId,
    /// e.g. `run.status_changed`
    pub event_type: &'a str,
    /// The neutral data as queued, with `agent` added.
    pub data: &'a serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// A rendered body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub content_type: &'static str,
    pub body: String,
    /// Extra headers of the format.
    pub headers: Vec<(&'static str, String)>,
}

/// Headers the sender sets itself: a format may not set them.
const RESERVED_HEADERS: [&str; 7] = [
    "authorization",
    "content-type",
    "content-length",
    "user-agent",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

impl Webhooks {
    /// The body and headers of an attempt, but for `webhook-id` and `webhook-timestamp`.
    pub(super) fn payload(
        &self,
        next: &Outbound,
        id: &str,
        timestamp: i64,
    ) -> Result<Payload, String> {
        let data = data_of(next)?;
        let created_at: DateTime<Utc> = next.created_at.into();
        let context = seal_context(&next.tenant_id, &next.endpoint_id);
        let secret = self
            .secrets
            .open(&next.secrets.secret, &context)
            .map_err(|_| "the endpoint's secret cannot be decrypted".to_owned())?;
        if let Some(name) = &next.format {
            let token = String::from_utf8(secret)
                .map_err(|_| "the endpoint's token cannot be decrypted".to_owned())?;
            let format = self
                .format(name)
                .ok_or_else(|| format!("no payload format `{name}` is registered"))?;
            let message = OutboundMessage {
                message_id: &next.message_id,
                event_type: &next.event_type,
                data: &data,
                created_at,
            };
            let mut payload = format
                .render(&message, &token)
                .map_err(|error| format!("the payload format `{name}` failed: {error}"))?;
            if let Some((header, _)) = payload.headers.iter().find(|(header, _)| {
                RESERVED_HEADERS
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(header))
            }) {
                return Err(format!(
                    "the payload format `{name}` sets the reserved header `{header}`"
                ));
            }
            let signature =
                sign::signature(token.as_bytes(), id, timestamp, payload.body.as_bytes());
            payload.headers.push(("webhook-signature", signature));
            if let Some(scheme) = &next.authorization_scheme {
                payload
                    .headers
                    .push(("authorization", self.authorization(next, scheme)?));
            }
            return Ok(payload);
        }
        let body = serde_json::json!({
            "type": next.event_type,
            "timestamp": created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "data": data,
        })
        .to_string();
        let header = match next.auth.parse::<DeliveryAuth>() {
            Ok(DeliveryAuth::Signature) => {
                let mut secrets = vec![secret];
                let overlap = next
                    .secrets
                    .previous_until
                    .is_some_and(|until| DateTime::<Utc>::from(until) > crate::model::now());
                if let (Some(previous), true) = (&next.secrets.previous_secret, overlap)
                    && let Ok(previous) = self.secrets.open(previous, &context)
                {
                    secrets.push(previous);
                }
                let keys: Vec<Vec<u8>> = secrets
                    .iter()
                    .filter_map(|s| std::str::from_utf8(s).ok().and_then(sign::secret_key))
                    .collect();
                (
                    "webhook-signature",
                    sign::signatures(&keys, id, timestamp, body.as_bytes()),
                )
            }
            Ok(DeliveryAuth::Bearer) => (
                "authorization",
                format!("Bearer {}", String::from_utf8_lossy(&secret)),
            ),
            Err(_) => return Err("the delivery's auth mode is unknown".into()),
        };
        Ok(Payload {
            content_type: "application/json",
            body,
            headers: vec![header],
        })
    }

    /// `<scheme> <credentials>`, or the scheme alone.
    fn authorization(&self, next: &Outbound, scheme: &str) -> Result<String, String> {
        let Some(sealed) = &next.authorization_credentials else {
            return Ok(scheme.to_owned());
        };
        let context = credentials_context(&next.tenant_id, &next.endpoint_id);
        let credentials = self
            .secrets
            .open(sealed, &context)
            .ok()
            .and_then(|c| String::from_utf8(c).ok())
            .ok_or_else(|| "the endpoint's credentials cannot be decrypted".to_owned())?;
        Ok(format!("{scheme} {credentials}"))
    }
}

/// The message's data as queued, with the session's agent added.
fn data_of(next: &Outbound) -> Result<serde_json::Value, String> {
    let mut data: serde_json::Value =
        serde_json::from_str(&next.data).map_err(|_| "the stored message is corrupt".to_owned())?;
    data["agent"] = serde_json::json!(next.agent);
    Ok(data)
}
