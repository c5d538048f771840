//! Which A2A version a request speaks: the `A2A-Version` header (or query parameter),
//! `Major.Minor`; absent or empty means 0.3, as the specification requires of servers.

use actix_web::HttpRequest;

use super::error::A2aError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    /// 0.3 over JSON-RPC: objects with their `kind`, bare results and events.
    V03,
    /// 0.3 over HTTP+JSON, as the SDKs speak it: the ProtoJSON of 0.3's proto (results and
    /// events wrapped as 1.0 wraps them, `TASK_STATE_*`, a message's parts in `content`).
    V03Rest,
}

/// The header (and query parameter) that names the version.
pub const HEADER: &str = "A2A-Version";

impl Version {
    /// The version a request names.
    pub fn of(req: &HttpRequest) -> Result<Version, A2aError> {
        let from_header = req
            .headers()
            .get(HEADER)
            .map(|v| v.to_str().unwrap_or("?").to_owned());
        // Versions are digits and a dot: nothing to percent-decode.
        let from_query = || {
            req.query_string()
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.eq_ignore_ascii_case(HEADER))
                .map(|(_, v)| v.to_owned())
        };
        Version::parse(from_header.or_else(from_query).as_deref())
    }

    /// The version as the HTTP+JSON binding writes it.
    pub fn over_rest(self) -> Version {
        match self {
            Version::V03 => Version::V03Rest,
            other => other,
        }
    }

    /// Whether results and events are ProtoJSON (wrapped, proto enum names).
    pub fn proto_json(self) -> bool {
        self != Version::V03
    }

    /// `1.0` (any 1.x) or `0.3`; none or empty is 0.3.
    pub fn parse(raw: Option<&str>) -> Result<Version, A2aError> {
        let raw = raw.map(str::trim).unwrap_or_default();
        if raw.is_empty() {
            return Ok(Version::V03);
        }
        let mut numbers = raw.split('.');
        let major = numbers.next().unwrap_or_default();
        let minor = numbers.next().unwrap_or("0");
        match (major, minor) {
            ("1", minor) if minor.bytes().all(|b| b.is_ascii_digit()) => Ok(Version::V1),
            ("0", "3") => Ok(Version::V03),
            _ => Err(A2aError::version_not_supported(raw)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_major_minor_and_absent_is_0_3() {
        assert_eq!(Version::parse(None).unwrap(), Version::V03);
        assert_eq!(Version::parse(Some(" ")).unwrap(), Version::V03);
        assert_eq!(Version::parse(Some("1.0")).unwrap(), Version::V1);
        assert_eq!(Version::parse(Some("1")).unwrap(), Version::V1);
        assert_eq!(Version::parse(Some("0.3")).unwrap(), Version::V03);
        for bad in ["2.0", "0.2", "1.x", "abc"] {
            assert!(Version::parse(Some(bad)).is_err(), "{bad}");
        }
    }
}
