// Drives an A2A server with the official JS SDK (`@a2a-js/sdk`) and checks every answer.
//
//   node js_client.mjs SDK_DIR BASE_URL TOKEN ECHO_AGENT SLOW_AGENT [TASK_PREFIX CONTEXT_PREFIX]
//
// SDK_DIR is where `npm ci` installed this directory's package.json (the driver is not
// inside it, so it loads the SDK from SDK_DIR/node_modules). Each agent lives under `BASE_URL/a2a/{agent}`; ECHO_AGENT
// answers with the user's text, SLOW_AGENT too but slowly enough (about 50 ms a character)
// that a task can be caught running. TOKEN goes out through the SDK's
// `createAuthenticatingFetchWithRetry`. The prefixes, when given, are what every task id and
// context id must start with.
//
// The SDK speaks protocol 1.0 and, through its v0.3 compat transports, 0.3. The driver runs
// the whole scenario on 1.0 JSON-RPC and on 0.3 JSON-RPC (`message/send`, no `A2A-Version`
// 1.0, `kind`-tagged results; 0.3 has no ListTasks), and the core (send, get, stream) on 1.0
// and 0.3 HTTP+JSON. For 0.3 it gives the client the resolved card with only the interfaces
// it declares for 0.3, which is what makes the SDK pick its 0.3 transports.
//
// One line per step on stdout; the first failed check ends the run with exit status 1.

import { createRequire } from "node:module";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import path from "node:path";

const [sdkDir, baseUrl, token, echoAgent, slowAgent, taskPrefix = "", contextPrefix = ""] =
  process.argv.slice(2);
if (!slowAgent) {
  console.error(
    "usage: node js_client.mjs SDK_DIR BASE_URL TOKEN ECHO_AGENT SLOW_AGENT [TASK_PREFIX CONTEXT_PREFIX]",
  );
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const sdk = require("@a2a-js/sdk");
const {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  createAuthenticatingFetchWithRetry,
} = require("@a2a-js/sdk/client");
const { TaskState, taskStateToJSON, Role } = sdk;

const SLOW_TEXT = "The slow agent spells this out one character at a time, ok?!";
const DEADLINE_MS = 30_000;
const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

class Failure extends Error {}

function check(condition, what) {
  if (!condition) throw new Failure(what);
}

const stateName = (state) => taskStateToJSON(state);
const step = (text) => console.log(`ok   ${text}`);
const base = baseUrl.replace(/\/+$/, "");
// The card resolver joins its path to the base like a browser: a base without a trailing
// slash would lose its last segment.
const agentBase = (agent) => `${base}/a2a/${agent}/`;
const agentUrl = (agent) => `${base}/a2a/${agent}`;

const authFetch = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});

function userMessage(text, contextId) {
  const message = { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] };
  if (contextId) message.contextId = contextId;
  return message;
}

function sendRequest(text, { contextId, returnImmediately } = {}) {
  const json = { message: userMessage(text, contextId) };
  if (returnImmediately) json.configuration = { returnImmediately: true };
  return sdk.SendMessageRequest.fromJSON(json);
}

function artifactText(task) {
  return task.artifacts
    .flatMap((artifact) => artifact.parts)
    .filter((part) => part.content?.$case === "text")
    .map((part) => part.content.value)
    .join("");
}

function checkIds(task, what) {
  check(task.id, `${what}: the task has no id`);
  check(task.contextId, `${what}: task ${task.id} has no contextId`);
  check(
    task.id.startsWith(taskPrefix),
    `${what}: task id ${task.id} does not start with ${taskPrefix}`,
  );
  check(
    task.contextId.startsWith(contextPrefix),
    `${what}: contextId ${task.contextId} does not start with ${contextPrefix}`,
  );
}

function checkEchoed(task, text, what) {
  check(
    task.status?.state === TaskState.TASK_STATE_COMPLETED,
    `${what}: task ${task.id} is ${stateName(task.status?.state)}, not TASK_STATE_COMPLETED`,
  );
  const got = artifactText(task);
  check(got === text, `${what}: the artifacts say ${JSON.stringify(got)}, not the echo ${JSON.stringify(text)}`);
}

function asTask(result, what) {
  check(result && !("messageId" in result), `${what}: the answer is a message, not a task`);
  return result;
}

async function expectError(reason, call, what) {
  try {
    const result = await call();
    throw new Failure(`${what}: expected ${reason}, got a result: ${JSON.stringify(result)}`);
  } catch (error) {
    if (error instanceof Failure) throw error;
    check(
      error.reason === reason,
      `${what}: expected ${reason}, got ${error.name} (${error.reason}): ${error.message}`,
    );
    return error;
  }
}

