//! Tool names as providers accept them. OpenAI and Anthropic take only
//! `^[a-zA-Z0-9_-]{1,64}$`, while MCP tools are named `<server>.<tool>`: such names are
//! mapped to safe ones on the way out and back on the way in. Names that are already safe
//! stay as they are; the mapping is deterministic for a set of names and never maps two
//! names to one.

use std::collections::{BTreeSet, HashMap};

use crate::model::{ContentBlock, HistoryMessage, ToolSpec, sha256_hex};

const MAX_LEN: usize = 64;

/// Whether a provider accepts the name as it is.
pub fn is_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// The names of one request, real to wire and back.
#[derive(Debug, Default, Clone)]
pub struct ToolNames {
    to_wire: HashMap<String, String>,
    to_real: HashMap<String, String>,
}

impl ToolNames {
    /// A mapping for these names (duplicates are fine).
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> ToolNames {
        let names: BTreeSet<&str> = names.into_iter().collect();
        let mut taken: BTreeSet<String> = names
            .iter()
            .filter(|n| is_safe(n))
            .map(|n| (*n).to_owned())
            .collect();
        let mut mapping = ToolNames::default();
        for name in names.iter().filter(|n| !is_safe(n)) {
            let plain = sanitize(name, MAX_LEN);
            let wire = if !taken.contains(&plain) {
                plain
            } else {
                let suffix = &sha256_hex(name.as_bytes())[..8];
                let mut candidate = format!("{}_{suffix}", sanitize(name, MAX_LEN - 9));
                let mut n = 0;
                while taken.contains(&candidate) {
                    n += 1;
                    let tail = format!("_{suffix}{n}");
                    candidate = format!("{}{tail}", sanitize(name, MAX_LEN - tail.len()));
                }
                candidate
            };
            taken.insert(wire.clone());
            mapping.to_real.insert(wire.clone(), (*name).to_owned());
            mapping.to_wire.insert((*name).to_owned(), wire);
        }
        mapping
    }

    /// The mapping for a request: its tools and the tool calls in its history.
    pub fn for_request<M: std::borrow::Borrow<HistoryMessage>>(
        tools: &[ToolSpec],
        history: &[M],
    ) -> ToolNames {
        let called = history
            .iter()
            .filter_map(|m| m.borrow().content())
            .flat_map(|content| content.blocks())
            .filter_map(|block| match block {
                ContentBlock::ToolUse { name, .. } => Some(name.as_str()),
                _ => None,
            });
        ToolNames::new(tools.iter().map(|t| t.name.as_str()).chain(called))
    }

    /// The name to send.
    pub fn wire<'a>(&'a self, real: &'a str) -> &'a str {
        self.to_wire.get(real).map_or(real, String::as_str)
    }

    /// The real name of a name the model sent (unknown names stay as they are).
    pub fn real(&self, wire: &str) -> String {
        self.to_real
            .get(wire)
            .cloned()
            .unwrap_or_else(|| wire.to_owned())
    }
}

/// Unsafe characters replaced by `_`, cut to `max` bytes.
fn sanitize(name: &str, max: usize) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(max);
    if out.is_empty() {
        out.push('_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names_stay_and_dotted_ones_map_both_ways() {
        let names = ToolNames::new(["clock", "files.read", "files.read_all"]);
        assert_eq!(names.wire("clock"), "clock");
        assert_eq!(names.wire("files.read"), "files_read");
        assert_eq!(names.real("files_read"), "files.read");
        assert_eq!(names.real("files_read_all"), "files.read_all");
        assert_eq!(names.real("made_up"), "made_up");
    }

    #[test]
    fn a_mapped_name_never_takes_another_tools_name() {
        let names = ToolNames::new(["files.read", "files_read", "files-read"]);
        let wire = names.wire("files.read");
        assert_ne!(wire, "files_read");
        assert!(is_safe(wire), "{wire}");
        assert_eq!(names.real(wire), "files.read");
        assert_eq!(names.real("files_read"), "files_read");
        // Two unsafe names that sanitize alike get different wire names.
        let names = ToolNames::new(["a.b", "a/b"]);
        assert_ne!(names.wire("a.b"), names.wire("a/b"));
        assert_eq!(names.real(names.wire("a/b")), "a/b");
    }

    #[test]
    fn the_mapping_is_deterministic_and_fits_64_characters() {
        let long = format!("server.{}", "x".repeat(120));
        let one = ToolNames::new([long.as_str(), "other.tool"]);
        let two = ToolNames::new(["other.tool", long.as_str()]);
        assert_eq!(one.wire(&long), two.wire(&long));
        assert!(is_safe(one.wire(&long)));
        assert_eq!(one.real(one.wire(&long)), long);
    }
}
