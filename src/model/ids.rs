//! Typed, prefixed, unguessable identifiers.
//!
//! An id is a UUIDv7: time-ordered (so lists sort by creation), with 74 random bits, and
//! never a sequential integer. It is `Copy`, stored as the 16 bytes of its UUID (SQLite
//! BLOB, PostgreSQL `uuid`), and written on the wire as its prefix and 32 hex digits.

use std::fmt;
use std::str::FromStr;

macro_rules! typed_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::Type)]
        #[sqlx(transparent)]
        pub struct $name(uuid::Uuid);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            pub fn generate() -> Self {
                Self(uuid::Uuid::now_v7())
            }

            /// The UUID this id is written from (protocols that name things by UUID).
            pub fn to_uuid(self) -> uuid::Uuid {
                self.0
            }

            /// The id written from a UUID.
            pub fn from_uuid(uuid: uuid::Uuid) -> Self {
                Self(uuid)
            }

            /// The 32 hex digits after the prefix.
            pub fn hex(self) -> String {
                self.0.simple().to_string()
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            fn from_str(s: &str) -> Result<Self, InvalidId> {
                let hex = s.strip_prefix($prefix).ok_or(InvalidId)?;
                if hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                    uuid::Uuid::try_parse(hex).map(Self).map_err(|_| InvalidId)
                } else {
                    Err(InvalidId)
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($prefix)?;
                fmt::Display::fmt(&self.0.simple(), f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some(concat!("^", $prefix, "[0-9a-f]{32}$")))
                    .examples([concat!($prefix, "0194f0c2a1b27c3d8e9f0a1b2c3d4e5f")])
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(|_| {
                    serde::de::Error::custom(format!("not a valid {} id", $prefix.trim_end_matches('_')))
                })
            }
        }
    };
}

typed_id!(
    /// A tenant: the unit of isolation.
    TenantId,
    "ten_"
);
typed_id!(
    /// A tenant's client credential; also its `client_id`.
    CredentialId,
    "cred_"
);
typed_id!(
    /// A token's `jti`.
    TokenId,
    "tok_"
);
typed_id!(
    /// A tenant's own agent (made through the API), across its versions.
    AgentId,
    "agt_"
);
typed_id!(
    /// A conversation with one agent.
    SessionId,
    "sess_"
);
typed_id!(
    /// One request to an agent and what it produced.
    TurnId,
    "turn_"
);

typed_id!(
    /// A chain of turns answering one request of a protocol whose unit is bigger than a
    /// turn (an ACP run, an A2A task).
    RunId,
    "run_"
);

typed_id!(
    /// A running agentry process: the owner of the turns it runs.
    ProcessId,
    "proc_"
);

typed_id!(
    /// A stored part content, served at `/files/{id}`.
    FileId,
    "file_"
);

typed_id!(
    /// A tenant's webhook endpoint.
    EndpointId,
    "wh_"
);

typed_id!(
    /// A webhook message: the `webhook-id` of every attempt to deliver it, to every
    /// endpoint that receives it.
    MessageId,
    "msg_"
);

typed_id!(
    /// A tenant's schedule: an agent started on a cron expression.
    ScheduleId,
    "sched_"
);

typed_id!(
    /// One occurrence of a schedule, in its run history.
    ScheduleRunId,
    "srun_"
);

/// A string that is not an id of the expected kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed identifier")]
pub struct InvalidId;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_check_their_prefix() {
        let id = SessionId::generate();
        assert!(id.to_string().starts_with("sess_"));
        assert_eq!(id.to_string().parse::<SessionId>().unwrap(), id);
        assert!(id.to_string().parse::<TenantId>().is_err());
        assert!("sess_123".parse::<SessionId>().is_err());
        assert!(
            "sess_0123456789ABCDEF0123456789abcdef"
                .parse::<SessionId>()
                .is_err()
        );
    }

    #[test]
    fn every_id_round_trips_through_its_uuid() {
        fn check<T: Copy + std::fmt::Debug + PartialEq + FromStr>(
            generate: fn() -> T,
            to_uuid: fn(T) -> uuid::Uuid,
            from_uuid: fn(uuid::Uuid) -> T,
            hex: fn(T) -> String,
        ) {
            let id = generate();
            let uuid = to_uuid(id);
            assert_eq!(uuid.simple().to_string(), hex(id));
            assert_eq!(from_uuid(uuid), id);
            let hyphenated: uuid::Uuid = uuid.hyphenated().to_string().parse().unwrap();
            assert_eq!(from_uuid(hyphenated), id);
        }
        macro_rules! each {
            ($($ty:ident),*) => {$(
                check::<$ty>($ty::generate, $ty::to_uuid, $ty::from_uuid, $ty::hex);
            )*};
        }
        each!(
            TenantId,
            CredentialId,
            TokenId,
            SessionId,
            TurnId,
            RunId,
            FileId,
            EndpointId,
            MessageId
        );
        let turn = TurnId::generate();
        let run = RunId::from_uuid(turn.to_uuid());
        assert_eq!(run.hex(), turn.hex());
        assert!(run.to_string().starts_with("run_"));
    }

    #[test]
    fn ids_sort_by_creation() {
        let ids: Vec<SessionId> = (0..100).map(|_| SessionId::generate()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }
}
