//! A finished turn's events stored as one row: what the batch that ends a turn packs, and
//! that a reader gets exactly the events the writer published, after any cursor.

use super::coalescing_tests::{append, text, writer};
use super::*;
use crate::engine::testing::{running_turn, tenant, test_store};
use crate::model::{Content, ContentBlock, StopReason, Turn, Usage};
use crate::store::{Backend, Deltas};

fn stop() -> EventData {
    EventData::TurnStop {
        stop_reason: StopReason::EndTurn,
        error: None,
        usage: Usage {
            input_tokens: 7,
            output_tokens: 3,
            ..Usage::default()
        },
    }
}

/// The turn's stored events after `after`, from up to `rows` stored rows.
async fn read(store: &Store, turn: &Turn, after: i64, rows: i64, deltas: Deltas) -> Vec<Event> {
    store
        .list_events(
            &turn.tenant_id,
            &turn.session_id,
            Some(&turn.id),
            after,
            rows,
            deltas,
        )
        .await
        .unwrap()
}

/// An event as a reader compares it: times as stored, to the microsecond.
type Compared = (i64, Option<TurnId>, EventData, i64);

fn as_stored(event: &Event) -> Compared {
    (
        event.seq,
        event.turn_id,
        event.data.clone(),
        event.created_at.timestamp_micros(),
    )
}

/// What a reader after `after` must get: the published events after it, deltas as
/// streamed or, merged, one per run holding the text after the cursor; a run's deltas
/// keep the time of its first (they are stored together once their message stops).
fn expected(published: &[Event], after: i64, deltas: Deltas) -> Vec<Compared> {
    let mut out: Vec<Compared> = Vec::new();
    let mut run_time = None;
    for event in published {
        let EventData::TextDelta { delta } = &event.data else {
            run_time = None;
            if event.seq > after {
                out.push(as_stored(event));
            }
            continue;
        };
        let time = *run_time.get_or_insert(event.created_at.timestamp_micros());
        if event.seq <= after {
            continue;
        }
        match out.last_mut() {
            Some((seq, _, EventData::TextDelta { delta: last }, _))
                if deltas == Deltas::Merged && *seq + 1 == event.seq =>
            {
                last.push_str(delta);
                *seq = event.seq;
            }
            _ => out.push((event.seq, event.turn_id, event.data.clone(), time)),
        }
    }
    out
}

