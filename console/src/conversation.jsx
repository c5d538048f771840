// One session's conversation: its history, then turns streamed in delta mode.
//
// A running turn's rendered state and its last event id are kept in sessionStorage as its
// events arrive, so that after a reload (or a dropped connection) the console follows the
// turn again from that id (`Last-Event-ID`): the reply continues with no gap and no
// duplicate, while the turn itself never stopped on the server. A turn request is retried
// with the same `Idempotency-Key`, so a retry never starts a second turn.

import { useEffect, useRef, useState } from 'preact/hooks';
import { api, post, stream } from './api.js';
import { ErrorNote, Loading } from './components.jsx';
import { explain } from './pages/chat.jsx';
import { href } from './router.js';
import { Entry, applyEvent, fromHistory, unanswered } from './transcript.jsx';

const KEPT = (session) => `agentry.console.turn.${session}`;
const RETRY_DELAYS = [500, 1000, 2000, 4000, 8000];

function keep(session, value) {
  if (value) sessionStorage.setItem(KEPT(session), JSON.stringify(value));
  else sessionStorage.removeItem(KEPT(session));
}

function kept(session) {
  try {
    return JSON.parse(sessionStorage.getItem(KEPT(session)));
  } catch {
    return null;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const networkError = (e) => e && !(e.status > 0) && e.name !== 'AbortError';

async function loadHistory(id) {
  try {
    return (await api.sessions.wholeHistory(id, 'full')).messages;
  } catch (e) {
    if (e.status !== 404) throw e;
    return (await api.sessions.wholeHistory(id, 'compacted')).messages;
  }
}

export function Conversation({ id }) {
  const [session, setSession] = useState(null);
  const [error, setError] = useState(null);
  // Stored history: entries and results; `live`: the turn being streamed, after them.
  const [past, setPast] = useState(null);
  const [live, setLive] = useState(null);
  const [turn, setTurn] = useState(null); // {turnId, lastEventId, state: streaming|reconnecting|ended, stop}
  const [notice, setNotice] = useState(null);
  const abort = useRef(null);
  const liveRef = useRef(null);
  const turnRef = useRef(null);

  const update = (next) => {
    liveRef.current = next;
    setLive(next);
  };
  const updateTurn = (next) => {
    turnRef.current = next;
    setTurn(next);
  };

  useEffect(() => {
    let gone = false;
    (async () => {
      try {
        const [info, messages, turns] = await Promise.all([
          api.sessions.get(id),
          loadHistory(id),
          api.turns.list(id, undefined, 1),
        ]);
        if (gone) return;
        setSession(info);
        const last = turns.turns?.[0];
        const running = last && (last.status === 'queued' || last.status === 'running');
        const saved = kept(id);
        if (running) {
          if (saved && saved.turnId === last.turnId) {
            const lastUser = messages.map((m) => m.role).lastIndexOf('user');
            setPast(fromHistory(messages.slice(0, saved.base ?? Math.max(lastUser, 0))));
            update({ entries: saved.entries, results: saved.results, split: saved.split, base: saved.base });
            follow(last.turnId, saved.lastEventId, saved.base);
          } else {
            // Opened elsewhere: the turn's input is the history's last user message; its
            // output is replayed from the turn's first event.
            const lastUser = messages.map((m) => m.role).lastIndexOf('user');
            const base = lastUser + 1;
            setPast(fromHistory(messages.slice(0, base)));
            update({ entries: [], results: {}, split: false, base });
            follow(last.turnId, 0, base);
          }
        } else {
          keep(id, null);
          setPast(fromHistory(messages));
          update(null);
        }
      } catch (e) {
        if (!gone) setError(explain(e));
      }
    })();
    return () => {
      gone = true;
      abort.current?.abort();
    };
  }, [id]);

  /** Applies an event of the followed turn, and keeps where it is. */
  const onEvent = (turnId, base) => (event) => {
    const current = turnRef.current;
    if (event.id !== null && current && event.id <= current.lastEventId) return; // seen
    const next = applyEvent(liveRef.current || { entries: [], results: {}, split: false }, event);
    next.base = base;
    update(next);
    const lastEventId = event.id ?? current?.lastEventId ?? 0;
    const stopped = event.event === 'turn_stop';
    updateTurn({ ...current, turnId, lastEventId, state: stopped ? 'ended' : 'streaming', stop: stopped ? event.data : null });
    keep(id, stopped ? null : { turnId, lastEventId, base, entries: next.entries, results: next.results, split: next.split });
  };

  /** Follows a turn's events after `after`, reconnecting from the last id seen. */
  async function follow(turnId, after, base) {
    const controller = new AbortController();
    abort.current = controller;
    updateTurn({ turnId, lastEventId: after, state: 'streaming', stop: null });
    for (let attempt = 0; ; attempt++) {
      try {
        await stream('GET', `/sessions/${id}/turns/${turnId}/events`, {
          query: { stream: 'delta' },
          lastEventId: turnRef.current.lastEventId || undefined,
          signal: controller.signal,
          onEvent: onEvent(turnId, base),
        });
      } catch (e) {
        if (controller.signal.aborted) return;
        if (!networkError(e) || attempt >= RETRY_DELAYS.length) {
          setNotice(explain(e));
          updateTurn({ ...turnRef.current, state: 'ended' });
          return;
        }
        updateTurn({ ...turnRef.current, state: 'reconnecting' });
        await sleep(RETRY_DELAYS[attempt]);
        continue;
      }
      if (turnRef.current.state === 'ended' || controller.signal.aborted) return;
      // The server closed the stream before turn_stop: follow again from the last id.
      updateTurn({ ...turnRef.current, state: 'reconnecting' });
      await sleep(RETRY_DELAYS[Math.min(attempt, RETRY_DELAYS.length - 1)]);
    }
  }

  /** Starts a turn with `messages`; retried with the same Idempotency-Key. */
  async function startTurn(messages, extra = {}) {
    setNotice(null);
    // What was streamed before joins the conversation above the new turn.
    const before = mergeLive(past, liveRef.current);
    setPast(before);
    // The answers show at once; a tool_result event replaces a permission's placeholder.
    const results = {};
    for (const m of messages) {
      if (m.role === 'tool') results[m.toolCallId] = m.content;
      if (m.role === 'tool_permission') results[m.toolCallId] = m.granted ? '(permission granted)' : 'Tool call denied';
    }
    const entries = messages
      .filter((m) => m.role === 'user')
      .map((m) => ({ role: 'user', blocks: [{ type: 'text', text: m.content }] }));
    update({ entries, results, split: true, base: null });
    const key = crypto.randomUUID();
    const controller = new AbortController();
    abort.current = controller;
    const body = { stream: 'delta', messages, ...extra };
    let turnId = null;
    updateTurn({ turnId: null, lastEventId: 0, state: 'streaming', stop: null });
    const historyLength = (await countHistory(id)) ?? null;
    for (let attempt = 0; ; attempt++) {
      try {
        await stream('POST', `/sessions/${id}/turns`, {
          body,
          headers: { 'Idempotency-Key': key },
          lastEventId: turnRef.current.lastEventId || undefined,
          signal: controller.signal,
          onOpen: ({ turnId: opened }) => {
            turnId = opened;
            updateTurn({ ...turnRef.current, turnId });
          },
          onEvent: (event) => onEvent(turnId, historyLength)(event),
        });
      } catch (e) {
        if (controller.signal.aborted) return;
        if (!networkError(e) || attempt >= RETRY_DELAYS.length) {
          setNotice(explain(e));
          updateTurn({ ...turnRef.current, state: 'ended' });
          return;
        }
        updateTurn({ ...turnRef.current, state: 'reconnecting' });
        await sleep(RETRY_DELAYS[attempt]);
        if (turnId) return follow(turnId, turnRef.current.lastEventId, historyLength);
        continue; // the same key: the same turn
      }
      if (turnRef.current.state !== 'ended' && turnId) return follow(turnId, turnRef.current.lastEventId, historyLength);
      return;
    }
  }

  if (error) return <ErrorNote error={error} />;
  if (!session || !past) return <Loading what="Loading the session" />;

  const all = mergeLive(past, live);
  const running = turn && turn.state !== 'ended';
  const pending = running ? [] : unanswered(all.entries, all.results);
  const clientTools = new Set((session.tools || []).map((t) => t.name));

  return (
    <div class="conversation">
      <header class="conversation-head">
        <h1>
          {session.agent.name}{' '}
          {session.agent.version && (
            <span class="badge" data-testid="agent-version">
              version {session.agent.version}
            </span>
          )}{' '}
          <span class="muted small">{session.sessionId}</span>
        </h1>
        <div class="row">
          <a href={href(`sessions/${session.sessionId}`)}>Session details</a>
          {turn?.turnId && <a href={href(`turns/${session.sessionId}/${turn.turnId}`)}>Inspect this turn</a>}
        </div>
      </header>
      <div class="transcript" aria-live="polite" aria-busy={running ? 'true' : 'false'} data-testid="transcript">
        {all.entries.map((entry, i) => (
          <Entry key={i} entry={entry} results={all.results} />
        ))}
        {!all.entries.length && <p class="muted">No messages yet: say something.</p>}
      </div>
      <TurnStatus turn={turn} onCancel={() => turn?.turnId && api.turns.cancel(id, turn.turnId).catch(setNotice)} />
      <ErrorNote error={notice} />
      {pending.length > 0 ? (
        <PendingCalls calls={pending} clientTools={clientTools} onAnswer={(answers) => startTurn(answers)} />
      ) : (
        <Composer disabled={running} session={session} onSend={(text, tools) => startTurn([{ role: 'user', content: text }], tools ? { tools } : {})} />
      )}
    </div>
  );
}

async function countHistory(id) {
  try {
    let count = 0;
    let after;
    do {
      const page = await api.sessions.history(id, 'full', after, 1000);
      count += page.history.full.length;
      after = page.next;
    } while (after);
    return count;
  } catch {
    return null;
  }
}

function mergeLive(past, live) {
  if (!live) return past;
  return { entries: [...past.entries, ...live.entries], results: { ...past.results, ...live.results } };
}

function TurnStatus({ turn, onCancel }) {
  if (!turn) return null;
  if (turn.state === 'ended') {
    const stop = turn.stop;
    if (!stop) return null;
    return (
      <p class={stop.stopReason === 'error' ? 'error' : 'muted'} role="status" data-testid="turn-stop">
        Turn ended: {stop.stopReason}
        {stop.error ? ` — ${stop.error.code}: ${stop.error.message}` : ''}
      </p>
    );
  }
  return (
    <div class="row" role="status">
      <span class="spinner" aria-hidden="true" />
      <span data-testid="turn-state">
        {turn.state === 'reconnecting' ? 'Connection lost: resuming from event ' + turn.lastEventId + '…' : 'The agent is answering…'}
      </span>
      <button type="button" onClick={onCancel} disabled={!turn.turnId}>
        Cancel
      </button>
    </div>
  );
}

function Composer({ disabled, session, onSend }) {
  const [text, setText] = useState('');
  const [tools, setTools] = useState(null);
  const [failure, setFailure] = useState(null);
  const submit = (event) => {
    event.preventDefault();
    if (!text.trim()) return;
    let declared = null;
    if (tools !== null) {
      try {
        declared = JSON.parse(tools);
        if (!Array.isArray(declared)) throw new Error('must be a JSON array');
      } catch (e) {
        setFailure(new Error(`Client tools: ${e.message}`));
        return;
      }
    }
    setFailure(null);
    onSend(text, declared);
    setText('');
    setTools(null);
  };
  return (
    <form class="composer" onSubmit={submit}>
      <label for="message">Message</label>
      <textarea
        id="message"
        rows={3}
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) submit(e);
        }}
        placeholder="Ctrl+Enter sends"
      />
      <details>
        <summary>Client tools for the next turns</summary>
        <label for="turn-tools">Client tools (JSON array; replaces the session's)</label>
        <textarea
          id="turn-tools"
          rows={6}
          spellcheck={false}
          value={tools ?? JSON.stringify(session.tools || [], null, 2)}
          onInput={(e) => setTools(e.currentTarget.value)}
        />
      </details>
      <ErrorNote error={failure} />
      <button class="primary" type="submit" disabled={disabled}>
        Send
      </button>
    </form>
  );
}

