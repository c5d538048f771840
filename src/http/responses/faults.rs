//! The engine's refusal of input messages, named as the input item it is about
//! (`input[3].content[1]`, `items[0].content`): the engine counts messages, the client
//! wrote items (consecutive `function_call` items make one message, `reasoning` items
//! none).

use super::error::OpenAiError;
use crate::engine::EngineError;

/// `error` with its field moved from the engine's `messages[k]…` to `param[i]…`, where
/// `origins[offset + k]` is the item message k came from; other errors as they are.
pub fn input_fault(
    error: EngineError,
    param: &str,
    origins: &[usize],
    offset: usize,
) -> OpenAiError {
    match error {
        EngineError::Invalid(field) => located(param, &field.field, field.message, origins, offset),
        EngineError::InvalidInput(input) => {
            located(param, &input.field, input.reason, origins, offset)
        }
        other => other.into(),
    }
}

fn located(
    param: &str,
    field: &str,
    message: String,
    origins: &[usize],
    offset: usize,
) -> OpenAiError {
    let item = field
        .strip_prefix("messages[")
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(k, rest)| Some((origins.get(offset + k.parse::<usize>().ok()?)?, rest)));
    match item {
        Some((item, rest)) => OpenAiError::invalid(format!("{param}[{item}]{rest}"), message),
        None => OpenAiError::invalid(param, format!("{field}: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FieldError;

    #[test]
    fn a_message_is_named_as_the_item_it_came_from() {
        let error = EngineError::Invalid(FieldError::new("messages[1].content[2].url", "no"));
        let named = input_fault(error, "input", &[0, 2, 3], 1);
        assert_eq!(named.param.as_deref(), Some("input[3].content[2].url"));
        assert_eq!(named.message, "input[3].content[2].url: no");
        let whole = input_fault(
            EngineError::Invalid(FieldError::new("messages", "too many")),
            "items",
            &[0],
            0,
        );
        assert_eq!(whole.param.as_deref(), Some("items"));
        assert_eq!(whole.message, "items: messages: too many");
    }
}
