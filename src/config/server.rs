//! `[server]`, `[database]`, `[log]` and `[agentscope]`: how the process listens, stores
//! and logs.

use serde::Deserialize;

use super::IpNet;

use super::Secret;

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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: Secret,
    pub max_connections: u32,
    pub sqlite_busy_timeout_ms: u64,
    /// SQLite's page cache per connection, in KiB (the writer and each reader have one).
    pub sqlite_cache_kib: u32,
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
