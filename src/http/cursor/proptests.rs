//! Properties of stream cursors: a printed sequence number parses back, the parser
//! accepts exactly non-negative decimal integers that fit, and whatever a client sends in
//! `Last-Event-ID` or `?after=` is read as a cursor or refused naming its parameter.

use actix_web::http::header::HeaderValue;
use actix_web::test::TestRequest;
use proptest::prelude::*;

use super::{BadCursor, ResumeFrom, Seq};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn seq() -> impl Strategy<Value = i64> {
    prop_oneof![0..1_000i64, 0..=i64::MAX]
}

/// Non-empty ASCII digits whose value fits an i64.
fn reference(s: &str) -> Option<Seq> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value = s.trim_start_matches('0');
    if value.len() > 19 {
        return None;
    }
    let value: u128 = if value.is_empty() {
        0
    } else {
        value.parse().ok()?
    };
    i64::try_from(value).ok().map(Seq)
}

fn near_miss() -> impl Strategy<Value = String> {
    "[0-9 +\\-.xe]{0,24}"
}

/// A query string value as a client would percent-encode it.
fn query_escape(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn printed_seqs_parse_back(n in seq()) {
        prop_assert_eq!(n.to_string().parse::<Seq>(), Ok(Seq(n)));
    }

    #[test]
    fn the_parser_accepts_exactly_non_negative_integers(
        s in prop_oneof![near_miss(), "[0-9]{18,22}", any::<String>()],
    ) {
        prop_assert_eq!(s.parse::<Seq>().ok(), reference(&s), "{:?}", s);
    }

    #[test]
    fn the_header_is_read_trimmed_and_wins_over_the_query(
        header in seq(),
        query in seq(),
        pad in "[ \t]{0,3}",
    ) {
        let req = TestRequest::with_uri(&format!("/x?stream=delta&after={query}"))
            .insert_header(("Last-Event-ID", format!("{pad}{header}{pad}")))
            .to_http_request();
        prop_assert_eq!(ResumeFrom::of(&req).parse::<Seq>(), Ok(Some(Seq(header))));
        let req = TestRequest::with_uri(&format!("/x?stream=delta&after={query}"))
            .to_http_request();
        prop_assert_eq!(ResumeFrom::of(&req).parse::<Seq>(), Ok(Some(Seq(query))));
    }

    #[test]
    fn any_header_is_a_cursor_or_refused_by_name(bytes in prop::collection::vec(any::<u8>(), 0..24)) {
        // Only bytes a header can carry reach a handler.
        prop_assume!(HeaderValue::from_bytes(&bytes).is_ok());
        let req = TestRequest::with_uri("/x?after=1")
            .insert_header(("Last-Event-ID", HeaderValue::from_bytes(&bytes).unwrap()))
            .to_http_request();
        let expected = std::str::from_utf8(&bytes)
            .ok()
            .filter(|text| text.is_ascii())
            .and_then(|text| reference(text.trim()));
        match ResumeFrom::of(&req).parse::<Seq>() {
            Ok(found) => prop_assert_eq!(found, Some(expected.unwrap())),
            Err(bad) => {
                prop_assert!(expected.is_none());
                prop_assert_eq!(bad, BadCursor { field: ResumeFrom::HEADER });
            }
        }
    }

    #[test]
    fn any_query_value_is_a_cursor_or_refused_by_name(
        value in prop_oneof![near_miss(), any::<String>()],
        before in "[a-z]{1,4}=[a-z0-9%]{0,6}",
    ) {
        let uri = format!("/x?{before}&after={}", query_escape(&value));
        let req = TestRequest::with_uri(&uri).to_http_request();
        match ResumeFrom::of(&req).parse::<Seq>() {
            Ok(found) => prop_assert_eq!(found, Some(reference(&value).unwrap()), "{}", uri),
            Err(bad) => {
                prop_assert!(reference(&value).is_none());
                prop_assert_eq!(bad, BadCursor { field: ResumeFrom::QUERY });
            }
        }
    }
}
