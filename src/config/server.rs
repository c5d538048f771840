//! `[server]`, `[database]`, `[log]` and `[agentscope]`: how the process listens, stores
//! and logs.

use serde::Deserialize;

use super::{ConfigError, IpNet, Secret};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    pub bind: String,
    pub workers: usize,
    pub max_body_bytes: usize,
    /// Longest a request head may take to arrive (seconds).
    pub header_read_timeout_seconds: u64,
    /// Longest a request body may take to arrive after its head (seconds); then 408.
    pub body_read_timeout_seconds: u64,
    /// How long an idle keep-alive connection stays open (seconds); 0 closes it.
    pub keep_alive_seconds: u64,
    /// Peers whose forwarding headers (`Forwarded`, `X-Forwarded-*`) are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// Web origins (`scheme://host[:port]`, or `*`) whose pages may call the API.
    pub cors_allowed_origins: Vec<String>,
    /// `scheme://host[:port][/path]` of absolute URLs agentry writes (agent cards,
    /// `Location`); empty: from a trusted proxy's forwarding headers, else the address the
    /// connection reached.
    pub public_url: String,
}

impl ServerSettings {
    /// `public_url` without its trailing slashes (empty when unset).
    pub fn public_base(&self) -> &str {
        self.public_url.trim_end_matches('/')
    }

    pub(super) fn validate_public_url(&self) -> Result<(), ConfigError> {
        if self.public_url.is_empty() {
            return Ok(());
        }
        let valid = self
            .public_url
            .strip_prefix("https://")
            .or_else(|| self.public_url.strip_prefix("http://"))
            .is_some_and(|rest| {
                let host = rest.split('/').next().unwrap_or("");
                !host.is_empty()
                    && rest.chars().all(|c| {
                        c.is_ascii_alphanumeric()
                            || matches!(c, '.' | '-' | ':' | '[' | ']' | '/' | '_' | '~')
                    })
            });
        if !valid {
            return Err(ConfigError::new(
                "server.public_url",
                "must be empty or an http(s) URL such as https://agents.example.com (scheme, \
                 host, port and path only)",
            ));
        }
        Ok(())
    }

    /// Each allowed origin is `*` or a bare origin, as a browser sends it in `Origin`.
    pub(super) fn validate_origins(&self) -> Result<(), ConfigError> {
        for (i, origin) in self.cors_allowed_origins.iter().enumerate() {
            if origin == "*" {
                continue;
            }
            let bare = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"))
                .filter(|host| {
                    !host.is_empty()
                        && host.chars().all(|c| {
                            c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']')
                        })
                });
            if bare.is_none() {
                return Err(ConfigError::new(
                    format!("server.cors_allowed_origins[{i}]"),
                    "must be `*` or an origin such as https://app.example.com (scheme, host \
                     and port only, lower case, no path)",
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: Secret,
    /// PostgreSQL: the size of the one pool every query shares.
    pub max_connections: u32,
    /// SQLite: the most read-only connections (the writer is one more). Each keeps its own
    /// page cache, parsed schema and prepared statements while it stays open.
    pub sqlite_readers: u32,
    pub sqlite_busy_timeout_ms: u64,
    /// How long one database call may take (waiting for a connection included) before it
    /// fails and its request is answered 503 `database_unavailable`.
    pub timeout_ms: u64,
    /// SQLite's page cache of each reader connection, in KiB.
    pub sqlite_cache_kib: u32,
    /// SQLite's page cache of the writer connection, in KiB: the pages every commit
    /// changes (the end of each active session's history and events) kept in memory.
    pub sqlite_writer_cache_kib: u32,
    /// How long after a write SQLite's log is copied back into the database file by a
    /// connection of its own, in milliseconds; 0: by the writer, as SQLite does by itself.
    pub sqlite_checkpoint_delay_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    pub level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentScopeSettings {
    /// The agent `POST /agentscope/process` talks to when the request names none; empty:
    /// the first configured agent.
    pub default_agent: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSettings {
    /// The agent whose card `GET /.well-known/agent-card.json` serves; empty: the first
    /// configured agent.
    pub default_agent: String,
    /// Whether cards carry 0.3's own card fields beside 1.0's (as the official SDK's server
    /// writes them): 0.3 clients need them, a strict 1.0 card schema refuses them.
    pub card_v03_fields: bool,
}
