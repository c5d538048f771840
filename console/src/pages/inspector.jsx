// Turn inspector: a turn's stored events with their ids, kinds, times and data, a timeline
// of the turn, its usage, and a replay of its stream from any event id.

import { useRef, useState } from 'preact/hooks';
import { api, stream } from '../api.js';
import { ErrorNote, Json, Loading, MoreButton, Status, Time, useLoad, usePaged } from '../components.jsx';
import { href } from '../router.js';
import { explain } from './chat.jsx';

export function Inspector({ route }) {
  const [session, turn] = route;
  if (session && turn) return <TurnView session={session} turn={turn} key={turn} />;
  return <Picker session={session} />;
}

function Picker({ session }) {
  const sessions = usePaged(async (after) => {
    const page = await api.sessions.list(after, 20);
    return { items: page.sessions, next: page.next };
  }, []);
  const [turns, error] = useLoad(() => (session ? api.turns.list(session, undefined, 50) : null), [session]);
  return (
    <section class="card">
      <h1>Turn inspector</h1>
      <p class="muted">Pick a session, then one of its turns.</p>
      <ErrorNote error={explain(sessions.error || error)} />
      <div class="side-by-side">
        <div>
          <h2 class="small">Sessions</h2>
          <ul class="plain">
            {sessions.items.map((s) => (
              <li key={s.sessionId}>
                <a href={href(`turns/${s.sessionId}`)} aria-current={s.sessionId === session ? 'page' : undefined}>
                  <code>{s.sessionId}</code> {s.agent?.name}
                </a>
              </li>
            ))}
          </ul>
          <MoreButton paged={sessions} />
        </div>
        <div>
          <h2 class="small">Turns</h2>
          {session && !turns && !error && <Loading />}
          <ul class="plain">
            {(turns?.turns || []).map((t) => (
              <li key={t.turnId}>
                <a href={href(`turns/${session}/${t.turnId}`)}>
                  <code>{t.turnId}</code>
                </a>{' '}
                <Status value={t.status} /> <Time value={t.createdAt} />
              </li>
            ))}
          </ul>
        </div>
      </div>
    </section>
  );
}

async function wholeLog(session, turn) {
  const events = [];
  let after = 0;
  for (let i = 0; i < 50; i++) {
    const page = await api.turns.log(session, turn, after, 1000);
    events.push(...page.events);
    if (page.next === undefined || page.next === null || !page.events.length) break;
    after = page.next;
  }
  return events;
}

const ms = (from, to) => new Date(to) - new Date(from);

function summarize(turn, events) {
  const start = events.find((e) => e.kind === 'turn_start')?.createdAt || turn.startedAt || turn.createdAt;
  const stop = events.find((e) => e.kind === 'turn_stop')?.createdAt || turn.finishedAt;
  const firstOutput = events.find((e) => ['text_delta', 'thinking_delta', 'tool_call'].includes(e.kind));
  const spans = [];
  let open = null;
  for (const e of events) {
    if (e.kind === 'message_start') open = e.createdAt;
    if (e.kind === 'message_stop' && open) {
      spans.push({ kind: 'model step', from: open, to: e.createdAt });
      open = null;
    }
    if (e.kind === 'tool_call') spans.push({ kind: 'tool call', from: e.createdAt, to: e.createdAt, label: e.data.name });
    if (e.kind === 'tool_result') spans.push({ kind: 'tool result', from: e.createdAt, to: e.createdAt });
  }
  return {
    start,
    stop,
    total: start && stop ? ms(start, stop) : null,
    firstOutput: firstOutput && start ? ms(start, firstOutput.createdAt) : null,
    steps: events.filter((e) => e.kind === 'message_start').length,
    toolCalls: events.filter((e) => e.kind === 'tool_call').length,
    spans,
  };
}

function Timeline({ summary }) {
  const { start, total, spans } = summary;
  if (!start || !total) return <p class="muted">The turn has not ended: no timeline yet.</p>;
  const x = (at) => Math.max(0, Math.min(1000, (ms(start, at) / total) * 1000));
  return (
    <figure class="timeline">
      <svg viewBox="0 0 1000 60" role="img" aria-label={`Timeline: ${summary.steps} model steps and ${summary.toolCalls} tool calls over ${total} ms`} preserveAspectRatio="none">
        <rect class="tl-turn" x="0" y="24" width="1000" height="12" />
        {spans.map((s, i) =>
          s.kind === 'model step' ? (
            <rect key={i} class="tl-step" x={x(s.from)} y="18" width={Math.max(2, x(s.to) - x(s.from))} height="24">
              <title>model step {ms(s.from, s.to)} ms</title>
            </rect>
          ) : (
            <rect key={i} class={s.kind === 'tool call' ? 'tl-tool' : 'tl-result'} x={x(s.from) - 2} y="8" width="4" height="44">
              <title>{s.kind} {s.label || ''}</title>
            </rect>
          ),
        )}
      </svg>
      <figcaption class="small muted">
        <span class="key key-step" /> model step <span class="key key-tool" /> tool call <span class="key key-result" /> tool result
      </figcaption>
    </figure>
  );
}

