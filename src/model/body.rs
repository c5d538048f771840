//! Message bodies as ordered lists of parts, and the schemas an agent declares over them:
//! part names are POSIX absolute paths, schema parts match names and content types with
//! the globs `*`, `**` and `{a,b}`.

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a part's inline content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContentEncoding {
    #[default]
    Plain,
    Base64,
}

impl ContentEncoding {
    pub fn is_plain(&self) -> bool {
        *self == ContentEncoding::Plain
    }
}

/// One part of a message body: what AAP has no block for (named attachments, data, audio,
/// files, refusals), kept as it came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub content_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "ContentEncoding::is_plain")]
    pub content_encoding: ContentEncoding,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Part {
    /// The history block the part becomes: unnamed plain text is a text block and an
    /// unnamed https or base64 image an image block (what models read); everything else
    /// stays a part.
    pub fn into_block(self) -> super::ContentBlock {
        use super::ContentBlock;
        let media = super::media_type(&self.content_type);
        if self.name.is_none() && self.metadata.is_none() {
            if media == "text/plain"
                && self.content_encoding.is_plain()
                && let Some(text) = &self.content
            {
                return ContentBlock::Text { text: text.clone() };
            }
            if media.starts_with("image/") && media != "image/*" {
                if let Some(url) = self
                    .content_url
                    .as_deref()
                    .filter(|u| u.starts_with("https://"))
                {
                    return ContentBlock::Image {
                        url: url.to_owned(),
                    };
                }
                if self.content_encoding == ContentEncoding::Base64
                    && let Some(data) = &self.content
                {
                    return ContentBlock::Image {
                        url: format!("data:{media};base64,{data}"),
                    };
                }
            }
        }
        ContentBlock::Part(self)
    }

    pub fn text(content_type: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            name: None,
            content_type: content_type.into(),
            content: Some(content.into()),
            content_encoding: ContentEncoding::Plain,
            content_url: None,
            metadata: None,
        }
    }

    /// A one-line description for readers that cannot show the part itself.
    pub fn describe(&self) -> String {
        let mut text = String::from("[part");
        if let Some(name) = &self.name {
            text.push(' ');
            text.push_str(name);
        }
        text.push_str(&format!(" ({})", self.content_type));
        if let Some(url) = &self.content_url {
            text.push_str(&format!(": {url}"));
        }
        text.push(']');
        if self.content_encoding.is_plain()
            && let Some(content) = &self.content
        {
            text.push('\n');
            text.push_str(content);
        }
        text
    }
}

/// Checks a part name: a POSIX absolute path of `A-Za-z0-9._-/`, no `//`, no trailing `/`.
pub fn check_part_name(name: &str) -> Result<(), &'static str> {
    if !name.starts_with('/') {
        return Err("a part name is an absolute path and starts with `/`");
    }
    if name.len() == 1 || name.ends_with('/') {
        return Err("a part name does not end with `/`");
    }
    if name.contains("//") {
        return Err("a part name has no empty segment (`//`)");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
    {
        return Err("a part name has only the characters A-Z a-z 0-9 . _ - /");
    }
    Ok(())
}

/// A compiled glob as a schema uses it: `*` stays inside one path segment, `**` crosses
/// segments, `{a,b}` is an alternation.
#[derive(Debug, Clone)]
pub struct PartGlob {
    pattern: String,
    matcher: GlobMatcher,
}

