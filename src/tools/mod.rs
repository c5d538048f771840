//! Server tools: the built-ins an agent may be configured with, their schemas, argument
//! validation and execution.

mod calculator;
pub mod fetch;
pub mod mcp;

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::model::{TenantId, ToolSpec};
use crate::store::Store;

pub use crate::model::Builtin;
pub use calculator::evaluate;

impl Builtin {
    pub fn description(self) -> &'static str {
        match self {
            Builtin::Clock => "The current date and time, in UTC or in an IANA time zone.",
            Builtin::Calculator => {
                "Evaluates an arithmetic expression: numbers, + - * / % ^ and parentheses."
            }
            Builtin::Memory => {
                "Notes kept for this tenant across sessions: save a note, search notes, or \
                 delete one by id."
            }
            Builtin::HttpFetch => "Fetches a web page or API response over HTTP(S) with GET.",
        }
    }

    pub fn parameters(self) -> Value {
        match self {
            Builtin::Clock => json!({
                "type": "object",
                "properties": {"zone": {"type": "string", "description": "An IANA time zone, such as Europe/Paris. Default: UTC."}},
                "additionalProperties": false
            }),
            Builtin::Calculator => json!({
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "For example (2 + 3) * 4."}},
                "required": ["expression"],
                "additionalProperties": false
            }),
            Builtin::Memory => json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["save", "search", "delete"]},
                    "text": {"type": "string", "description": "The note to save."},
                    "query": {"type": "string", "description": "Words to search for; empty lists the latest notes."},
                    "id": {"type": "string", "description": "The note to delete."}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
            Builtin::HttpFetch => json!({
                "type": "object",
                "properties": {"url": {"type": "string", "description": "An http:// or https:// URL."}},
                "required": ["url"],
                "additionalProperties": false
            }),
        }
    }

    pub fn spec(self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            title: None,
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
}

/// A tool's argument schema, compiled once (when the tool is configured or listed).
#[derive(Clone)]
pub struct ArgumentSchema {
    schema: Value,
    validator: Result<Arc<jsonschema::Validator>, String>,
}

impl ArgumentSchema {
    pub fn compile(schema: &Value) -> Self {
        Self {
            schema: schema.clone(),
            validator: jsonschema::validator_for(schema)
                .map(Arc::new)
                .map_err(|e| format!("the tool's parameter schema is invalid: {e}")),
        }
    }

    /// Checks `input` against the schema; the error lists what does not fit.
    pub fn check(&self, input: &Map<String, Value>) -> Result<(), String> {
        validate_with(&self.validator, input)
    }
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ArgumentSchema").field(&self.schema).finish()
    }
}

impl PartialEq for ArgumentSchema {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
    }
}

/// Checks `input` against a JSON schema compiled for this one call.
pub fn validate_arguments(schema: &Value, input: &Map<String, Value>) -> Result<(), String> {
    ArgumentSchema::compile(schema).check(input)
}

fn validate_with(
    validator: &Result<Arc<jsonschema::Validator>, String>,
    input: &Map<String, Value>,
) -> Result<(), String> {
    if let Some(raw) = input.get("_invalid_arguments") {
        return Err(format!("the arguments are not a JSON object: {raw}"));
    }
    let validator = validator.as_ref().map_err(Clone::clone)?;
    let instance = Value::Object(input.clone());
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Runs a built-in with validated arguments. The text is the tool's result, errors included
/// (a model reads them and can try again).
pub async fn run(
    tool: Builtin,
    input: &Map<String, Value>,
    store: &Store,
    tenant: &TenantId,
    settings: &crate::config::ToolsSettings,
) -> String {
    let result = match tool {
        Builtin::Calculator => {
            let expression = input
                .get("expression")
                .and_then(Value::as_str)
                .unwrap_or_default();
            evaluate(expression).map(|v| {
                if v.fract() == 0.0 && v.abs() < 1e15 {
                    format!("{}", v as i64)
                } else {
                    format!("{v}")
                }
            })
        }
        Builtin::Clock => clock(input.get("zone").and_then(Value::as_str)),
        Builtin::Memory => memory(input, store, tenant).await,
        Builtin::HttpFetch => {
            let url = input.get("url").and_then(Value::as_str).unwrap_or_default();
            fetch::fetch(url, settings).await
        }
    };
    result.unwrap_or_else(|error| format!("Error: {error}"))
}

fn clock(zone: Option<&str>) -> Result<String, String> {
    let now = chrono::Utc::now();
    match zone {
        None | Some("UTC") | Some("") => Ok(now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        Some(zone) => {
            let tz: chrono_tz::Tz = zone
                .parse()
                .map_err(|_| format!("`{zone}` is not an IANA time zone"))?;
            Ok(format!(
                "{} ({zone})",
                now.with_timezone(&tz)
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ))
        }
    }
}

async fn memory(
    input: &Map<String, Value>,
    store: &Store,
    tenant: &TenantId,
) -> Result<String, String> {
    let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
    let failed = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "memory tool failed");
        "the notes are unavailable right now".to_owned()
    };
    match text("action") {
        "save" => {
            let note = text("text").trim();
            if note.is_empty() || note.len() > 10_000 {
                return Err("`text` must be 1 to 10000 characters".into());
            }
            let id = store.insert_note(tenant, note).await.map_err(failed)?;
            Ok(json!({"saved": id}).to_string())
        }
        "search" => {
            let notes = store
                .search_notes(tenant, text("query"), 20)
                .await
                .map_err(failed)?;
            Ok(json!({"notes": notes.into_iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>()}).to_string())
        }
        "delete" => {
            let deleted = store
                .delete_note(tenant, text("id"))
                .await
                .map_err(failed)?;
            Ok(json!({"deleted": deleted}).to_string())
        }
        other => Err(format!(
            "unknown action `{other}`; use save, search or delete"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let schema = Builtin::Calculator.parameters();
        let ok: Map<String, Value> = serde_json::from_value(json!({"expression": "1+1"})).unwrap();
        assert!(validate_arguments(&schema, &ok).is_ok());
        let missing = Map::new();
        assert!(
            validate_arguments(&schema, &missing)
                .unwrap_err()
                .contains("expression")
        );
        let wrong: Map<String, Value> = serde_json::from_value(json!({"expression": 5})).unwrap();
        assert!(validate_arguments(&schema, &wrong).is_err());
    }

    #[test]
    fn the_clock_knows_iana_zones() {
        assert!(clock(None).unwrap().ends_with('Z'));
        assert!(
            clock(Some("Europe/Paris"))
                .unwrap()
                .contains("Europe/Paris")
        );
        assert!(clock(Some("Mars/Olympus")).is_err());
    }
}
