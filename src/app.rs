//! Building the application: shared state, the HTTP server, and running it.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::http::KeepAlive;
use actix_web::middleware::from_fn;
use actix_web::{App as ActixApp, HttpServer, web};
use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing_actix_web::TracingLogger;

use crate::agents::Agents;
use crate::auth::{AuthCache, LoginLimits, TokenKeys};
use crate::config::Settings;
use crate::crypto::{self, SecretBox};
use crate::engine::{Engine, Schedules, Webhooks};
use crate::http;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::tools::mcp::McpRegistry;

/// Instance key purposes in the store.
const JWT_KEY: &str = "jwt";
const SECRETS_KEY: &str = "secrets";

/// Everything a request handler or CLI command needs.
#[derive(Debug)]
pub struct AppState {
    settings: Settings,
    store: Store,
    /// What `/admin` and authentication need of the database.
    admin: crate::auth::Admin,
    agents: Agents,
    tokens: TokenKeys,
    login_limits: LoginLimits,
    auth_cache: AuthCache,
    secrets: SecretBox,
    engine: Arc<Engine>,
    /// Webhook endpoints and the sender of their deliveries.
    webhooks: Arc<Webhooks>,
    /// Tenants' schedules and this process's scheduler.
    schedules: Arc<Schedules>,
    /// The configured MCP servers; connected once the app is built to serve.
    mcp: Arc<McpRegistry>,
    /// What `GET /metrics` reports.
    metrics: Arc<Metrics>,
    /// The open event streams, per tenant and client address, within the descriptors.
    streams: Arc<http::streams::StreamGate>,
}

impl AppState {
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The engine: every face's way to sessions, turns, runs and the log.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The admin service: tenants, credentials, tokens, quotas, logins.
    pub fn admin(&self) -> &crate::auth::Admin {
        &self.admin
    }

    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    pub fn tokens(&self) -> &TokenKeys {
        &self.tokens
    }

    pub fn login_limits(&self) -> &LoginLimits {
        &self.login_limits
    }

    pub fn auth_cache(&self) -> &AuthCache {
        &self.auth_cache
    }

    pub fn secrets(&self) -> &SecretBox {
        &self.secrets
    }

    pub fn webhooks(&self) -> &Arc<Webhooks> {
        &self.webhooks
    }

    pub fn schedules(&self) -> &Arc<Schedules> {
        &self.schedules
    }

