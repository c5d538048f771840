//! A run's own endpoints: a client registers a URL, under a key of its own, to be told of one
//! run's status changes in a payload format a face registered, signed with the client's
//! token. They are sent like a tenant's endpoints (outbox, order, retries, leases) and
//! listed with them; they count toward `webhooks.max_run_endpoints_per_tenant` (and at most
//! [`MAX_ENDPOINTS_PER_RUN`] per run), not toward `webhooks.max_endpoints_per_tenant`.

use std::fmt;
use std::sync::Arc;

use super::{PayloadFormat, WebhookError, Webhooks, credentials_context, seal_context};
use crate::model::{EndpointId, FieldError, RunEndpoint, RunId, TenantId};
use crate::store::{RunEndpointLimits, RunEndpointRecord, RunEndpointWrite, StoreError};

/// The most endpoints one run may have.
const MAX_ENDPOINTS_PER_RUN: u32 = 10;
const MAX_KEY_CHARS: usize = 256;
const MAX_TOKEN_BYTES: usize = 1024;
const MAX_SCHEME_BYTES: usize = 64;
const MAX_CREDENTIALS_BYTES: usize = 4096;
/// Random bytes in a generated token.
const TOKEN_BYTES: usize = 32;
/// Writes of one key that lose to a concurrent write before one wins.
const WRITE_TRIES: usize = 3;

/// Sent as `Authorization: <scheme> <credentials>`.
#[derive(Clone)]
pub struct Authorization {
    pub scheme: String,
    pub credentials: Option<String>,
}

impl fmt::Debug for Authorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorization")
            .field("scheme", &self.scheme)
            .field("credentials", &self.credentials.as_ref().map(|_| "***"))
            .finish()
    }
}

/// A run's endpoint as its client asks for it.
#[derive(Clone)]
pub struct NewRunEndpoint {
    pub run: RunId,
    /// The client's name for it, unique within the run (1–256 printable chars).
    pub key: String,
    pub url: String,
    /// The client's token; when None, agentry generates one (URL-safe, 32 random bytes).
    pub token: Option<String>,
    /// Sent as `Authorization: <scheme> <credentials>` (scheme alone when no credentials).
    pub authorization: Option<Authorization>,
    /// The name a format was registered under.
    pub format: String,
}

impl fmt::Debug for NewRunEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewRunEndpoint")
            .field("run", &self.run)
            .field("key", &self.key)
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("authorization", &self.authorization)
            .field("format", &self.format)
            .finish()
    }
}

/// A run's endpoint as written, with its token: the only time a generated token is shown.
pub struct CreatedRunEndpoint {
    pub endpoint: RunEndpoint,
    pub token: String,
}

impl fmt::Debug for CreatedRunEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatedRunEndpoint")
            .field("endpoint", &self.endpoint)
            .field("token", &"***")
            .finish()
    }
}

impl Webhooks {
    /// Registers a payload format under `name` (a later one replaces it).
    pub fn register_format(&self, name: &str, format: Arc<dyn PayloadFormat>) {
        self.formats
            .write()
            .expect("payload formats lock")
            .insert(name.to_owned(), format);
    }

    pub(super) fn format(&self, name: &str) -> Option<Arc<dyn PayloadFormat>> {
        self.formats
            .read()
            .expect("payload formats lock")
            .get(name)
            .cloned()
    }

    /// Checks what a new run endpoint asks for, as [`Webhooks::create_run_endpoint`] would
    /// (its key, format, token, authorization, URL and the tenant's limit), without a run:
    /// a face refuses a request whose endpoint would be refused before it starts a run.
    pub async fn check_run_endpoint(
        &self,
        tenant: &TenantId,
        new: &NewRunEndpoint,
    ) -> Result<(), WebhookError> {
        self.checked_fields(new).await?;
        let limit = self.settings.max_run_endpoints_per_tenant;
        if self
            .store
            .count_run_webhook_endpoints_of_tenant(tenant)
            .await?
            >= i64::from(limit)
        {
            return Err(WebhookError::TooManyRunEndpoints(limit));
        }
        Ok(())
    }

    /// The endpoint's token (the client's, or a new one) and URL, once every field checks.
    async fn checked_fields(&self, new: &NewRunEndpoint) -> Result<(String, String), WebhookError> {
        checked_key(&new.key)?;
        if self.format(&new.format).is_none() {
            return Err(FieldError::new(
                "format",
                format!("no payload format `{}` is registered", new.format),
            )
            .into());
        }
        let token = match &new.token {
            Some(token) => checked_token(token.clone())?,
            None => crate::crypto::random_token(TOKEN_BYTES),
        };
        if let Some(authorization) = &new.authorization {
            checked_authorization(authorization)?;
        }
        let url = self.checked_url(&new.url).await?;
        Ok((token, url))
    }

