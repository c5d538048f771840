//! Where a (re)connecting client resumes a stream: `Last-Event-ID`, which wins, or the
//! `after` query parameter. Each face parses the cursor into its own id type and answers a
//! malformed one in its own error shape, naming the parameter at fault.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::str::FromStr;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};

/// The cursor a client sent, as it sent it.
#[derive(Debug, Clone, Default)]
pub struct ResumeFrom {
    sent: Option<(&'static str, String)>,
}

/// A cursor that is not an id of the stream: which parameter carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadCursor {
    pub field: &'static str,
}

impl ResumeFrom {
    pub const HEADER: &'static str = "Last-Event-ID";
    pub const QUERY: &'static str = "after";

    pub fn of(req: &HttpRequest) -> ResumeFrom {
        if let Some(value) = req.headers().get("last-event-id") {
            let text = value.to_str().unwrap_or("\u{fffd}").trim().to_owned();
            return ResumeFrom {
                sent: Some((Self::HEADER, text)),
            };
        }
        let after = serde_urlencoded::from_str::<Vec<(String, String)>>(req.query_string())
            .ok()
            .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == Self::QUERY))
            .map(|(_, v)| v);
        ResumeFrom {
            sent: after.map(|after| (Self::QUERY, after)),
        }
    }

    /// The cursor as a `T`, if one was sent.
    pub fn parse<T: FromStr>(&self) -> Result<Option<T>, BadCursor> {
        match &self.sent {
            None => Ok(None),
            Some((field, text)) => text.parse().map(Some).map_err(|_| BadCursor { field }),
        }
    }
}

impl FromRequest for ResumeFrom {
    type Error = Infallible;
    type Future = Ready<Result<Self, Infallible>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(ResumeFrom::of(req)))
    }
}

/// A sequence number as a cursor: a non-negative integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq(pub i64);

impl FromStr for Seq {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(());
        }
        s.parse().map(Seq).map_err(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn the_header_wins_and_a_bad_cursor_names_its_parameter() {
        let req = TestRequest::with_uri("/x?after=3")
            .insert_header(("Last-Event-ID", " 7 "))
            .to_http_request();
        assert_eq!(ResumeFrom::of(&req).parse::<Seq>(), Ok(Some(Seq(7))));
        let req = TestRequest::with_uri("/x?stream=delta&after=3").to_http_request();
        assert_eq!(ResumeFrom::of(&req).parse::<Seq>(), Ok(Some(Seq(3))));
        let req = TestRequest::with_uri("/x").to_http_request();
        assert_eq!(ResumeFrom::of(&req).parse::<Seq>(), Ok(None));
        for bad in ["-1", "+1", "x", "", "1.5"] {
            let req = TestRequest::with_uri(&format!("/x?after={bad}")).to_http_request();
            assert_eq!(
                ResumeFrom::of(&req).parse::<Seq>(),
                Err(BadCursor { field: "after" }),
                "{bad}"
            );
        }
        let req = TestRequest::with_uri("/x")
            .insert_header(("Last-Event-ID", "-1"))
            .to_http_request();
        assert_eq!(
            ResumeFrom::of(&req).parse::<Seq>(),
            Err(BadCursor {
                field: "Last-Event-ID"
            })
        );
    }
}

#[cfg(test)]
mod proptests;
