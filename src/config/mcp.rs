//! `[[mcp_servers]]`: the MCP servers whose tools agents may use, reached over stdio (a
//! command agentry starts) or streamable HTTP (a URL).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ConfigError, Secret};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSettings {
    /// Names the server's tools: `<name>.<tool>`.
    pub name: String,
    /// stdio: the program to start (looked up on PATH).
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The program's environment variables, beside the few it inherits from agentry's
    /// (`HOME`, `PATH`, …: see the MCP connector).
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// The program's working directory; default: agentry's.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Streamable HTTP: the server's endpoint URL.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent with every request (for example `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// Longest a tool call may take, in seconds.
    #[serde(default = "default_call_timeout")]
    pub timeout_seconds: u64,
    /// Longest connecting and listing the tools may take, in seconds.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_seconds: u64,
}

/// Headers the streamable HTTP transport sets itself.
const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

fn default_call_timeout() -> u64 {
    60
}

fn default_connect_timeout() -> u64 {
    15
}

/// Server names: lowercase letters, digits, `_` and `-`; no dot, which separates a server's
/// name from its tool's.
pub fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
}

/// Splits `<server>.<tool>` (or `<server>.*`) into its parts.
pub fn split_tool_name(name: &str) -> Option<(&str, &str)> {
    let (server, tool) = name.split_once('.')?;
    (is_server_name(server) && !tool.is_empty()).then_some((server, tool))
}

impl McpServerSettings {
    /// `text` (an error to log) with the server's URL cut down to where it points: no
    /// credentials, query or fragment, which may carry secrets from `${NAME}`.
    pub fn redact(&self, text: &str) -> String {
        let Some(url) = &self.url else {
            return text.to_owned();
        };
        let shown = match reqwest::Url::parse(url) {
            Ok(parsed) => format!(
                "{}://{}{}",
                parsed.scheme(),
                parsed.host_str().unwrap_or_default(),
                parsed.port().map(|p| format!(":{p}")).unwrap_or_default() + parsed.path()
            ),
            Err(_) => "<the server's URL>".to_owned(),
        };
        let mut redacted = text.replace(url.as_str(), &shown);
        // Clients write URLs again in their own form (`…/mcp?key=…` parsed and printed).
        if let Ok(parsed) = reqwest::Url::parse(url) {
            redacted = redacted.replace(parsed.as_str(), &shown);
        }
        redacted
    }

    /// Replaces `${NAME}` in every string with the environment variable.
    pub(super) fn resolve_environment(
        &mut self,
        at: &str,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let resolve = |key: &str, value: &str| {
            super::resolve_env(value, lookup).map_err(|name| {
                ConfigError::new(
                    format!("{at}.{key}"),
                    format!("environment variable `{name}` is not set"),
                )
            })
        };
        if let Some(command) = &self.command {
            self.command = Some(resolve("command", command)?);
        }
        for (i, arg) in self.args.iter_mut().enumerate() {
            *arg = resolve(&format!("args[{i}]"), arg)?;
        }
        for (key, value) in self.env.iter_mut() {
            *value = Secret::new(resolve(&format!("env.{key}"), value.expose())?);
        }
        if let Some(cwd) = &self.cwd {
            self.cwd = Some(resolve("cwd", cwd)?);
        }
        if let Some(url) = &self.url {
            self.url = Some(resolve("url", url)?);
        }
        for (key, value) in self.headers.iter_mut() {
            *value = Secret::new(resolve(&format!("headers.{key}"), value.expose())?);
        }
        Ok(())
    }

    pub(super) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        if !is_server_name(&self.name) {
            return Err(ConfigError::new(
                format!("{at}.name"),
                "must be 1-32 characters of a-z 0-9 _ -",
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    format!("{at}.url"),
                    "give either `command` (stdio) or `url` (streamable HTTP), not both",
                ));
            }
            (None, None) => {
                return Err(ConfigError::new(
                    format!("{at}.command"),
                    "give either `command` (stdio) or `url` (streamable HTTP)",
                ));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(ConfigError::new(
                        format!("{at}.command"),
                        "must not be empty",
                    ));
                }
                if !self.headers.is_empty() {
                    return Err(ConfigError::new(
                        format!("{at}.headers"),
                        "only an HTTP server (`url`) takes headers",
                    ));
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError::new(
                        format!("{at}.url"),
                        "must be an http:// or https:// URL",
                    ));
                }
                for (key, field) in [
                    ("args", !self.args.is_empty()),
                    ("env", !self.env.is_empty()),
                    ("cwd", self.cwd.is_some()),
                ] {
                    if field {
                        return Err(ConfigError::new(
                            format!("{at}.{key}"),
                            "only a stdio server (`command`) takes this",
                        ));
                    }
                }
                for (name, value) in &self.headers {
                    if RESERVED_HEADERS
                        .iter()
                        .any(|r| name.eq_ignore_ascii_case(r))
                    {
                        return Err(ConfigError::new(
                            format!("{at}.headers.{name}"),
                            "this header belongs to the MCP transport",
                        ));
                    }
                    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
                        || reqwest::header::HeaderValue::from_str(value.expose()).is_err()
                    {
                        return Err(ConfigError::new(
                            format!("{at}.headers.{name}"),
                            "not a valid HTTP header",
                        ));
                    }
                }
            }
        }
        for (key, value) in [
            ("timeout_seconds", self.timeout_seconds),
            ("connect_timeout_seconds", self.connect_timeout_seconds),
        ] {
            if value == 0 {
                return Err(ConfigError::new(
                    format!("{at}.{key}"),
                    "must be at least 1",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_error_shows_where_the_url_points_but_not_its_secrets() {
        let settings: McpServerSettings = serde_json::from_value(serde_json::json!({
            "name": "search",
            "url": "https://user:pw@mcp.example.com:8443/mcp?key=s3cr3t"
        }))
        .unwrap();
        let error =
            "error sending request for url (https://user:pw@mcp.example.com:8443/mcp?key=s3cr3t)";
        let redacted = settings.redact(error);
        assert_eq!(
            redacted,
            "error sending request for url (https://mcp.example.com:8443/mcp)"
        );
        let stdio: McpServerSettings =
            serde_json::from_value(serde_json::json!({"name": "fx", "command": "fx"})).unwrap();
        assert_eq!(stdio.redact("broken pipe"), "broken pipe");
    }

    #[test]
    fn tool_names_split_at_the_first_dot() {
        assert_eq!(split_tool_name("files.read"), Some(("files", "read")));
        assert_eq!(split_tool_name("files.*"), Some(("files", "*")));
        assert_eq!(split_tool_name("a.b.c"), Some(("a", "b.c")));
        assert_eq!(split_tool_name("clock"), None);
        assert_eq!(split_tool_name("Files.read"), None);
        assert_eq!(split_tool_name("files."), None);
    }
}
