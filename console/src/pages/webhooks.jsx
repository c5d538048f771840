// Webhooks: endpoints, their deliveries with attempts and last error, replay, rotate a
// secret (shown once). An admin sees any tenant's through `prefix`.

import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ConfirmButton, ErrorNote, MoreButton, ShownOnce, Status, Time, usePaged } from '../components.jsx';
import { explain } from './chat.jsx';

export function Webhooks({ prefix = '', nested = false }) {
  const hooks = api.webhooks(prefix);
  const paged = usePaged(async (after) => {
    const page = await hooks.list(after);
    return { items: page.endpoints, next: page.next };
  }, [prefix]);
  const [secret, setSecret] = useState(null);
  const [open, setOpen] = useState(null);
  const [failure, setFailure] = useState(null);

  const create = async (event) => {
    event.preventDefault();
    const element = event.currentTarget;
    const form = new FormData(element);
    const types = String(form.get('event_types') || '')
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    const body = { url: form.get('url') };
    if (form.get('description')) body.description = form.get('description');
    if (types.length) body.event_types = types;
    setFailure(null);
    try {
      const created = await hooks.create(body);
      setSecret({ label: `Signing secret of ${created.id}`, value: created.secret });
      element.reset();
      paged.reload();
    } catch (e) {
      setFailure(explain(e));
    }
  };

  return (
    <div class="stack">
      <section class="card">
        {nested ? <h2>Webhooks</h2> : <h1>Webhooks</h1>}
        {secret && <ShownOnce label={secret.label} value={secret.value} onDone={() => setSecret(null)} />}
        <ErrorNote error={explain(paged.error)} />
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Endpoint</th>
                <th scope="col">Events</th>
                <th scope="col">State</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {paged.items.map((e) => (
                <tr key={e.id}>
                  <td>
                    <code>{e.id}</code>
                    <div class="small break">{e.url}</div>
                    {e.description && <div class="small muted">{e.description}</div>}
                    {e.run_id && <div class="small muted">run {e.run_id}</div>}
                  </td>
                  <td class="small">{(e.event_types || []).join(', ') || 'all'}</td>
                  <td>
                    <Status value={e.enabled ? 'enabled' : 'disabled'} />
                    {e.disabled_reason && <div class="small error-text">{e.disabled_reason}</div>}
                  </td>
                  <td class="actions">
                    <button type="button" onClick={() => setOpen(open === e.id ? null : e.id)} aria-expanded={open === e.id}>
                      Deliveries
                    </button>
                    <button type="button" onClick={() => hooks.update(e.id, { enabled: !e.enabled }).then(paged.reload, setFailure)}>
                      {e.enabled ? 'Disable' : 'Enable'}
                    </button>
                    {!e.run_id && (
                      <ConfirmButton
                        label="Rotate secret"
                        question={`Rotate the signing secret of ${e.id}? The old one keeps signing for the overlap period.`}
                        onConfirm={async () => {
                          const rotated = await hooks.rotate(e.id);
                          setSecret({ label: `New signing secret of ${e.id}`, value: rotated.secret });
                        }}
                      />
                    )}
                    <ConfirmButton
                      label="Delete"
                      danger
                      question={`Delete ${e.id} and its deliveries?`}
                      onConfirm={async () => {
                        await hooks.remove(e.id);
                        paged.reload();
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {!paged.loading && !paged.items.length && !paged.error && <p class="muted">No endpoints.</p>}
        <MoreButton paged={paged} />
        <ErrorNote error={failure} />
      </section>
      {open && <Deliveries hooks={hooks} endpoint={open} key={open} />}
      <section class="card">
        <h2>Add an endpoint</h2>
        <form onSubmit={create}>
          <label for="hook-url">URL</label>
          <input id="hook-url" name="url" type="url" required placeholder="https://hooks.example.com/agentry" />
          <label for="hook-description">Description</label>
          <input id="hook-description" name="description" />
          <label for="hook-types">Event types (comma-separated; empty: all)</label>
          <input id="hook-types" name="event_types" placeholder="turn.completed, turn.failed" />
          <button class="primary" type="submit">
            Add endpoint
          </button>
        </form>
      </section>
    </div>
  );
}

function Deliveries({ hooks, endpoint }) {
  const paged = usePaged(async (after) => {
    const page = await hooks.deliveries(endpoint, after);
    return { items: page.deliveries, next: page.next };
  }, [endpoint]);
  const [failure, setFailure] = useState(null);
  const [replayed, setReplayed] = useState(null);
  return (
    <section class="card" aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">
        Deliveries of <code>{endpoint}</code>
      </h2>
      <ErrorNote error={paged.error || failure} />
      {replayed && <p role="status">Delivery {replayed} is queued again.</p>}
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Message</th>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last attempt</th>
              <th scope="col">Replay</th>
            </tr>
          </thead>
          <tbody>
            {paged.items.map((d) => (
              <tr key={d.id}>
                <td>
                  <code>{d.id}</code>
                  <div class="small muted">
                    <Time value={d.created_at} />
                  </div>
                </td>
                <td>{d.event_type}</td>
                <td>
                  <Status value={d.status} />
                </td>
                <td>{d.attempts}</td>
                <td class="small">
                  <Time value={d.last_attempt_at} />
                  {d.last_status && <div>HTTP {d.last_status}</div>}
                  {d.last_error && <div class="error-text">{d.last_error}</div>}
                </td>
                <td>
                  <button
                    type="button"
                    aria-label={`Replay ${d.id}`}
                    onClick={() => hooks.replay(endpoint, d.id).then(() => (setReplayed(d.id), paged.reload()), setFailure)}
                  >
                    Replay
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!paged.loading && !paged.items.length && !paged.error && <p class="muted">No deliveries yet.</p>}
      <MoreButton paged={paged} />
    </section>
  );
}
