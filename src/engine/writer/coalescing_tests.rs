//! The coalescing of a finished message's deltas: which runs become one row, which deltas
//! stay single, and what an append must stop storing or remove; then the same through the
//! writer and the database, for a message whose deltas came in an earlier commit and in an
//! earlier append of the same batch.

use std::time::Duration;

use super::*;
use crate::engine::testing::{running_turn, tenant, test_store};
use crate::model::Turn;
use crate::store::Deltas;

fn delta(seq: i64, thinking: bool, text: &str, stored: Stored) -> OpenDelta {
    let data = if thinking {
        EventData::ThinkingDelta { delta: text.into() }
    } else {
        EventData::TextDelta { delta: text.into() }
    };
    OpenDelta {
        event: Arc::new(Event {
            session_id: SessionId::generate(),
            seq,
            turn_id: None,
            data,
            created_at: crate::model::now(),
        }),
        stored,
    }
}

#[test]
fn runs_of_one_kind_and_consecutive_seqs_become_one_row_and_lone_deltas_stay_single() {
    let deltas = vec![
        delta(1, false, "he", Stored::No),
        delta(2, false, "llo", Stored::No),
        delta(3, true, "hmm", Stored::No),
        // A gap: a new run even of the same kind.
        delta(5, true, "ok", Stored::No),
        delta(6, true, "!", Stored::No),
        delta(8, false, "x", Stored::No),
    ];
    let (mut stored, mut coalesced, mut unstored) = (Vec::new(), Vec::new(), HashSet::new());
    coalesce(deltas, &mut stored, &mut coalesced, &mut unstored);

    let runs: Vec<(bool, i64, &str, &[u32])> = coalesced
        .iter()
        .map(|c| {
            (
                c.thinking,
                c.first_seq,
                c.text.as_str(),
                c.lengths.as_slice(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            (false, 1, "hello", &[2, 3][..]),
            (true, 5, "ok!", &[2, 1][..])
        ]
    );
    assert_eq!(coalesced[1].last_seq(), 6);
    assert!(coalesced.iter().all(|c| !c.replaces_stored));
    let single: Vec<i64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(single, [3, 8], "lone deltas are stored as they are");
    assert!(unstored.is_empty());
}

#[test]
fn a_run_replaces_its_durable_deltas_and_unstores_those_of_its_batch() {
    let deltas = vec![
        delta(1, false, "a", Stored::Durable),
        delta(2, false, "b", Stored::InBatch),
        delta(3, false, "c", Stored::No),
        // Lone and already written: nothing more to store.
        delta(4, true, "t", Stored::InBatch),
    ];
    let (mut stored, mut coalesced, mut unstored) = (Vec::new(), Vec::new(), HashSet::new());
    coalesce(deltas, &mut stored, &mut coalesced, &mut unstored);

    assert_eq!(coalesced.len(), 1);
    assert_eq!(coalesced[0].text, "abc");
    assert!(
        coalesced[0].replaces_stored,
        "seq 1 is stored singly and must go"
    );
    assert_eq!(
        unstored,
        HashSet::from([2]),
        "seq 2 is not to be written singly"
    );
    assert!(stored.is_empty(), "{stored:?}");
}

/// A writer of this process over `store`, its lease held.
pub(super) async fn writer(store: &Store, process: ProcessId) -> EventWriter {
    let lease = Duration::from_secs(60);
    store.insert_process(&process, "test", lease).await.unwrap();
    let metrics = Metrics::new(false);
    EventWriter::start(
        store.clone(),
        Arc::new(Fanout::new(16, metrics.clone())),
        process,
        1024,
        Arc::new(Notify::new()),
        metrics,
        Ownership {
            lease: Arc::new(Lease::new(lease, Duration::from_secs(1), true)),
            controls: Arc::default(),
        },
    )
}

pub(super) fn append(turn: &Turn, events: Vec<EventData>) -> Append {
    Append {
        tenant: turn.tenant_id,
        session: turn.session_id,
        turn: turn.id,
        run: None,
        events,
        history: Vec::new(),
        after_failure: false,
        span: tracing::Span::none(),
    }
}

pub(super) fn text(delta: &str) -> EventData {
    EventData::TextDelta {
        delta: delta.into(),
    }
}

/// The turn's deltas as stored rows give them (merged) and as streamed, after `after`.
async fn read(store: &Store, turn: &Turn, after: i64) -> (Vec<String>, Vec<(i64, String)>) {
    let list = |deltas| {
        store.list_events(
            &turn.tenant_id,
            &turn.session_id,
            Some(&turn.id),
            after,
            100,
            deltas,
        )
    };
    let texts = |events: Vec<Event>| -> Vec<(i64, String)> {
        events
            .into_iter()
            .filter_map(|e| match e.data {
                EventData::TextDelta { delta } => Some((e.seq, delta)),
                _ => None,
            })
            .collect()
    };
    let merged = texts(list(Deltas::Merged).await.unwrap());
    let streamed = texts(list(Deltas::AsStreamed).await.unwrap());
    (merged.into_iter().map(|(_, d)| d).collect(), streamed)
}

#[tokio::test]
async fn a_message_finished_in_a_later_commit_replaces_its_single_deltas_with_one_row() {
    let (store, _dir) = test_store().await;
    let process = ProcessId::generate();
    let writer = writer(&store, process).await;
    let turn = running_turn(&store, tenant(&store).await, &process).await;

    let first = vec![
        EventData::TurnStart {},
        EventData::MessageStart {},
        text("hel"),
        text("lo "),
    ];
    let committed = writer
        .append(append(&turn, first))
        .await
        .await
        .unwrap()
        .unwrap();
    let first_delta = committed[2].seq;
    // Durable before the message stops: stored singly.
    let (merged, _) = read(&store, &turn, 0).await;
    assert_eq!(merged, ["hel", "lo "]);

    let last = vec![text("world"), EventData::MessageStop {}];
    writer
        .append(append(&turn, last))
        .await
        .await
        .unwrap()
        .unwrap();
    let (merged, streamed) = read(&store, &turn, 0).await;
    assert_eq!(merged, ["hello world"], "one row, the single ones gone");
    let seqs: Vec<i64> = streamed.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, [first_delta, first_delta + 1, first_delta + 2]);
    // A reader inside the run gets exactly what follows its cursor.
    let (merged, _) = read(&store, &turn, first_delta).await;
    assert_eq!(merged, ["lo world"]);
    store.close().await;
}

#[tokio::test]
async fn a_message_finished_in_the_same_batch_is_stored_once_as_one_row() {
    let (store, _dir) = test_store().await;
    let process = ProcessId::generate();
    let writer = writer(&store, process).await;
    let turn = running_turn(&store, tenant(&store).await, &process).await;

    // Both appends are queued before the writer runs: one batch.
    let first = writer
        .append(append(
            &turn,
            vec![
                EventData::TurnStart {},
                EventData::MessageStart {},
                text("a"),
                text("b"),
            ],
        ))
        .await;
    let last = writer
        .append(append(&turn, vec![text("c"), EventData::MessageStop {}]))
        .await;
    let published = first.await.unwrap().unwrap();
    assert_eq!(
        published.len(),
        4,
        "every event is published as it was sent"
    );
    last.await.unwrap().unwrap();

    let (merged, streamed) = read(&store, &turn, 0).await;
    assert_eq!(merged, ["abc"]);
    assert_eq!(streamed.len(), 3);
    store.close().await;
}
