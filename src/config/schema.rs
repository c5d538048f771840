//! An agent's `input_schema` and `output_schema` parts.

use serde::Deserialize;

/// One part of a message-body schema: globs (`*`, `**`, `{a,b}`) over part names and
/// content types.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaPartSettings {
    /// Matches named parts whose name fits; absent: matches only unnamed parts.
    #[serde(default)]
    pub name: Option<String>,
    pub content_type: String,
    #[serde(default)]
    pub required: bool,
}

impl SchemaPartSettings {
    pub fn compile(&self) -> Result<crate::model::SchemaPart, (&'static str, String)> {
        use crate::model::PartGlob;
        let name = match &self.name {
            Some(pattern) if !pattern.starts_with('/') => {
                return Err((
                    "name",
                    format!("`{pattern}` must start with `/`: part names are absolute paths"),
                ));
            }
            Some(pattern) => Some(PartGlob::new(pattern).map_err(|e| ("name", e))?),
            None => None,
        };
        Ok(crate::model::SchemaPart {
            name,
            content_type: PartGlob::new(&self.content_type).map_err(|e| ("content_type", e))?,
            required: self.required,
        })
    }
}
