// Drives agentry's console in Debian's Chromium through Playwright, against a running
// agentry (started by tests/api/console.rs), and checks what a person would see.
//
//   node console_test.mjs <packages dir> <base url> <settings json>
//
// settings: {adminSecret, tenantId, clientId, clientSecret, screenshots, cut} (`cut`: a URL that drops
// every open connection between the browser and the server). Prints "step ok: …" per step
// and ends with "all steps passed"; any failure exits non-zero with what went wrong.

import { createRequire } from 'node:module';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import assert from 'node:assert/strict';

const [packages, base, settingsJson] = process.argv.slice(2);
const settings = JSON.parse(settingsJson);
const require = createRequire(join(packages, 'node_modules', 'package.json'));
const { chromium } = require('playwright-core');
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const CONSOLE = `${base}/console/`;
const WIDE = { width: 1280, height: 900 };
const NARROW = { width: 390, height: 844 };
const TIMEOUT = 30_000;
mkdirSync(settings.screenshots, { recursive: true });

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
  ],
});

/** Problems any page showed: dialogs (a script ran) and console errors. */
const problems = [];

async function newPage(options = {}) {
  const context = await browser.newContext({ viewport: WIDE, ...options });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('dialog', async (dialog) => {
    problems.push(`a dialog opened: ${dialog.type()} ${dialog.message()}`);
    await dialog.dismiss();
  });
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()} at ${page.url()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  // Only this server is ever contacted: no CDN, no other host.
  page.on('request', (request) => {
    if (!request.url().startsWith(base) && !request.url().startsWith('data:')) {
      problems.push(`a request left the server: ${request.url()}`);
    }
  });
  return { context, page };
}

/** Runs `run`, forgiving the browser's logs of the connections it breaks on purpose. */
async function breakingConnections(run) {
  const from = problems.length;
  await run();
  const broken = /Failed to load resource: net::(ERR_INCOMPLETE_CHUNKED_ENCODING|ERR_CONNECTION_RESET|ERR_EMPTY_RESPONSE)/;
  const kept = problems.splice(from).filter((problem) => !broken.test(problem));
  problems.push(...kept);
}

async function step(name, run) {
  const started = Date.now();
  await run();
  console.log(`step ok: ${name} (${Date.now() - started} ms)`);
}

/** axe-core finds no violation of serious or critical impact on the page as it is shown now. */
async function accessible(page, name) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() =>
    // eslint-disable-next-line no-undef
    axe.run(document, { resultTypes: ['violations'] }),
  );
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(
    bad.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
    [],
    `accessibility violations on ${name}`,
  );
}

/** Screenshots at both widths and in dark mode, and axe-core at both widths. */
async function check(page, name, { dark = false } = {}) {
  await accessible(page, `${name} at 1280 px`);
  await page.screenshot({ path: join(settings.screenshots, `${name}-1280.png`), fullPage: true });
  await page.setViewportSize(NARROW);
  await accessible(page, `${name} at 390 px`);
  await page.screenshot({ path: join(settings.screenshots, `${name}-390.png`), fullPage: true });
  // Nothing wider than the screen at 390 px but scrollable tables.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `${name} is ${overflow} px wider than a 390 px screen`);
  await page.setViewportSize(WIDE);
  if (dark) {
    await page.emulateMedia({ colorScheme: 'dark' });
    await accessible(page, `${name} in dark mode`);
    await page.screenshot({ path: join(settings.screenshots, `${name}-1280-dark.png`), fullPage: true });
    await page.setViewportSize(NARROW);
    await page.screenshot({ path: join(settings.screenshots, `${name}-390-dark.png`), fullPage: true });
    await page.setViewportSize(WIDE);
    await page.emulateMedia({ colorScheme: 'light' });
  }
}

