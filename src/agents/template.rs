//! Rendering an agent's provider settings and system prompt for a session: every
//! `{{options.NAME}}` becomes the session's option (secrets decrypted).

use std::collections::BTreeMap;

use crate::config::option_placeholders as placeholders;
pub use crate::config::option_references;

/// `text` with every `{{options.NAME}}` replaced by the option's value.
pub fn render_options(text: &str, options: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (range, name) in placeholders(text) {
        out.push_str(&text[copied..range.start]);
        out.push_str(options.get(name).map_or("", String::as_str));
        copied = range.end;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_placeholders_render_and_are_found() {
        let options = BTreeMap::from([
            ("language".to_owned(), "French".to_owned()),
            ("model".to_owned(), "big".to_owned()),
        ]);
        let text = "Answer in {{options.language}} with {{ options.model }}.";
        assert_eq!(option_references(text), ["language", "model"]);
        assert_eq!(render_options(text, &options), "Answer in French with big.");
        assert_eq!(render_options("{{options.nope}}!", &options), "!");
        assert_eq!(
            render_options("no {{options. end", &options),
            "no {{options. end"
        );
    }
}
