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

/// Where in a URL template a placeholder stands, which decides what its value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlPart {
    /// The host (or port): only letters, digits, `-` and `.`; the host it makes must not be
    /// an internal address unless the operator allows it.
    Host,
    /// The path: the value is one segment, percent-encoded.
    Path,
    /// The query: the value is percent-encoded.
    Query,
    /// The fragment: never sent, so no option may stand there.
    Fragment,
}

/// The part of the URL each `{{options.NAME}}` of `template` stands in.
pub fn url_placeholders(template: &str) -> Vec<(&str, UrlPart)> {
    let authority = template.find("://").map_or(0, |i| i + 3);
    placeholders(template)
        .into_iter()
        .map(|(range, name)| {
            let before = &template[..range.start];
            let part = if before.contains('#') {
                UrlPart::Fragment
            } else if before.contains('?') {
                UrlPart::Query
            } else if before[authority.min(before.len())..].contains('/') {
                UrlPart::Path
            } else {
                UrlPart::Host
            };
            (name, part)
        })
        .collect()
}

/// Whether `value` may fill an option in `part` of a URL; the reason when it may not.
pub fn check_url_value(part: UrlPart, value: &str) -> Result<(), &'static str> {
    match part {
        UrlPart::Host => {
            let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
            if value.is_empty() || !value.chars().all(allowed) || value.contains("..") {
                return Err("fills a URL's host: only letters, digits, `-` and `.` are allowed");
            }
            Ok(())
        }
        UrlPart::Path if value == "." || value == ".." => {
            Err("fills a URL's path: `.` and `..` are not a segment")
        }
        UrlPart::Path | UrlPart::Query => Ok(()),
        UrlPart::Fragment => Err("fills a URL's fragment, which is never sent"),
    }
}

/// A URL template rendered with the session's options, each value checked for the part it
/// fills and percent-encoded in a path or query, and whether its host came from an option.
pub fn render_url(
    template: &str,
    options: &BTreeMap<String, String>,
) -> Result<(String, bool), String> {
    let parts = url_placeholders(template);
    let mut out = String::with_capacity(template.len());
    let mut copied = 0;
    let mut templated_host = false;
    for ((range, name), (_, part)) in placeholders(template).into_iter().zip(parts) {
        let value = options.get(name).map_or("", String::as_str);
        check_url_value(part, value).map_err(|reason| format!("option `{name}` {reason}"))?;
        out.push_str(&template[copied..range.start]);
        match part {
            UrlPart::Host => {
                templated_host = true;
                out.push_str(value);
            }
            _ => out.push_str(&percent_encode(value)),
        }
        copied = range.end;
    }
    out.push_str(&template[copied..]);
    Ok((out, templated_host))
}

/// Every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX`.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_options_are_checked_for_the_part_they_fill() {
        let template = "https://{{options.region}}.api.example/v1/{{options.org}}?k={{options.q}}";
        assert_eq!(
            url_placeholders(template),
            [
                ("region", UrlPart::Host),
                ("org", UrlPart::Path),
                ("q", UrlPart::Query)
            ]
        );
        let options = |region: &str, org: &str| {
            BTreeMap::from([
                ("region".to_owned(), region.to_owned()),
                ("org".to_owned(), org.to_owned()),
                ("q".to_owned(), "a b&c".to_owned()),
            ])
        };
        assert_eq!(
            render_url(template, &options("eu-1", "acme/../x")).unwrap(),
            (
                "https://eu-1.api.example/v1/acme%2F..%2Fx?k=a%20b%26c".to_owned(),
                true
            )
        );
        for host in [
            "localhost:18604/x#",
            "evil.example@localhost/#",
            "a\r\nHost: x",
            "",
            "a..b",
        ] {
            assert!(render_url(template, &options(host, "o")).is_err(), "{host}");
        }
        assert!(render_url(template, &options("eu", "..")).is_err());
        let fixed = "http://127.0.0.1:9/v1/{{options.org}}";
        assert_eq!(
            render_url(fixed, &options("x", "o")).unwrap(),
            ("http://127.0.0.1:9/v1/o".to_owned(), false)
        );
        assert_eq!(
            url_placeholders("http://h/#{{options.f}}"),
            [("f", UrlPart::Fragment)]
        );
    }

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
