//! The command line: `serve`, `migrate`, `config check` and `admin …`. Only `serve` logs
//! unless asked (`-v`): the other commands print their result and, on failure, the error.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::app::{App, AppState};
use crate::auth;
use crate::config::Settings;
use crate::model::{TenantId, TenantStatus};
use crate::store::Page;
use crate::telemetry;

mod schedules;

pub use schedules::SchedulesCommand;

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
    /// Log what the command does to stderr (`-v`: info, `-vv`: debug); `serve` always logs.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
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
    /// List tenants' schedules and their run history (prints JSON).
    Schedules {
        #[command(subcommand)]
        command: SchedulesCommand,
    },
    /// Manage tenants' own agents directly in the database (prints JSON), as
    /// `/admin/tenants/{id}/agents` does.
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
}

/// Where a command takes a tenant, its name or its id (`acme` or `ten_…`). Versions made
/// here are recorded as made by `admin`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List a tenant's agents.
    List {
        /// The tenant's name or id.
        tenant: String,
    },
    /// Show an agent with its newest version (or `--version N`).
    Show {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
        /// The version to show instead of the newest.
        #[arg(long)]
        version: Option<i64>,
    },
    /// Create an agent from a JSON file (the body of `POST /agents`): its version 1.
    Create {
        /// The tenant's name or id.
        tenant: String,
        /// The agent as JSON (`-`: standard input).
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
    /// Make an agent's next version from a JSON file (the body of `PUT /agents/{name}`).
    Update {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
        /// The agent's next version as JSON (`-`: standard input).
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Refuse if the agent's revision (its ETag) is no longer this.
        #[arg(long, value_name = "REVISION")]
        if_match: Option<i64>,
    },
    /// List an agent's kept versions, newest first.
    Versions {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
    },
    /// Publish a kept version (an older one: a rollback).
    Publish {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
        /// The version to publish.
        version: i64,
    },
    /// Archive an agent: no new sessions; its sessions go on.
    Archive {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
    },
    /// Restore an archived agent.
    Restore {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
    },
    /// Delete an agent and its versions.
    Delete {
        /// The tenant's name or id.
        tenant: String,
        /// The agent's name.
        name: String,
        /// Confirm the deletion; without it nothing is deleted.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration; on error, name the offending key.
    Check,
}

/// Where a command takes a tenant, its name or its id (`acme` or `ten_…`).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a tenant.
    CreateTenant {
        /// The tenant's name: unique, what the other commands accept in place of its id.
        name: String,
        /// Print only the tenant id.
        #[arg(long)]
        raw: bool,
    },
    /// List tenants, newest first.
    ListTenants,
    /// Suspend a tenant: its requests are refused and its running turns cancelled.
    SuspendTenant {
        /// The tenant's name or id.
        tenant: String,
    },
    /// Reactivate a suspended tenant.
    ActivateTenant {
        /// The tenant's name or id.
        tenant: String,
    },
    /// Delete a tenant and all its data (sessions, histories, credentials, tokens).
    DeleteTenant {
        /// The tenant's name or id.
        tenant: String,
        /// Confirm the deletion; without it nothing is deleted.
        #[arg(long)]
        yes: bool,
    },
    /// Create a client credential for POST /auth/token (the secret is shown once).
    CreateCredential {
        /// The tenant's name or id.
        tenant: String,
        /// A name for the credential, to tell it from the others.
        #[arg(long)]
        name: Option<String>,
    },
    /// Issue a long-lived tenant token (an API key).
    IssueToken {
        /// The tenant's name or id.
        tenant: String,
        /// Lifetime in seconds (default: auth.api_key_ttl_seconds).
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
        /// A name for the token, to tell it from the others.
        #[arg(long)]
        name: Option<String>,
        /// Print only the token.
        #[arg(long)]
        raw: bool,
    },
    /// List a tenant's tokens (their records: id, name, expiry, revocation; never a token).
    ListTokens {
        /// The tenant's name or id.
        tenant: String,
    },
    /// Revoke a tenant's token: it is refused from then on.
    RevokeToken {
        /// The tenant's name or id.
        tenant: String,
        /// The token's id (`tok_…`, its `jti`, as issue-token and list-tokens print it).
        jti: String,
    },
    /// Show a tenant's quotas, after setting some: `--set requests_per_minute=600`,
    /// `--set turns_per_minute=default` (0: unlimited). Serving processes apply the change
    /// within auth.state_cache_ttl_ms.
    Quotas {
        /// The tenant's name or id.
        tenant: String,
        /// `QUOTA=LIMIT` or `QUOTA=default`; repeatable.
        #[arg(long = "set", value_name = "QUOTA=LIMIT")]
        set: Vec<String>,
    },
    /// Show what a tenant's turns consumed, in total and per UTC day.
    Usage {
        /// The tenant's name or id.
        tenant: String,
        /// Turns created at or after this time (RFC 3339; default: the beginning).
        #[arg(long, value_name = "TIME")]
        from: Option<chrono::DateTime<chrono::Utc>>,
        /// Turns created before this time (RFC 3339; default: now).
        #[arg(long, value_name = "TIME")]
        to: Option<chrono::DateTime<chrono::Utc>>,
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
    match (&cli.command, cli.verbose) {
        (Command::Serve, _) => {
            if let Err(error) = telemetry::init_with_traces(
                &settings.log,
                Some(&settings.telemetry),
                std::io::stderr,
            ) {
                eprintln!("error: {error:#}");
                return 1;
            }
        }
        (_, 0) => {}
        (_, verbose) => {
            let mut log = settings.log.clone();
            log.level = if verbose == 1 { "info" } else { "debug" }.to_owned();
            telemetry::init(&log, std::io::stderr);
        }
    }
    let result = match cli.command {
        Command::Serve => serve(settings).await,
        Command::Migrate => migrate(settings).await,
        Command::Admin { command } => admin(settings, command).await,
        Command::Schedules { command } => schedules_command(settings, command).await,
        Command::Agents { command } => agents(settings, command).await,
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

async fn schedules_command(settings: Settings, command: SchedulesCommand) -> anyhow::Result<()> {
    let state = AppState::init(settings).await?;
    let result = schedules::run(&state, command).await;
    state.store().close().await;
    result
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

/// The tenant a user named: by id (`ten_…`) or by name.
async fn tenant_arg(state: &AppState, raw: &str) -> anyhow::Result<TenantId> {
    let tenant = match raw.parse::<TenantId>() {
        Ok(id) => state.store().get_tenant(&id).await.ok(),
        Err(_) => all_tenants(state)
            .await?
            .into_iter()
            .find(|tenant| tenant.name == raw),
    };
    tenant.map(|tenant| tenant.id).ok_or_else(|| {
        anyhow::anyhow!(
            "no tenant is named or has the id `{raw}` (`agentry admin list-tenants` lists them)"
        )
    })
}

async fn all_tenants(state: &AppState) -> anyhow::Result<Vec<crate::model::Tenant>> {
    let mut tenants = Vec::new();
    let mut after = None;
    loop {
        let page = Page { after, limit: 200 };
        let (batch, more) = state.store().list_tenants(page).await?;
        after = batch.last().map(|t| t.id.to_uuid());
        tenants.extend(batch);
        if !more {
            return Ok(tenants);
        }
    }
}

/// A JSON file, or standard input for `-`.
fn read_json(file: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?
    };
    serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", file.display()))
}

async fn agents(settings: Settings, command: AgentsCommand) -> anyhow::Result<()> {
    const BY: &str = "admin";
    let state = AppState::init(settings).await?;
    let engine = state.engine();
    let refused = |e: crate::engine::AgentError| anyhow::anyhow!(e.to_string());
    let archiving = matches!(command, AgentsCommand::Archive { .. });
    let body = |found: crate::engine::AgentWithVersion| serde_json::json!({"agent": found.agent, "version": found.version});
    match command {
        AgentsCommand::List { tenant } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let mut agents = Vec::new();
            let mut after = None;
            loop {
                let (batch, more) = engine
                    .list_agents(&tenant, Page { after, limit: 200 })
                    .await
                    .map_err(refused)?;
                after = batch.last().map(|a| a.id.to_uuid());
                agents.extend(batch);
                if !more {
                    break;
                }
            }
            print_json(&agents);
        }
        AgentsCommand::Show {
            tenant,
            name,
            version,
        } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let found = match version {
                Some(number) => engine.get_agent_version(&tenant, &name, number).await,
                None => engine.get_agent(&tenant, &name).await,
            }
            .map_err(refused)?;
            print_json(&body(found));
        }
        AgentsCommand::Create { tenant, file } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let made = engine
                .create_agent(&tenant, read_json(&file)?, BY)
                .await
                .map_err(refused)?;
            print_json(&body(made));
        }
        AgentsCommand::Update {
            tenant,
            name,
            file,
            if_match,
        } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let made = engine
                .update_agent(&tenant, &name, read_json(&file)?, if_match, BY)
                .await
                .map_err(refused)?;
            print_json(&body(made));
        }
        AgentsCommand::Versions { tenant, name } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let (_, versions, _) = engine
                .list_agent_versions(&tenant, &name, None, u32::MAX - 1)
                .await
                .map_err(refused)?;
            print_json(&versions);
        }
        AgentsCommand::Publish {
            tenant,
            name,
            version,
        } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let agent = engine
                .publish_agent(&tenant, &name, version, None)
                .await
                .map_err(refused)?;
            print_json(&agent);
        }
        AgentsCommand::Archive { tenant, name } | AgentsCommand::Restore { tenant, name } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let agent = engine
                .archive_agent(&tenant, &name, archiving, None)
                .await
                .map_err(refused)?;
            print_json(&agent);
        }
        AgentsCommand::Delete { tenant, name, yes } => {
            if !yes {
                anyhow::bail!("deleting an agent deletes its versions: add --yes to confirm");
            }
            let tenant = tenant_arg(&state, &tenant).await?;
            engine.delete_agent(&tenant, &name).await.map_err(refused)?;
            print_json(&serde_json::json!({"deleted": name}));
        }
    }
    Ok(())
}

