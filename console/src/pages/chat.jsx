// Chat: pick an agent and start a session, or continue one; the conversation itself is in
// ../conversation.jsx.

import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorNote, Loading, MoreButton, Time, useLoad, usePaged } from '../components.jsx';
import { Conversation } from '../conversation.jsx';
import { href, navigate } from '../router.js';

export function Chat({ route }) {
  const session = route[0];
  return (
    <div class="chat-layout">
      <aside class="card chat-sessions" aria-label="Your sessions">
        <a class="button primary" href={href('chat')}>
          New session
        </a>
        <RecentSessions current={session} />
      </aside>
      <section class="chat-main">{session ? <Conversation id={session} key={session} /> : <NewSession />}</section>
    </div>
  );
}

export function explain(error) {
  if (error?.code === 'tenant_suspended') {
    return Object.assign(new Error('This tenant is suspended: an administrator must reactivate it before it can chat.'), {
      code: error.code,
      status: error.status,
    });
  }
  return error;
}

function RecentSessions({ current }) {
  const paged = usePaged(async (after) => {
    const page = await api.sessions.list(after, 20);
    return { items: page.sessions, next: page.next };
  }, [current]);
  return (
    <>
      <h2 class="small">Sessions</h2>
      <ErrorNote error={explain(paged.error)} />
      <ul class="plain">
        {paged.items.map((s) => (
          <li key={s.sessionId}>
            <a href={href(`chat/${s.sessionId}`)} aria-current={s.sessionId === current ? 'page' : undefined}>
              {s.agent?.name} <span class="muted small">
                <Time value={s.createdAt} />
              </span>
            </a>
          </li>
        ))}
      </ul>
      {!paged.loading && !paged.error && !paged.items.length && <p class="muted">No sessions yet.</p>}
      <MoreButton paged={paged} />
    </>
  );
}

const EXAMPLE_TOOLS = `[
  {
    "name": "lookup_order",
    "description": "Finds an order by its number.",
    "parameters": {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]}
  }
]`;

function NewSession() {
  // `/meta` lists the platform's agents, then the tenant's published ones (by their names).
  const [meta, error] = useLoad(async () => {
    const [listed, own] = await Promise.all([api.meta(), api.agents().list()]);
    const versions = new Map(own.agents.map((a) => [a.name, a.published_version]));
    return { agents: (listed.agents || []).map((a) => ({ ...a, own: versions.get(a.name) })) };
  }, []);
  const [name, setName] = useState(null);
  const [options, setOptions] = useState({});
  const [tools, setTools] = useState({});
  const [clientTools, setClientTools] = useState('[]');
  const [failure, setFailure] = useState(null);
  const [busy, setBusy] = useState(false);
  if (error) return <ErrorNote error={explain(error)} />;
  if (!meta) return <Loading what="Loading agents" />;
  const agents = meta.agents || [];
  const agent = agents.find((a) => a.name === name) || agents[0];
  if (!agent) return <p>No agent is configured.</p>;
  const acceptsClientTools = agent.capabilities?.application?.tools;

  const start = async (event) => {
    event.preventDefault();
    setFailure(null);
    let declared = [];
    try {
      declared = JSON.parse(clientTools || '[]');
      if (!Array.isArray(declared)) throw new Error('must be a JSON array of tools');
    } catch (e) {
      setFailure(new Error(`Client tools: ${e.message}`));
      return;
    }
    const body = {
      agent: {
        name: agent.name,
        options: Object.fromEntries(Object.entries(options).filter(([, v]) => v !== '')),
        tools: Object.entries(tools)
          .filter(([, t]) => t.enabled)
          .map(([toolName, t]) => ({ name: toolName, trust: Boolean(t.trust) })),
      },
    };
    if (declared.length) body.tools = declared;
    setBusy(true);
    try {
      const created = await api.sessions.create(body);
      navigate(`chat/${created.sessionId}`);
    } catch (e) {
      setFailure(explain(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card" onSubmit={start} aria-labelledby="new-session">
      <h1 id="new-session">New session</h1>
      <label for="agent">Agent</label>
      <select
        id="agent"
        value={agent.name}
        onChange={(e) => (setName(e.currentTarget.value), setOptions({}), setTools({}))}
      >
        {agents.map((a) => (
          <option value={a.name} key={a.name}>
            {a.title || a.name} ({a.name}
            {a.own ? `, yours: version ${a.own}` : `${a.version ? ` v${a.version}` : ''}, platform`})
          </option>
        ))}
      </select>
      {agent.description && <p class="muted">{agent.description}</p>}
      {(agent.options || []).length > 0 && (
        <fieldset>
          <legend>Options</legend>
          {agent.options.map((o) => (
            <div key={o.name}>
              <label for={`option-${o.name}`}>
                {o.title || o.name}
                {o.type === 'secret' ? ' (secret: stored encrypted, shown as ***)' : ''}
              </label>
              {o.type === 'select' ? (
                <select
                  id={`option-${o.name}`}
                  value={options[o.name] ?? o.default ?? ''}
                  onChange={(e) => setOptions({ ...options, [o.name]: e.currentTarget.value })}
                >
                  {(o.options || []).map((v) => (
                    <option key={v} value={v}>
                      {v}
                    </option>
                  ))}
                </select>
              ) : (
                <input
                  id={`option-${o.name}`}
                  type={o.type === 'secret' ? 'password' : 'text'}
                  autocomplete="off"
                  value={options[o.name] ?? ''}
                  placeholder={o.type === 'secret' ? '' : o.default || ''}
                  onInput={(e) => setOptions({ ...options, [o.name]: e.currentTarget.value })}
                />
              )}
            </div>
          ))}
        </fieldset>
      )}
      {(agent.tools || []).length > 0 && (
        <fieldset>
          <legend>Server tools</legend>
          <p class="muted small">An untrusted tool asks your permission before each call.</p>
          {agent.tools.map((t) => (
            <div class="row" key={t.name}>
              <label>
                <input
                  type="checkbox"
                  checked={tools[t.name]?.enabled || false}
                  onChange={(e) => setTools({ ...tools, [t.name]: { ...tools[t.name], enabled: e.currentTarget.checked } })}
                />{' '}
                Enable <code>{t.name}</code>
              </label>
              <label>
                <input
                  type="checkbox"
                  checked={tools[t.name]?.trust || false}
                  disabled={!tools[t.name]?.enabled}
                  onChange={(e) => setTools({ ...tools, [t.name]: { ...tools[t.name], trust: e.currentTarget.checked } })}
                />{' '}
                Trust <code>{t.name}</code>
              </label>
              <span class="muted small">{t.description}</span>
            </div>
          ))}
        </fieldset>
      )}
      {acceptsClientTools && (
        <details>
          <summary>Client tools (declared as JSON Schema, answered by you)</summary>
          <label for="client-tools">Client tools (JSON array of {'{name, description, parameters}'})</label>
          <textarea
            id="client-tools"
            rows={8}
            spellcheck={false}
            value={clientTools}
            placeholder={EXAMPLE_TOOLS}
            onInput={(e) => setClientTools(e.currentTarget.value)}
          />
          <button type="button" onClick={() => setClientTools(EXAMPLE_TOOLS)}>
            Insert an example
          </button>
        </details>
      )}
      <ErrorNote error={failure} />
      <button class="primary" type="submit" disabled={busy}>
        Start session
      </button>
    </form>
  );
}