    pub fn mcp(&self) -> &Arc<McpRegistry> {
        &self.mcp
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn streams(&self) -> &Arc<http::streams::StreamGate> {
        &self.streams
    }

    /// The database itself: for the CLI's operator commands, closing it at shutdown, and
    /// tests. Request handlers use the engine and the admin service.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Connects to the database, migrates it, and loads or generates the instance keys.
    pub async fn init(settings: Settings) -> anyhow::Result<AppState> {
        let store = Store::connect(&settings.database)
            .await
            .context("cannot open the database named by database.url")?;
        let applied = store
            .migrate()
            .await
            .context("cannot migrate the database")?;
        if !applied.is_empty() {
            tracing::info!(?applied, "applied database migrations");
        }
        let tokens = load_token_keys(&settings, &store).await?;
        let secrets = load_secret_box(&settings, &store).await?;
        let login_limits = LoginLimits::new(&settings.auth)
            .await
            .context("cannot prepare the login limits")?;
        let metrics = Metrics::new(settings.metrics.tenant_label);
        let mcp = McpRegistry::new(&settings.mcp_servers);
        let agents = Agents::from_settings(&settings.agents, &mcp);
        let engine = Engine::new(
            store.clone(),
            agents.clone(),
            secrets.clone(),
            settings.engine.clone(),
            settings.tools.clone(),
            mcp.clone(),
            settings.quotas.policy(&settings.engine),
            metrics.clone(),
            settings.limits.clone(),
            crate::engine::TenantAgentPolicy {
                connections: settings.connections.clone(),
                limits: settings.tenant_agents.clone(),
                mcp_servers: settings.mcp_servers.clone(),
            },
        );
        let (process, wake) = engine.webhook_wiring();
        let webhooks = Webhooks::new(
            store.clone(),
            secrets.clone(),
            settings.webhooks.clone(),
            process,
            wake,
            metrics.clone(),
        );
        crate::http::register_payload_formats(&webhooks);
        let schedules = Schedules::new(engine.clone(), store.clone(), settings.schedules.clone());
        let auth_cache = AuthCache::new(Duration::from_millis(settings.auth.state_cache_ttl_ms));
        let descriptors = http::streams::raise_descriptor_limit();
        let streams = Arc::new(http::streams::StreamGate::new(
            &settings.limits,
            descriptors,
        ));
        tracing::info!(
            descriptors,
            streams = streams.budget(),
            "file descriptors: streams may hold the limit less limits.fd_reserve"
        );
        Ok(AppState {
            settings,
            admin: crate::auth::Admin::new(store.clone()),
            store,
            agents,
            tokens,
            login_limits,
            auth_cache,
            secrets,
            engine,
            webhooks,
            schedules,
            mcp,
            metrics,
            streams,
        })
    }
}

async fn load_token_keys(settings: &Settings, store: &Store) -> anyhow::Result<TokenKeys> {
    let auth = &settings.auth;
    let previous: Vec<&str> = auth
        .jwt_previous_secrets
        .iter()
        .map(|s| s.expose())
        .collect();
    if !auth.jwt_secret.is_empty() {
        return Ok(TokenKeys::new(auth, auth.jwt_secret.expose(), &previous));
    }
    let generated = store
        .get_or_insert_instance_key(JWT_KEY, &crypto::random_token(48))
        .await
        .context("cannot load the generated JWT signing key")?;
    Ok(TokenKeys::new(auth, &generated, &previous))
}

async fn load_secret_box(settings: &Settings, store: &Store) -> anyhow::Result<SecretBox> {
    let stored = store
        .get_instance_key(SECRETS_KEY)
        .await
        .context("cannot load the generated secrets key")?
        .map(|k| crypto::parse_key(&k))
        .transpose()
        .map_err(|e| anyhow::anyhow!("the stored secrets key is corrupt: {e}"))?;
    if !settings.secrets.key.is_empty() {
        let configured = crypto::parse_key(settings.secrets.key.expose())
            .map_err(|e| anyhow::anyhow!("secrets.key {e}"))?;
        return Ok(SecretBox::new(configured, stored));
    }
    let key = match stored {
        Some(key) => key,
        None => {
            let candidate = crypto::encode_key(&crypto::random_bytes::<32>());
            let stored = store
                .get_or_insert_instance_key(SECRETS_KEY, &candidate)
                .await
                .context("cannot store a generated secrets key")?;
            crypto::parse_key(&stored).map_err(|e| anyhow::anyhow!("stored secrets key: {e}"))?
        }
    };
    Ok(SecretBox::new(key, []))
}

/// A bound, ready-to-run server.
pub struct App {
    port: u16,
    server: Server,
    /// The listener of `/metrics` alone (`metrics.bind`), with its port.
    metrics: Option<(u16, Server)>,
    state: web::Data<AppState>,
    stop: CancellationToken,
    /// On SQLite: held while this process serves the file (see [`claim_sqlite`]).
    _claim: Option<std::fs::File>,
}

impl App {
    /// Initializes the state and binds `server.bind` (port 0 picks a free port).
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        let listener = TcpListener::bind(&settings.server.bind)
            .with_context(|| format!("cannot listen on server.bind {}", settings.server.bind))?;
        let metrics_listener = settings
            .metrics
            .own_bind()
            .map(|bind| {
                TcpListener::bind(bind)
                    .with_context(|| format!("cannot listen on metrics.bind {bind}"))
            })
            .transpose()?;
        // Before anything touches the database: start-up recovery would end the turns of
        // another process serving the same SQLite file.
        let claim = claim_sqlite(settings.database.url.expose())?;
        // Said once, when a server starts: the other commands are quiet about it.
        if settings.secrets.key.is_empty() {
            tracing::warn!(
                "secrets.key is not set: secret options are encrypted with a key stored in \
                 the database itself. Set secrets.key (AGENTRY__SECRETS__KEY) in production."
            );
        }
        let state = web::Data::new(AppState::init(settings).await?);
        let recovered = state
            .engine()
            .recover()
            .await
            .context("cannot recover the turns a previous run left unfinished")?;
        if recovered > 0 {
            tracing::warn!(
                recovered,
                "interrupted turns left unfinished by a process that is gone"
            );
        }
        state.engine().start_cluster();
        state.webhooks().start();
        state.schedules().start();
        // Servers connect in the background: one that is down delays nothing.
        state.mcp().start();
        let mut app = Self::with_state(listener, state)?;
        if let Some(listener) = metrics_listener {
            app.metrics = Some(metrics_server(listener, app.state.clone())?);
        }
        app._claim = claim;
        Ok(app)
    }

