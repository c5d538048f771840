//! What holds when the database or a process fails: a paused owner writes nothing after
//! another process ended its turns, a full disk or a database outage is answered (507/503)
//! and never acknowledged as stored, and everything recovers without a restart.

mod disk_full;
mod fencing;
mod outage;

use crate::helpers::TestDb;
use crate::process::ServerProcess;
use crate::sse::SseReader;

/// Rounds of a fault: `default`, or `AGENTRY_FAULT_ROUNDS` for a longer fault run.
pub fn rounds(default: usize) -> usize {
    std::env::var("AGENTRY_FAULT_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The turn's id, from a turn stream's headers.
pub fn turn_id(stream: &SseReader) -> String {
    stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// The event kinds a packed row's entries name by number (their index), as the store
/// writes them.
const PACKED_KINDS: [&str; 11] = [
    "turn_start",
    "message_start",
    "text_delta",
    "thinking_delta",
    "tool_call",
    "message_stop",
    "tool_result",
    "usage",
    "compaction",
    "turn_stop",
    "agent_version_change",
];

/// Every stored event of a turn as `(seq, kind)`, in order, coalesced deltas at their
/// last seq and the events of a packed row (a finished turn's, stored together) each at
/// its own.
pub async fn stored_events(db: &TestDb, turn: &str) -> Vec<(i64, String)> {
    let rows = db
        .column(&format!(
            "SELECT CAST(seq AS TEXT) || ' ' || kind || ' ' || CAST(data AS TEXT) \
             FROM events WHERE turn_id = {} ORDER BY seq",
            db.id(turn)
        ))
        .await;
    let mut events = Vec::new();
    for row in rows {
        let mut parts = row.splitn(3, ' ');
        let (seq, kind, data) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let seq: i64 = seq.parse().unwrap();
        if kind != "packed" {
            events.push((seq, kind.to_owned()));
            continue;
        }
        let mut entries: Vec<serde_json::Value> = serde_json::from_str(data).unwrap();
        // A row that leaves its reply's text to the history starts with the message's
        // position.
        if entries.first().is_some_and(serde_json::Value::is_number) {
            entries.remove(0);
        }
        let entries: Vec<Vec<serde_json::Value>> = entries
            .into_iter()
            .map(|entry| serde_json::from_value(entry).unwrap())
            .collect();
        let seqs = |entry: &[serde_json::Value]| -> i64 {
            entry
                .get(1)
                .and_then(|data| data["lengths"].as_array())
                .map_or(1, |runs| {
                    runs.iter().map(|run| run[1].as_i64().unwrap()).sum()
                })
        };
        let mut last = seq - entries.iter().map(|entry| seqs(entry)).sum::<i64>();
        for entry in &entries {
            last += seqs(entry);
            let kind = match &entry[0] {
                serde_json::Value::Number(code) => {
                    PACKED_KINDS[usize::try_from(code.as_u64().unwrap()).unwrap()]
                }
                name => name.as_str().unwrap(),
            };
            events.push((last, kind.to_owned()));
        }
    }
    events
}

/// A stored turn's log ends with its one `turn_stop`: nothing after it, nothing twice.
pub async fn assert_one_terminal_event_last(db: &TestDb, turn: &str) {
    let events = stored_events(db, turn).await;
    let stops: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, (_, kind))| kind == "turn_stop")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        stops.len(),
        1,
        "turn {turn}: one terminal event: {events:?}"
    );
    assert_eq!(
        stops[0],
        events.len() - 1,
        "turn {turn}: nothing after its end: {events:?}"
    );
}

/// The roles of a session's stored history with the turns that own them, in order.
pub async fn history_roles(db: &TestDb, session: &str) -> Vec<(String, String)> {
    let role = if db.url().starts_with("sqlite:") {
        "json_extract(h.message, '$.role')"
    } else {
        "h.message->>'role'"
    };
    let turn = if db.url().starts_with("sqlite:") {
        "lower(hex(h.turn_id))"
    } else {
        "replace(CAST(h.turn_id AS TEXT), '-', '')"
    };
    db.column(&format!(
        "SELECT {role} || ' ' || COALESCE({turn}, '-') FROM history h \
         WHERE h.session_id = {} ORDER BY h.position",
        db.id(session)
    ))
    .await
    .into_iter()
    .map(|row| {
        let (role, turn) = row.split_once(' ').unwrap();
        (role.to_owned(), turn.to_owned())
    })
    .collect()
}

/// The hex of a prefixed id, as `history_roles` names turns.
pub fn hex(id: &str) -> String {
    id.rsplit_once('_').unwrap().1.to_lowercase()
}

/// Sends a signal to a server process.
pub fn signal(server: &ServerProcess, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &server.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}
