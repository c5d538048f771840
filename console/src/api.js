// The console's client of agentry's public API: the bearer token, JSON requests with the
// API's error body turned into ApiError, and SSE streams read with fetch (so a stream can
// send Authorization and Last-Event-ID, which EventSource cannot).

import { readEvents } from './sse.js';

const base = new URL(
  document.querySelector('meta[name="agentry-api-base"]')?.content || '/',
  document.baseURI,
);

/** The absolute URL of an API path such as `/sessions`. */
export function apiUrl(path, query) {
  const url = new URL(path.replace(/^\//, ''), base);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, value);
  }
  return url.toString();
}

// ---- the login, in sessionStorage only (never a cookie, never a URL) ----

const STORE = 'agentry.console.login';
const listeners = new Set();

/** `{token, role, subject, expiresAt, clientId?, clientSecret?, previous?}` or null. */
export function currentLogin() {
  try {
    return JSON.parse(sessionStorage.getItem(STORE)) || null;
  } catch {
    return null;
  }
}

function saveLogin(login) {
  if (login) sessionStorage.setItem(STORE, JSON.stringify(login));
  else sessionStorage.removeItem(STORE);
  for (const listener of listeners) listener(login);
}

export function onLoginChange(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The claims of a JWT, unverified (the server verifies it): for display and routing. */
export function claims(token) {
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(payload.padEnd(payload.length + ((4 - (payload.length % 4)) % 4), '=')));
  } catch {
    return null;
  }
}

function loginFromToken(token, extra = {}) {
  const c = claims(token);
  if (!c || !c.sub) throw new ApiError(0, 'invalid_token', 'This is not an agentry token.');
  return {
    token,
    role: c.role === 'admin' || c.sub === 'admin' ? 'admin' : 'tenant',
    subject: c.sub,
    expiresAt: c.exp ? c.exp * 1000 : null,
    ...extra,
  };
}

/** Uses a pasted token. */
export function usePastedToken(token) {
  saveLogin(loginFromToken(token.trim()));
}

async function exchange(clientId, clientSecret) {
  const response = await fetch(apiUrl('/auth/token'), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_id: clientId, client_secret: clientSecret }),
  });
  const body = await readJson(response);
  if (!response.ok) throw errorFrom(response, body);
  return body.access_token;
}

/** Logs in with a client id and secret; they are kept (in this tab only) to renew the token. */
export async function logIn(clientId, clientSecret) {
  const token = await exchange(clientId, clientSecret);
  saveLogin(loginFromToken(token, { clientId, clientSecret }));
}

export function logOut() {
  saveLogin(null);
}

/** An admin acts as a tenant with a token issued for it; `back()` returns to the admin. */
export function actAs(tenantToken, tenantName) {
  const admin = currentLogin();
  saveLogin(loginFromToken(tenantToken, { tenantName, previous: admin }));
}

export function stopActing() {
  const login = currentLogin();
  saveLogin(login?.previous || null);
}

/** Renews an expired token from the kept credentials; false when it cannot. */
async function renew() {
  const login = currentLogin();
  if (!login?.clientId) return false;
  try {
    const token = await exchange(login.clientId, login.clientSecret);
    saveLogin({ ...loginFromToken(token, { clientId: login.clientId, clientSecret: login.clientSecret }) });
    return true;
  } catch {
    return false;
  }
}

// ---- requests ----

export class ApiError extends Error {
  constructor(status, code, message, extra = {}) {
    super(message);
    this.status = status;
    this.code = code;
    Object.assign(this, extra);
  }
}

async function readJson(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return { error: { code: 'not_json', message: text.slice(0, 200) } };
  }
}

function errorFrom(response, body) {
  const error = body?.error;
  if (error && typeof error === 'object') {
    return new ApiError(response.status, error.code || 'error', error.message || response.statusText, {
      field: error.field,
      quota: error.quota,
      retryAfter: response.headers.get('Retry-After'),
    });
  }
  return new ApiError(response.status, 'http_' + response.status, response.statusText || 'request failed');
}

function authHeaders(extra) {
  const login = currentLogin();
  const headers = { ...extra };
  if (login?.token) headers.Authorization = `Bearer ${login.token}`;
  return headers;
}

