//! Properties of frame ids: what is printed parses back, order survives the round trip,
//! and the parser accepts exactly `<digits>` or `<digits>.<digits>` (whitespace around).

use proptest::prelude::*;

use super::FrameId;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every id a stream can send: a stored event's seq (never negative) and a place.
fn frame_id() -> impl Strategy<Value = FrameId> {
    let seq = prop_oneof![0..1_000i64, 0..=i64::MAX];
    let k = prop_oneof![Just(0u32), 0..8u32, any::<u32>()];
    (seq, k).prop_map(|(seq, k)| FrameId::new(seq, k))
}

/// The grammar, written out: `d+` or `d+.d+` after trimming, each part within its type.
fn reference(s: &str) -> Option<FrameId> {
    fn digits(s: &str) -> Option<&str> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then_some(s)
    }
    fn value(s: &str) -> Option<u128> {
        let s = s.trim_start_matches('0');
        if s.len() > 30 {
            return None;
        }
        Some(if s.is_empty() { 0 } else { s.parse().ok()? })
    }
    let s = s.trim();
    let (seq, k) = match s.split_once('.') {
        Some((seq, k)) => (digits(seq)?, digits(k)?),
        None => (digits(s)?, "0"),
    };
    Some(FrameId::new(
        i64::try_from(value(seq)?).ok()?,
        u32::try_from(value(k)?).ok()?,
    ))
}

/// Text near the grammar: digits, dots, signs, spaces and a few others.
fn near_miss() -> impl Strategy<Value = String> {
    "[0-9 .+\\-x\t]{0,24}"
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn printed_ids_parse_back(id in frame_id()) {
        prop_assert_eq!(id.to_string().parse::<FrameId>(), Ok(id));
    }

    #[test]
    fn order_survives_printing(a in frame_id(), b in frame_id()) {
        let (pa, pb) = (
            a.to_string().parse::<FrameId>().unwrap(),
            b.to_string().parse::<FrameId>().unwrap(),
        );
        prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
        // An event's first frame comes before its further ones, and all of them before
        // the next event's; every frame after the start.
        prop_assert!(FrameId::new(a.seq, 0) <= a);
        if a.seq < i64::MAX {
            prop_assert!(a < FrameId::new(a.seq + 1, 0));
        }
        prop_assert!(FrameId::START < a);
    }

    #[test]
    fn the_parser_accepts_exactly_the_grammar(
        s in prop_oneof![
            near_miss(),
            "[+\\-]?[0-9]{1,3}(\\.[+\\-]?[0-9]{1,3})?",
            "[0-9]{9,21}(\\.[0-9]{9,11})?",
            any::<String>(),
        ],
    ) {
        prop_assert_eq!(s.parse::<FrameId>().ok(), reference(&s), "{:?}", s);
    }

    #[test]
    fn a_changed_byte_is_refused_or_names_another_frame(
        id in frame_id(),
        at in any::<prop::sample::Index>(),
        with in prop::sample::select(vec!['+', '-', ' ', 'x', '.', 'e', '_']),
    ) {
        let printed = id.to_string();
        let at = at.index(printed.len());
        let mut changed = printed.clone();
        changed.replace_range(at..=at, &with.to_string());
        prop_assume!(changed != printed);
        if let Ok(other) = changed.parse::<FrameId>() {
            // Only a space (trimmed away at either end) or a dot (splitting the digits)
            // leaves an id, and then another one.
            prop_assert!(with == ' ' || with == '.', "{:?}", changed);
            prop_assert_ne!(other, id);
        }
    }
}
