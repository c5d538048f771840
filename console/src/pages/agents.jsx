// Agents: the tenant's own agents (create, edit as a form or as JSON, versions with a diff
// between any two, publish, roll back, archive, restore, delete) and the platform's agents,
// read-only. An admin sees any tenant's through `prefix` (`/admin/tenants/{id}`), under
// `base` (the route the links start from).

import { useEffect, useState } from 'preact/hooks';
import { diffLines } from 'diff';
import { api } from '../api.js';
import { ConfirmButton, ErrorNote, Loading, MoreButton, Status, Time, useLoad, usePaged } from '../components.jsx';
import { href, navigate } from '../router.js';
import { explain } from './chat.jsx';

export function Agents({ route, prefix = '', base = 'agents' }) {
  const name = route[0];
  if (name === 'new') return <NewAgent prefix={prefix} base={base} />;
  if (name) return <AgentDetail prefix={prefix} base={base} name={name} key={`${prefix}/${name}`} />;
  return <AgentList prefix={prefix} base={base} />;
}

function AgentList({ prefix, base }) {
  const agents = api.agents(prefix);
  const paged = usePaged(async (after) => {
    const page = await agents.list(after);
    return { items: page.agents, next: page.next };
  }, [prefix]);
  return (
    <div class="stack">
      <section class="card">
        <div class="row spread">
          <h1>{prefix ? 'Agents of this tenant' : 'Your agents'}</h1>
          <a class="button primary" href={href(`${base}/new`)}>
            New agent
          </a>
        </div>
        <p class="muted small">
          Each change makes a new version; new sessions run the published one, open sessions keep the version they
          were opened on.
        </p>
        <ErrorNote error={explain(paged.error)} />
        <div class="table-wrap" tabIndex={0} role="region" aria-label="The tenant's agents">
          <table data-testid="agent-table">
            <caption class="visually-hidden">The tenant's agents, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Published</th>
                <th scope="col">Latest</th>
                <th scope="col">State</th>
                <th scope="col">Changed</th>
              </tr>
            </thead>
            <tbody>
              {paged.items.map((a) => (
                <tr key={a.id} data-agent={a.name}>
                  <td>
                    <a href={href(`${base}/${encodeURIComponent(a.name)}`)}>{a.name}</a>
                  </td>
                  <td>{a.published_version ? `v${a.published_version}` : <span class="muted">none</span>}</td>
                  <td>v{a.latest_version}</td>
                  <td>
                    <Status value={a.archived ? 'archived' : a.published_version ? 'published' : 'draft'} />
                  </td>
                  <td>
                    <Time value={a.updated_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {!paged.loading && !paged.items.length && !paged.error && <p class="muted">No agents yet.</p>}
        <MoreButton paged={paged} />
      </section>
      {!prefix && <PlatformAgents own={new Set(paged.items.map((a) => a.name))} />}
    </div>
  );
}

/** The agents `/meta` lists that are not the tenant's own: the platform's, read-only. */
function PlatformAgents({ own }) {
  const [meta, error] = useLoad(() => api.meta(), []);
  if (error) return <ErrorNote error={explain(error)} />;
  if (!meta) return <Loading what="Loading the platform's agents" />;
  const agents = (meta.agents || []).filter((a) => !own.has(a.name));
  return (
    <section class="card" aria-labelledby="platform-agents">
      <h2 id="platform-agents">Platform agents</h2>
      <p class="muted small">Configured by the operator: you can use them, not change them.</p>
      <div class="table-wrap" tabIndex={0} role="region" aria-label="Platform agents">
        <table data-testid="platform-agents">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Version</th>
              <th scope="col">Description</th>
              <th scope="col">Tools</th>
            </tr>
          </thead>
          <tbody>
            {agents.map((a) => (
              <tr key={a.name}>
                <td>
                  <code>{a.name}</code>
                  {a.title && <div class="small muted">{a.title}</div>}
                </td>
                <td>{a.version}</td>
                <td class="break">{a.description}</td>
                <td class="small">{(a.tools || []).map((t) => t.name).join(', ') || '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!agents.length && <p class="muted">None.</p>}
    </section>
  );
}

const STARTER = { name: '', title: '', description: '', connection: '', model: '', system_prompt: '' };

function NewAgent({ prefix, base }) {
  const save = async (spec) => {
    const made = await api.agents(prefix).create(spec);
    navigate(`${base}/${encodeURIComponent(made.name)}`);
  };
  return (
    <section class="card">
      <p>
        <a href={href(base)}>← Agents</a>
      </p>
      <h1>New agent</h1>
      <p class="muted small">
        Version 1 is made as a draft: publish it to open sessions on the agent by its name.
      </p>
      <Editor initial={STARTER} creating onSave={save} saveLabel="Create agent" />
    </section>
  );
}

function AgentDetail({ prefix, base, name }) {
  const agents = api.agents(prefix);
  const [state, setState] = useState(null);
  const [error, setError] = useState(null);
  // Reads the agent and its versions; a write's outcome is shown once they are read again,
  // so the next write sends the revision it made.
  const reload = async () => {
    const [current, versions] = await Promise.all([agents.get(name), agents.versions(name)]);
    setState({ agent: current, latest: current.version, versions: versions.versions });
  };
  useEffect(() => {
    reload().catch(setError);
  }, [prefix, name]);
  const [failure, setFailure] = useState(null);
  const [notice, setNotice] = useState(null);
  if (error) return <ErrorNote error={explain(error)} />;
  if (!state) return <Loading what="Loading the agent" />;
  const { agent, latest, versions } = state;
  const spec = latest.spec || {};

  const act = async (what, run) => {
    setFailure(null);
    setNotice(null);
    try {
      await run();
      await reload();
      setNotice(what);
    } catch (e) {
      setFailure(explain(e));
      if (e.status === 412) await reload().catch(setError);
    }
  };
  const publish = (version) =>
    act(
      version < (agent.published_version || 0) ? `Rolled back: v${version} is published.` : `v${version} is published.`,
      () => agents.publish(name, version, agent.revision),
    );

  return (
    <div class="stack">
      <section class="card">
        <p>
          <a href={href(base)}>← Agents</a>
        </p>
        <h1>
          Agent <span data-testid="agent-name">{agent.name}</span>
        </h1>
        {spec.title && <p data-testid="agent-title">{spec.title}</p>}
        {spec.description && (
          <p class="muted break" data-testid="agent-description">
            {spec.description}
          </p>
        )}
        <dl class="facts">
          <dt>Published</dt>
          <dd data-testid="published-version">
            {agent.published_version ? `v${agent.published_version}` : 'none yet (new sessions cannot open it by name)'}
          </dd>
          <dt>Latest</dt>
          <dd>v{agent.latest_version}</dd>
          <dt>State</dt>
          <dd>
            <Status value={agent.archived ? 'archived' : 'active'} />
          </dd>
          <dt>Changed</dt>
          <dd>
            <Time value={agent.updated_at} />
          </dd>
        </dl>
        {notice && (
          <p role="status" data-testid="agent-notice">
            {notice}
          </p>
        )}
        <ErrorNote error={failure} />
        <div class="row">
          {agent.published_version !== agent.latest_version && (
            <button type="button" class="primary" onClick={() => publish(agent.latest_version)}>
              Publish v{agent.latest_version}
            </button>
          )}
          {agent.archived ? (
            <button type="button" onClick={() => act('Restored.', () => agents.archive(name, false, agent.revision))}>
              Restore agent
            </button>
          ) : (
            <ConfirmButton
              label="Archive agent"
              question={`Archive ${agent.name}? It takes no new sessions and leaves the agent lists; its open sessions go on.`}
              onConfirm={() => act('Archived.', () => agents.archive(name, true, agent.revision))}
            />
          )}
          <ConfirmButton
            label="Delete agent"
            danger
            question={`Delete ${agent.name} and all its versions? Its sessions stay, but cannot run another turn. This cannot be undone.`}
            confirmLabel={`Delete ${agent.name}`}
            onConfirm={async () => {
              await agents.remove(name);
              navigate(base);
            }}
          />
        </div>
      </section>
      <Versions agent={agent} versions={versions} onPublish={publish} key={agent.revision} />
      <section class="card" aria-labelledby="edit-title">
        <h2 id="edit-title">Edit: make v{agent.latest_version + 1}</h2>
        <p class="muted small">
          Saving makes a new draft version from the whole agent; the published version and the sessions on it do not
          change until you publish it.
        </p>
        <Editor
          initial={spec}
          key={agent.revision}
          saveLabel={`Save as v${agent.latest_version + 1}`}
          onSave={async (edited) => {
            setFailure(null);
            setNotice(null);
            try {
              await agents.update(name, edited, agent.revision);
            } catch (e) {
              if (e.status === 412) {
                throw Object.assign(
                  new Error('The agent was changed elsewhere since this page read it: nothing was saved. Reload to see it.'),
                  { code: e.code, status: e.status },
                );
              }
              throw e;
            }
            await reload();
            setNotice(`v${agent.latest_version + 1} is saved as a draft.`);
          }}
        />
      </section>
    </div>
  );
}

function Versions({ agent, versions, onPublish }) {
  const newest = versions[0]?.version;
  const [from, setFrom] = useState(versions[1]?.version ?? newest);
  const [to, setTo] = useState(newest);
  const byNumber = new Map(versions.map((v) => [v.version, v]));
  return (
    <section class="card" aria-labelledby="versions-title">
      <h2 id="versions-title">Versions</h2>
      <div class="table-wrap" tabIndex={0} role="region" aria-label="Versions">
        <table data-testid="version-table">
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Label</th>
              <th scope="col">Made by</th>
              <th scope="col">Made</th>
              <th scope="col">State</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {versions.map((v) => {
              const published = v.version === agent.published_version;
              const older = agent.published_version && v.version < agent.published_version;
              return (
                <tr key={v.version} data-version={v.version}>
                  <td>v{v.version}</td>
                  <td>{v.spec?.version || <span class="muted">—</span>}</td>
                  <td>
                    <code>{v.created_by}</code>
                  </td>
                  <td>
                    <Time value={v.created_at} />
                  </td>
                  <td>{published ? <Status value="published" /> : <span class="muted">draft</span>}</td>
                  <td class="actions">
                    {!published && (
                      <button type="button" onClick={() => onPublish(v.version)}>
                        {older ? `Roll back to v${v.version}` : `Publish v${v.version}`}
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <h3>Compare</h3>
      <div class="row">
        <label>
          From
          <select value={from} onChange={(e) => setFrom(Number(e.currentTarget.value))}>
            {versions.map((v) => (
              <option key={v.version} value={v.version}>
                v{v.version}
              </option>
            ))}
          </select>
        </label>
        <label>
          To
          <select value={to} onChange={(e) => setTo(Number(e.currentTarget.value))}>
            {versions.map((v) => (
              <option key={v.version} value={v.version}>
                v{v.version}
              </option>
            ))}
          </select>
        </label>
      </div>
      {byNumber.has(from) && byNumber.has(to) && (
        <Diff before={byNumber.get(from).spec} after={byNumber.get(to).spec} label={`Changes from v${from} to v${to}`} />
      )}
    </section>
  );
}

/** JSON with its keys in order, so that two versions compare key by key. */
function canonical(value) {
  const sort = (v) =>
    Array.isArray(v)
      ? v.map(sort)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sort(v[k])]),
          )
        : v;
  return JSON.stringify(sort(value ?? {}), null, 2) + '\n';
}

/** A line diff of two specs: removed lines marked `-`, added `+` (not by colour alone). */
export function Diff({ before, after, label }) {
  const parts = diffLines(canonical(before), canonical(after));
  const changed = parts.some((p) => p.added || p.removed);
  return (
    <figure class="diff-figure">
      <figcaption>{label}</figcaption>
      {changed ? (
        <pre class="diff" tabIndex={0} aria-label={label} data-testid="version-diff">
          {parts.flatMap((part, i) =>
            part.value
              .replace(/\n$/, '')
              .split('\n')
              .map((line, j) => {
                const mark = part.added ? '+' : part.removed ? '-' : ' ';
                const Tag = part.added ? 'ins' : part.removed ? 'del' : 'span';
                return (
                  <Tag key={`${i}-${j}`} class={`diff-line diff-${part.added ? 'add' : part.removed ? 'del' : 'same'}`}>
                    {`${mark} ${line}`}
                  </Tag>
                );
              }),
          )}
        </pre>
      ) : (
        <p class="muted">The two versions are the same.</p>
      )}
    </figure>
  );
}

// The form's fields; everything else (options, tools, history, schemas, …) is edited as JSON.
const FIELDS = [
  { key: 'title', label: 'Title' },
  { key: 'version', label: 'Version label (free text, shown in /meta)' },
  { key: 'description', label: 'Description', multiline: 2 },
  { key: 'connection', label: "Connection (the operator's name for a model API)", required: true },
  { key: 'model', label: "Model (one of the connection's models)" },
  { key: 'system_prompt', label: 'System prompt ({{options.NAME}} fills in an option)', multiline: 6 },
];

/**
 * The agent as a form or as JSON, the same object either way. `onSave(spec)` throws the
 * API's error, whose `field` (a JSON pointer) is shown with its message and marks the field.
 */
function Editor({ initial, creating = false, onSave, saveLabel }) {
  const [spec, setSpec] = useState(() => ({ ...initial }));
  const [mode, setMode] = useState('form');
  const [text, setText] = useState('');
  const [failure, setFailure] = useState(null);
  const [busy, setBusy] = useState(false);
  const id = creating ? 'new-agent' : 'edit-agent';

  /** The spec as the JSON tab has it, or an error. */
  const current = () => {
    if (mode === 'form') return spec;
    const parsed = JSON.parse(text);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('must be a JSON object');
    return parsed;
  };
  const switchTo = (next) => {
    if (next === mode) return;
    setFailure(null);
    if (next === 'json') {
      setText(JSON.stringify(clean(spec), null, 2));
      setMode('json');
      return;
    }
    try {
      setSpec(current());
      setMode('form');
    } catch (e) {
      setFailure(new Error(`The JSON is not valid: ${e.message}`));
    }
  };
  const save = async (event) => {
    event.preventDefault();
    setFailure(null);
    let body;
    try {
      body = clean(current());
    } catch (e) {
      setFailure(new Error(`The JSON is not valid: ${e.message}`));
      return;
    }
    setBusy(true);
    try {
      await onSave(body);
    } catch (e) {
      setFailure(explain(e));
    } finally {
      setBusy(false);
    }
  };
  const wrong = (key) => failure?.field === `/${key}`;
  return (
    <form onSubmit={save} aria-label={saveLabel}>
      <div class="tabs" role="radiogroup" aria-label="Edit the agent as">
        <label>
          <input type="radio" name={`${id}-mode`} checked={mode === 'form'} onChange={() => switchTo('form')} /> Form
        </label>
        <label>
          <input type="radio" name={`${id}-mode`} checked={mode === 'json'} onChange={() => switchTo('json')} /> JSON
        </label>
      </div>
      {mode === 'form' ? (
        <>
          <label for={`${id}-name`}>Name</label>
          <input
            id={`${id}-name`}
            value={spec.name ?? ''}
            required={creating}
            readOnly={!creating}
            aria-invalid={wrong('name') || undefined}
            onInput={(e) => setSpec({ ...spec, name: e.currentTarget.value })}
          />
          {FIELDS.map((f) => {
            const props = {
              id: `${id}-${f.key}`,
              value: spec[f.key] ?? '',
              required: f.required,
              'aria-invalid': wrong(f.key) || undefined,
              onInput: (e) => setSpec({ ...spec, [f.key]: e.currentTarget.value }),
            };
            return (
              <div key={f.key}>
                <label for={props.id}>{f.label}</label>
                {f.multiline ? <textarea rows={f.multiline} {...props} /> : <input {...props} />}
              </div>
            );
          })}
          <label for={`${id}-max_steps`}>Most model calls in one turn (empty: 16)</label>
          <input
            id={`${id}-max_steps`}
            type="number"
            min="1"
            value={spec.max_steps ?? ''}
            aria-invalid={wrong('max_steps') || undefined}
            onInput={(e) => {
              const value = e.currentTarget.value;
              setSpec({ ...spec, max_steps: value === '' ? undefined : Number(value) });
            }}
          />
          <p class="muted small">
            Options, tools, history, message schemas and image inputs: switch to JSON (the keys of an{' '}
            <code>[[agents]]</code> entry).
          </p>
        </>
      ) : (
        <>
          <label for={`${id}-json`}>The agent as JSON</label>
          <textarea
            id={`${id}-json`}
            rows={18}
            spellcheck={false}
            class="code-input"
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
          />
        </>
      )}
      <ErrorNote error={failure} />
      <button class="primary" type="submit" disabled={busy}>
        {saveLabel}
      </button>
    </form>
  );
}

/** The spec without the form's empty fields (an empty title is no title). */
function clean(spec) {
  return Object.fromEntries(Object.entries(spec).filter(([, v]) => v !== '' && v !== undefined && v !== null));
}
