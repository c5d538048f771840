//! A `tools/call` result as the text of a tool message.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Text items joined; other content summarized; structured content when there is no text;
/// an error result says so first.
pub fn result_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|item| match item {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => {
                format!(
                    "[image: {}, {} bytes]",
                    image.mime_type,
                    image.data.len() * 3 / 4
                )
            }
            ContentBlock::Audio(audio) => {
                format!(
                    "[audio: {}, {} bytes]",
                    audio.mime_type,
                    audio.data.len() * 3 / 4
                )
            }
            ContentBlock::Resource(resource) => match &resource.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[resource {uri}: {}]",
                    mime_type.as_deref().unwrap_or("binary")
                ),
                #[allow(unreachable_patterns)]
                _ => "[resource]".to_owned(),
            },
            ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
            #[allow(unreachable_patterns)]
            _ => "[content of a kind agentry does not show]".to_owned(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        if text.is_empty() {
            "Error: the tool failed.".to_owned()
        } else {
            format!("Error: {text}")
        }
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_joined_other_content_summarized_and_errors_flagged() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::text("two"),
        ]);
        assert_eq!(
            result_text(&result),
            "one\n[image: image/png, 3 bytes]\ntwo"
        );
        let failed = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        assert_eq!(result_text(&failed), "Error: no such file");
        let empty = CallToolResult::error(Vec::new());
        assert_eq!(result_text(&empty), "Error: the tool failed.");
    }
}
