// Runs and tasks: the tenant's ACP runs and A2A tasks (the engine keeps both as runs), with
// their status and links to their turns.

import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorNote, MoreButton, Status, Time, usePaged } from '../components.jsx';
import { href } from '../router.js';
import { explain } from './chat.jsx';

const STATUSES = ['', 'created', 'running', 'awaiting', 'completed', 'failed', 'cancelled', 'interrupted'];

export function Runs() {
  const [status, setStatus] = useState('');
  const paged = usePaged(async (after) => {
    const page = await api.runs.list(after, status || undefined);
    return { items: page.runs, next: page.next };
  }, [status]);
  return (
    <section class="card">
      <h1>Runs &amp; tasks</h1>
      <p class="muted">
        An ACP run and an A2A task are the same thing here: a chain of turns answering one request. Most recently changed first.
      </p>
      <label for="run-status">Status</label>
      <select id="run-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
        {STATUSES.map((s) => (
          <option key={s} value={s}>
            {s || 'any'}
          </option>
        ))}
      </select>
      <ErrorNote error={explain(paged.error)} />
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Run / task</th>
              <th scope="col">Agent</th>
              <th scope="col">Status</th>
              <th scope="col">Turns</th>
              <th scope="col">Changed</th>
            </tr>
          </thead>
          <tbody>
            {paged.items.map((run) => (
              <tr key={run.runId}>
                <td>
                  <code>{run.runId}</code>
                  <div class="small">
                    <a href={href(`sessions/${run.sessionId}`)}>session</a>
                  </div>
                </td>
                <td>{run.agent}</td>
                <td>
                  <Status value={run.status} />
                </td>
                <td>
                  <ol class="plain">
                    {run.turns.map((turn) => (
                      <li key={turn}>
                        <a href={href(`turns/${run.sessionId}/${turn}`)}>
                          <code>{turn}</code>
                        </a>
                      </li>
                    ))}
                  </ol>
                </td>
                <td>
                  <Time value={run.updatedAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!paged.loading && !paged.items.length && !paged.error && <p class="muted">No runs yet: ACP runs and A2A tasks show here.</p>}
      <MoreButton paged={paged} />
    </section>
  );
}
