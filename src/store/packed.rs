//! A finished turn's events in one row. The batch that stores a turn's `turn_stop` stores
//! the events of that turn it holds, from the last gap in their seqs up to the stop, as one
//! row at the stop's seq instead of one row each: six rows of an echo turn become one, which
//! saves each row's keys, turn id and time.
//!
//! The row's `kind` is `packed` and its `data` a JSON array of entries, in seq order, each
//! `[kind]`, `[kind, data]`, `[kind, micros]` or `[kind, data, micros]`: the event's kind,
//! its data when not `{}`, and how many microseconds after the row's time it was made when
//! not at it. A kind of [`KINDS`] is written as its index there, any other as its name (rows
//! written before the indexes name every kind; both read alike). An entry takes one seq,
//! except coalesced deltas, which take one per delta (`lengths`); the last entry ends at the
//! row's seq. Nothing is packed before its turn ends, so no later batch removes or replaces
//! part of a packed row.
//!
//! A `turn_stop`'s usage leaves out its `input_tokens` and `output_tokens` when they are the
//! sums of the row's `usage` entries (the turn's whole usage when they are all in the row):
//! read back, a stop's usage without them has those sums (rows written before always name
//! them).
//!
//! A reply's text is stored once. Where the row's coalesced text deltas are the whole text
//! of the last history message the same batch writes to the session, of the row's turn (an
//! assistant message of one text), their entry leaves out its `delta`, and the row's first
//! element, before the entries, is that message's history position: the reader takes the
//! text from there. The writer does not know the position (the database gives a message
//! the one after the session's last), so the row goes to the database without it and the
//! statement that inserts it puts it in front: SQLite's one-statement writes
//! (`reply_event`, migration V33) and PostgreSQL's one call per batch (`agentry_append`'s
//! `event_refers`, migration V33). The paths that write a batch statement by statement (a
//! run's turns, a stop with webhook messages to queue on SQLite) keep the text.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::StoreError;
use super::events::{AppendGroup, NewRow, history_rows};
use crate::model::{Content, ContentBlock, HistoryMessage, SessionId, TurnId};

/// The `kind` of a row holding several events of a finished turn.
pub(super) const PACKED: &str = "packed";

/// The kinds a packed entry names by their index here: stored rows keep these numbers, so
/// the list only grows at its end.
const KINDS: [&str; 11] = [
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

/// A row to insert, with the first seq it stands for (coalesced deltas stand for several).
pub(super) struct Entry<'a> {
    pub first_seq: i64,
    pub row: NewRow<'a>,
}

/// The text of an assistant message of one text: what a reply's coalesced deltas may be
/// read back from.
pub(super) fn reply_text(message: &HistoryMessage) -> Option<&str> {
    match message {
        HistoryMessage::Assistant {
            content: Content::Text(text),
        } => Some(text),
        HistoryMessage::Assistant {
            content: Content::Blocks(blocks),
        } => match blocks.as_slice() {
            [ContentBlock::Text { text }] => Some(text),
            _ => None,
        },
        _ => None,
    }
}

/// The history position a packed row takes its reply's text from, if it does.
pub(super) fn reply_position(data: &Value) -> Option<i64> {
    data.as_array()?.first()?.as_i64()
}