/**
 * Applies stream events to the first event's task as the spec says a client must.
 *
 * `appendLost`: the SDK's v0.3 HTTP+JSON transport (1.3.0) drops `append` when it turns a
 * v0.3 proto event into a v0.3 object (`_FromProto.taskArtifactUpdateEvent` copies
 * `lastChunk` only), so every chunk after the first reaches us as `append: false`. There a
 * repeated artifactId can only mean "more of it".
 */
function fold(events, what, { appendLost = false } = {}) {
  check(events.length > 0, `${what}: the stream was empty`);
  check(
    events[0].payload?.$case === "task",
    `${what}: the first event is ${events[0].payload?.$case}, not the task`,
  );
  const task = structuredClone(events[0].payload.value);
  const kinds = ["task"];
  for (const event of events.slice(1)) {
    const kind = event.payload?.$case;
    const value = event.payload?.value;
    kinds.push(kind);
    if (kind === "task") {
      check(value.id === task.id, `${what}: a snapshot of another task`);
      Object.assign(task, structuredClone(value));
    } else if (kind === "statusUpdate" || kind === "artifactUpdate") {
      check(
        value.taskId === task.id && value.contextId === task.contextId,
        `${what}: a ${kind} for ${value.taskId}/${value.contextId}, not ${task.id}/${task.contextId}`,
      );
      if (kind === "statusUpdate") {
        task.status = value.status;
      } else {
        const existing = task.artifacts.find((a) => a.artifactId === value.artifact.artifactId);
        if (value.append || (appendLost && existing)) {
          check(existing, `${what}: append to an artifact never started: ${value.artifact.artifactId}`);
          existing.parts.push(...value.artifact.parts);
        } else if (existing) {
          Object.assign(existing, structuredClone(value.artifact));
        } else {
          task.artifacts.push(structuredClone(value.artifact));
        }
      }
    } else {
      throw new Failure(`${what}: an unexpected ${kind} event in a task stream`);
    }
  }
  return { task, kinds };
}

function checkStreamEnd(task, kinds, text, what) {
  const lastStatus = kinds.lastIndexOf("statusUpdate");
  check(lastStatus >= 0, `${what}: no status update in the stream: ${kinds}`);
  check(
    kinds.slice(lastStatus + 1).every((kind) => kind === "task"),
    `${what}: events after the final status update: ${kinds.slice(lastStatus)}`,
  );
  check(kinds.includes("artifactUpdate"), `${what}: the reply came in no artifact update: ${kinds}`);
  checkEchoed(task, text, what);
}

