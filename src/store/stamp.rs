//! How a point in time is stored: microseconds since the Unix epoch in an SQLite INTEGER
//! (8 bytes, where chrono's text form takes 32), a native `timestamptz` on PostgreSQL.

use chrono::{DateTime, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef};
use sqlx::sqlite::{SqliteArgumentsBuffer, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Postgres, Sqlite, Type};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp(pub DateTime<Utc>);

impl Stamp {
    /// Microseconds since the Unix epoch: what SQLite stores.
    pub fn micros(self) -> i64 {
        self.0.timestamp_micros()
    }
}

impl From<DateTime<Utc>> for Stamp {
    fn from(at: DateTime<Utc>) -> Self {
        Stamp(at)
    }
}

impl From<Stamp> for DateTime<Utc> {
    fn from(stamp: Stamp) -> Self {
        stamp.0
    }
}

impl Type<Sqlite> for Stamp {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <i64 as Type<Sqlite>>::compatible(ty)
    }
}

impl Encode<'_, Sqlite> for Stamp {
    fn encode_by_ref(&self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Sqlite>>::encode(self.micros(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Stamp {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let micros = <i64 as Decode<Sqlite>>::decode(value)?;
        DateTime::from_timestamp_micros(micros)
            .map(Stamp)
            .ok_or_else(|| format!("timestamp {micros} is out of range").into())
    }
}

impl Type<Postgres> for Stamp {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <DateTime<Utc> as Type<Postgres>>::compatible(ty)
    }
}

impl Encode<'_, Postgres> for Stamp {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Stamp {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<Postgres>>::decode(value).map(Stamp)
    }
}
