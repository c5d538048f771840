// Admin (with the admin token): tenants created, suspended, deleted; a tenant's credentials
// and tokens issued and revoked (secrets shown once), its quotas, usage, webhooks and
// agents (`#/admin/tenants/{id}/agents…`: the Agents page on the tenant's admin routes); and
// the tenant pages opened as that tenant.

import { useState } from 'preact/hooks';
import { actAs, api } from '../api.js';
import { ConfirmButton, ErrorNote, Loading, MoreButton, ShownOnce, Status, Time, useLoad, usePaged } from '../components.jsx';
import { href, navigate } from '../router.js';
import { QuotaTable, UsageChart, since } from './usage.jsx';
import { Webhooks } from './webhooks.jsx';
import { Agents } from './agents.jsx';

export function Admin({ route }) {
  if (route[0] !== 'tenants' || !route[1]) return <Tenants />;
  const id = route[1];
  if (route[2] === 'agents') {
    return (
      <div class="stack">
        <p>
          <a href={href(`admin/tenants/${id}`)}>← Tenant</a>
        </p>
        <Agents route={route.slice(3)} prefix={`/admin/tenants/${id}`} base={`admin/tenants/${id}/agents`} />
      </div>
    );
  }
  return <Tenant id={id} key={id} />;
}

function Tenants() {
  const paged = usePaged(async (after) => {
    const page = await api.admin.tenants(after);
    return { items: page.tenants, next: page.next };
  }, []);
  const [failure, setFailure] = useState(null);
  const create = async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    setFailure(null);
    try {
      const tenant = await api.admin.createTenant(new FormData(form).get('name'));
      navigate(`admin/tenants/${tenant.id}`);
    } catch (e) {
      setFailure(e);
    }
  };
  return (
    <div class="stack">
      <section class="card">
        <h1>Tenants</h1>
        <ErrorNote error={paged.error} />
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {paged.items.map((t) => (
                <tr key={t.id}>
                  <td>
                    <a href={href(`admin/tenants/${t.id}`)}>{t.name}</a>
                  </td>
                  <td>
                    <code>{t.id}</code>
                  </td>
                  <td>
                    <Status value={t.status} />
                  </td>
                  <td>
                    <Time value={t.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {!paged.loading && !paged.items.length && !paged.error && <p class="muted">No tenants yet.</p>}
        <MoreButton paged={paged} />
      </section>
      <section class="card">
        <h2>Create a tenant</h2>
        <form onSubmit={create}>
          <label for="tenant-name">Name</label>
          <input id="tenant-name" name="name" required />
          <ErrorNote error={failure} />
          <button class="primary" type="submit">
            Create tenant
          </button>
        </form>
      </section>
    </div>
  );
}

function Tenant({ id }) {
  const [tenant, error, reload] = useLoad(() => api.admin.tenant(id), [id]);
  const [failure, setFailure] = useState(null);
  if (error) return <ErrorNote error={error} />;
  if (!tenant) return <Loading what="Loading the tenant" />;
  const suspended = tenant.status === 'suspended';
  const openAsTenant = async () => {
    setFailure(null);
    try {
      const issued = await api.admin.issueToken(id, { ttl_seconds: 3600, name: 'console' });
      actAs(issued.token, tenant.name);
      navigate('chat');
    } catch (e) {
      setFailure(e);
    }
  };
  return (
    <div class="stack">
      <section class="card">
        <p>
          <a href={href('admin')}>← Tenants</a>
        </p>
        <h1>
          Tenant <span data-testid="tenant-name">{tenant.name}</span>
        </h1>
        <dl class="facts">
          <dt>Id</dt>
          <dd>
            <code>{tenant.id}</code>
          </dd>
          <dt>Status</dt>
          <dd>
            <Status value={tenant.status} />
          </dd>
          <dt>Created</dt>
          <dd>
            <Time value={tenant.created_at} />
          </dd>
        </dl>
        <ErrorNote error={failure} />
        <div class="row">
          <ConfirmButton
            label={suspended ? 'Reactivate tenant' : 'Suspend tenant'}
            danger={!suspended}
            question={
              suspended
                ? `Reactivate ${tenant.name}? Its tokens work again.`
                : `Suspend ${tenant.name}? Its requests are refused and its running turns are cancelled.`
            }
            onConfirm={async () => {
              await api.admin.updateTenant(id, { status: suspended ? 'active' : 'suspended' });
              reload();
            }}
          />
          <button type="button" onClick={openAsTenant} disabled={suspended}>
            Open the tenant pages as this tenant
          </button>
          <ConfirmButton
            label="Delete tenant"
            danger
            question={`Delete ${tenant.name} and all its data (sessions, histories, credentials, webhooks)? This cannot be undone.`}
            confirmLabel={`Delete ${tenant.name}`}
            onConfirm={async () => {
              await api.admin.deleteTenant(id);
              navigate('admin');
            }}
          />
        </div>
      </section>
      <Credentials id={id} />
      <Tokens id={id} />
      <Quotas id={id} />
      <section class="card">
        <h2>Usage</h2>
        <TenantUsage id={id} />
      </section>
      <section class="card">
        <h2>Agents</h2>
        <p>
          <a href={href(`admin/tenants/${id}/agents`)}>The tenant's agents</a>: their versions, publish, roll back,
          archive, edit.
        </p>
      </section>
      <Webhooks prefix={`/admin/tenants/${id}`} nested />
    </div>
  );
}

function TenantUsage({ id }) {
  const [report, error] = useLoad(() => api.admin.usage(id, since()), [id]);
  if (error) return <ErrorNote error={error} />;
  return report ? <UsageChart report={report} /> : <Loading />;
}

function Credentials({ id }) {
  const [list, error, reload] = useLoad(() => api.admin.credentials(id), [id]);
  const [secret, setSecret] = useState(null);
  const [failure, setFailure] = useState(null);
  const create = async (event) => {
    event.preventDefault();
    setFailure(null);
    try {
      const created = await api.admin.createCredential(id, new FormData(event.currentTarget).get('name'));
      setSecret({ label: `Client secret of ${created.client_id}`, value: created.client_secret });
      reload();
    } catch (e) {
      setFailure(e);
    }
  };
  return (
    <section class="card">
      <h2>Credentials</h2>
      {secret && <ShownOnce label={secret.label} value={secret.value} onDone={() => setSecret(null)} />}
      <ErrorNote error={error || failure} />
      <ul class="plain">
        {(list?.credentials || []).map((c) => (
          <li key={c.client_id} class="row">
            <code>{c.client_id}</code> {c.name && <span>{c.name}</span>} <Time value={c.created_at} />
            <ConfirmButton
              label={`Delete ${c.client_id}`}
              danger
              question={`Delete credential ${c.client_id}? Tokens obtained with it stop working.`}
              onConfirm={async () => {
                await api.admin.deleteCredential(id, c.client_id);
                reload();
              }}
            />
          </li>
        ))}
      </ul>
      {list && !list.credentials.length && <p class="muted">No credentials.</p>}
      <form class="row" onSubmit={create}>
        <label for="credential-name">Name</label>
        <input id="credential-name" name="name" />
        <button type="submit">Create credential</button>
      </form>
    </section>
  );
}

function Tokens({ id }) {
  const [list, error, reload] = useLoad(() => api.admin.tokens(id), [id]);
  const [secret, setSecret] = useState(null);
  const [failure, setFailure] = useState(null);
  const issue = async (event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const body = {};
    if (form.get('name')) body.name = form.get('name');
    if (form.get('ttl')) body.ttl_seconds = Number(form.get('ttl'));
    setFailure(null);
    try {
      const issued = await api.admin.issueToken(id, body);
      setSecret({ label: `Token ${issued.jti}`, value: issued.token });
      reload();
    } catch (e) {
      setFailure(e);
    }
  };
  return (
    <section class="card">
      <h2>Tokens</h2>
      {secret && <ShownOnce label={secret.label} value={secret.value} onDone={() => setSecret(null)} />}
      <ErrorNote error={error || failure} />
      <ul class="plain">
        {(list?.tokens || []).map((t) => (
          <li key={t.jti} class="row">
            <code>{t.jti}</code> {t.name && <span>{t.name}</span>} <span class="muted small">expires</span> <Time value={t.expires_at} />
            {t.revoked_at ? (
              <span class="badge status-revoked">revoked</span>
            ) : (
              <ConfirmButton
                label={`Revoke ${t.jti}`}
                danger
                question={`Revoke token ${t.jti}? It is refused from then on.`}
                onConfirm={async () => {
                  await api.admin.revokeToken(id, t.jti);
                  reload();
                }}
              />
            )}
          </li>
        ))}
      </ul>
      {list && !list.tokens.length && <p class="muted">No tokens.</p>}
      <form class="row" onSubmit={issue}>
        <label for="token-name">Name</label>
        <input id="token-name" name="name" />
        <label for="token-ttl">Lifetime (seconds)</label>
        <input id="token-ttl" name="ttl" type="number" min="1" />
        <button type="submit">Issue token</button>
      </form>
    </section>
  );
}

function Quotas({ id }) {
  const [report, error, reload] = useLoad(() => api.admin.quotas(id), [id]);
  const [failure, setFailure] = useState(null);
  const save = async (event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const body = {};
    for (const [name, value] of form.entries()) {
      const text = String(value).trim();
      body[name] = text === '' ? null : Number(text);
    }
    setFailure(null);
    try {
      await api.admin.updateQuotas(id, body);
      reload();
    } catch (e) {
      setFailure(e);
    }
  };
  if (error) return <ErrorNote error={error} />;
  if (!report) return <Loading />;
  return (
    <section class="card">
      <h2>Quotas</h2>
      <QuotaTable quotas={report.quotas} own={report.own} />
      <details>
        <summary>Change quotas</summary>
        <form onSubmit={save} class="grid-form">
          {Object.keys(report.quotas).map((name) => (
            <div key={name}>
              <label for={`quota-${name}`}>{name} (empty: default)</label>
              <input id={`quota-${name}`} name={name} type="number" min="0" value={report.own[name] ?? ''} />
            </div>
          ))}
          <ErrorNote error={failure} />
          <button type="submit" class="primary">
            Save quotas
          </button>
        </form>
      </details>
    </section>
  );
}
