//! Placeholders in an agent's provider settings and system prompt: `{{options.NAME}}` is
//! the session's option (secrets decrypted, at run time), `${NAME}` an environment variable
//! (at start-up).

use std::collections::BTreeMap;

/// Every `{{options.NAME}}` (spaces inside the braces allowed): its byte range and NAME.
fn placeholders(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("{{").map(|i| from + i) {
        let Some(close) = text[open..].find("}}").map(|i| open + i) else {
            break;
        };
        if let Some(name) = text[open + 2..close].trim().strip_prefix("options.") {
            found.push((open..close + 2, name.trim()));
        }
        from = close + 2;
    }
    found
}

/// The option names `text` refers to as `{{options.NAME}}`.
pub fn option_references(text: &str) -> Vec<String> {
    placeholders(text)
        .into_iter()
        .map(|(_, name)| name.to_owned())
        .collect()
}

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

/// `text` with every `${NAME}` replaced by `lookup(NAME)`; the first unknown name is the error.
pub fn resolve_env(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        out.push_str(&lookup(name).ok_or_else(|| name.to_owned())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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

    #[test]
    fn environment_placeholders_resolve_or_name_the_missing_variable() {
        let lookup = |name: &str| (name == "KEY").then(|| "sk-1".to_owned());
        assert_eq!(resolve_env("Bearer ${KEY}", lookup).unwrap(), "Bearer sk-1");
        assert_eq!(resolve_env("${MISSING}", lookup).unwrap_err(), "MISSING");
        assert_eq!(resolve_env("plain", lookup).unwrap(), "plain");
    }
}