/// Every cursor from before the turn to its end reads back what was published after it,
/// deltas as streamed and merged.
async fn assert_every_cursor_reads_as_published(store: &Store, turn: &Turn, published: &[Event]) {
    let last = published.last().unwrap().seq;
    for after in 0..=last {
        for deltas in [Deltas::AsStreamed, Deltas::Merged] {
            let got: Vec<_> = read(store, turn, after, 100, deltas)
                .await
                .iter()
                .map(as_stored)
                .collect();
            assert_eq!(
                got,
                expected(published, after, deltas),
                "after {after}, {deltas:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_turn_ended_in_one_batch_is_one_row_that_reads_back_as_published_after_any_cursor() {
    let (store, _dir) = test_store().await;
    let process = ProcessId::generate();
    let writer = writer(&store, process).await;
    let turn = running_turn(&store, tenant(&store).await, &process).await;

    // Three appends queued before the writer runs: one batch, made at different times.
    let start = writer
        .append(append(
            &turn,
            vec![EventData::TurnStart {}, EventData::MessageStart {}],
        ))
        .await;
    let reply = writer
        .append(append(
            &turn,
            vec![
                text("he"),
                text("llo"),
                text("!"),
                EventData::MessageStop {},
            ],
        ))
        .await;
    let end = writer
        .append(append(
            &turn,
            vec![
                EventData::Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                },
                stop(),
            ],
        ))
        .await;
    let mut published: Vec<Event> = Vec::new();
    for receipt in [start, reply, end] {
        published.extend(
            receipt
                .await
                .unwrap()
                .unwrap()
                .iter()
                .map(|e| (**e).clone()),
        );
    }
    let (first, last) = (published[0].seq, published.last().unwrap().seq);
    assert_eq!(last - first, 7);

    // One stored row: a read of one row gives the whole turn.
    let one_row = read(&store, &turn, 0, 1, Deltas::AsStreamed).await;
    assert_eq!(one_row.len(), published.len(), "{one_row:?}");
    assert_every_cursor_reads_as_published(&store, &turn, &published).await;
    store.close().await;
}

#[tokio::test]
async fn a_turn_whose_start_was_stored_before_packs_what_its_last_batch_holds() {
    let (store, _dir) = test_store().await;
    let process = ProcessId::generate();
    let writer = writer(&store, process).await;
    let turn = running_turn(&store, tenant(&store).await, &process).await;

    let mut published: Vec<Event> = Vec::new();
    let batches = [
        vec![
            EventData::TurnStart {},
            EventData::MessageStart {},
            text("a"),
        ],
        vec![text("b"), EventData::MessageStop {}, stop()],
    ];
    for events in batches {
        let committed = writer
            .append(append(&turn, events))
            .await
            .await
            .unwrap()
            .unwrap();
        published.extend(committed.iter().map(|e| (**e).clone()));
    }

    // Stored: turn_start and message_start singly (committed before the turn ended), then
    // the deltas coalesced, message_stop and turn_stop in one row.
    let rows = |n| read(&store, &turn, 0, n, Deltas::Merged);
    let kinds = |events: Vec<Event>| events.iter().map(|e| e.data.kind()).collect::<Vec<_>>();
    assert_eq!(kinds(rows(2).await), ["turn_start", "message_start"]);
    assert_eq!(
        kinds(rows(3).await),
        [
            "turn_start",
            "message_start",
            "text_delta",
            "message_stop",
            "turn_stop"
        ]
    );
    assert_every_cursor_reads_as_published(&store, &turn, &published).await;
    store.close().await;
}

/// A turn that ends in one batch with `reply` as its last history message, its reply
/// streamed as `deltas`: what was published.
async fn turn_with_reply(
    writer: &EventWriter,
    turn: &Turn,
    deltas: &[&str],
    history: Vec<HistoryMessage>,
) -> Vec<Event> {
    let mut events = vec![EventData::TurnStart {}, EventData::MessageStart {}];
    events.extend(deltas.iter().map(|delta| text(delta)));
    events.extend([
        EventData::MessageStop {},
        EventData::Usage {
            input_tokens: 7,
            output_tokens: 3,
        },
        stop(),
    ]);
    let mut end = append(turn, events);
    end.history = history;
    let committed = writer.append(end).await.await.unwrap().unwrap();
    committed.iter().map(|e| (**e).clone()).collect()
}

fn assistant(content: Content) -> HistoryMessage {
    HistoryMessage::Assistant { content }
}

/// The reply's text is stored once, in its history message: the turn's packed row holds
/// that message's position instead; every cursor reads back what was published.
#[tokio::test]
async fn a_replys_text_is_stored_once_with_its_history_message() {
    let (store, _dir) = test_store().await;
    let process = ProcessId::generate();
    let writer = writer(&store, process).await;
    let tenant = tenant(&store).await;
    for (n, content) in [
        Content::Text("a reply in three deltas".into()),
        Content::Blocks(vec![ContentBlock::Text {
            text: "a reply in three deltas".into(),
        }]),
    ]
    .into_iter()
    .enumerate()
    {
        let turn = running_turn(&store, tenant, &process).await;
        let deltas = ["a reply ", "in three ", "deltas"];
        let published = turn_with_reply(&writer, &turn, &deltas, vec![assistant(content)]).await;

        let rows = store.stored_event_rows(&turn.session_id).await;
        assert_eq!(rows.len(), 1, "one packed row: {rows:?}");
        let (_, kind, data) = &rows[0];
        assert_eq!(kind, "packed");
        // The reply is the session's first history message: position 0.
        let position = match store.backend() {
            Backend::Sqlite => "[0,[0]",
            Backend::Postgres => "[0, [0]",
        };
        assert!(data.starts_with(position), "{n}: {data}");
        assert!(
            !data.contains("three"),
            "{n}: the text stored twice: {data}"
        );
        assert_every_cursor_reads_as_published(&store, &turn, &published).await;
    }
    store.close().await;
}

/// Deltas that are not the whole text of the batch's last history message of their turn
/// keep their text:
/// a reply of other blocks, a tool's answer after the reply, a different text.
#[tokio::test]
async fn deltas_that_are_not_the_turns_last_message_keep_their_text() {
    let (store, _dir) = test_store().await;
    let process = ProcessId::generate();
    let writer = writer(&store, process).await;
    let tenant = tenant(&store).await;
    let reply = || assistant(Content::Text("ok then".into()));
    for history in [
        vec![assistant(Content::Blocks(vec![
            ContentBlock::Text {
                text: "ok then".into(),
            },
            ContentBlock::Thinking {
                thinking: "hm".into(),
            },
        ]))],
        vec![
            reply(),
            HistoryMessage::Tool {
                tool_call_id: "call".into(),
                content: Content::Text("ok then".into()),
            },
        ],
        vec![assistant(Content::Text("ok then!".into()))],
        vec![],
    ] {
        let turn = running_turn(&store, tenant, &process).await;
        let published = turn_with_reply(&writer, &turn, &["ok ", "then"], history.clone()).await;
        let rows = store.stored_event_rows(&turn.session_id).await;
        assert_eq!(rows.len(), 1, "{history:?}: {rows:?}");
        assert!(rows[0].2.contains("ok then"), "{history:?}: {rows:?}");
        assert_every_cursor_reads_as_published(&store, &turn, &published).await;
    }
    store.close().await;
}