impl PartGlob {
    pub fn new(pattern: &str) -> Result<Self, String> {
        let glob: Glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(false)
            .build()
            .map_err(|e| format!("`{pattern}` is not a valid glob: {}", e.kind()))?;
        Ok(Self {
            pattern: pattern.to_owned(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn is_match(&self, candidate: &str) -> bool {
        self.matcher.is_match(candidate)
    }
}

/// One schema part: which names (none = unnamed parts only) and content types it allows,
/// and whether a body must contain a part it matches.
#[derive(Debug, Clone)]
pub struct SchemaPart {
    pub name: Option<PartGlob>,
    pub content_type: PartGlob,
    pub required: bool,
}

impl SchemaPart {
    pub fn matches(&self, part: &Part) -> bool {
        let name_fits = match (&self.name, &part.name) {
            (None, None) => true,
            (Some(glob), Some(name)) => glob.is_match(name),
            _ => false,
        };
        name_fits && self.content_type.is_match(media_type(&part.content_type))
    }

    fn describe(&self) -> String {
        match &self.name {
            Some(name) => format!("`{}` ({})", name.pattern(), self.content_type.pattern()),
            None => format!("an unnamed part ({})", self.content_type.pattern()),
        }
    }
}

/// The media type without parameters: `text/plain; charset=utf-8` → `text/plain`.
pub fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or_default().trim()
}

/// A declared message-body schema. An empty schema accepts every body.
#[derive(Debug, Clone, Default)]
pub struct BodySchema {
    pub parts: Vec<SchemaPart>,
}

/// Why a body does not fit a schema: the offending part (by index and name) or the
/// required schema part nothing matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// The index of the offending part in the body, when one part is at fault.
    pub part: Option<usize>,
    pub message: String,
    /// The offending part's content type is one no schema part takes, whatever its name.
    pub unsupported_type: bool,
}

impl BodySchema {
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Valid iff every part matches some schema part and every required schema part is
    /// matched by some part; part names must be valid and unique.
    pub fn check(&self, body: &[Part]) -> Result<(), SchemaViolation> {
        check_names(body)?;
        if self.is_empty() {
            return Ok(());
        }
        for (index, part) in body.iter().enumerate() {
            if !self.parts.iter().any(|s| s.matches(part)) {
                let which = match &part.name {
                    Some(name) => format!("part `{name}`"),
                    None => "an unnamed part".to_owned(),
                };
                let media = media_type(&part.content_type);
                return Err(SchemaViolation {
                    part: Some(index),
                    message: format!(
                        "{which} of type `{}` matches no part of the agent's schema",
                        part.content_type
                    ),
                    unsupported_type: !self.parts.iter().any(|s| s.content_type.is_match(media)),
                });
            }
        }
        if let Some(missing) = self
            .parts
            .iter()
            .find(|s| s.required && !body.iter().any(|p| s.matches(p)))
        {
            return Err(SchemaViolation {
                part: None,
                message: format!("the body lacks {}, which is required", missing.describe()),
                unsupported_type: false,
            });
        }
        Ok(())
    }
}

/// Every name is a valid part name, and no name appears twice.
pub fn check_names(body: &[Part]) -> Result<(), SchemaViolation> {
    let mut seen = std::collections::HashSet::new();
    for (index, part) in body.iter().enumerate() {
        if let Some(name) = &part.name {
            check_part_name(name).map_err(|why| SchemaViolation {
                part: Some(index),
                message: format!("part name `{name}`: {why}"),
                unsupported_type: false,
            })?;
            if !seen.insert(name.as_str()) {
                return Err(SchemaViolation {
                    part: Some(index),
                    message: format!("part name `{name}` appears twice in one message"),
                    unsupported_type: false,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, content_type: &str) -> Part {
        Part {
            name: Some(name.to_owned()),
            ..Part::text(content_type, "x")
        }
    }

    fn schema(parts: &[(Option<&str>, &str, bool)]) -> BodySchema {
        BodySchema {
            parts: parts
                .iter()
                .map(|(name, content_type, required)| SchemaPart {
                    name: name.map(|n| PartGlob::new(n).unwrap()),
                    content_type: PartGlob::new(content_type).unwrap(),
                    required: *required,
                })
                .collect(),
        }
    }

    #[test]
    fn names_are_posix_absolute_paths() {
        for good in ["/a", "/foo/bar.png", "/sources/1/urls/5", "/a-b_c.d"] {
            assert!(check_part_name(good).is_ok(), "{good}");
        }
        for bad in [
            "a",
            "image.png",
            "/",
            "/a/",
            "//a",
            "/a//b",
            "/a b",
            "/é",
            "/a?b",
        ] {
            assert!(check_part_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_single_star_stays_within_a_segment_and_a_double_star_crosses() {
        let one = PartGlob::new("/sources/*").unwrap();
        assert!(one.is_match("/sources/1"));
        assert!(!one.is_match("/sources/1/urls/5"));
        assert!(!one.is_match("/other/1"));
        let deep = PartGlob::new("/sources/**").unwrap();
        assert!(deep.is_match("/sources/1"));
        assert!(deep.is_match("/sources/1/urls/5"));
        let types = PartGlob::new("image/*").unwrap();
        assert!(types.is_match("image/png"));
        assert!(!types.is_match("text/plain"));
    }

    #[test]
    fn alternations_match_either_branch() {
        let glob = PartGlob::new("/files/*.{py,rs}").unwrap();
        assert!(glob.is_match("/files/main.py"));
        assert!(glob.is_match("/files/lib.rs"));
        assert!(!glob.is_match("/files/notes.txt"));
        let types = PartGlob::new("{text/plain,application/json}").unwrap();
        assert!(types.is_match("application/json"));
        assert!(!types.is_match("text/html"));
    }

    #[test]
    fn every_part_must_match_and_every_required_part_must_be_matched() {
        let researcher = schema(&[
            (None, "text/*", true),
            (None, "image/*", false),
            (Some("/sources/*"), "*/*", false),
        ]);
        let good = [
            Part::text("text/plain", "Cats are cute."),
            Part::text("image/png", "x"),
            named("/sources/1", "text/url"),
        ];
        assert_eq!(researcher.check(&good), Ok(()));

        // A named part outside the schema's names.
        let stray = [
            Part::text("text/plain", "hi"),
            named("/notes/1", "text/plain"),
        ];
        let err = researcher.check(&stray).unwrap_err();
        assert_eq!(err.part, Some(1));
        assert!(err.message.contains("/notes/1"), "{}", err.message);

        // An unnamed part never matches a named schema part, and vice versa.
        let unnamed_audio = [Part::text("text/plain", "hi"), Part::text("audio/wav", "x")];
        assert_eq!(researcher.check(&unnamed_audio).unwrap_err().part, Some(1));
        let named_text = [named("/text", "text/plain")];
        assert_eq!(researcher.check(&named_text).unwrap_err().part, Some(0));

        // The required text part is missing.
        let only_image = [Part::text("image/png", "x")];
        let err = researcher.check(&only_image).unwrap_err();
        assert_eq!(err.part, None);
        assert!(err.message.contains("required"), "{}", err.message);
    }

    #[test]
    fn content_type_parameters_do_not_defeat_the_match() {
        let chat = schema(&[(None, "text/plain", true)]);
        assert!(
            chat.check(&[Part::text("text/plain; charset=utf-8", "hi")])
                .is_ok()
        );
    }

    #[test]
    fn an_empty_schema_accepts_any_body_but_names_are_still_checked() {
        let open = BodySchema::default();
        assert!(
            open.check(&[named("/a", "x/y"), Part::text("a/b", "")])
                .is_ok()
        );
        assert_eq!(
            open.check(&[named("/a", "x/y"), named("/a", "x/y")])
                .unwrap_err()
                .part,
            Some(1)
        );
        assert!(open.check(&[named("image.png", "image/png")]).is_err());
    }
}

#[cfg(test)]
mod proptests;
