//! What the engine's unit tests share: a migrated store on either backend, and an engine
//! over it with agents that answer at once (`echo`), a few characters a millisecond
//! (`paced`), or not before the test ends (`slow`).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::StreamExt;

use super::request::{Idempotency, StartedTurn, TurnRequest};
use super::{Engine, InputMessage, TenantAgentPolicy};
use crate::config::Settings;
use crate::model::{
    Content, EventData, ProcessId, Session, SessionId, StreamMode, Tenant, TenantId, TenantStatus,
    Turn, TurnId, TurnStatus,
};
use crate::store::{AdmissionLimits, RunLink, Store};

/// The agents of a test engine.
const AGENTS: &str = r#"
[[agents]]
name = "echo"
provider = "echo"
model = "echo"

[[agents]]
name = "paced"
provider = "echo"
model = "echo"
chunk_size = 4
delay_ms = 1

[[agents]]
name = "slow"
provider = "echo"
model = "echo"
chunk_size = 1
delay_ms = 600000
"#;

/// A migrated store: SQLite in a temporary directory, or a database of its own on the
/// PostgreSQL server of `TEST_POSTGRES_URL` when that is set. Returns the settings it was
/// made with (with `layers` over them).
pub async fn test_store_with(layers: &[&str]) -> (Store, Settings, Option<tempfile::TempDir>) {
    let (url, dir) = match std::env::var("TEST_POSTGRES_URL") {
        Ok(server) if !server.is_empty() => {
            use sqlx::Connection;
            let name = format!("agentry_test_{}", uuid::Uuid::new_v4().simple());
            let mut conn = sqlx::PgConnection::connect(&server).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
                .execute(&mut conn)
                .await
                .unwrap();
            let (base, query) = server.split_once('?').unwrap_or((&server, ""));
            let base = base.rsplit_once('/').map_or(base, |(base, _)| base);
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("?{query}")
            };
            (format!("{base}/{name}{query}"), None)
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            (sqlite_url(&dir), Some(dir))
        }
    };
    let (store, settings) = store_at(&url, layers).await;
    (store, settings, dir)
}

fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("agentry.db").display())
}

/// A migrated store on the database at `url`, with the settings `layers` make.
async fn store_at(url: &str, layers: &[&str]) -> (Store, Settings) {
    let database = format!("[database]\nurl = \"{url}\"\n");
    let mut all = vec![database.as_str()];
    all.extend_from_slice(layers);
    let settings = Settings::from_toml_layers(&all).unwrap();
    let store = Store::connect(&settings.database).await.unwrap();
    store.migrate().await.unwrap();
    (store, settings)
}

/// A migrated store on a new SQLite file whichever backend the tests run on, for what
/// only SQLite does.
pub async fn sqlite_store() -> (Store, tempfile::TempDir) {
    sqlite_store_with(&[]).await
}

/// [`sqlite_store`] with the settings `layers` make.
pub async fn sqlite_store_with(layers: &[&str]) -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = store_at(&sqlite_url(&dir), layers).await;
    (store, dir)
}

/// [`test_store_with`] the default settings.
pub async fn test_store() -> (Store, Option<tempfile::TempDir>) {
    let (store, _, dir) = test_store_with(&[]).await;
    (store, dir)
}

/// A session of `tenant` with a turn running under `process`.
pub async fn running_turn(store: &Store, tenant: TenantId, process: &ProcessId) -> Turn {
    turn_of_new_session(store, tenant, process, TurnStatus::Running).await
}

/// A session of `tenant` with a turn of `process`'s waiting for its slot.
pub async fn queued_turn(store: &Store, tenant: TenantId, process: &ProcessId) -> Turn {
    turn_of_new_session(store, tenant, process, TurnStatus::Queued).await
}

