//! Tool-call ids are unique within a session: a client that sees a call id it already
//! answered takes the call as answered. A call the model sent without an id gets a new one
//! (`call_<32 hex>`); a call whose id the session already holds (a provider that numbers
//! calls per response, a model that repeats itself) is renamed `<id>~<8 hex>`, and named
//! `<id>` again when the history goes back to the model, which sees its own ids.

/// Marks a renamed repeat: the ids providers make never hold it.
const REPEAT_MARK: char = '~';

/// A new id for a call that came without one.
pub fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

/// A session-unique id for a call whose `id` the session already holds.
pub fn repeated_call_id(id: &str) -> String {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{id}{REPEAT_MARK}{}", &suffix[..8])
}

/// The id the model gave the call: a renamed repeat's original, any other id as it is.
pub fn provider_call_id(id: &str) -> &str {
    match id.rsplit_once(REPEAT_MARK) {
        Some((original, suffix))
            if !original.is_empty()
                && suffix.len() == 8
                && suffix.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            original
        }
        _ => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_renamed_and_map_back_while_other_ids_stay() {
        let renamed = repeated_call_id("call_0");
        assert_ne!(renamed, "call_0");
        assert_ne!(renamed, repeated_call_id("call_0"));
        assert_eq!(provider_call_id(&renamed), "call_0");
        let fresh = new_call_id();
        assert!(fresh.starts_with("call_") && fresh.len() == 37, "{fresh}");
        assert_eq!(provider_call_id(&fresh), fresh);
        for id in ["call_0", "toolu_01A", "a~b", "~12345678", "x~1234567z"] {
            assert_eq!(provider_call_id(id), id);
        }
    }
}