    /// Creates, or replaces (same run and key), a run's endpoint. The URL is checked like a
    /// tenant endpoint's; an unknown run of the tenant is `NotFound("run")`; an unknown
    /// format is `Invalid`. A replaced endpoint keeps its id and its deliveries, and is
    /// enabled again.
    pub async fn create_run_endpoint(
        &self,
        tenant: &TenantId,
        new: NewRunEndpoint,
    ) -> Result<CreatedRunEndpoint, WebhookError> {
        let (token, url) = self.checked_fields(&new).await?;
        self.existing_run(tenant, &new.run).await?;
        for _ in 0..WRITE_TRIES {
            let existing = self
                .store
                .find_run_webhook_endpoint(tenant, &new.run, &new.key)
                .await?;
            let id = existing.unwrap_or_else(EndpointId::generate);
            let mut endpoint = RunEndpoint {
                id,
                run: new.run,
                key: new.key.clone(),
                url: url.clone(),
                authorization_scheme: new.authorization.as_ref().map(|a| a.scheme.clone()),
                format: new.format.clone(),
                created_at: crate::model::now(),
            };
            let credentials = new
                .authorization
                .as_ref()
                .and_then(|a| a.credentials.as_ref());
            let record = RunEndpointRecord {
                sealed_token: self
                    .secrets
                    .seal(token.as_bytes(), &seal_context(tenant, &id)),
                sealed_credentials: credentials.map(|credentials| {
                    self.secrets
                        .seal(credentials.as_bytes(), &credentials_context(tenant, &id))
                }),
                endpoint: endpoint.clone(),
            };
            let limits = RunEndpointLimits {
                per_run: MAX_ENDPOINTS_PER_RUN,
                per_tenant: self.settings.max_run_endpoints_per_tenant,
            };
            let written = self
                .store
                .upsert_run_webhook_endpoint(tenant, &record, limits)
                .await
                .map_err(|error| match error {
                    // The run was deleted meanwhile.
                    StoreError::NotFound => WebhookError::NotFound("run"),
                    other => other.into(),
                })?;
            match written {
                RunEndpointWrite::Written(created_at) => {
                    endpoint.created_at = created_at.into();
                    if existing.is_some() {
                        // Its pending messages, if any, go to the new target now.
                        self.wake.notify_one();
                    }
                    return Ok(CreatedRunEndpoint { endpoint, token });
                }
                RunEndpointWrite::RunFull => {
                    return Err(WebhookError::TooManyForRun(MAX_ENDPOINTS_PER_RUN));
                }
                RunEndpointWrite::TenantFull => {
                    return Err(WebhookError::TooManyRunEndpoints(limits.per_tenant));
                }
                // Another request wrote the key under another id meanwhile.
                RunEndpointWrite::Taken => {}
            }
        }
        Err(WebhookError::Concurrent(
            "the endpoint was written concurrently",
        ))
    }

    /// The run's endpoint under `key`: `NotFound("push config")` when it has none,
    /// `NotFound("run")` when the tenant has no such run.
    pub async fn get_run_endpoint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &str,
    ) -> Result<RunEndpoint, WebhookError> {
        // A key no endpoint can have (a NUL, which PostgreSQL cannot even compare) is not
        // looked up.
        let found = match checked_key(key) {
            Ok(()) => self.store.get_run_webhook_endpoint(tenant, run, key).await,
            Err(_) => Err(StoreError::NotFound),
        };
        match found {
            Ok(endpoint) => Ok(endpoint),
            Err(StoreError::NotFound) => {
                self.existing_run(tenant, run).await?;
                Err(WebhookError::NotFound("push config"))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// The run's endpoints, oldest first; `NotFound("run")` when the tenant has no such run.
    pub async fn list_run_endpoints(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<RunEndpoint>, WebhookError> {
        let endpoints = self.store.list_run_webhook_endpoints(tenant, run).await?;
        if endpoints.is_empty() {
            self.existing_run(tenant, run).await?;
        }
        Ok(endpoints)
    }

    /// Deletes the run's endpoint under `key` with its deliveries. Idempotent: Ok when it
    /// does not exist (but `NotFound("run")` when the tenant has no such run).
    pub async fn delete_run_endpoint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &str,
    ) -> Result<(), WebhookError> {
        let deleted = match checked_key(key) {
            Ok(()) => {
                self.store
                    .delete_run_webhook_endpoint(tenant, run, key)
                    .await?
            }
            Err(_) => false,
        };
        if !deleted {
            self.existing_run(tenant, run).await?;
        }
        Ok(())
    }

    async fn existing_run(&self, tenant: &TenantId, run: &RunId) -> Result<(), WebhookError> {
        match self.store.get_run_status(tenant, run).await {
            Ok(_) => Ok(()),
            Err(StoreError::NotFound) => Err(WebhookError::NotFound("run")),
            Err(other) => Err(other.into()),
        }
    }
}

fn checked_key(key: &str) -> Result<(), FieldError> {
    let chars = key.chars().count();
    if chars == 0 || chars > MAX_KEY_CHARS {
        return Err(FieldError::new(
            "key",
            format!("must be 1 to {MAX_KEY_CHARS} characters"),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(FieldError::new(
            "key",
            "must not contain control characters",
        ));
    }
    Ok(())
}

/// Visible ASCII: a token may be echoed in a header.
fn checked_token(token: String) -> Result<String, FieldError> {
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
        return Err(FieldError::new(
            "token",
            format!("must be 1 to {MAX_TOKEN_BYTES} characters"),
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(FieldError::new(
            "token",
            "must be visible ASCII characters, without spaces",
        ));
    }
    Ok(token)
}

fn checked_authorization(authorization: &Authorization) -> Result<(), FieldError> {
    let scheme = &authorization.scheme;
    // An RFC 9110 token.
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if scheme.is_empty() || scheme.len() > MAX_SCHEME_BYTES || !scheme.bytes().all(tchar) {
        return Err(FieldError::new(
            "authorization.scheme",
            format!("must be an HTTP authentication scheme of 1 to {MAX_SCHEME_BYTES} characters"),
        ));
    }
    if let Some(credentials) = &authorization.credentials {
        let visible = credentials
            .bytes()
            .all(|b| b.is_ascii_graphic() || b == b' ');
        if credentials.is_empty()
            || credentials.len() > MAX_CREDENTIALS_BYTES
            || !visible
            || credentials.starts_with(' ')
            || credentials.ends_with(' ')
        {
            // Never the credentials themselves.
            return Err(FieldError::new(
                "authorization.credentials",
                format!(
                    "must be 1 to {MAX_CREDENTIALS_BYTES} visible ASCII characters (spaces \
                     only inside)"
                ),
            ));
        }
    }
    Ok(())
}