/// The rows of a batch, each finished turn's contiguous tail packed into one. With
/// `refer`, a packed row whose deltas are its turn's reply leaves their text to the
/// history message the batch writes (see the module's documentation).
pub(super) fn pack_finished_turns<'a>(
    groups: &[AppendGroup],
    entries: Vec<Entry<'a>>,
    refer: bool,
) -> Vec<NewRow<'a>> {
    let finished: HashSet<(SessionId, TurnId)> = groups
        .iter()
        .filter(|group| group.events.iter().any(|e| e.data.is_turn_stop()))
        .map(|group| (group.session, group.turn))
        .collect();
    if finished.is_empty() {
        return entries.into_iter().map(|entry| entry.row).collect();
    }
    let mut rows = Vec::with_capacity(entries.len());
    let mut of_finished: HashMap<(SessionId, TurnId), Vec<Entry<'a>>> = HashMap::new();
    for entry in entries {
        let key = (entry.row.session, entry.row.turn);
        if finished.contains(&key) {
            of_finished.entry(key).or_default().push(entry);
        } else {
            rows.push(entry.row);
        }
    }
    // Each session's last history message the batch writes, with its turn: what the
    // statement puts the position of in front of a row that refers.
    let mut last_messages: HashMap<SessionId, (TurnId, &HistoryMessage)> = HashMap::new();
    if refer {
        for row in history_rows(groups) {
            last_messages.insert(row.session, (row.turn, row.message));
        }
    }
    for (key, mut entries) in of_finished {
        entries.sort_unstable_by_key(|entry| entry.first_seq);
        let mut start = entries.len() - 1;
        while start > 0 && entries[start - 1].row.seq + 1 == entries[start].first_seq {
            start -= 1;
        }
        let tail = entries.split_off(start);
        rows.extend(entries.into_iter().map(|entry| entry.row));
        if tail.len() == 1 {
            rows.extend(tail.into_iter().map(|entry| entry.row));
        } else {
            let reply = match last_messages.get(&key.0) {
                Some((turn, message)) if *turn == key.1 => reply_text(message),
                _ => None,
            };
            rows.push(pack(tail, reply));
        }
    }
    rows
}

/// Consecutive rows of one turn as one row at the last one's seq; coalesced text deltas
/// that are `reply` written without their text.
fn pack<'a>(entries: Vec<Entry<'a>>, reply: Option<&str>) -> NewRow<'a> {
    let first = &entries[0].row;
    let last = &entries[entries.len() - 1].row;
    let (session, seq, turn, created_at) = (first.session, last.seq, first.turn, first.created_at);
    let at = created_at.timestamp_micros();
    let mut tokens = Tokens::default();
    let mut refers = false;
    let mut data = String::from("[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        data.push('[');
        match KINDS.iter().position(|kind| *kind == entry.row.kind) {
            Some(code) => write!(data, "{code}").expect("a String takes every write"),
            None => write!(data, "\"{}\"", entry.row.kind).expect("a String takes every write"),
        }
        let micros = entry.row.created_at.timestamp_micros() - at;
        let cut = match entry.row.kind {
            "usage" => {
                tokens.add_text(&entry.row.data);
                None
            }
            "turn_stop" => tokens.cut_from_stop(&entry.row.data),
            // One entry at most leaves its text to the reply.
            "text_delta" if !refers => reply
                .and_then(|text| without_text(&entry.row.data, text))
                .inspect(|_| refers = true),
            _ => None,
        };
        let entry_data = cut.as_deref().unwrap_or(&entry.row.data);
        if entry_data != "{}" {
            data.push(',');
            data.push_str(entry_data);
        }
        if micros != 0 {
            write!(data, ",{micros}").expect("a String takes every write");
        }
        data.push(']');
    }
    data.push(']');
    NewRow {
        session,
        seq,
        turn,
        kind: PACKED,
        data,
        created_at,
        refers,
    }
}

/// Coalesced deltas' data without their text, when the text is `text`.
fn without_text(deltas: &str, text: &str) -> Option<String> {
    let mut deltas: Value = serde_json::from_str(deltas).ok()?;
    let fields = deltas.as_object_mut()?;
    if !fields.contains_key("lengths") || fields.get("delta")?.as_str()? != text {
        return None;
    }
    fields.remove("delta");
    Some(deltas.to_string())
}

/// The input and output tokens of a packed row's `usage` entries so far; `None` once one
/// of them did not hold two counts (no stop is then written or read without its own).
struct Tokens(Option<(u64, u64)>);

impl Default for Tokens {
    fn default() -> Self {
        Tokens(Some((0, 0)))
    }
}