async function collect(stream) {
  const events = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** The scenario against one agent pair through one binding and protocol version. */
class Run {
  constructor(label, echo, slow, { appendLost = false } = {}) {
    this.label = label;
    this.echo = echo;
    this.slow = slow;
    this.appendLost = appendLost;
  }

  async blockingSend() {
    const what = `${this.label} blocking send`;
    const text = `Hello from the JS SDK driver over ${this.label}, blocking.`;
    const request = sendRequest(text);
    const task = asTask(await this.echo.sendMessage(request), what);
    checkIds(task, what);
    checkEchoed(task, text, what);
    step(`${what}: ${task.id} completed with the echo`);
    return { task, text, messageId: request.message.messageId };
  }

  async runningSlowTask(what) {
    const task = asTask(
      await this.slow.sendMessage(sendRequest(SLOW_TEXT, { returnImmediately: true })),
      what,
    );
    checkIds(task, what);
    check(
      !TERMINAL.has(task.status?.state),
      `${what}: returnImmediately answered with a finished task (${stateName(task.status?.state)})`,
    );
    return task;
  }

  async nonBlockingSend() {
    const what = `${this.label} non-blocking send`;
    const task = await this.runningSlowTask(what);
    const first = stateName(task.status.state);
    const deadline = Date.now() + DEADLINE_MS;
    let current = task;
    while (!TERMINAL.has(current.status?.state)) {
      check(Date.now() < deadline, `${what}: ${task.id} still ${stateName(current.status?.state)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      current = await this.slow.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id }));
    }
    checkEchoed(current, SLOW_TEXT, what);
    step(`${what}: ${task.id} came back ${first}, polled GetTask until completed`);
  }

  async streamingSend() {
    const what = `${this.label} streaming send`;
    const text = `Streamed back over ${this.label}, chunk by chunk.`;
    const events = await collect(this.echo.sendMessageStream(sendRequest(text)));
    const { task, kinds } = fold(events, what, { appendLost: this.appendLost });
    checkIds(task, what);
    checkStreamEnd(task, kinds, text, what);
    const stored = await this.echo.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id }));
    checkEchoed(stored, text, `${what}, GetTask after it`);
    const updates = kinds.filter((kind) => kind === "artifactUpdate").length;
    step(`${what}: ${task.id} in ${kinds.length} events (${updates} artifact updates)`);
  }

  async getWithHistory({ task, text, messageId }) {
    const what = `${this.label} get`;
    const full = await this.echo.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id }));
    check(full.id === task.id, `${what}: asked for ${task.id}, got ${full.id}`);
    checkEchoed(full, text, what);
    check(full.history.length > 0, `${what}: task ${task.id} has no history`);
    const first = full.history[0];
    check(
      first.role === Role.ROLE_USER &&
        first.parts.length === 1 &&
        first.parts[0].content?.value === text,
      `${what}: the history does not start with the user's message: ${JSON.stringify(first)}`,
    );
    // The creator of a message chooses its messageId (a2a.proto, Message.message_id).
    check(
      first.messageId === messageId,
      `${what}: the user's message came back with messageId ${first.messageId}, not the ${messageId} the client gave it`,
    );
    const one = await this.echo.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id, historyLength: 1 }));
    check(one.history.length === 1, `${what}: historyLength=1 gave ${one.history.length} messages`);
    check(
      JSON.stringify(one.history[0]) === JSON.stringify(full.history.at(-1)),
      `${what}: historyLength=1 is not the newest message`,
    );
    step(`${what}: ${task.id} with ${full.history.length} messages, historyLength=1 gives the newest`);
  }

  async continueConversation({ task: first }) {
    const what = `${this.label} second message in the context`;
    const text = "And a second message in the same conversation.";
    const task = asTask(
      await this.echo.sendMessage(sendRequest(text, { contextId: first.contextId })),
      what,
    );
    checkIds(task, what);
    check(task.contextId === first.contextId, `${what}: contextId ${task.contextId}, not ${first.contextId}`);
    check(task.id !== first.id, `${what}: the same task id ${task.id} again`);
    checkEchoed(task, text, what);
    step(`${what}: ${task.id} in ${task.contextId} after ${first.id}`);
    return task;
  }

  async listTasks(first, second) {
    const what = `${this.label} list`;
    const contextId = first.contextId;
    const page = await this.echo.listTasks(sdk.ListTasksRequest.fromJSON({ contextId, pageSize: 1 }));
    const ids = (response) => response.tasks.map((t) => t.id);
    check(
      JSON.stringify(ids(page)) === JSON.stringify([second.id]),
      `${what}: page 1 of size 1 is ${ids(page)}, not the newest task ${second.id}`,
    );
    check(page.nextPageToken !== "", `${what}: page 1 of 2 has no nextPageToken`);
    check(page.totalSize === 2, `${what}: totalSize ${page.totalSize}, not 2`);
    const rest = await this.echo.listTasks(
      sdk.ListTasksRequest.fromJSON({ contextId, pageSize: 1, pageToken: page.nextPageToken }),
    );
    check(
      JSON.stringify(ids(rest)) === JSON.stringify([first.id]),
      `${what}: page 2 is ${ids(rest)}, not ${first.id}`,
    );
    check(rest.nextPageToken === "", `${what}: the last page has nextPageToken ${rest.nextPageToken}`);
    for (const task of [...page.tasks, ...rest.tasks]) {
      check(task.contextId === contextId, `${what}: ${task.id} of another context`);
      check(task.artifacts.length === 0, `${what}: ${task.id} lists artifacts without includeArtifacts`);
    }
    step(`${what}: ${contextId} pages [${second.id}] then [${first.id}]`);
  }

  async cancel(finished) {
    const what = `${this.label} cancel`;
    const task = await this.runningSlowTask(what);
    const canceled = await this.slow.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: task.id }));
    check(canceled.id === task.id, `${what}: asked to cancel ${task.id}, got ${canceled.id}`);
    check(
      canceled.status?.state === TaskState.TASK_STATE_CANCELED,
      `${what}: CancelTask answered ${stateName(canceled.status?.state)}`,
    );
    const stored = await this.slow.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id }));
    check(
      stored.status?.state === TaskState.TASK_STATE_CANCELED,
      `${what}: GetTask after the cancel says ${stateName(stored.status?.state)}`,
    );
    step(`${what}: running ${task.id} is TASK_STATE_CANCELED`);
    const error = await expectError(
      "TASK_NOT_CANCELABLE",
      () => this.echo.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: finished.id })),
      `${what} of finished ${finished.id}`,
    );
    step(`${what} of finished ${finished.id}: ${error.name} (${error.message})`);
  }

  async subscribe() {
    const what = `${this.label} subscribe`;
    const task = await this.runningSlowTask(what);
    const events = await collect(
      this.slow.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: task.id })),
    );
    const { task: folded, kinds } = fold(events, what);
    check(folded.id === task.id, `${what}: the snapshot is of ${folded.id}, not ${task.id}`);
    checkStreamEnd(folded, kinds, SLOW_TEXT, what);
    step(`${what}: ${task.id} snapshot first, then ${kinds.length - 1} events to the end`);
  }

  async pushConfigs(receiver, supported) {
    const what = `${this.label} push config`;
    const task = await this.runningSlowTask(what);
    if (!supported) return this.pushNotSupported(task, receiver);
    const created = await this.slow.createTaskPushNotificationConfig(
      sdk.TaskPushNotificationConfig.fromJSON({ taskId: task.id, url: receiver, token: "driver-token" }),
    );
    check(created.id, `${what} create: no id in ${JSON.stringify(created)}`);
    check(
      created.taskId === task.id && created.url === receiver && created.token === "driver-token",
      `${what} create: answered ${JSON.stringify(created)}`,
    );
    step(`${what} create: ${created.id} on ${task.id}`);
    const ids = { taskId: task.id, id: created.id };
    const got = await this.slow.getTaskPushNotificationConfig(
      sdk.GetTaskPushNotificationConfigRequest.fromJSON(ids),
    );
    check(
      // agentry shows a config's token once, when it is created.
      got.id === created.id && got.url === receiver && !got.token,
      `${what} get: answered ${JSON.stringify(got)}`,
    );
    step(`${what} get: ${got.id} -> ${got.url}`);
    const listed = await this.slow.listTaskPushNotificationConfig(
      sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }),
    );
    check(
      JSON.stringify(listed.configs.map((c) => c.id)) === JSON.stringify([created.id]),
      `${what} list: ${listed.configs.map((c) => c.id)}, not ${created.id}`,
    );
    step(`${what} list: [${created.id}]`);
    await this.slow.deleteTaskPushNotificationConfig(
      sdk.DeleteTaskPushNotificationConfigRequest.fromJSON(ids),
    );
    const after = await this.slow.listTaskPushNotificationConfig(
      sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }),
    );
    check(after.configs.length === 0, `${what} delete: still listed: ${JSON.stringify(after.configs)}`);
    await expectError(
      "TASK_NOT_FOUND",
      () => this.slow.getTaskPushNotificationConfig(sdk.GetTaskPushNotificationConfigRequest.fromJSON(ids)),
      `${what} get after delete`,
    );
    step(`${what} delete: ${created.id} gone from list and get`);
    await this.slow.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: task.id }));
  }

  /**
   * Without the capability every push config operation is PushNotificationNotSupported: the
   * SDK refuses create, get and list itself (it reads the card), delete reaches the server.
   */
  async pushNotSupported(task, receiver) {
    const ids = { taskId: task.id, id: "any" };
    const calls = {
      create: () =>
        this.slow.createTaskPushNotificationConfig(
          sdk.TaskPushNotificationConfig.fromJSON({ taskId: task.id, url: receiver }),
        ),
      get: () =>
        this.slow.getTaskPushNotificationConfig(sdk.GetTaskPushNotificationConfigRequest.fromJSON(ids)),
      list: () =>
        this.slow.listTaskPushNotificationConfig(
          sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }),
        ),
      delete: () =>
        this.slow.deleteTaskPushNotificationConfig(
          sdk.DeleteTaskPushNotificationConfigRequest.fromJSON(ids),
        ),
    };
    for (const [name, call] of Object.entries(calls)) {
      await expectError(
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        call,
        `${this.label} push config ${name} without the capability`,
      );
    }
    await this.slow.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: task.id }));
    step(
      `${this.label} push config: the card says pushNotifications false; ` +
        "create/get/list/delete answer PushNotificationNotSupportedError",
    );
  }

  /** Every operation; `list` only where the protocol version has ListTasks. */
  async full(receiver, { list, push }) {
    const sent = await this.blockingSend();
    await this.nonBlockingSend();
    await this.streamingSend();
    await this.getWithHistory(sent);
    const second = await this.continueConversation(sent);
    if (list) await this.listTasks(sent.task, second);
    await this.cancel(sent.task);
    await this.subscribe();
    await this.pushConfigs(receiver, push);
  }

  async core() {
    await this.getWithHistory(await this.blockingSend());
    await this.streamingSend();
  }
}

