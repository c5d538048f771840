//! The command line: `serve`, `migrate`, `config check` and `admin …`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::app::{App, AppState};
use crate::auth;
use crate::config::Settings;
use crate::model::TenantId;
use crate::store::Page;
use crate::telemetry;

#[derive(Debug, Parser)]
#[command(
    name = "agentry",
    version,
    about = "Self-hosted multi-tenant agent platform"
)]
pub struct Cli {
    /// Configuration file layered over the embedded defaults.
    #[arg(long, global = true, env = "AGENTRY_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (migrates the database first).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Manage tenants directly in the database (prints JSON).
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration; on error, name the offending key.
    Check,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a tenant.
    CreateTenant {
        name: String,
        /// Print only the tenant id.
        #[arg(long)]
        raw: bool,
    },
    /// Create a client credential for POST /auth/token (the secret is shown once).
    CreateCredential {
        tenant: String,
        #[arg(long)]
        name: Option<String>,
    },
    /// Issue a long-lived tenant token (an API key).
    IssueToken {
        tenant: String,
        /// Lifetime in seconds (default: auth.api_key_ttl_seconds).
        #[arg(long)]
        ttl: Option<u64>,
        #[arg(long)]
        name: Option<String>,
        /// Print only the token.
        #[arg(long)]
        raw: bool,
    },
    /// List tenants, newest first.
    ListTenants,
    /// Show a tenant's quotas, after setting some: `--set requests_per_minute=600`,
    /// `--set turns_per_minute=default` (0: unlimited). Serving processes apply the change
    /// within auth.state_cache_ttl_ms.
    Quotas {
        tenant: String,
        /// `QUOTA=LIMIT` or `QUOTA=default`; repeatable.
        #[arg(long = "set", value_name = "QUOTA=LIMIT")]
        set: Vec<String>,
    },
}

/// Runs the parsed command; the process exits with the returned code.
pub async fn run(cli: Cli) -> i32 {
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("error: {error}");
            return 2;
        }
    };
    if let Command::Config {
        command: ConfigCommand::Check,
    } = cli.command
    {
        println!(
            "configuration is valid: {} agent(s), {} MCP server(s), database {}",
            settings.agents.len(),
            settings.mcp_servers.len(),
            if settings.database.url.expose().starts_with("sqlite:") {
                "SQLite"
            } else {
                "PostgreSQL"
            }
        );
        return 0;
    }
    if let Err(error) =
        telemetry::init_with_traces(&settings.log, Some(&settings.telemetry), std::io::stderr)
    {
        eprintln!("error: {error:#}");
        return 1;
    }
    let result = match cli.command {
        Command::Serve => serve(settings).await,
        Command::Migrate => migrate(settings).await,
        Command::Admin { command } => admin(settings, command).await,
        Command::Config { .. } => unreachable!("handled above"),
    };
    crate::traces::shutdown();
    match result {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("error: {error:#}");
            1
        }
    }
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let app = App::build(settings).await?;
    app.run_until_stopped().await?;
    Ok(())
}

async fn migrate(settings: Settings) -> anyhow::Result<()> {
    let store = crate::store::Store::connect(&settings.database).await?;
    let applied = store.migrate().await?;
    print_json(&serde_json::json!({ "applied": applied }));
    Ok(())
}

fn print_json(value: &impl Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("values serialize")
    );
}

fn tenant_arg(raw: &str) -> anyhow::Result<TenantId> {
    raw.parse()
        .map_err(|_| anyhow::anyhow!("`{raw}` is not a tenant id (ten_…)"))
}

async fn admin(settings: Settings, command: AdminCommand) -> anyhow::Result<()> {
    let state = AppState::init(settings).await?;
    let api = |e: auth::AuthError| anyhow::anyhow!(e.to_string());
    match command {
        AdminCommand::CreateTenant { name, raw } => {
            let tenant = auth::create_tenant(&state.store, &name)
                .await
                .map_err(api)?;
            if raw {
                println!("{}", tenant.id);
            } else {
                print_json(&tenant);
            }
        }
        AdminCommand::CreateCredential { tenant, name } => {
            let tenant = tenant_arg(&tenant)?;
            let created = auth::create_credential(&state.store, &tenant, name)
                .await
                .map_err(api)?;
            print_json(&created);
        }
        AdminCommand::IssueToken {
            tenant,
            ttl,
            name,
            raw,
        } => {
            let tenant = tenant_arg(&tenant)?;
            let issued = auth::issue_api_token(
                &state.store,
                &state.tokens,
                &state.settings.auth,
                &tenant,
                ttl,
                name,
            )
            .await
            .map_err(api)?;
            if raw {
                println!("{}", issued.token);
            } else {
                print_json(&issued);
            }
        }
        AdminCommand::Quotas { tenant, set } => {
            let tenant = tenant_arg(&tenant)?;
            state
                .store
                .get_tenant(&tenant)
                .await
                .map_err(|_| anyhow::anyhow!("tenant {tenant} not found"))?;
            let mut own = state.store.get_quota_overrides(&tenant).await?;
            if !set.is_empty() {
                let mut changes = serde_json::Map::new();
                for item in &set {
                    let (name, value) = item.split_once('=').ok_or_else(|| {
                        anyhow::anyhow!("--set {item}: expected QUOTA=LIMIT or QUOTA=default")
                    })?;
                    let value = match value {
                        "default" => serde_json::Value::Null,
                        value => {
                            value
                                .parse::<u64>()
                                .map(serde_json::Value::from)
                                .map_err(|_| {
                                    anyhow::anyhow!("--set {item}: the limit must be a number")
                                })?
                        }
                    };
                    changes.insert(name.to_owned(), value);
                }
                own.apply(&changes)
                    .map_err(|e| anyhow::anyhow!("--set {e}"))?;
                state.store.put_quota_overrides(&tenant, &own).await?;
            }
            let defaults = state.settings.quotas.defaults(&state.settings.engine);
            print_json(&serde_json::json!({
                "tenant_id": tenant,
                "quotas": crate::model::Quotas::resolve(&defaults, &own).to_map(),
                "own": own,
            }));
        }
        AdminCommand::ListTenants => {
            let mut tenants = Vec::new();
            let mut after = None;
            loop {
                let page = Page { after, limit: 200 };
                let (batch, more) = state.store.list_tenants(page).await?;
                after = batch.last().map(|t| t.id.to_uuid());
                tenants.extend(batch);
                if !more {
                    break;
                }
            }
            print_json(&serde_json::json!({ "tenants": tenants }));
        }
    }
    state.store.close().await;
    Ok(())
}
