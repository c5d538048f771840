// Sessions: the tenant's sessions a page at a time; one session's full and compacted
// histories side by side, its options (secrets read back as ***), its turns, and delete.

import { api } from '../api.js';
import { ConfirmButton, ErrorNote, Json, Loading, MoreButton, Status, Time, useLoad, usePaged } from '../components.jsx';
import { href, navigate } from '../router.js';
import { Entry, fromHistory } from '../transcript.jsx';
import { explain } from './chat.jsx';

export function Sessions({ route }) {
  return route[0] ? <SessionDetail id={route[0]} key={route[0]} /> : <SessionList />;
}

function SessionList() {
  const paged = usePaged(async (after) => {
    const page = await api.sessions.list(after, 25);
    return { items: page.sessions, next: page.next };
  }, []);
  return (
    <section class="card">
      <h1>Sessions</h1>
      <ErrorNote error={explain(paged.error)} />
      <div class="table-wrap">
        <table>
          <caption class="visually-hidden">Your sessions, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Session</th>
              <th scope="col">Agent</th>
              <th scope="col">Created</th>
              <th scope="col">Open</th>
            </tr>
          </thead>
          <tbody>
            {paged.items.map((s) => (
              <tr key={s.sessionId}>
                <td>
                  <a href={href(`sessions/${s.sessionId}`)}>
                    <code>{s.sessionId}</code>
                  </a>
                </td>
                <td>{s.agent?.name}</td>
                <td>
                  <Time value={s.createdAt} />
                </td>
                <td>
                  <a href={href(`chat/${s.sessionId}`)} aria-label={`Chat in ${s.sessionId}`}>
                    Chat
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!paged.loading && !paged.items.length && !paged.error && <p class="muted">No sessions yet.</p>}
      <MoreButton paged={paged} />
    </section>
  );
}

async function historyOrNone(id, type) {
  try {
    return await api.sessions.wholeHistory(id, type, 1000);
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

function History({ title, history }) {
  if (!history) return <p class="muted">This agent keeps no {title.toLowerCase()}.</p>;
  const { entries, results } = fromHistory(history.messages);
  return (
    <>
      {entries.map((entry, i) => (
        <Entry key={i} entry={entry} results={results} />
      ))}
      {!entries.length && <p class="muted">Empty.</p>}
      {history.truncated && <p class="muted">Only the first {history.messages.length} messages are shown.</p>}
    </>
  );
}

function SessionDetail({ id }) {
  const [data, error] = useLoad(async () => {
    const [session, full, compacted, turns] = await Promise.all([
      api.sessions.get(id),
      historyOrNone(id, 'full'),
      historyOrNone(id, 'compacted'),
      api.turns.list(id, undefined, 50),
    ]);
    return { session, full, compacted, turns: turns.turns };
  }, [id]);
  if (error) return <ErrorNote error={explain(error)} />;
  if (!data) return <Loading what="Loading the session" />;
  const { session } = data;
  return (
    <div class="stack">
      <section class="card">
        <h1>
          Session <code>{session.sessionId}</code>
        </h1>
        <dl class="facts">
          <dt>Agent</dt>
          <dd>{session.agent.name}</dd>
          <dt>Created</dt>
          <dd>
            <Time value={session.createdAt} />
          </dd>
          <dt>Server tools</dt>
          <dd>
            {session.agent.tools.length
              ? session.agent.tools.map((t) => `${t.name}${t.trust ? ' (trusted)' : ' (asks permission)'}`).join(', ')
              : 'none'}
          </dd>
          <dt>Client tools</dt>
          <dd>{(session.tools || []).map((t) => t.name).join(', ') || 'none'}</dd>
        </dl>
        <h2 class="small">Options</h2>
        <Json value={session.agent.options} label="Options (secrets read back as ***)" />
        <div class="row">
          <a class="button" href={href(`chat/${session.sessionId}`)}>
            Continue in chat
          </a>
          <ConfirmButton
            label="Delete session"
            danger
            question={`Delete ${session.sessionId} and its whole history? This cannot be undone.`}
            onConfirm={async () => {
              await api.sessions.remove(session.sessionId);
              navigate('sessions');
            }}
          />
        </div>
      </section>
      <section class="card">
        <h2>Turns</h2>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Turn</th>
                <th scope="col">Status</th>
                <th scope="col">Stop</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {data.turns.map((t) => (
                <tr key={t.turnId}>
                  <td>
                    <a href={href(`turns/${session.sessionId}/${t.turnId}`)}>
                      <code>{t.turnId}</code>
                    </a>
                  </td>
                  <td>
                    <Status value={t.status} />
                  </td>
                  <td>{t.stopReason || ''}</td>
                  <td>
                    <Time value={t.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
      <div class="side-by-side">
        <section class="card" aria-labelledby="full-history">
          <h2 id="full-history">Full history</h2>
          <History title="Full history" history={data.full} />
        </section>
        <section class="card" aria-labelledby="compacted-history">
          <h2 id="compacted-history">Compacted history</h2>
          <History title="Compacted history" history={data.compacted} />
        </section>
      </div>
    </div>
  );
}
