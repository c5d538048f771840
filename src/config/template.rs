//! Placeholders in configured strings: `{{options.NAME}}` is a session's option (filled in
//! at run time), `${NAME}` an environment variable (filled in at start-up).

/// Every `{{options.NAME}}` (spaces inside the braces allowed): its byte range and NAME.
pub fn option_placeholders(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
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
    option_placeholders(text)
        .into_iter()
        .map(|(_, name)| name.to_owned())
        .collect()
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
    fn environment_placeholders_resolve_or_name_the_missing_variable() {
        let lookup = |name: &str| (name == "KEY").then(|| "sk-1".to_owned());
        assert_eq!(resolve_env("Bearer ${KEY}", lookup).unwrap(), "Bearer sk-1");
        assert_eq!(resolve_env("${MISSING}", lookup).unwrap_err(), "MISSING");
        assert_eq!(resolve_env("plain", lookup).unwrap(), "plain");
    }
}