async fn turn_of_new_session(
    store: &Store,
    tenant: TenantId,
    process: &ProcessId,
    status: TurnStatus,
) -> Turn {
    let now = crate::model::now();
    let session = Session {
        id: SessionId::generate(),
        tenant_id: tenant,
        agent: "echo".into(),
        agent_version: None,
        server_tools: Vec::new(),
        options: BTreeMap::new(),
        sealed_options: BTreeMap::new(),
        client_tools: Vec::new(),
        alias: None,
        created_at: now,
        updated_at: now,
    };
    assert!(
        store
            .insert_session(&tenant, &session, &[], None)
            .await
            .unwrap()
    );
    let turn = Turn {
        status,
        created_at: now,
        started_at: (status == TurnStatus::Running).then_some(now),
        ..Turn::queued(TurnId::generate(), tenant, session.id, StreamMode::None)
    };
    store
        .insert_turn(
            &tenant,
            &turn,
            Some(process),
            None,
            None,
            &[],
            RunLink::None,
            false,
            None,
            AdmissionLimits::default(),
        )
        .await
        .unwrap();
    turn
}

/// A new active tenant.
pub async fn tenant(store: &Store) -> TenantId {
    let tenant = Tenant {
        id: TenantId::generate(),
        name: "acme".into(),
        status: TenantStatus::Active,
        created_at: crate::model::now(),
    };
    store.insert_tenant(&tenant).await.unwrap();
    tenant.id
}

/// An engine as `App` builds it, registered as a process (its lease proven), with a tenant.
pub struct TestEngine {
    pub engine: Arc<Engine>,
    pub store: Store,
    pub tenant: TenantId,
    _dir: Option<tempfile::TempDir>,
}

impl TestEngine {
    pub async fn start() -> TestEngine {
        let (store, settings, dir) = test_store_with(&[AGENTS]).await;
        let mcp = crate::tools::mcp::McpRegistry::new(&settings.mcp_servers);
        let metrics = crate::metrics::Metrics::new(false);
        let engine = Engine::new(
            store.clone(),
            crate::agents::Agents::from_settings(&settings.agents, &mcp),
            crate::crypto::SecretBox::new(crate::crypto::random_bytes::<32>(), []),
            settings.engine.clone(),
            settings.tools.clone(),
            mcp,
            settings.quotas.policy(&settings.engine),
            metrics,
            settings.limits.clone(),
            TenantAgentPolicy {
                connections: settings.connections.clone(),
                limits: settings.tenant_agents.clone(),
                mcp_servers: settings.mcp_servers.clone(),
            },
        );
        engine.recover().await.unwrap();
        TestEngine {
            engine,
            tenant: tenant(&store).await,
            store,
            _dir: dir,
        }
    }

    pub async fn session(&self, agent: &str) -> Session {
        self.engine
            .create_session(&self.tenant, agent, Default::default(), Vec::new())
            .await
            .unwrap()
    }

    /// Runs a turn of one user message `text` on `session` to its stop; returns its id.
    pub async fn run_turn(&self, session: &SessionId, text: &str) -> TurnId {
        let started = self
            .engine
            .start_turn(&self.tenant, session, says(text, None))
            .await
            .unwrap();
        let turn = started.turn.id;
        self.finish(started).await;
        turn
    }

    /// Waits until the turn has stopped, by its events.
    pub async fn finish(&self, started: StartedTurn) {
        let events = self.engine.follow_started(started);
        futures_util::pin_mut!(events);
        while let Some(event) = events.next().await {
            if matches!(event.unwrap().data, EventData::TurnStop { .. }) {
                return;
            }
        }
        panic!("the turn's events ended before its stop");
    }

    /// Stops every turn and closes the database.
    pub async fn stop(self) {
        self.engine
            .shutdown(std::time::Duration::from_secs(5))
            .await;
        self.store.close().await;
    }
}

/// A request with one user message.
pub fn says(text: &str, key: Option<&str>) -> TurnRequest {
    let body = serde_json::json!({ "text": text, "key": key });
    TurnRequest {
        agent_name: None,
        agent: Default::default(),
        messages: vec![InputMessage::User {
            content: Content::Text(text.into()),
        }],
        stream: StreamMode::None,
        idempotency: key.map(|key| Idempotency::of(key.to_owned(), &body)),
    }
}

/// Whether a turn's status is one it has before it ends.
pub fn unfinished(status: TurnStatus) -> bool {
    matches!(status, TurnStatus::Queued | TurnStatus::Running)
}