/** Sends a request with the token; renews it once on `invalid_token` when it can. */
async function send(method, path, { query, body, headers, signal } = {}, retried = false) {
  const init = { method, headers: authHeaders(headers), signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(apiUrl(path, query), init);
  if (response.status === 401 && !retried) {
    const copy = response.clone();
    const error = (await readJson(copy))?.error;
    if (error?.code === 'invalid_token' && (await renew())) {
      return send(method, path, { query, body, headers, signal }, true);
    }
  }
  return response;
}

/** A JSON request: the parsed body, or an ApiError. */
export async function request(method, path, options = {}) {
  const response = await send(method, path, options);
  const body = response.status === 204 ? null : await readJson(response);
  if (!response.ok) throw errorFrom(response, body);
  if (options.withHeaders) return { body, headers: response.headers };
  return body;
}

export const get = (path, query, options) => request('GET', path, { ...options, query });
export const post = (path, body, options) => request('POST', path, { ...options, body });
export const patch = (path, body) => request('PATCH', path, { body });
export const del = (path) => request('DELETE', path);

/**
 * Opens an SSE response and hands each event (`{id, event, data}`) to `onEvent`. Resolves
 * with `{turnId}` when the server ends the stream; rejects with an ApiError for an error
 * status, or with the network's error when the connection drops.
 */
export async function stream(method, path, { body, headers, lastEventId, signal, onOpen, onEvent, query } = {}) {
  const extra = { Accept: 'text/event-stream', ...headers };
  if (lastEventId) extra['Last-Event-ID'] = String(lastEventId);
  const response = await send(method, path, { body, headers: extra, signal, query });
  if (!response.ok) throw errorFrom(response, await readJson(response));
  const turnId = response.headers.get('Agentry-Turn-Id');
  onOpen?.({ turnId });
  await readEvents(response.body, onEvent);
  return { turnId };
}

// ---- the API by resource (pages call these; a new page adds its own here) ----

export const api = {
  meta: () => get('/meta'),
  sessions: {
    list: (after, limit = 20) => get('/sessions', { after, limit }),
    get: (id) => get(`/sessions/${id}`),
    create: (body) => post('/sessions', body),
    remove: (id) => del(`/sessions/${id}`),
    history: (id, type, after, limit = 200) => get(`/sessions/${id}/history`, { type, after, limit }),
    /** Every page of a history, up to `max` messages. */
    async wholeHistory(id, type, max = 2000) {
      const messages = [];
      let after;
      do {
        const page = await api.sessions.history(id, type, after);
        messages.push(...(page.history?.[type] || []));
        after = page.next;
      } while (after && messages.length < max);
      return { messages, truncated: Boolean(after) };
    },
  },
  turns: {
    list: (session, after, limit = 20) => get(`/sessions/${session}/turns`, { after, limit }),
    get: (session, turn) => get(`/sessions/${session}/turns/${turn}`),
    log: (session, turn, after, limit) => get(`/sessions/${session}/turns/${turn}/log`, { after, limit }),
    cancel: (session, turn) => post(`/sessions/${session}/turns/${turn}/cancel`),
  },
  runs: {
    list: (after, status) => get('/runs', { after, status, limit: 20 }),
  },
  usage: (from) => get('/usage', { from }),
  quotas: () => request('GET', '/quotas', { withHeaders: true }),
  // A tenant's own webhooks at `/webhooks`; an admin's view of a tenant's at
  // `/admin/tenants/{id}/webhooks`: `prefix` picks which.
  webhooks: (prefix = '') => ({
    list: (after) => get(`${prefix}/webhooks`, { after, limit: 50 }),
    create: (body) => post(`${prefix}/webhooks`, body),
    update: (id, body) => patch(`${prefix}/webhooks/${id}`, body),
    remove: (id) => del(`${prefix}/webhooks/${id}`),
    rotate: (id) => post(`${prefix}/webhooks/${id}/rotate-secret`),
    deliveries: (id, after) => get(`${prefix}/webhooks/${id}/deliveries`, { after, limit: 50 }),
    replay: (id, message) => post(`${prefix}/webhooks/${id}/deliveries/${message}/replay`),
  }),
  // A tenant's own agents at `/agents`; an admin's view of a tenant's at
  // `/admin/tenants/{id}/agents`: `prefix` picks which. Writes send the revision the page
  // read as `If-Match`, so a concurrent change is refused (412) rather than overwritten.
  agents: (prefix = '') => {
    const at = (name, rest = '') => `${prefix}/agents/${encodeURIComponent(name)}${rest}`;
    const ifMatch = (revision) => (revision === undefined ? {} : { 'If-Match': `"${revision}"` });
    return {
      list: (after) => get(`${prefix}/agents`, { after, limit: 50 }),
      get: (name) => get(at(name)),
      create: (spec) => post(`${prefix}/agents`, spec),
      update: (name, spec, revision) => request('PUT', at(name), { body: spec, headers: ifMatch(revision) }),
      versions: (name, after) => get(at(name, '/versions'), { after, limit: 200 }),
      publish: (name, version, revision) => post(at(name, '/publish'), { version }, { headers: ifMatch(revision) }),
      archive: (name, archived, revision) =>
        post(at(name, archived ? '/archive' : '/restore'), undefined, { headers: ifMatch(revision) }),
      remove: (name) => del(at(name)),
    };
  },
  admin: {
    tenants: (after) => get('/admin/tenants', { after, limit: 50 }),
    tenant: (id) => get(`/admin/tenants/${id}`),
    createTenant: (name) => post('/admin/tenants', { name }),
    updateTenant: (id, body) => patch(`/admin/tenants/${id}`, body),
    deleteTenant: (id) => del(`/admin/tenants/${id}`),
    credentials: (id) => get(`/admin/tenants/${id}/credentials`),
    createCredential: (id, name) => post(`/admin/tenants/${id}/credentials`, name ? { name } : {}),
    deleteCredential: (id, clientId) => del(`/admin/tenants/${id}/credentials/${clientId}`),
    tokens: (id) => get(`/admin/tenants/${id}/tokens`),
    issueToken: (id, body) => post(`/admin/tenants/${id}/tokens`, body),
    revokeToken: (id, jti) => del(`/admin/tenants/${id}/tokens/${jti}`),
    quotas: (id) => get(`/admin/tenants/${id}/quotas`),
    updateQuotas: (id, body) => patch(`/admin/tenants/${id}/quotas`, body),
    usage: (id, from) => get(`/admin/tenants/${id}/usage`, { from }),
  },
};
