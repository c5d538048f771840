//! The cache of sessions and histories: what it keeps, checks, evicts and forgets.

use super::*;
use crate::model::{Content, ContentBlock};

fn session() -> Session {
    Session {
        id: SessionId::generate(),
        tenant_id: TenantId::generate(),
        agent: "echo".into(),
        agent_version: None,
        server_tools: Vec::new(),
        options: Default::default(),
        sealed_options: Default::default(),
        client_tools: Vec::new(),
        alias: None,
        created_at: crate::model::now(),
        updated_at: crate::model::now(),
    }
}

fn user(text: &str) -> HistoryMessage {
    HistoryMessage::User {
        content: Content::Text(text.into()),
    }
}

fn call(id: &str) -> HistoryMessage {
    HistoryMessage::Assistant {
        content: Content::Blocks(vec![ContentBlock::ToolUse {
            tool_call_id: id.into(),
            name: "lookup".into(),
            input: Default::default(),
        }]),
    }
}

/// An entry as a turn that read its (empty) history leaves it.
fn remembered(histories: &Histories, session: &Session, turn: &TurnId) {
    histories.put(
        &session.tenant_id,
        &session.id,
        Cached {
            exact_for: Some(*turn),
            ..Cached::new(session.clone())
        },
    );
}

#[test]
fn a_snapshot_carries_the_length_the_admission_checks_and_the_pending_calls() {
    let histories = Histories::new(1 << 20);
    let session = session();
    let first = TurnId::generate();
    assert!(
        histories
            .snapshot(&session.tenant_id, &session.id)
            .is_none()
    );
    remembered(&histories, &session, &first);
    histories.added(&first, &session.id, vec![user("hi"), call("c1")]);

    let snapshot = histories.snapshot(&session.tenant_id, &session.id).unwrap();
    assert_eq!(snapshot.remembered.history_len, 2);
    assert_eq!(snapshot.pending.len(), 1);
    assert_eq!(snapshot.pending[0].id, "c1");
    assert!(
        histories
            .snapshot(&TenantId::generate(), &session.id)
            .is_none(),
        "another tenant's session is not theirs"
    );

    // A turn admitted on it continues it; another turn's writes do not.
    let second = TurnId::generate();
    let answer = HistoryMessage::Tool {
        tool_call_id: "c1".into(),
        content: Content::Text("42".into()),
    };
    histories.admitted(&second, &snapshot, &session, vec![answer]);
    histories.added(&first, &session.id, vec![user("late")]);
    let after = histories.snapshot(&session.tenant_id, &session.id).unwrap();
    assert_eq!(after.remembered.history_len, 3);
    assert!(after.pending.is_empty());
}

#[test]
fn an_admission_on_a_moved_entry_drops_it() {
    let histories = Histories::new(1 << 20);
    let session = session();
    let first = TurnId::generate();
    remembered(&histories, &session, &first);
    let snapshot = histories.snapshot(&session.tenant_id, &session.id).unwrap();
    histories.added(&first, &session.id, vec![user("moved")]);
    histories.admitted(&TurnId::generate(), &snapshot, &session, vec![user("next")]);
    assert!(
        histories
            .snapshot(&session.tenant_id, &session.id)
            .is_none()
    );
}

fn assistant(text: &str) -> HistoryMessage {
    HistoryMessage::Assistant {
        content: Content::Text(text.into()),
    }
}

#[test]
fn a_tail_only_entry_keeps_the_last_exchange_and_measures_the_whole_history() {
    let (mut whole, mut tail) = (Cached::new(session()), Cached::new(session()));
    tail.tail_only = true;
    let steps = [
        vec![user("one"), assistant("one")],
        vec![user("two"), call("c1")],
        vec![HistoryMessage::Tool {
            tool_call_id: "c1".into(),
            content: Content::Text("42".into()),
        }],
        vec![assistant("done"), user("three")],
    ];
    let mut all = Vec::new();
    for step in steps {
        all.extend(step.clone());
        whole.extend(step.clone());
        tail.extend(step);
        assert_eq!(tail.len(), all.len());
        assert_eq!(tail.full_bytes, size_of(&all));
        let (w, t) = (whole.compacted(), tail.compacted());
        assert_eq!(t.chars, size_of(&all), "the running size is the whole size");
        assert_eq!(w.chars, t.chars);
        let last_user = all
            .iter()
            .rposition(|m| matches!(m, HistoryMessage::User { .. }))
            .unwrap();
        let kept: Vec<&HistoryMessage> = t.messages.iter().map(|m| &**m).collect();
        assert_eq!(kept, all[last_user..].iter().collect::<Vec<_>>());
        // The echo estimates the request the same from either.
        let request = |history: ModelHistory| crate::providers::ModelRequest {
            system_prompt: "be brief".into(),
            messages: history.messages,
            history_chars: history.chars,
            options: Default::default(),
            tools: Arc::from(Vec::new()),
        };
        let estimate = crate::providers::estimate_tokens("be brief", &all, &[]);
        assert_eq!(request(t).estimated_tokens(), estimate);
        assert_eq!(request(w).estimated_tokens(), estimate);
    }
    assert!(tail.bytes() < whole.bytes());
    assert_eq!(tail.kept_bytes, size_of(&all[all.len() - 1..]));
}