async function api(token, method, path, body) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function sseIds(token, path) {
  const response = await fetch(`${base}${path}`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(response.status, 200, `${path}`);
  const text = await response.text();
  return [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
}

const agentText = (page) =>
  page.evaluate(() => {
    const entries = [...document.querySelectorAll('[data-testid="transcript"] .entry-assistant .markdown')];
    return entries.length ? entries[entries.length - 1].textContent.trim() : '';
  });

async function waitForStop(page, reason = 'end_turn') {
  await page.getByTestId('turn-stop').filter({ hasText: reason }).waitFor();
}

async function startSession(page, agent, { tools = [] } = {}) {
  await page.goto(`${CONSOLE}#/chat`);
  await page.getByLabel('Agent', { exact: true }).selectOption(agent);
  for (const tool of tools) await page.getByLabel(`Enable ${tool}`).check();
  await page.getByRole('button', { name: 'Start session' }).click();
  await page.waitForURL(/#\/chat\/sess_/);
  await page.getByLabel('Message', { exact: true }).waitFor();
  return page.url().match(/#\/chat\/(sess_[0-9a-f]+)/)[1];
}

async function send(page, text) {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
}

// ---------------------------------------------------------------------------------------

const { context: tenantContext, page } = await newPage();
let token;
let echoSession;
let echoTurn;

await step('the console is served with a strict policy and loads nothing from elsewhere', async () => {
  const response = await page.goto(`${base}/console`);
  assert.equal(response.status(), 200);
  assert.equal(page.url(), CONSOLE, 'the bare path redirects to the page');
  const csp = response.headers()['content-security-policy'];
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /style-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  await page.getByRole('heading', { name: 'agentry console' }).waitFor();
  await check(page, 'login', { dark: true });
});

await step('log in with a client id and secret; the token stays in session storage', async () => {
  await page.getByLabel('Client id', { exact: true }).fill(settings.clientId);
  await page.getByLabel('Client secret', { exact: true }).fill(settings.clientSecret);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'New session' }).waitFor();
  const stored = await page.evaluate(() => JSON.parse(sessionStorage.getItem('agentry.console.login')));
  token = stored.token;
  assert.equal(stored.role, 'tenant');
  assert.equal((await tenantContext.cookies()).length, 0, 'no cookie');
  assert.ok(!page.url().includes(token), 'the token is not in the URL');
  assert.equal(await page.evaluate(() => localStorage.getItem('agentry.console.login')), null);
  await check(page, 'chat-new-session', { dark: true });
});

await step('chat with echo in delta mode: the reply streams in', async () => {
  echoSession = await startSession(page, 'echo');
  // Record the agent's text as it grows.
  await page.evaluate(() => {
    window.__lengths = [];
    new MutationObserver(() => {
      const entries = document.querySelectorAll('[data-testid="transcript"] .entry-assistant .markdown');
      const last = entries[entries.length - 1];
      if (last) window.__lengths.push(last.textContent.length);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  const message = 'Streaming works: each delta of this reply arrives on its own, in order.';
  await send(page, message);
  await waitForStop(page);
  assert.equal(await agentText(page), message);
  const lengths = [...new Set(await page.evaluate(() => window.__lengths))];
  assert.ok(lengths.length >= 4, `the reply arrived in pieces (lengths seen: ${lengths})`);
  assert.deepEqual(lengths, [...lengths].sort((a, b) => a - b), 'the reply only grew');
  const thinking = page.locator('[data-testid="transcript"] details.thinking').last();
  assert.equal(await thinking.getAttribute('open'), null, 'thinking is folded');
  assert.match(await thinking.textContent(), /Thinking/);
  const turns = await api(token, 'GET', `/sessions/${echoSession}/turns`);
  echoTurn = turns.turns[0].turnId;
  await check(page, 'chat-conversation', { dark: true });
});

await step('a long turn reloaded mid-turn continues to its end with no gap and no duplicate', async () => {
  await startSession(page, 'slow');
  const message = Array.from({ length: 16 }, (_, i) => `part ${String(i).padStart(2, '0')} of a long reply;`).join(' ');
  const resumes = [];
  page.on('request', (request) => {
    if (/\/turns\/turn_[0-9a-f]+\/events/.test(request.url())) resumes.push(request.headers()['last-event-id']);
  });
  await send(page, message);
  await page.waitForFunction(() => {
    const entries = document.querySelectorAll('[data-testid="transcript"] .entry-assistant .markdown');
    return entries.length && entries[entries.length - 1].textContent.length >= 40;
  });
  const before = await agentText(page);
  assert.ok(before.length < message.length, 'reloaded before the end');
  await page.reload();
  await waitForStop(page);
  assert.equal(await agentText(page), message, 'the whole reply, once');
  assert.ok(resumes.length >= 1 && Number(resumes[0]) > 0, `resumed after an event id (Last-Event-ID ${resumes})`);
  const userEntries = await page.locator('[data-testid="transcript"] .entry-user').count();
  assert.equal(userEntries, 1, 'the question is shown once');
});

await step('an untrusted server tool asks permission: approve one, deny another', async () => {
  await startSession(page, 'tooly', { tools: ['clock', 'calculator'] });
  await send(page, 'What time is it?');
  await page.getByRole('button', { name: 'Approve clock' }).waitFor();
  await check(page, 'chat-permission');
  await page.getByRole('button', { name: 'Approve clock' }).click();
  await waitForStop(page);
  assert.equal(await agentText(page), 'It is about now.');
  const clockResult = await page.locator('[data-tool-call="call_clock"] [data-testid="tool-result"]').textContent();
  assert.match(clockResult, /\d{4}-\d{2}-\d{2}/, `the clock ran: ${clockResult}`);
  await send(page, 'Add two and two.');
  await page.getByRole('button', { name: 'Deny calculator' }).click();
  await waitForStop(page);
  assert.equal(await agentText(page), 'Fine, I will not.');
  const denied = await page.locator('[data-tool-call="call_calc"] [data-testid="tool-result"]').textContent();
  assert.match(denied, /denied/i);
  // After a reload the stored history shows the same.
  await page.reload();
  await page.locator('[data-tool-call="call_calc"] [data-testid="tool-result"]').waitFor();
  assert.match(await page.locator('[data-tool-call="call_calc"] [data-testid="tool-result"]').textContent(), /denied/i);
});

await step('a dropped connection resumes from the last event id', async () => {
  await startSession(page, 'slow');
  const message = Array.from({ length: 10 }, (_, i) => `piece ${i} of a reply cut off;`).join(' ');
  const resumes = [];
  const listener = (request) => {
    if (/\/turns\/turn_[0-9a-f]+\/events/.test(request.url())) resumes.push(request.headers()['last-event-id']);
  };
  page.on('request', listener);
  await send(page, message);
  await page.waitForFunction(() => {
    const entries = document.querySelectorAll('[data-testid="transcript"] .entry-assistant .markdown');
    return entries.length && entries[entries.length - 1].textContent.length >= 30;
  });
  await breakingConnections(async () => {
    const cut = await fetch(settings.cut); // every connection to the server drops
    assert.equal(cut.status, 204);
    await page.getByTestId('turn-state').filter({ hasText: 'Connection lost' }).waitFor();
    await waitForStop(page);
  });
  page.off('request', listener);
  assert.equal(await agentText(page), message, 'the whole reply, once');
  assert.ok(resumes.length >= 1 && resumes.every((id) => Number(id) > 0), `resumed after an event id (${resumes})`);
});

await step('a turn request whose answer was lost is retried with the same Idempotency-Key', async () => {
  const session = await startSession(page, 'echo');
  const keys = [];
  let first = true;
  await page.route(`**/sessions/${session}/turns`, async (route) => {
    keys.push(route.request().headers()['idempotency-key']);
    if (first) {
      first = false;
      await route.fetch(); // the server gets it and runs the turn; its answer is lost
      await route.abort('connectionreset');
    } else {
      await route.continue();
    }
  });
  await breakingConnections(async () => {
    await send(page, 'Said once, sent twice.');
    await waitForStop(page);
  });
  await page.unroute(`**/sessions/${session}/turns`);
  assert.equal(keys.length, 2, `sent twice: ${keys}`);
  assert.ok(keys[0] && keys[0] === keys[1], `with one key: ${keys}`);
  assert.equal(await agentText(page), 'Said once, sent twice.');
  const turns = await api(token, 'GET', `/sessions/${session}/turns`);
  assert.equal(turns.turns.length, 1, 'one turn ran');
});

await step('cancel stops a running turn', async () => {
  await startSession(page, 'slow');
  await send(page, 'This reply is long enough to be cancelled before it ends, well before.');
  await page.waitForFunction(() => {
    const entries = document.querySelectorAll('[data-testid="transcript"] .entry-assistant .markdown');
    return entries.length && entries[entries.length - 1].textContent.length >= 5;
  });
  await page.getByRole('button', { name: 'Cancel' }).click();
  await waitForStop(page, 'cancelled');
  assert.match(await page.getByTestId('turn-stop').textContent(), /error — cancelled/);
});

await step('a client tool declared as JSON Schema is answered by hand', async () => {
  await page.goto(`${CONSOLE}#/chat`);
  await page.getByLabel('Agent', { exact: true }).selectOption('tooly');
  await page.getByText('Client tools (declared as JSON Schema, answered by you)').click();
  await page.getByRole('button', { name: 'Insert an example' }).click();
  await page.getByRole('button', { name: 'Start session' }).click();
  await page.waitForURL(/#\/chat\/sess_/);
  await send(page, 'Where is order 42?');
  const answer = page.getByLabel('Result of lookup_order');
  await answer.fill('shipped yesterday');
  await page.getByRole('button', { name: 'Send result' }).click();
  await waitForStop(page);
  assert.equal(await agentText(page), 'Order 42 has shipped.');
  assert.match(await page.locator('[data-tool-call="call_order"] [data-testid="tool-result"]').textContent(), /shipped yesterday/);
});

await step('the turn inspector lists the events of a turn with the ids the API returns', async () => {
  await page.goto(`${CONSOLE}#/turns/${echoSession}/${echoTurn}`);
  await page.getByTestId('event-table').waitFor();
  const shown = await page.$$eval('[data-testid="event-table"] tbody tr', (rows) => rows.map((r) => Number(r.dataset.eventId)));
  const log = await api(token, 'GET', `/sessions/${echoSession}/turns/${echoTurn}/log`);
  assert.deepEqual(shown, log.events.map((e) => e.id));
  const streamed = await sseIds(token, `/sessions/${echoSession}/turns/${echoTurn}/events?stream=delta`);
  assert.ok(streamed.length > 2 && streamed.every((id) => shown.includes(id)), `every streamed id is listed: ${streamed} in ${shown}`);
  const kinds = await page.$$eval('[data-testid="event-table"] tbody tr td:nth-child(2)', (cells) => cells.map((c) => c.textContent));
  assert.equal(kinds[0], 'turn_start');
  assert.equal(kinds[kinds.length - 1], 'turn_stop');
  // Replay after the third event: exactly the streamed frames after it.
  const from = shown[2];
  await page.getByRole('button', { name: `Replay after ${from}`, exact: true }).click();
  await page.getByRole('button', { name: 'Replay', exact: true }).click();
  await page.getByText(/\d+ frames/).waitFor();
  const replayed = await page.$$eval('[data-testid="replay-frames"] li code:first-child', (codes) =>
    codes.map((c) => Number(c.textContent.replace('id: ', ''))),
  );
  assert.deepEqual(replayed, streamed.filter((id) => id > from));
  await check(page, 'turn-inspector', { dark: true });
});

await step('markup in a message renders as text and runs nothing', async () => {
  await page.goto(`${CONSOLE}#/chat/${echoSession}`);
  const hostile = '<img src=x onerror=alert(1)> and <script>alert(2)</script> **bold**';
  await send(page, hostile);
  await waitForStop(page);
  const transcript = page.getByTestId('transcript');
  assert.equal(await transcript.locator('img').count(), 0, 'no image element');
  assert.equal(await transcript.locator('script').count(), 0, 'no script element');
  assert.match(await agentText(page), /<img src=x onerror=alert\(1\)> and <script>alert\(2\)<\/script> bold/);
  assert.equal(await transcript.locator('.entry-assistant strong').last().textContent(), 'bold', 'markdown still renders');
  assert.match(await transcript.locator('.entry-user').last().textContent(), /<img src=x onerror=alert\(1\)>/);
});

await step('sessions: a page of sessions, full and compacted history side by side, secrets as ***', async () => {
  await api(token, 'POST', '/sessions', { agent: { name: 'echo', options: { api_key: 'sk-never-shown' } } });
  await page.goto(`${CONSOLE}#/sessions`);
  await page.getByRole('heading', { name: 'Sessions' }).waitFor();
  await page.locator('tbody tr').first().waitFor();
  await check(page, 'sessions', { dark: true });
  await page.goto(`${CONSOLE}#/sessions/${echoSession}`);
  await page.getByRole('heading', { name: 'Full history' }).waitFor();
  await page.getByRole('heading', { name: 'Compacted history' }).waitFor();
  await check(page, 'session-detail');
  const newest = (await api(token, 'GET', '/sessions?limit=1')).sessions[0].sessionId;
  await page.goto(`${CONSOLE}#/sessions/${newest}`);
  const options = await page.getByLabel('Options (secrets read back as ***)').textContent();
  assert.match(options, /"api_key": "\*\*\*"/);
  assert.ok(!(await page.content()).includes('sk-never-shown'), 'the secret is never on the page');
  await page.getByRole('button', { name: 'Delete session' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete session' }).click();
  await page.waitForURL(/#\/sessions$/);
  const gone = await fetch(`${base}/sessions/${newest}`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(gone.status, 404, 'deleted');
});

await step('runs and tasks: a run with its status and a link to its turn', async () => {
  const run = await api(token, 'POST', '/acp/runs', {
    agent_name: 'echo',
    input: [{ role: 'user', parts: [{ content: 'A run.', content_type: 'text/plain' }] }],
    mode: 'sync',
  });
  await page.goto(`${CONSOLE}#/runs`);
  const row = page.locator('tr', { hasText: String(run.run_id).replace(/-/g, '').replace(/^run_/, '') });
  await row.first().waitFor();
  assert.match(await row.first().textContent(), /completed/);
  await check(page, 'runs', { dark: true });
  await row.first().locator('a[href*="#/turns/"]').first().click();
  await page.getByTestId('event-table').waitFor();
});

await step('webhooks: an endpoint, its secret shown once, its deliveries with attempts and errors', async () => {
  await page.goto(`${CONSOLE}#/webhooks`);
  await page.getByLabel('URL').fill('http://127.0.0.1:9/hook');
  await page.getByLabel('Description').fill('nobody listens');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const secret = await page.getByTestId('shown-once').textContent();
  assert.match(secret, /^whsec_/);
  await page.getByRole('button', { name: 'Done' }).click();
  assert.ok(!(await page.content()).includes(secret), 'the secret is gone once dismissed');
  // A turn makes a delivery, whose attempts fail: nobody listens on port 9.
  await api(token, 'POST', `/sessions/${echoSession}/turns`, { messages: [{ role: 'user', content: 'ping' }] });
  await page.reload();
  await page.getByRole('button', { name: 'Deliveries' }).click();
  await page.getByRole('heading', { name: /Deliveries of/ }).waitFor();
  await page.getByRole('button', { name: /^Replay msg_|^Replay / }).first().waitFor();
  await check(page, 'webhooks', { dark: true });
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Rotate secret' }).click();
  const rotated = await page.getByTestId('shown-once').textContent();
  assert.match(rotated, /^whsec_/);
  assert.notEqual(rotated, secret);
});

await step('usage and quotas: a chart of the days and what is left', async () => {
  await page.goto(`${CONSOLE}#/usage`);
  await page.locator('.chart canvas').waitFor();
  await page.locator('[data-quota="tokens_per_day"]').waitFor();
  await check(page, 'usage', { dark: true });
});

// ---- agents ----

const hostileDescription = '<img src=x onerror=alert(5)> and <script>alert(6)</script>';
let agentSession;

const versionShown = (page) => page.getByTestId('agent-version').textContent();

await step('agents: the platform agents read-only; a bad agent is refused naming its field', async () => {
  await page.goto(`${CONSOLE}#/agents`);
  await page.getByRole('heading', { name: 'Your agents' }).waitFor();
  await page.getByText('No agents yet.').waitFor();
  const platform = page.getByTestId('platform-agents');
  for (const name of ['echo', 'slow', 'tooly']) await platform.locator('code', { hasText: name }).first().waitFor();
  assert.equal(await platform.getByRole('button').count(), 0, 'nothing to change on a platform agent');
  await check(page, 'agents', { dark: true });
  await page.getByRole('link', { name: 'New agent' }).click();
  await page.getByRole('heading', { name: 'New agent' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('helper');
  await page.getByLabel(/^Connection/).fill('nowhere');
  // The browser logs the refused request (400): expected here, and only here.
  const from = problems.length;
  await page.getByRole('button', { name: 'Create agent' }).click();
  assert.match(await page.getByRole('alert').textContent(), /\/connection: unknown connection `nowhere`/);
  const refused = /status of 400 \(Bad Request\)/;
  problems.push(...problems.splice(from).filter((problem) => !refused.test(problem)));
  assert.equal(await page.getByLabel(/^Connection/).getAttribute('aria-invalid'), 'true');
  const listed = await api(token, 'GET', '/agents');
  assert.equal(listed.agents.length, 0, 'nothing stored');
});

await step('agents: create one with the form and the JSON editor; its description is text', async () => {
  await page.getByLabel(/^Connection/).fill('local');
  await page.getByLabel('Title', { exact: true }).fill('Helper');
  await page.getByLabel('Description', { exact: true }).fill(hostileDescription);
  await page.getByLabel('JSON', { exact: true }).check();
  const editor = page.getByLabel('The agent as JSON');
  const spec = JSON.parse(await editor.inputValue());
  assert.deepEqual(spec, { name: 'helper', title: 'Helper', description: hostileDescription, connection: 'local' });
  spec.options = [{ name: 'style', type: 'select', options: ['plain', 'upper'], default: 'plain' }];
  await editor.fill(JSON.stringify(spec, null, 2));
  await check(page, 'agent-new');
  await page.getByLabel('Form', { exact: true }).check();
  assert.equal(await page.getByLabel('Title', { exact: true }).inputValue(), 'Helper', 'the form keeps what the JSON said');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.waitForURL(/#\/agents\/helper$/);
  assert.equal(await page.getByTestId('agent-description').textContent(), hostileDescription);
  assert.equal(await page.locator('main img').count(), 0, 'no image element');
  assert.equal(await page.locator('main script').count(), 0, 'no script element');
  assert.match(await page.getByTestId('published-version').textContent(), /none yet/);
  await page.getByRole('button', { name: 'Publish v1' }).first().click();
  await page.getByTestId('published-version').filter({ hasText: /^v1$/ }).waitFor();
  await check(page, 'agent-detail', { dark: true });
});

await step('agents: chat with the published agent; the session runs version 1', async () => {
  await page.goto(`${CONSOLE}#/chat`);
  const option = page.getByLabel('Agent', { exact: true }).locator('option[value="helper"]');
  assert.match(await option.textContent(), /yours: version 1/);
  agentSession = await startSession(page, 'helper');
  assert.equal(await versionShown(page), 'version 1');
  await send(page, 'keep me plain');
  await waitForStop(page);
  assert.equal(await agentText(page), 'keep me plain');
});

await step('agents: v2 made with the JSON editor, compared with v1, published', async () => {
  await page.goto(`${CONSOLE}#/agents/helper`);
  await page.getByRole('heading', { name: 'Edit: make v2' }).waitFor();
  await page.getByLabel('JSON', { exact: true }).check();
  const editor = page.getByLabel('The agent as JSON');
  const spec = JSON.parse(await editor.inputValue());
  spec.options[0].default = 'upper';
  spec.version = '2.0';
  await editor.fill(JSON.stringify(spec, null, 2));
  await page.getByRole('button', { name: 'Save as v2' }).click();
  await page.getByTestId('agent-notice').filter({ hasText: 'v2 is saved as a draft.' }).waitFor();
  assert.match(await page.getByTestId('published-version').textContent(), /^v1$/, 'a draft changes nothing published');
  // The diff of v1 and v2: what was removed and what was added, marked in the text.
  const diff = page.getByTestId('version-diff');
  await diff.waitFor();
  const removed = await diff.locator('del').allTextContents();
  const added = await diff.locator('ins').allTextContents();
  assert.ok(removed.some((line) => /^- +"default": "plain"/.test(line)), `removed: ${removed}`);
  assert.ok(added.some((line) => /^\+ +"default": "upper"/.test(line)), `added: ${added}`);
  assert.ok(added.some((line) => /^\+ +"version": "2.0"/.test(line)), `added: ${added}`);
  await check(page, 'agent-versions', { dark: true });
  await page.getByRole('button', { name: 'Publish v2' }).first().click();
  await page.getByTestId('published-version').filter({ hasText: /^v2$/ }).waitFor();
});

await step('agents: the open session keeps v1; a new session runs v2', async () => {
  await page.goto(`${CONSOLE}#/chat/${agentSession}`);
  await page.getByLabel('Message', { exact: true }).waitFor();
  assert.equal(await versionShown(page), 'version 1');
  await send(page, 'still plain');
  await waitForStop(page);
  assert.equal(await agentText(page), 'still plain', 'the open session still runs version 1');
  await startSession(page, 'helper');
  assert.equal(await versionShown(page), 'version 2');
  await send(page, 'now upper');
  await waitForStop(page);
  assert.equal(await agentText(page), 'NOW UPPER', 'a new session runs version 2');
});

await step('agents: roll back to v1, archive and restore', async () => {
  await page.goto(`${CONSOLE}#/agents/helper`);
  await page.getByRole('button', { name: 'Roll back to v1' }).click();
  await page.getByTestId('agent-notice').filter({ hasText: 'Rolled back: v1 is published.' }).waitFor();
  assert.equal((await api(token, 'GET', '/agents/helper')).published_version, 1);
  await page.getByRole('button', { name: 'Archive agent' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Archive agent' }).click();
  await page.getByRole('button', { name: 'Restore agent' }).waitFor();
  const meta = await api(token, 'GET', '/meta');
  assert.ok(!meta.agents.some((a) => a.name === 'helper'), 'an archived agent leaves /meta');
  await page.getByRole('button', { name: 'Restore agent' }).click();
  await page.getByRole('button', { name: 'Archive agent' }).waitFor();
  await page.goto(`${CONSOLE}#/agents`);
  const row = page.locator('[data-testid="agent-table"] tr[data-agent="helper"]');
  await row.waitFor();
  assert.match(await row.textContent(), /v1.*v2.*published/);
});

// ---- admin ----

const { page: admin } = await newPage();
let adminLogin;
const adminToken = () => adminLogin.token;
let tenantId;
let issued;
const hostileName = '<img src=x onerror=alert(3)><script>alert(4)</script>';

await step('the admin logs in with the keyboard alone, focus always visible', async () => {
  await admin.goto(CONSOLE);
  await admin.getByRole('heading', { name: 'agentry console' }).waitFor();
  const focused = () =>
    admin.evaluate(() => {
      const element = document.activeElement;
      const style = getComputedStyle(element);
      return { id: element.id, outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
    });
  // Tab reaches the radio buttons, then the client id.
  for (let i = 0; i < 5 && (await focused()).id !== 'client_id'; i++) await admin.keyboard.press('Tab');
  const id = await focused();
  assert.equal(id.id, 'client_id', 'Tab reaches the client id');
  assert.ok(id.outline !== 'none' && id.width >= 2, `focus is visible: ${JSON.stringify(id)}`);
  await admin.keyboard.type('admin');
  await admin.keyboard.press('Tab');
  assert.equal((await focused()).id, 'client_secret');
  await admin.keyboard.type(settings.adminSecret);
  await admin.keyboard.press('Enter');
  await admin.getByRole('heading', { name: 'Tenants' }).waitFor();
  adminLogin = await admin.evaluate(() => JSON.parse(sessionStorage.getItem('agentry.console.login')));
  assert.equal(adminLogin.role, 'admin');
  // Focus is on the content; the header's controls are reached with the keyboard too.
  assert.equal((await focused()).id, 'main', 'focus moves to the content after logging in');
  const stops = [];
  for (let i = 0; i < 6; i++) {
    await admin.keyboard.press('Shift+Tab');
    const here = await admin.evaluate(() => {
      const element = document.activeElement;
      return { text: element.textContent.trim(), tag: element.tagName, outline: getComputedStyle(element).outlineStyle };
    });
    stops.push(here);
    assert.notEqual(here.outline, 'none', `visible focus on ${JSON.stringify(here)}`);
    if (here.tag === 'A' && here.text === 'Tenants') break;
  }
  assert.deepEqual(
    stops.map((stop) => stop.text || stop.tag),
    ['Log out', 'AutoLightDark', 'Tenants'],
    'Shift+Tab walks back through the header',
  );
  await admin.keyboard.press('Enter');
  await admin.waitForURL(/#\/admin$/);
});

await step("admin: a tenant's agents, on the admin's pages", async () => {
  await admin.goto(`${CONSOLE}#/admin/tenants/${settings.tenantId}`);
  await admin.getByRole('link', { name: "The tenant's agents" }).click();
  await admin.getByRole('heading', { name: 'Agents of this tenant' }).waitFor();
  await admin.getByRole('link', { name: 'helper' }).click();
  await admin.getByTestId('agent-description').waitFor();
  assert.equal(await admin.getByTestId('agent-description').textContent(), hostileDescription);
  assert.equal(await admin.locator('[data-testid="version-table"] tbody tr').count(), 2);
  await check(admin, 'admin-agent', { dark: true });
  await admin.goto(`${CONSOLE}#/admin`);
  await admin.getByRole('heading', { name: 'Tenants' }).waitFor();
});

await step('admin: create a tenant whose name is markup, shown as text', async () => {
  await admin.getByLabel('Name').fill(hostileName);
  await admin.getByRole('button', { name: 'Create tenant' }).click();
  await admin.waitForURL(/#\/admin\/tenants\/ten_/);
  tenantId = admin.url().match(/(ten_[0-9a-f]+)/)[1];
  assert.equal(await admin.getByTestId('tenant-name').textContent(), hostileName);
  assert.equal(await admin.locator('main img').count(), 0);
  await check(admin, 'admin-tenant', { dark: true });
  await admin.getByRole('link', { name: '← Tenants' }).click();
  await admin.getByRole('link', { name: hostileName }).waitFor();
  await check(admin, 'admin-tenants', { dark: true });
});

let credential;
await step('admin: create a credential, its secret shown once; it logs in', async () => {
  await admin.goto(`${CONSOLE}#/admin/tenants/${tenantId}`);
  await admin.locator('#credential-name').fill('console login');
  await admin.getByRole('button', { name: 'Create credential' }).click();
  const secret = await admin.getByTestId('shown-once').textContent();
  const label = await admin.locator('.shown-once strong').textContent();
  credential = { id: label.replace('Client secret of ', '').trim(), secret };
  await admin.getByRole('button', { name: 'Done' }).click();
  assert.ok(!(await admin.content()).includes(secret), 'shown once only');
  const { page: other } = await newPage();
  await other.goto(CONSOLE);
  await other.getByLabel('Client id', { exact: true }).fill(credential.id);
  await other.getByLabel('Client secret', { exact: true }).fill(credential.secret);
  await other.getByRole('button', { name: 'Log in' }).click();
  await other.getByRole('heading', { name: 'New session' }).waitFor();
  await other.context().close();
});

await step('admin: change a quota with the form', async () => {
  await admin.getByText('Change quotas').click();
  await admin.getByLabel('stored_sessions (empty: default)').fill('7');
  await admin.getByRole('button', { name: 'Save quotas' }).click();
  await admin.locator('tr', { hasText: 'Stored sessions' }).filter({ hasText: '7' }).first().waitFor();
  const quotas = await api(adminToken(), 'GET', `/admin/tenants/${tenantId}/quotas`);
  assert.equal(quotas.quotas.stored_sessions, 7);
});

await step('admin: issue a token, shown once', async () => {
  await admin.goto(`${CONSOLE}#/admin/tenants/${tenantId}`);
  await admin.getByLabel('Name', { exact: true }).first().waitFor();
  await admin.locator('#token-name').fill('console test');
  await admin.getByRole('button', { name: 'Issue token' }).click();
  issued = await admin.getByTestId('shown-once').textContent();
  assert.equal(issued.split('.').length, 3, 'a JWT');
  await admin.getByRole('button', { name: 'Done' }).click();
  assert.ok(!(await admin.content()).includes(issued), 'shown once only');
  await admin.reload();
  await admin.getByRole('heading', { name: 'Tokens' }).waitFor();
  await admin.locator('li', { hasText: 'console test' }).waitFor();
  assert.ok(!(await admin.content()).includes(issued), 'never shown again');
});

await step('the issued token opens the tenant pages', async () => {
  const { page: other } = await newPage();
  await other.goto(CONSOLE);
  await other.getByLabel('Paste a token').check();
  await other.getByLabel('Bearer token').fill(issued);
  await other.getByRole('button', { name: 'Log in' }).click();
  await other.getByRole('heading', { name: 'New session' }).waitFor();
  await other.getByText('No sessions yet.').waitFor();
  await other.context().close();
});

await step('admin: suspend the tenant; its chat page then says so', async () => {
  await admin.getByRole('button', { name: 'Suspend tenant' }).click();
  await admin.getByRole('dialog').getByRole('button', { name: 'Suspend tenant' }).click();
  await admin.getByText('suspended', { exact: true }).first().waitFor();
  const { page: suspended } = await newPage();
  suspended.removeAllListeners('console'); // the refused requests are logged by the browser
  await suspended.goto(CONSOLE);
  await suspended.getByLabel('Paste a token').check();
  await suspended.getByLabel('Bearer token').fill(issued);
  await suspended.getByRole('button', { name: 'Log in' }).click();
  const alert = suspended.getByRole('alert').first();
  await alert.waitFor();
  assert.match(await alert.textContent(), /suspended/i);
  await suspended.screenshot({ path: join(settings.screenshots, 'chat-suspended-1280.png') });
  await suspended.context().close();
});

await step('admin: delete the tenant, after a confirmation', async () => {
  await admin.goto(`${CONSOLE}#/admin/tenants/${tenantId}`);
  await admin.getByRole('button', { name: 'Delete tenant' }).click();
  const dialog = admin.getByRole('dialog');
  assert.match(await dialog.textContent(), /cannot be undone/);
  await dialog.getByRole('button', { name: `Delete ${hostileName}` }).click();
  await admin.waitForURL(/#\/admin$/);
  const gone = await fetch(`${base}/admin/tenants/${tenantId}`, { headers: { Authorization: `Bearer ${adminToken()}` } });
  assert.equal(gone.status, 404);
});

await step('no dialog opened and no script error anywhere', async () => {
  assert.deepEqual(problems, []);
});

await browser.close();
console.log('all steps passed');
