//! `[console]`: the browser console the binary serves.

use serde::Deserialize;

use super::ConfigError;

/// Paths the API's own routes start with: the console may not take one of them.
const TAKEN: &[&str] = &[
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/docs",
    "/auth",
    "/admin",
    "/webhooks",
    "/meta",
    "/sessions",
    "/files",
    "/usage",
    "/quotas",
    "/runs",
    "/agentscope",
    "/acp",
    "/a2a",
    "/.well-known",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSettings {
    /// Whether the console is served at all.
    pub enabled: bool,
    /// Where: an absolute path such as `/console`.
    pub path: String,
}

impl ConsoleSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let path = self.path.as_str();
        let well_formed = path.len() > 1
            && path.starts_with('/')
            && !path.ends_with('/')
            && !path.contains("//")
            && path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'))
            && !path
                .split('/')
                .any(|segment| segment == "." || segment == "..");
        if !well_formed {
            return Err(ConfigError::new(
                "console.path",
                "must be an absolute path like /console: letters, digits, `-`, `_`, `.` and `/`, \
                 no trailing `/`",
            ));
        }
        let first = path.split('/').nth(1).unwrap_or_default();
        if let Some(taken) = TAKEN.iter().find(|taken| taken[1..] == *first) {
            return Err(ConfigError::new(
                "console.path",
                format!("must not start with {taken}, which the API serves"),
            ));
        }
        Ok(())
    }

    /// The relative URL from the console's page (`{path}/`) to the server's root, so the
    /// console reaches the API behind a proxy that serves agentry under a prefix.
    pub fn api_base(&self) -> String {
        "../".repeat(self.path.matches('/').count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console(path: &str) -> ConsoleSettings {
        ConsoleSettings {
            enabled: true,
            path: path.into(),
        }
    }

    #[test]
    fn a_path_must_be_absolute_and_clear_of_the_api() {
        for good in ["/console", "/ops/console", "/ui-2"] {
            assert!(console(good).validate().is_ok(), "{good}");
        }
        for bad in [
            "",
            "/",
            "console",
            "/console/",
            "//x",
            "/a//b",
            "/a b",
            "/x/../y",
            "/sessions",
            "/admin/ui",
            "/a2a",
        ] {
            let error = console(bad).validate().unwrap_err();
            assert_eq!(error.key, "console.path", "{bad}");
        }
    }

    #[test]
    fn the_api_is_one_level_up_per_segment() {
        assert_eq!(console("/console").api_base(), "../");
        assert_eq!(console("/ops/console").api_base(), "../../");
    }
}