impl Tokens {
    fn add(&mut self, usage: &Value) {
        let count = |key: &str| usage.get(key).map_or(Some(0), Value::as_u64);
        self.0 = self.0.and_then(|(input, output)| {
            Some((
                input.checked_add(count("input_tokens")?)?,
                output.checked_add(count("output_tokens")?)?,
            ))
        });
    }

    fn add_text(&mut self, usage: &str) {
        match serde_json::from_str::<Value>(usage) {
            Ok(usage) => self.add(&usage),
            Err(_) => self.0 = None,
        }
    }

    /// A stop's data without its usage's tokens, when they are the sums so far.
    fn cut_from_stop(&self, stop: &str) -> Option<String> {
        let sums = self.0?;
        let mut stop: Value = serde_json::from_str(stop).ok()?;
        let usage = stop.get_mut("usage")?.as_object_mut()?;
        let tokens = (
            usage.get("input_tokens")?.as_u64()?,
            usage.get("output_tokens")?.as_u64()?,
        );
        if tokens != sums {
            return None;
        }
        usage.remove("input_tokens");
        usage.remove("output_tokens");
        Some(stop.to_string())
    }

    /// Gives a stop's usage that names neither token count the sums so far; `Err` when
    /// there are none to give.
    fn fill_stop(&self, stop: &mut Value) -> Result<(), ()> {
        let Some(usage) = stop.get_mut("usage").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if usage.contains_key("input_tokens") || usage.contains_key("output_tokens") {
            return Ok(());
        }
        let (input, output) = self.0.ok_or(())?;
        usage.insert("input_tokens".to_owned(), input.into());
        usage.insert("output_tokens".to_owned(), output.into());
        Ok(())
    }
}

/// One entry of a packed row, read back.
pub(super) struct Unpacked {
    pub kind: String,
    pub data: Value,
    pub created_at: DateTime<Utc>,
}