async function resolveCard(agent) {
  const resolver = new DefaultAgentCardResolver();
  const card = await resolver.resolve(agentBase(agent));
  const url = agentUrl(agent);
  const interfaces = card.supportedInterfaces.map(
    (i) => `${i.protocolBinding} ${i.url} ${i.protocolVersion}`,
  );
  for (const binding of ["JSONRPC", "HTTP+JSON"]) {
    check(
      interfaces.includes(`${binding} ${url} 1.0`),
      `card of ${agent}: no ${binding} 1.0 interface at ${url}: ${interfaces}`,
    );
  }
  const caps = card.capabilities ?? {};
  check(
    caps.streaming && caps.extendedAgentCard,
    `card of ${agent}: capabilities ${JSON.stringify(caps)}: streaming and extendedAgentCard are not both true`,
  );
  // The resolver parses a card whose schemes are in ProtoJSON alone (`$case`); a card that
  // also carries 0.3's `type` in them, as the official Python SDK's server writes it, comes
  // back as sent.
  const bearer = Object.entries(card.securitySchemes ?? {}).filter(([, scheme]) => {
    const http =
      scheme.scheme?.$case === "httpAuthSecurityScheme"
        ? scheme.scheme.value
        : scheme.httpAuthSecurityScheme;
    return http?.scheme?.toLowerCase() === "bearer";
  });
  check(bearer.length > 0, `card of ${agent}: no bearer httpAuthSecurityScheme`);
  step(
    `card of ${agent}: ${JSON.stringify(card.name)}, interfaces ${interfaces.join(", ")}, ` +
      `pushNotifications ${Boolean(caps.pushNotifications)}`,
  );
  return card;
}

