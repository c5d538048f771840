//! Admission on an engine and a database, without HTTP: a busy session, a retried request,
//! and a remembered session that no longer matches the stored one.

use crate::engine::EngineError;
use crate::engine::testing::{TestEngine, says, unfinished};
use crate::model::{Content, ContentBlock, HistoryMessage, TurnId};
use crate::store::Page;

const ALL: Page = Page {
    after: None,
    limit: 100,
};

#[tokio::test]
async fn a_second_turn_while_one_is_unfinished_is_refused_as_busy() {
    let test = TestEngine::start().await;
    let session = test.session("slow").await;
    let first = test
        .engine
        .start_turn(&test.tenant, &session.id, says("hello", None))
        .await
        .unwrap();
    assert!(unfinished(first.turn.status));

    let second = test
        .engine
        .start_turn(&test.tenant, &session.id, says("again", None))
        .await;
    assert!(
        matches!(second, Err(EngineError::SessionBusy)),
        "{second:?}"
    );
    let (turns, _) = test
        .store
        .list_turns(&test.tenant, &session.id, ALL)
        .await
        .unwrap();
    assert_eq!(turns.len(), 1, "the refused turn is not recorded");
    test.stop().await;
}

#[tokio::test]
async fn a_retry_with_the_same_key_gets_the_earlier_turn_and_another_request_is_refused() {
    let test = TestEngine::start().await;
    let session = test.session("slow").await;
    let first = test
        .engine
        .start_turn(&test.tenant, &session.id, says("hello", Some("key-1")))
        .await
        .unwrap();

    // While the first still runs: the same request is a retry, not a busy session.
    let retry = test
        .engine
        .start_turn(&test.tenant, &session.id, says("hello", Some("key-1")))
        .await
        .unwrap();
    assert_eq!(retry.turn.id, first.turn.id);
    assert!(retry.live.is_none(), "a replay follows the stored log");

    let other = test
        .engine
        .start_turn(&test.tenant, &session.id, says("other", Some("key-1")))
        .await;
    assert!(
        matches!(other, Err(EngineError::IdempotencyMismatch)),
        "{other:?}"
    );
    let (turns, _) = test
        .store
        .list_turns(&test.tenant, &session.id, ALL)
        .await
        .unwrap();
    assert_eq!(turns.len(), 1);
    test.stop().await;
}

/// Remembers the session as holding `extra` after what is stored, as a process would
/// that missed a change another one made.
async fn remember_wrongly(
    test: &TestEngine,
    session: &crate::model::Session,
    extra: HistoryMessage,
) {
    let engine = &test.engine;
    let reader = TurnId::generate();
    engine
        .histories
        .compacted(&test.store, session, &reader, false)
        .await
        .unwrap();
    engine.histories.added(&reader, &session.id, vec![extra]);
    let snapshot = engine
        .histories
        .snapshot(&test.tenant, &session.id)
        .expect("the session is remembered");
    assert_eq!(
        snapshot.remembered.history_len, 1,
        "it remembers a message the store lacks"
    );
}

#[tokio::test]
async fn a_remembered_session_that_moved_is_admitted_on_the_stored_one() {
    let test = TestEngine::start().await;
    let session = test.session("echo").await;
    remember_wrongly(
        &test,
        &session,
        HistoryMessage::Assistant {
            content: Content::Text("said elsewhere".into()),
        },
    )
    .await;

    // The turn's INSERT finds the stored session unlike the remembered one (stale): read
    // again, it is admitted.
    test.run_turn(&session.id, "hello").await;
    let history = test
        .store
        .list_history(&test.tenant, &session.id, crate::config::HistoryType::Full)
        .await
        .unwrap();
    assert_eq!(
        history.len(),
        2,
        "the user's message and the reply: {history:?}"
    );
    test.stop().await;
}

#[tokio::test]
async fn calls_remembered_as_pending_are_checked_again_on_the_stored_session() {
    let test = TestEngine::start().await;
    let session = test.session("echo").await;
    let mut input = serde_json::Map::new();
    input.insert("q".into(), "x".into());
    remember_wrongly(
        &test,
        &session,
        HistoryMessage::Assistant {
            content: Content::Blocks(vec![ContentBlock::ToolUse {
                tool_call_id: "call_1".into(),
                name: "lookup".into(),
                input,
            }]),
        },
    )
    .await;

    // Remembered, the session waits for `call_1`'s answer and refuses a user message;
    // stored, it waits for nothing.
    test.run_turn(&session.id, "hello").await;
    test.stop().await;
}