/// The entries of a packed row made at `created_at`; `reply` is the text of the history
/// message at its [`reply_position`], when it has one.
pub(super) fn unpack(
    seq: i64,
    data: Value,
    created_at: DateTime<Utc>,
    mut reply: Option<&str>,
) -> Result<Vec<Unpacked>, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("the packed events at seq {seq} are malformed"));
    let Value::Array(mut entries) = data else {
        return Err(corrupt());
    };
    if entries.first().is_some_and(Value::is_number) {
        entries.remove(0);
        if reply.is_none() {
            return Err(StoreError::Corrupt(format!(
                "the packed events at seq {seq} lack the history message they refer to"
            )));
        }
    } else if reply.is_some() {
        return Err(corrupt());
    }
    let mut unpacked = Vec::with_capacity(entries.len());
    let mut tokens = Tokens::default();
    for entry in entries {
        let Value::Array(parts) = entry else {
            return Err(corrupt());
        };
        let mut parts = parts.into_iter().peekable();
        let kind = match parts.next() {
            Some(Value::String(kind)) => kind,
            Some(Value::Number(code)) => code
                .as_u64()
                .and_then(|code| KINDS.get(usize::try_from(code).ok()?))
                .ok_or_else(corrupt)?
                .to_string(),
            _ => return Err(corrupt()),
        };
        let mut data = match parts.peek() {
            Some(Value::Object(_)) => parts.next().expect("peeked"),
            Some(Value::Number(_)) | None => Value::Object(Default::default()),
            Some(_) => return Err(corrupt()),
        };
        match kind.as_str() {
            "usage" => tokens.add(&data),
            "turn_stop" => tokens.fill_stop(&mut data).map_err(|()| corrupt())?,
            "text_delta" => {
                if let Some(fields) = data.as_object_mut()
                    && fields.contains_key("lengths")
                    && !fields.contains_key("delta")
                {
                    let text = reply.take().ok_or_else(corrupt)?;
                    fields.insert("delta".to_owned(), text.into());
                }
            }
            _ => {}
        }
        let created_at = match parts.next() {
            None => created_at,
            Some(micros) => micros
                .as_i64()
                .map(chrono::Duration::microseconds)
                .and_then(|after| created_at.checked_add_signed(after))
                .ok_or_else(corrupt)?,
        };
        if parts.next().is_some() {
            return Err(corrupt());
        }
        unpacked.push(Unpacked {
            kind,
            data,
            created_at,
        });
    }
    if reply.is_some() {
        return Err(corrupt());
    }
    Ok(unpacked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventData, StopReason, TenantId, Usage};

    fn entry<'a>(
        session: SessionId,
        turn: TurnId,
        seqs: (i64, i64),
        kind: &'static str,
        data: &str,
        at: &'a DateTime<Utc>,
    ) -> Entry<'a> {
        Entry {
            first_seq: seqs.0,
            row: NewRow {
                session,
                seq: seqs.1,
                turn,
                kind,
                data: data.to_owned(),
                created_at: at,
                refers: false,
            },
        }
    }

    fn group(session: SessionId, turn: TurnId, events: Vec<EventData>) -> AppendGroup {
        AppendGroup {
            tenant: TenantId::generate(),
            session,
            turn,
            run: None,
            events: events
                .into_iter()
                .map(|data| Event {
                    session_id: session,
                    seq: 0,
                    turn_id: Some(turn),
                    data,
                    created_at: crate::model::now(),
                })
                .collect(),
            coalesced: Vec::new(),
            history: Vec::new(),
            transition: None,
        }
    }

    /// A turn's end, as the batch that stores it holds it.
    fn end_turn() -> EventData {
        EventData::TurnStop {
            stop_reason: StopReason::EndTurn,
            error: None,
            usage: Usage::default(),
        }
    }

    #[test]
    fn a_finished_turns_rows_after_their_last_gap_become_one_and_others_stay() {
        let session = SessionId::generate();
        let (ended, running) = (TurnId::generate(), TurnId::generate());
        let groups = [
            group(session, ended, vec![end_turn()]),
            group(session, running, vec![EventData::TurnStart {}]),
        ];
        let at = crate::model::now();
        let later = at + chrono::Duration::microseconds(250);
        let entries = vec![
            entry(session, ended, (2, 2), "turn_start", "{}", &at),
            // Seq 3 is not in the batch: a gap.
            entry(session, ended, (4, 4), "message_start", "{}", &at),
            entry(
                session,
                ended,
                (5, 7),
                "text_delta",
                r#"{"delta":"abc","lengths":[[1,3]]}"#,
                &at,
            ),
            entry(session, ended, (8, 8), "message_stop", "{}", &later),
            entry(
                session,
                ended,
                (9, 9),
                "turn_stop",
                r#"{"stopReason":"end_turn"}"#,
                &later,
            ),
            entry(session, running, (10, 10), "turn_start", "{}", &at),
        ];
        let mut rows = pack_finished_turns(&groups, entries, true);
        rows.sort_by_key(|row| row.seq);
        let stored: Vec<(i64, &str)> = rows.iter().map(|row| (row.seq, row.kind)).collect();
        assert_eq!(
            stored,
            [(2, "turn_start"), (9, PACKED), (10, "turn_start")],
            "before the gap and the running turn's rows stay single"
        );
        assert_eq!(
            rows[1].data,
            r#"[[1],[2,{"delta":"abc","lengths":[[1,3]]}],[5,250],[9,{"stopReason":"end_turn"},250]]"#
        );
        assert_eq!(rows[1].created_at, &at);

        let data: Value = serde_json::from_str(&rows[1].data).unwrap();
        let at = DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap();
        let unpacked = unpack(9, data, at, None).unwrap();
        let kinds: Vec<&str> = unpacked.iter().map(|u| u.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["message_start", "text_delta", "message_stop", "turn_stop"]
        );
        assert_eq!(unpacked[0].created_at, at);
        assert_eq!(
            unpacked[3].created_at,
            at + chrono::Duration::microseconds(250)
        );
        assert_eq!(unpacked[3].data["stopReason"], "end_turn");
    }

    #[test]
    fn a_malformed_packed_row_is_refused_as_corrupt() {
        let at = crate::model::now();
        for data in [
            serde_json::json!({"kind": "turn_start"}),
            serde_json::json!([["turn_start", {}, 1, 2]]),
            serde_json::json!([[11]]),
            serde_json::json!([[-1]]),
            serde_json::json!([[1.5]]),
            serde_json::json!([[0, 1, 2]]),
            serde_json::json!([[true]]),
            serde_json::json!([["turn_start", "text"]]),
            serde_json::json!([["turn_start", {}, "soon"]]),
        ] {
            assert!(
                matches!(
                    unpack(1, data.clone(), at, None),
                    Err(StoreError::Corrupt(_))
                ),
                "{data}"
            );
        }
    }

    /// Rows packed before kinds were written as numbers name each kind; they read back as
    /// the same events, and a kind outside the list is stored by its name.
    #[test]
    fn kinds_by_name_and_by_number_read_alike() {
        let at = crate::model::now();
        let at = DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap();
        let by_name = serde_json::json!([
            ["turn_start"],
            ["text_delta", {"delta": "hi", "lengths": [[1, 2]]}],
            ["message_stop", {}, 7],
            ["usage", {"input_tokens": 1}, 9],
            ["agent_version_change", {"version": 2}]
        ]);
        let by_number = serde_json::json!([
            [0],
            [2, {"delta": "hi", "lengths": [[1, 2]]}],
            [5, 7],
            [7, {"input_tokens": 1}, 9],
            [10, {"version": 2}]
        ]);
        let read = |data: Value| {
            unpack(5, data, at, None)
                .unwrap()
                .into_iter()
                .map(|u| (u.kind, u.data, u.created_at))
                .collect::<Vec<_>>()
        };
        let expected = read(by_name);
        assert_eq!(read(by_number), expected);
        assert_eq!(expected[2].2, at + chrono::Duration::microseconds(7));
        assert_eq!(expected[3].1["input_tokens"], 1);

        let session = SessionId::generate();
        let turn = TurnId::generate();
        let packed = pack(
            vec![
                entry(session, turn, (1, 1), "turn_start", "{}", &at),
                entry(session, turn, (2, 2), "some_later_kind", r#"{"a":1}"#, &at),
            ],
            None,
        );
        assert_eq!(packed.data, r#"[[0],["some_later_kind",{"a":1}]]"#);
        let unpacked = unpack(2, serde_json::from_str(&packed.data).unwrap(), at, None).unwrap();
        assert_eq!(unpacked[1].kind, "some_later_kind");
    }

    /// A stop whose tokens are the sums of the row's usage entries is written without them
    /// and read back with them; one whose tokens are not (a usage entry outside the row)
    /// keeps its own.
    #[test]
    fn a_stops_tokens_are_left_out_when_the_rows_usage_sums_to_them() {
        let at = crate::model::now();
        let at = DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap();
        let (session, turn) = (SessionId::generate(), TurnId::generate());
        let stop = r#"{"stopReason":"end_turn","usage":{"input_tokens":12,"output_tokens":7,"tool_calls":1,"wall_ms":3}}"#;
        let usage = |seq, data| entry(session, turn, (seq, seq), "usage", data, &at);
        let stop_at = |seq| entry(session, turn, (seq, seq), "turn_stop", stop, &at);
        let packed = pack(
            vec![
                usage(1, r#"{"input_tokens":10,"output_tokens":5}"#),
                usage(2, r#"{"input_tokens":2,"output_tokens":2}"#),
                stop_at(3),
            ],
            None,
        );
        assert_eq!(
            packed.data,
            r#"[[7,{"input_tokens":10,"output_tokens":5}],[7,{"input_tokens":2,"output_tokens":2}],[9,{"stopReason":"end_turn","usage":{"tool_calls":1,"wall_ms":3}}]]"#
        );
        let unpacked = unpack(3, serde_json::from_str(&packed.data).unwrap(), at, None).unwrap();
        assert_eq!(
            unpacked[2].data,
            serde_json::from_str::<Value>(stop).unwrap()
        );

        let partial = pack(
            vec![
                usage(2, r#"{"input_tokens":2,"output_tokens":2}"#),
                stop_at(3),
            ],
            None,
        );
        assert!(
            partial.data.ends_with(&format!("[9,{stop}]]")),
            "{}",
            partial.data
        );
        let unpacked = unpack(3, serde_json::from_str(&partial.data).unwrap(), at, None).unwrap();
        assert_eq!(
            unpacked[1].data,
            serde_json::from_str::<Value>(stop).unwrap()
        );

        let unreadable = serde_json::json!([
            [7, {"input_tokens": "many"}],
            [9, {"stopReason": "end_turn", "usage": {"wall_ms": 3}}]
        ]);
        assert!(matches!(
            unpack(2, unreadable, at, None),
            Err(StoreError::Corrupt(_))
        ));
    }

    /// Coalesced text deltas that are the session's last history message of the batch, of
    /// their turn, leave their text to it: the row refers, and reads back with the
    /// message's text given (refused without it, or given one it does not refer to). Where
    /// the session's last message is of another turn, the text stays.
    #[test]
    fn a_replys_deltas_leave_their_text_to_its_history_message() {
        let at = crate::model::now();
        let at = DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap();
        let (session, turn) = (SessionId::generate(), TurnId::generate());
        let mut ended = group(session, turn, vec![end_turn()]);
        ended.history = vec![HistoryMessage::Assistant {
            content: Content::Text("hello".into()),
        }];
        let entries = || {
            vec![
                entry(session, turn, (1, 1), "message_start", "{}", &at),
                entry(
                    session,
                    turn,
                    (2, 3),
                    "text_delta",
                    r#"{"delta":"hello","lengths":[[2,1],[3,1]]}"#,
                    &at,
                ),
                entry(session, turn, (4, 4), "message_stop", "{}", &at),
                entry(session, turn, (5, 5), "turn_stop", "{}", &at),
            ]
        };
        let groups = [ended];

        let rows = pack_finished_turns(&groups, entries(), true);
        assert_eq!(rows.len(), 1);
        assert!(rows[0].refers);
        assert_eq!(
            rows[0].data,
            r#"[[1],[2,{"lengths":[[2,1],[3,1]]}],[5],[9]]"#
        );
        // As the statement that inserts it stores it: the position first.
        let stored: Value = serde_json::from_str(&format!("[7,{}", &rows[0].data[1..])).unwrap();
        assert_eq!(reply_position(&stored), Some(7));
        let unpacked = unpack(5, stored.clone(), at, Some("hello")).unwrap();
        assert_eq!(
            unpacked[1].data,
            serde_json::json!({"delta": "hello", "lengths": [[2, 1], [3, 1]]})
        );
        assert!(matches!(
            unpack(5, stored, at, None),
            Err(StoreError::Corrupt(_))
        ));

        let mut other = group(session, TurnId::generate(), vec![EventData::TurnStart {}]);
        other.history = groups[0].history.clone();
        let after_another = pack_finished_turns(&[groups[0].clone(), other], entries(), true);
        assert!(!after_another[0].refers);
        assert!(after_another[0].data.contains(r#""delta":"hello""#));

        let kept = pack_finished_turns(&groups, entries(), false);
        assert!(!kept[0].refers);
        assert!(
            kept[0].data.contains(r#""delta":"hello""#),
            "{}",
            kept[0].data
        );
        let kept: Value = serde_json::from_str(&kept[0].data).unwrap();
        assert_eq!(reply_position(&kept), None);
        assert!(matches!(
            unpack(5, kept, at, Some("hello")),
            Err(StoreError::Corrupt(_))
        ));
    }
}