/**
 * The card as a v0.3 client uses it: only the interfaces the card itself declares for 0.3
 * (the SDK picks 1.0 whenever a card offers it). The card must declare one per binding.
 */
function as03(card) {
  const legacy = card.supportedInterfaces.filter((i) => i.protocolVersion === "0.3");
  for (const binding of ["JSONRPC", "HTTP+JSON"]) {
    check(
      legacy.some((i) => i.protocolBinding === binding),
      `card of ${card.name}: no ${binding} 0.3 interface: ${JSON.stringify(card.supportedInterfaces)}`,
    );
  }
  return { ...card, supportedInterfaces: legacy };
}

async function clientFor(card, binding) {
  const options = { fetchImpl: authFetch, legacyCompat: { enabled: true } };
  const transport =
    binding === "JSONRPC" ? new JsonRpcTransportFactory(options) : new RestTransportFactory(options);
  const factory = new ClientFactory({ transports: [transport] });
  return factory.createFromAgentCard(card);
}

async function startReceiver() {
  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => response.writeHead(204).end());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  return `http://127.0.0.1:${server.address().port}/a2a-push`;
}

async function main() {
  const receiver = await startReceiver();
  const echoCard = await resolveCard(echoAgent);
  const slowCard = await resolveCard(slowAgent);

  const echo = await clientFor(echoCard, "JSONRPC");
  check(echo.protocolVersion === "1.0", `the 1.0 client speaks ${echo.protocolVersion}`);
  const extended = await echo.getAgentCard();
  check(extended.name && extended.supportedInterfaces.length > 0, "extended card: empty");
  step(`extended card: ${JSON.stringify(extended.name)}`);
  const push = Boolean(slowCard.capabilities?.pushNotifications);
  await new Run("1.0 JSON-RPC", echo, await clientFor(slowCard, "JSONRPC")).full(receiver, {
    list: true,
    push,
  });
  await new Run(
    "1.0 HTTP+JSON",
    await clientFor(echoCard, "HTTP+JSON"),
    await clientFor(slowCard, "HTTP+JSON"),
  ).core();

  const legacyEcho = await clientFor(as03(echoCard), "JSONRPC");
  check(legacyEcho.protocolVersion === "0.3", `the 0.3 client speaks ${legacyEcho.protocolVersion}`);
  await new Run("0.3 JSON-RPC", legacyEcho, await clientFor(as03(slowCard), "JSONRPC")).full(
    receiver,
    { list: false, push },
  );
  await new Run(
    "0.3 HTTP+JSON",
    await clientFor(as03(echoCard), "HTTP+JSON"),
    await clientFor(as03(slowCard), "HTTP+JSON"),
    { appendLost: true },
  ).core();
}

try {
  await main();
  console.log("all steps passed");
} catch (error) {
  if (!(error instanceof Failure)) console.error(error);
  console.log(`FAIL ${error instanceof Failure ? "" : `${error.name}: `}${error.message}`);
  process.exitCode = 1;
}
