//! PostgreSQL notifications between the processes serving one database: "these sessions
//! have new events" (sent by the event log's transaction, so at its commit) and commands
//! for the process that runs a turn. A notification is a hint: the log stays the truth, so
//! a lost or merged one costs latency, never an event. SQLite has one process and none.

use sqlx::postgres::{PgListener, PgNotification};

use super::{AppendGroup, Db, Store, StoreError};
use crate::model::{ProcessId, SessionId, TenantId};

const EVENTS: &str = "agentry_events";
const COMMANDS: &str = "agentry_commands";
/// PostgreSQL refuses payloads of 8000 bytes or more.
const MAX_PAYLOAD: usize = 7900;

/// New events of one session, committed by another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    pub tenant: TenantId,
    pub session: SessionId,
    /// The first and last seq the commit wrote.
    pub first: i64,
    pub last: i64,
}

/// What another process said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Events(Vec<Committed>),
    /// A command's payload, as another process sent it.
    Command(String),
    /// The connection was lost and is back: anything could have been missed.
    Reconnected,
}

/// The payloads announcing what `groups` commit: the origin's id, then one
/// `tenant:session:first:last` per session, split to fit PostgreSQL's limit.
pub(super) fn event_payloads(origin: &ProcessId, groups: &[AppendGroup]) -> Vec<String> {
    let mut ranges: Vec<Committed> = Vec::new();
    for group in groups {
        let seqs = group
            .events
            .iter()
            .map(|e| (e.seq, e.seq))
            .chain(group.coalesced.iter().map(|c| (c.first_seq, c.last_seq())));
        for (first, last) in seqs {
            match ranges.iter_mut().find(|r| r.session == group.session) {
                Some(range) => {
                    range.first = range.first.min(first);
                    range.last = range.last.max(last);
                }
                None => ranges.push(Committed {
                    tenant: group.tenant,
                    session: group.session,
                    first,
                    last,
                }),
            }
        }
    }
    let mut payloads = Vec::new();
    let mut payload = origin.hex();
    for range in ranges {
        let entry = format!(
            " {}:{}:{}:{}",
            range.tenant.hex(),
            range.session.hex(),
            range.first,
            range.last
        );
        if payload.len() + entry.len() > MAX_PAYLOAD {
            payloads.push(std::mem::replace(&mut payload, origin.hex()));
        }
        payload.push_str(&entry);
    }
    if payload.len() > origin.hex().len() {
        payloads.push(payload);
    }
    payloads
}

/// The sessions an event payload names, unless it came from `me`; `None` if malformed.
fn parse_events(payload: &str, me: &ProcessId) -> Option<Vec<Committed>> {
    let mut parts = payload.split(' ');
    let origin = uuid::Uuid::try_parse(parts.next()?).ok()?;
    if origin == me.to_uuid() {
        return Some(Vec::new());
    }
    parts
        .map(|entry| {
            let mut fields = entry.split(':');
            let tenant = TenantId::from_uuid(uuid::Uuid::try_parse(fields.next()?).ok()?);
            let session = SessionId::from_uuid(uuid::Uuid::try_parse(fields.next()?).ok()?);
            let first = fields.next()?.parse().ok()?;
            let last = fields.next()?.parse().ok()?;
            Some(Committed {
                tenant,
                session,
                first,
                last,
            })
        })
        .collect()
}

/// Sends the payloads on the events channel within `tx`: delivered when it commits.
pub(super) async fn notify_events(
    tx: &mut sqlx::PgConnection,
    payloads: &[String],
) -> Result<(), sqlx::Error> {
    if payloads.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .bind(EVENTS)
        .bind(payloads)
        .execute(tx)
        .await?;
    Ok(())
}

/// This process's subscription to the other processes' notifications.
pub struct Listener {
    inner: PgListener,
    me: ProcessId,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("me", &self.me).finish()
    }
}

impl Listener {
    /// The next notice. Errors are the connection's; the next call reconnects.
    pub async fn recv(&mut self) -> Result<Notice, StoreError> {
        loop {
            let Some(notification) = self.inner.try_recv().await? else {
                return Ok(Notice::Reconnected);
            };
            if let Some(notice) = self.notice(&notification) {
                return Ok(notice);
            }
        }
    }

    fn notice(&self, notification: &PgNotification) -> Option<Notice> {
        match notification.channel() {
            EVENTS => match parse_events(notification.payload(), &self.me) {
                Some(events) if events.is_empty() => None,
                Some(events) => Some(Notice::Events(events)),
                None => {
                    tracing::warn!("ignored a malformed event notification");
                    None
                }
            },
            COMMANDS => Some(Notice::Command(notification.payload().to_owned())),
            _ => None,
        }
    }
}

impl Store {
    /// Listens to the other processes (PostgreSQL only; `None` on SQLite). Holds one
    /// connection of the pool.
    pub async fn listen(&self, me: &ProcessId) -> Result<Option<Listener>, StoreError> {
        let Db::Postgres(pool) = &self.db else {
            return Ok(None);
        };
        let mut inner = PgListener::connect_with(pool).await?;
        inner.listen_all([EVENTS, COMMANDS]).await?;
        Ok(Some(Listener { inner, me: *me }))
    }

    /// Sends a command to every process (PostgreSQL only; nothing on SQLite).
    pub async fn notify_command(&self, payload: &str) -> Result<(), StoreError> {
        if let Db::Postgres(pool) = &self.db {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(COMMANDS)
                .bind(payload)
                .execute(pool)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventData, TurnId};

    fn group(
        tenant: TenantId,
        session: SessionId,
        seqs: std::ops::RangeInclusive<i64>,
    ) -> AppendGroup {
        AppendGroup {
            tenant,
            session,
            turn: TurnId::generate(),
            run: None,
            events: seqs
                .map(|seq| Event {
                    session_id: session,
                    seq,
                    turn_id: Some(TurnId::generate()),
                    data: EventData::MessageStop {},
                    created_at: crate::model::now(),
                })
                .collect(),
            coalesced: Vec::new(),
            history: Vec::new(),
            transition: None,
        }
    }

    #[test]
    fn an_event_payload_names_each_session_once_with_its_range_and_fits_postgresql() {
        let origin = ProcessId::generate();
        let me = ProcessId::generate();
        let tenant = TenantId::generate();
        let sessions: Vec<SessionId> = (0..200).map(|_| SessionId::generate()).collect();
        let mut groups = vec![
            group(tenant, sessions[0], 3..=4),
            group(tenant, sessions[0], 5..=9),
        ];
        groups.extend(sessions[1..].iter().map(|s| group(tenant, *s, 1..=1)));
        let payloads = event_payloads(&origin, &groups);
        assert!(payloads.len() > 1, "200 sessions do not fit one payload");
        let mut parsed = Vec::new();
        for payload in &payloads {
            assert!(payload.len() < 8000);
            parsed.extend(parse_events(payload, &me).expect("well formed"));
            assert_eq!(
                parse_events(payload, &origin),
                Some(Vec::new()),
                "its own are ignored"
            );
        }
        assert_eq!(parsed.len(), 200);
        assert_eq!(
            parsed[0],
            Committed {
                tenant,
                session: sessions[0],
                first: 3,
                last: 9
            }
        );
        assert_eq!(parse_events("not a payload", &me), None);
    }
}