async fn admin(settings: Settings, command: AdminCommand) -> anyhow::Result<()> {
    let suspending = matches!(command, AdminCommand::SuspendTenant { .. });
    let state = AppState::init(settings).await?;
    let api = |e: auth::AuthError| anyhow::anyhow!(e.to_string());
    match command {
        AdminCommand::CreateTenant { name, raw } => {
            let tenant = auth::create_tenant(state.store(), &name)
                .await
                .map_err(api)?;
            if raw {
                println!("{}", tenant.id);
            } else {
                print_json(&tenant);
            }
        }
        AdminCommand::CreateCredential { tenant, name } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let created = auth::create_credential(state.store(), &tenant, name)
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
            let tenant = tenant_arg(&state, &tenant).await?;
            let issued = auth::issue_api_token(
                state.store(),
                state.tokens(),
                &state.settings().auth,
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
            let tenant = tenant_arg(&state, &tenant).await?;
            let mut own = state.store().get_quota_overrides(&tenant).await?;
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
                state.store().put_quota_overrides(&tenant, &own).await?;
            }
            let defaults = state.settings().quotas.defaults(&state.settings().engine);
            print_json(&serde_json::json!({
                "tenant_id": tenant,
                "quotas": crate::model::Quotas::resolve(&defaults, &own).to_map(),
                "own": own,
            }));
        }
        AdminCommand::ListTenants => {
            let tenants = all_tenants(&state).await?;
            print_json(&serde_json::json!({ "tenants": tenants }));
        }
        AdminCommand::SuspendTenant { tenant } | AdminCommand::ActivateTenant { tenant } => {
            let status = if suspending {
                TenantStatus::Suspended
            } else {
                TenantStatus::Active
            };
            let tenant = tenant_arg(&state, &tenant).await?;
            let updated = state
                .engine()
                .update_tenant(&tenant, None, Some(status))
                .await
                .map_err(|e| anyhow::anyhow!(crate::http::error::ApiError::from(e).message))?;
            print_json(&updated);
        }
        AdminCommand::DeleteTenant { tenant, yes } => {
            let id = tenant_arg(&state, &tenant).await?;
            if !yes {
                anyhow::bail!(
                    "deleting tenant `{tenant}` ({id}) deletes all its data: add --yes to do it"
                );
            }
            state
                .engine()
                .delete_tenant(&id)
                .await
                .map_err(|e| anyhow::anyhow!(crate::http::error::ApiError::from(e).message))?;
            print_json(&serde_json::json!({ "deleted": id }));
        }
        AdminCommand::ListTokens { tenant } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let tokens = state.store().list_api_tokens(&tenant).await?;
            print_json(&serde_json::json!({ "tokens": tokens }));
        }
        AdminCommand::RevokeToken { tenant, jti } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let id: crate::model::TokenId = jti
                .parse()
                .map_err(|_| anyhow::anyhow!("`{jti}` is not a token id (tok_…)"))?;
            state
                .store()
                .revoke_api_token(&tenant, &id)
                .await
                .map_err(|_| anyhow::anyhow!("tenant {tenant} has no token {jti}"))?;
            print_json(&serde_json::json!({ "revoked": id }));
        }
        AdminCommand::Usage { tenant, from, to } => {
            let tenant = tenant_arg(&state, &tenant).await?;
            let from = from.unwrap_or(chrono::DateTime::UNIX_EPOCH);
            let to = to.unwrap_or_else(crate::model::now);
            if from >= to {
                anyhow::bail!("--from must be before --to");
            }
            let totals = state.store().sum_usage(&tenant, from, to).await?;
            let days = state.store().usage_by_day(&tenant, from, to).await?;
            let mut report = serde_json::json!({ "tenant_id": tenant, "from": from, "to": to });
            if let (Some(report), serde_json::Value::Object(totals)) =
                (report.as_object_mut(), serde_json::to_value(totals)?)
            {
                report.extend(totals);
            }
            report["days"] = serde_json::to_value(days)?;
            print_json(&report);
        }
    }
    state.store().close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn every_command_and_argument_has_help() {
        fn check(command: &clap::Command, path: &str) {
            let path = format!("{path} {}", command.get_name());
            assert!(command.get_about().is_some(), "`{path}` has no help");
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                assert!(arg.get_help().is_some(), "`{path}`'s `{id}` has no help");
            }
            for sub in command.get_subcommands() {
                if sub.get_name() != "help" {
                    check(sub, &path);
                }
            }
        }
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            if sub.get_name() != "help" {
                check(sub, "agentry");
            }
        }
        for arg in cli.get_arguments() {
            let id = arg.get_id().as_str();
            assert!(
                id == "help" || id == "version" || arg.get_help().is_some(),
                "{id}"
            );
        }
    }
}