#[test]
fn a_tail_only_snapshot_is_the_whole_ones() {
    let histories = Histories::new(1 << 20);
    let (one, two) = (session(), session());
    let (first, second) = (TurnId::generate(), TurnId::generate());
    for (session, turn, tail_only) in [(&one, &first, false), (&two, &second, true)] {
        histories.put(
            &session.tenant_id,
            &session.id,
            Cached {
                exact_for: Some(*turn),
                tail_only,
                ..Cached::new(session.clone())
            },
        );
        histories.added(turn, &session.id, vec![user("hi"), assistant("hi")]);
        histories.added(turn, &session.id, vec![user("again"), call("c1")]);
    }
    let a = histories.snapshot(&one.tenant_id, &one.id).unwrap();
    let b = histories.snapshot(&two.tenant_id, &two.id).unwrap();
    assert_eq!(a.remembered.history_len, 4);
    assert_eq!(b.remembered.history_len, a.remembered.history_len);
    assert_eq!(b.history_bytes, a.history_bytes);
    assert_eq!(b.pending, a.pending);
    assert_eq!(b.pending.len(), 1);
    // An admission on it continues it at the whole history's length.
    let third = TurnId::generate();
    let answer = HistoryMessage::Tool {
        tool_call_id: "c1".into(),
        content: Content::Text("42".into()),
    };
    histories.admitted(&third, &b, &two, vec![answer]);
    let after = histories.snapshot(&two.tenant_id, &two.id).unwrap();
    assert_eq!(after.remembered.history_len, 5);
    assert!(after.pending.is_empty());
}

#[test]
fn entries_stay_within_the_budget() {
    let text = "x".repeat(100);
    let one = size_of(&[user(&text)]);
    // Entries of two messages: four of them fill the budget.
    let histories = Histories::new((ENTRY_BYTES + 2 * one) * 4);
    let sessions: Vec<Session> = (0..4).map(|_| session()).collect();
    for session in &sessions {
        let turn = TurnId::generate();
        remembered(&histories, session, &turn);
        histories.added(&turn, &session.id, vec![user(&text), user(&text)]);
    }
    let state = histories.state.lock().unwrap();
    assert_eq!(state.bytes, (ENTRY_BYTES + 2 * one) * 4);
    drop(state);
    // A fifth pushes the least recently used one out.
    let turn = TurnId::generate();
    let fifth = session();
    remembered(&histories, &fifth, &turn);
    histories.added(&turn, &fifth.id, vec![user(&text), user(&text)]);
    assert!(
        histories
            .snapshot(&sessions[0].tenant_id, &sessions[0].id)
            .is_none()
    );
    assert!(histories.snapshot(&fifth.tenant_id, &fifth.id).is_some());
    // One larger than a quarter of the budget is not kept.
    histories.added(&turn, &fifth.id, vec![user(&text)]);
    assert!(histories.snapshot(&fifth.tenant_id, &fifth.id).is_none());
    assert!(histories.state.lock().unwrap().bytes <= (ENTRY_BYTES + 2 * one) * 4);
}

/// A session no entry remembers, read for a provider that reads only the end of its history:
/// the end comes from its last user message on, the whole history is measured, and nothing
/// before the end is read (a message there that no longer reads as one does not matter).
#[tokio::test]
async fn a_forgotten_session_is_read_from_its_last_user_message_on() {
    let test = crate::engine::testing::TestEngine::start().await;
    let session = test.session("echo").await;
    for i in 0..5 {
        test.run_turn(&session.id, &format!("turn {i}")).await;
    }
    let whole = test
        .store
        .list_history(&test.tenant, &session.id, crate::model::HistoryType::Full)
        .await
        .unwrap();
    assert_eq!(whole.len(), 10);
    test.store.garble_history_message(&session.id, 0).await;
    // What the history measures once its first message is garbled.
    let whole_bytes = size_of(&whole[1..]) + r#"{"role":"garbled"}"#.len();
    assert!(
        test.store
            .list_history_since(&test.tenant, &session.id, 0)
            .await
            .is_err(),
        "a whole read meets the garbled message"
    );

    let histories = Histories::new(1 << 20);
    let turn = TurnId::generate();
    let read = histories
        .compacted(&test.store, &session, &turn, true)
        .await
        .unwrap();
    let messages: Vec<HistoryMessage> = read.messages.iter().map(|m| (**m).clone()).collect();
    assert_eq!(messages, whole[8..], "the last user message and its answer");
    // The database measures a message as its JSON text, as a remembered one is measured.
    assert_eq!(read.chars, whole_bytes);
    let snapshot = histories
        .snapshot(&test.tenant, &session.id)
        .expect("remembered");
    assert_eq!(snapshot.remembered.history_len, 10, "the whole length");
    // The entry is remembered, exact for its turn: asked again, it does not read the end.
    test.store.garble_history_message(&session.id, 9).await;
    let again = histories
        .compacted(&test.store, &session, &turn, true)
        .await
        .unwrap();
    assert_eq!(again.messages.len(), 2);
    assert_eq!(again.chars, read.chars);

    // A provider that reads the whole history still reads it whole.
    let whole_reader = Histories::new(1 << 20);
    assert!(
        whole_reader
            .compacted(&test.store, &session, &TurnId::generate(), false)
            .await
            .is_err()
    );
    test.stop().await;
}