function Replay({ session, turn, from, onClose }) {
  const [frames, setFrames] = useState([]);
  const [state, setState] = useState('idle');
  const [error, setError] = useState(null);
  const [mode, setMode] = useState('delta');
  const controller = useRef(null);
  const start = async () => {
    controller.current?.abort();
    controller.current = new AbortController();
    setFrames([]);
    setError(null);
    setState('streaming');
    try {
      await stream('GET', `/sessions/${session}/turns/${turn}/events`, {
        query: { stream: mode },
        lastEventId: from || undefined,
        signal: controller.current.signal,
        onEvent: (event) => setFrames((old) => [...old, event]),
      });
      setState('done');
    } catch (e) {
      if (e.name !== 'AbortError') setError(e);
      setState('done');
    }
  };
  return (
    <section class="card" aria-labelledby="replay-title">
      <h2 id="replay-title">Replay after event {from}</h2>
      <div class="row">
        <label for="replay-mode">Stream mode</label>
        <select id="replay-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
          <option value="delta">delta</option>
          <option value="message">message</option>
        </select>
        <button type="button" class="primary" onClick={start}>
          Replay
        </button>
        <button type="button" onClick={() => (controller.current?.abort(), onClose())}>
          Close
        </button>
        <span role="status" class="muted">
          {state === 'streaming' ? 'Streaming…' : state === 'done' ? `${frames.length} frames` : ''}
        </span>
      </div>
      <ErrorNote error={error} />
      <ol class="frames" data-testid="replay-frames">
        {frames.map((f, i) => (
          <li key={i}>
            <code>id: {f.id ?? '—'}</code> <strong>{f.event}</strong> <code class="muted">{JSON.stringify(f.data)}</code>
          </li>
        ))}
      </ol>
    </section>
  );
}

function TurnView({ session, turn }) {
  const [data, error, reload] = useLoad(async () => {
    const [record, events] = await Promise.all([api.turns.get(session, turn), wholeLog(session, turn)]);
    return { record, events };
  }, [session, turn]);
  const [replayFrom, setReplayFrom] = useState(null);
  if (error) return <ErrorNote error={explain(error)} />;
  if (!data) return <Loading what="Loading the turn" />;
  const { record, events } = data;
  const summary = summarize(record, events);
  return (
    <div class="stack">
      <section class="card">
        <h1>
          Turn <code>{record.turnId}</code>
        </h1>
        <p>
          In session <a href={href(`sessions/${session}`)}>
            <code>{session}</code>
          </a>{' '}
          · <Status value={record.status} /> {record.stopReason && <>· stop reason {record.stopReason}</>}{' '}
          <button type="button" onClick={reload}>
            Refresh
          </button>
        </p>
        {record.error && <ErrorNote error={record.error} prefix="Turn error" />}
        <dl class="facts">
          <dt>Time to first output</dt>
          <dd>{summary.firstOutput ?? '—'} ms</dd>
          <dt>Model steps</dt>
          <dd>{summary.steps}</dd>
          <dt>Tool calls</dt>
          <dd>{summary.toolCalls}</dd>
          <dt>Total</dt>
          <dd>{summary.total ?? '—'} ms</dd>
          <dt>Usage</dt>
          <dd>
            {record.usage.input_tokens} input tokens, {record.usage.output_tokens} output tokens, {record.usage.tool_calls} tool calls,{' '}
            {record.usage.wall_ms} ms
          </dd>
          <dt>Created</dt>
          <dd>
            <Time value={record.createdAt} />
          </dd>
        </dl>
        <Timeline summary={summary} />
      </section>
      {replayFrom !== null && <Replay session={session} turn={turn} from={replayFrom} onClose={() => setReplayFrom(null)} key={replayFrom} />}
      <section class="card">
        <h2>Stored events ({events.length})</h2>
        <div class="table-wrap">
          <table class="events" data-testid="event-table">
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Kind</th>
                <th scope="col">Time</th>
                <th scope="col">Data</th>
                <th scope="col">Replay</th>
              </tr>
            </thead>
            <tbody>
              {events.map((e) => (
                <tr key={e.id} data-event-id={e.id}>
                  <td>
                    <code>{e.id}</code>
                  </td>
                  <td>{e.kind}</td>
                  <td>
                    <time datetime={e.createdAt} title={e.createdAt}>
                      +{summary.start ? ms(summary.start, e.createdAt) : 0} ms
                    </time>
                  </td>
                  <td>
                    <code class="data">{JSON.stringify(e.data)}</code>
                  </td>
                  <td>
                    <button type="button" onClick={() => setReplayFrom(e.id)}>
                      Replay after {e.id}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <button type="button" onClick={() => setReplayFrom(0)}>
          Replay from the start
        </button>
      </section>
    </div>
  );
}
