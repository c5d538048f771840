//! Properties of list cursors: what we issue reads back as the item it was issued for,
//! every accepted cursor is exactly the one we would issue (no aliases), and anything else
//! a client sends is refused as `invalid_query`, never a panic.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use proptest::prelude::*;

use super::{ListQuery, MAX_LIMIT, decode, encode, next_cursor};
use crate::http::error::ErrorCode;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A listed item's id as the typed ids print it.
fn item_id() -> impl Strategy<Value = (String, uuid::Uuid)> {
    let prefix = prop::sample::select(vec!["ses_", "turn_", "ten_", "cred_", "x_"]);
    (prefix, any::<u128>()).prop_map(|(prefix, bits)| {
        let uuid = uuid::Uuid::from_u128(bits);
        (format!("{prefix}{}", uuid.simple()), uuid)
    })
}

fn query(after: Option<String>, limit: Option<u32>) -> ListQuery {
    ListQuery { after, limit }
}

/// What `ListQuery::cursor` should make of a cursor: the UUID of a `v1:<prefix>_<32 lower
/// hex>` payload, written in unpadded URL-safe base64.
fn reference(cursor: &str) -> Option<uuid::Uuid> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let id = text.strip_prefix("v1:")?;
    let hex = &id[id.rfind('_')? + 1..];
    let lower_hex = hex.len() == 32
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    lower_hex.then(|| {
        u128::from_str_radix(hex, 16)
            .ok()
            .map(uuid::Uuid::from_u128)
    })?
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cursors_decode_to_what_they_were_made_of(id in any::<String>()) {
        prop_assert_eq!(decode(&encode(&id)), Some(id));
    }

    #[test]
    fn an_issued_cursor_continues_after_its_item(
        (id, uuid) in item_id(),
        limit in prop::option::of(1..=MAX_LIMIT),
    ) {
        let next = next_cursor(&[id], true, Clone::clone).unwrap();
        let page = query(Some(next), limit).cursor().unwrap().page();
        prop_assert_eq!(page.after, Some(uuid));
        prop_assert_eq!(page.limit, limit.unwrap_or(super::DEFAULT_LIMIT));
    }

    #[test]
    fn every_accepted_cursor_is_the_one_we_would_issue(
        cursor in prop_oneof!["[A-Za-z0-9_\\-]{0,64}", any::<String>()],
    ) {
        if let Some(id) = decode(&cursor) {
            prop_assert_eq!(encode(&id), cursor);
        }
    }

    #[test]
    fn any_after_is_a_position_or_invalid_query(
        after in prop_oneof!["[A-Za-z0-9_\\-=+/]{0,80}", any::<String>()],
    ) {
        match query(Some(after.clone()), None).cursor() {
            Ok(cursor) => {
                let expected = if after.is_empty() { None } else { Some(reference(&after).unwrap()) };
                prop_assert_eq!(cursor.page().after, expected);
            }
            Err(error) => {
                prop_assert!(reference(&after).is_none());
                prop_assert_eq!(error.code, ErrorCode::InvalidQuery);
            }
        }
    }

    /// Cursors carry no signature: a changed byte in the id's hex digits can name another
    /// position (of the caller's own lists; the store filters on the tenant). But it never
    /// names the same one under another spelling, and a change that breaks the `v1:` tag,
    /// the base64 or the hex form is refused.
    #[test]
    fn a_changed_byte_is_refused_or_names_another_position(
        (id, uuid) in item_id(),
        at in any::<prop::sample::Index>(),
        with in any::<u8>(),
    ) {
        let issued = encode(&id);
        let mut bytes = issued.clone().into_bytes();
        let at = at.index(bytes.len());
        prop_assume!(bytes[at] != with);
        bytes[at] = with;
        let Ok(changed) = String::from_utf8(bytes) else { return Ok(()) };
        match query(Some(changed.clone()), None).cursor() {
            Ok(cursor) => {
                let found = cursor.page().after.unwrap();
                prop_assert_eq!(Some(found), reference(&changed));
                let payload = decode(&changed).unwrap();
                prop_assert_ne!(&payload, &id);
                // Another prefix names the same item; any other change another item.
                let same_hex = payload.ends_with(&uuid.simple().to_string());
                prop_assert_eq!(found == uuid, same_hex);
            }
            Err(error) => prop_assert_eq!(error.code, ErrorCode::InvalidQuery),
        }
    }

    #[test]
    fn limits_outside_the_range_are_refused(limit in any::<u32>()) {
        let result = query(None, Some(limit)).cursor();
        prop_assert_eq!(result.is_ok(), (1..=MAX_LIMIT).contains(&limit));
        if let Err(error) = result {
            prop_assert_eq!(error.code, ErrorCode::InvalidQuery);
        }
    }
}