    fn with_state(listener: TcpListener, state: web::Data<AppState>) -> anyhow::Result<App> {
        let port = listener.local_addr()?.port();
        if state.settings().auth.admin_secret.is_empty() {
            tracing::warn!(
                "auth.admin_secret is not set: admin login is disabled; use `agentry admin` \
                 to manage tenants"
            );
        }
        let workers = match state.settings().server.workers {
            0 => std::thread::available_parallelism().map_or(2, usize::from),
            n => n,
        };
        let server_settings = &state.settings().server;
        let keep_alive = match server_settings.keep_alive_seconds {
            0 => KeepAlive::Disabled,
            n => KeepAlive::Timeout(Duration::from_secs(n)),
        };
        let header_timeout = Duration::from_secs(server_settings.header_read_timeout_seconds);
        let data = state.clone();
        let server = HttpServer::new(move || {
            ActixApp::new()
                .wrap(from_fn(http::streams::limit_streams))
                .wrap(from_fn(http::ratelimit::rate_limit_headers))
                .wrap(http::error_handlers())
                .wrap(from_fn(http::request_limits))
                .wrap(from_fn(http::cors::cors))
                .wrap(from_fn(http::observe))
                .wrap(from_fn(http::trace_header::trace_id_header))
                .wrap(TracingLogger::<http::RequestSpan>::new())
                .wrap(from_fn(http::forwarded::strip_untrusted))
                .app_data(data.clone())
                .configure(|cfg| http::configure(cfg, &data.settings))
        })
        .workers(workers)
        .keep_alive(keep_alive)
        .client_request_timeout(header_timeout)
        // SSE frames are small writes: without this, Nagle holds each one back until the
        // client acknowledges the previous (up to 40 ms on a reused connection).
        .tcp_nodelay(true)
        .disable_signals()
        .shutdown_timeout(5)
        .listen(listener)?
        .run();
        tracing::info!(port, "agentry is listening");
        Ok(App {
            port,
            server,
            metrics: None,
            state,
            stop: CancellationToken::new(),
            _claim: None,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the `/metrics` listener, when `metrics.bind` gives it one.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics.as_ref().map(|(port, _)| *port)
    }

    /// Cancelling this token shuts the app down as SIGTERM does.
    pub fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    pub fn state(&self) -> Arc<AppState> {
        self.state.clone().into_inner()
    }

    /// Serves until SIGTERM, SIGINT or the stopper, then shuts down gracefully: no new
    /// turns, running turns get `engine.shutdown_grace_seconds` to finish, the rest are
    /// interrupted, streams end, connections close.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let handle = self.server.handle();
        let metrics = self.metrics.map(|(_, server)| {
            let handle = server.handle();
            (handle, tokio::spawn(server))
        });
        let mut server = tokio::spawn(self.server);
        tokio::select! {
            result = &mut server => return result.unwrap_or_else(|e| Err(std::io::Error::other(e))),
            _ = shutdown_signal() => tracing::info!("shutdown signal received"),
            _ = self.stop.cancelled() => tracing::info!("shutdown requested"),
        }
        let grace = Duration::from_secs(self.state.settings().engine.shutdown_grace_seconds);
        self.state.schedules().shutdown().await;
        self.state.engine().shutdown(grace).await;
        self.state.webhooks().shutdown().await;
        handle.stop(true).await;
        if let Some((handle, server)) = metrics {
            handle.stop(true).await;
            let _ = server.await;
        }
        self.state.mcp().shutdown().await;
        let result = server
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        self.state.store().close().await;
        tracing::info!("agentry stopped");
        result
    }
}

/// The small server of `/metrics` on an address of its own (`metrics.bind`).
fn metrics_server(
    listener: TcpListener,
    state: web::Data<AppState>,
) -> anyhow::Result<(u16, Server)> {
    let port = listener.local_addr()?.port();
    let server = HttpServer::new(move || {
        ActixApp::new()
            .wrap(http::error_handlers())
            .wrap(TracingLogger::<http::RequestSpan>::new())
            .app_data(state.clone())
            .configure(http::configure_metrics)
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(5)
    .listen(listener)?
    .run();
    tracing::info!(port, "metrics are served on an address of their own");
    Ok((port, server))
}

/// A SQLite database is one serving process's: its engine numbers events and runs turns
/// alone. Takes an exclusive lock on `<file>.serve.lock` beside the database, held while
/// the returned file is open, and refuses clearly when another process holds it. The CLI's
/// other commands do not take it. `None` for PostgreSQL and in-memory databases.
fn claim_sqlite(url: &str) -> anyhow::Result<Option<std::fs::File>> {
    use std::str::FromStr;
    if !url.starts_with("sqlite:") {
        return Ok(None);
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .context("database.url is not a SQLite URL")?;
    let file = options.get_filename();
    if file.as_os_str().is_empty() || file.as_os_str() == ":memory:" {
        return Ok(None);
    }
    crate::store::create_parent_dir(file)?;
    let mut path = file.as_os_str().to_owned();
    path.push(".serve.lock");
    let path = std::path::PathBuf::from(path);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match lock.try_lock() {
        Ok(()) => Ok(Some(lock)),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another agentry process is serving the SQLite database {}: a SQLite database is \
             served by one process (run several processes on PostgreSQL)",
            file.display()
        ),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("SIGTERM handler installs");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