/** Tool calls waiting for the user: permission for server tools, results for client tools. */
function PendingCalls({ calls, clientTools, onAnswer }) {
  const [answers, setAnswers] = useState({});
  const [texts, setTexts] = useState({});
  const decide = (call, answer) => {
    const next = { ...answers, [call.id]: answer };
    setAnswers(next);
    if (calls.every((c) => c.id in next)) onAnswer(calls.map((c) => next[c.id]));
  };
  return (
    <section class="card pending" aria-label="Waiting for you">
      <h2 class="small">The agent is waiting for you</h2>
      {calls.map((call) =>
        clientTools.has(call.name) ? (
          <div class="pending-call" key={call.id}>
            <p>
              Client tool <code>{call.name}</code> was called with{' '}
              <code>{JSON.stringify(call.input ?? {})}</code>: answer it by hand.
            </p>
            <label for={`answer-${call.id}`}>Result of {call.name}</label>
            <textarea id={`answer-${call.id}`} rows={3} value={texts[call.id] || ''} onInput={(e) => setTexts({ ...texts, [call.id]: e.currentTarget.value })} />
            <button type="button" disabled={call.id in answers} onClick={() => decide(call, { role: 'tool', toolCallId: call.id, content: texts[call.id] || '' })}>
              Send result
            </button>
          </div>
        ) : (
          <div class="pending-call" key={call.id}>
            <p>
              Server tool <code>{call.name}</code> asks permission to run with{' '}
              <code>{JSON.stringify(call.input ?? {})}</code>.
            </p>
            <div class="row">
              <button type="button" class="primary" disabled={call.id in answers} onClick={() => decide(call, { role: 'tool_permission', toolCallId: call.id, granted: true })}>
                Approve {call.name}
              </button>
              <button type="button" class="danger" disabled={call.id in answers} onClick={() => decide(call, { role: 'tool_permission', toolCallId: call.id, granted: false, reason: 'denied in the console' })}>
                Deny {call.name}
              </button>
            </div>
          </div>
        ),
      )}
    </section>
  );
}
