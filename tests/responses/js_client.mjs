// Drives agentry's /v1 face with the official openai JS SDK and checks every answer.
//
//   node js_client.mjs SDK_DIR BASE_URL TOKEN
//
// SDK_DIR is where `npm ci` installed this directory's package.json (the driver is not
// inside it, so it loads the SDK from SDK_DIR/node_modules). Agents: `echo` answers at once,
// `slow` writes one character every 50 ms, `gpt` is a scripted model that calls the
// function `get_weather` (twice at once through the Responses API, once through Chat
// Completions), then answers the outputs.
//
// One line per step on stdout; the first failed check ends the run with exit status 1, and
// the last line of a run that passed is "all steps passed".

import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, baseUrl, token] = process.argv.slice(2);
if (!token) {
  console.error("usage: node js_client.mjs SDK_DIR BASE_URL TOKEN");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { OpenAI, APIError, NotFoundError, BadRequestError } = require("openai");

const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: token, maxRetries: 0 });

class Failure extends Error {}

function check(condition, what) {
  if (!condition) throw new Failure(what);
}

const show = (value) => JSON.stringify(value);
const step = (text) => console.log(`step: ${text}`);

async function collect(iterable) {
  const all = [];
  for await (const item of iterable) all.push(item);
  return all;
}

async function expectError(kind, promise, what) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof kind, `${what}: ${error}`);
    return error;
  }
  throw new Failure(`${what}: no error`);
}

const deltas = (events) =>
  events
    .filter((e) => e.type === "response.output_text.delta")
    .map((e) => e.delta)
    .join("");

const WEATHER_TOOL = {
  type: "function",
  name: "get_weather",
  description: "The weather of a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  },
  strict: null,
};

async function models() {
  step("models");
  const ids = (await collect(client.models.list())).map((m) => m.id);
  for (const id of ["echo", "slow", "gpt"]) check(ids.includes(id), `models: ${show(ids)}`);
  check((await client.models.retrieve("echo")).id === "echo", "models.retrieve");
  await expectError(NotFoundError, client.models.retrieve("nobody"), "an unknown model");
}

async function createAndRead() {
  step("create");
  const response = await client.responses.create({
    model: "echo",
    input: "Hello, world!",
    metadata: { k: "v" },
  });
  check(response.status === "completed", show(response));
  check(response.output_text === "Hello, world!", show(response.output_text));
  check(response.id.startsWith("resp_"), response.id);
  check(response.usage.total_tokens > 0, show(response.usage));
  check(show(response.metadata) === show({ k: "v" }), show(response.metadata));

  step("retrieve");
  const again = await client.responses.retrieve(response.id);
  check(again.id === response.id && again.output_text === "Hello, world!", show(again));
  check(show(again.output) === show(response.output), show(again.output));

  step("previous_response_id");
  const follow = await client.responses.create({
    model: "echo",
    previous_response_id: response.id,
    input: [{ role: "user", content: "And again" }],
  });
  check(follow.previous_response_id === response.id, show(follow));
  check(follow.output_text === "And again", show(follow));
  const brought = await collect(client.responses.inputItems.list(follow.id));
  check(brought.length === 1 && brought[0].content[0].text === "And again", show(brought));

  step("delete");
  await client.responses.delete(response.id);
  await expectError(NotFoundError, client.responses.retrieve(response.id), "a deleted response");
}

async function streams() {
  step("stream (raw)");
  const events = await collect(
    await client.responses.create({ model: "echo", input: "Stream me, please", stream: true }),
  );
  check(
    show(events.map((e) => e.sequence_number)) === show(events.map((_, i) => i)),
    show(events.map((e) => e.sequence_number)),
  );
  check(events[0].type === "response.created", events[0].type);
  check(events.at(-1).type === "response.completed", events.at(-1).type);
  check(deltas(events) === "Stream me, please", deltas(events));

  step("stream (helper)");
  const stream = client.responses.stream({ model: "echo", input: "Helper stream" });
  const kinds = [];
  for await (const event of stream) kinds.push(event.type);
  const final = await stream.finalResponse();
  check(final.output_text === "Helper stream", show(final));
  check(kinds.includes("response.output_text.done"), show(kinds));
}

async function background() {
  step("background, resumed with starting_after after dropping the stream");
  const started = await client.responses.create({
    model: "slow",
    input: "b".repeat(30),
    background: true,
  });
  check(started.status === "queued" && started.background === true, show(started));
  const first = await client.responses.retrieve(started.id, { stream: true });
  const seen = [];
  for await (const event of first) {
    seen.push(event);
    if (event.type === "response.output_text.delta" && seen.length >= 6) break;
  }
  const last = seen.at(-1).sequence_number;
  const rest = await collect(
    await client.responses.retrieve(started.id, { stream: true, starting_after: last }),
  );
  check(rest[0].sequence_number === last + 1, `resumed at ${show(rest[0])} after ${last}`);
  check(rest.at(-1).type === "response.completed", rest.at(-1).type);
  check(deltas([...seen, ...rest]) === "b".repeat(30), deltas([...seen, ...rest]));
  const done = await client.responses.retrieve(started.id);
  check(done.status === "completed" && done.output_text === "b".repeat(30), show(done));

  step("cancel");
  const running = await client.responses.create({
    model: "slow",
    input: "c".repeat(200),
    background: true,
  });
  const cancelled = await client.responses.cancel(running.id);
  check(cancelled.status === "cancelled", show(cancelled));
  check((await client.responses.retrieve(running.id)).status === "cancelled", "cancel is kept");
  const twice = await client.responses.cancel(running.id);
  check(twice.status === "cancelled", `cancel is idempotent: ${show(twice)}`);
  const foreground = await client.responses.create({ model: "echo", input: "done already" });
  await expectError(
    BadRequestError,
    client.responses.cancel(foreground.id),
    "cancelling a response made without background",
  );
}

async function functionTool() {
  step("function tool round trip, its outputs' input items paginated");
  const asked = await client.responses.create({
    model: "gpt",
    input: "Weather in Paris and Rome?",
    tools: [WEATHER_TOOL],
  });
  const calls = asked.output.filter((item) => item.type === "function_call");
  check(calls.length === 2 && calls.every((c) => c.name === "get_weather"), show(asked.output));
  check(calls[0].arguments === '{"city":"Paris"}', calls[0].arguments);
  check(calls[1].arguments === '{"city":"Rome"}', calls[1].arguments);
  const answered = await client.responses.create({
    model: "gpt",
    previous_response_id: asked.id,
    input: calls.map((call, i) => ({
      type: "function_call_output",
      call_id: call.call_id,
      output: ["sunny", "rainy"][i],
    })),
  });
  check(answered.output_text === "Sunny in Paris.", show(answered));
  const firstPage = await client.responses.inputItems.list(answered.id, { limit: 1, order: "asc" });
  check(firstPage.data.length === 1 && firstPage.has_more, show(firstPage.data));
  check(firstPage.hasNextPage(), "a second page of input items");
  const outputs = await collect(
    client.responses.inputItems.list(answered.id, { limit: 1, order: "asc" }),
  );
  check(
    show(outputs.map((item) => [item.type, item.call_id, item.output])) ===
      show(calls.map((call, i) => ["function_call_output", call.call_id, ["sunny", "rainy"][i]])),
    show(outputs),
  );
  const newest = await collect(client.responses.inputItems.list(answered.id, { limit: 1 }));
  check(newest[0].output === "rainy", `the default order is newest first: ${show(newest)}`);
}

async function chatCompletions() {
  step("chat completion");
  const completion = await client.chat.completions.create({
    model: "echo",
    messages: [
      { role: "developer", content: "Be brief." },
      { role: "user", content: "Hello, chat!" },
    ],
  });
  check(completion.object === "chat.completion", show(completion));
  check(completion.id.startsWith("chatcmpl-") && completion.model === "echo", show(completion));
  const choice = completion.choices[0];
  check(choice.message.role === "assistant" && choice.message.content === "Hello, chat!", show(choice));
  check(choice.finish_reason === "stop", show(choice));
  const usage = completion.usage;
  check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, show(usage));
  check(usage.total_tokens > 0, show(usage));

  step("chat completion streamed, with a tool round trip");
  const tools = [
    {
      type: "function",
      function: {
        name: WEATHER_TOOL.name,
        description: WEATHER_TOOL.description,
        parameters: WEATHER_TOOL.parameters,
      },
    },
  ];
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const chunks = await collect(
    await client.chat.completions.create({
      model: "gpt",
      messages,
      tools,
      stream: true,
      stream_options: { include_usage: true },
    }),
  );
  check(new Set(chunks.map((c) => c.id)).size === 1, show(chunks.map((c) => c.id)));
  check(chunks[0].choices[0].delta.role === "assistant", show(chunks[0]));
  const deltas = chunks.flatMap((c) => c.choices.flatMap((x) => x.delta.tool_calls ?? []));
  const call = { id: deltas[0]?.id, name: deltas[0]?.function?.name, arguments: "" };
  for (const delta of deltas) {
    check(delta.index === 0, show(delta));
    call.arguments += delta.function?.arguments ?? "";
  }
  check(call.name === "get_weather" && call.arguments === '{"city":"Paris"}', show(call));
  const finish = chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter(Boolean);
  check(show(finish) === show(["tool_calls"]), show(finish));
  const last = chunks.at(-1);
  check(last.choices.length === 0 && last.usage.total_tokens > 0, show(last));
  messages.push({
    role: "assistant",
    content: null,
    tool_calls: [
      { id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } },
    ],
  });
  messages.push({ role: "tool", tool_call_id: call.id, content: "sunny" });
  const answer = await collect(
    await client.chat.completions.create({ model: "gpt", messages, tools, stream: true }),
  );
  const text = answer.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  check(text === "Sunny in Paris.", text);
  check(answer.at(-1).choices[0].finish_reason === "stop", show(answer.at(-1)));

  step("chat completion streamed with the helper");
  const runner = client.chat.completions.stream({
    model: "echo",
    messages: [{ role: "user", content: "Helper chat" }],
  });
  for await (const _ of runner);
  const final = await runner.finalChatCompletion();
  check(final.choices[0].message.content === "Helper chat", show(final));
}

async function conversations() {
  step("conversations");
  const conversation = await client.conversations.create({
    model: "echo",
    items: [
      { type: "message", role: "user", content: "hi" },
      { type: "message", role: "assistant", content: "hello" },
    ],
  });
  check(conversation.id.startsWith("conv_"), show(conversation));
  check(conversation.object === "conversation", show(conversation));
  check((await client.conversations.retrieve(conversation.id)).id === conversation.id, "retrieve");
  const updated = await client.conversations.update(conversation.id, {
    metadata: { topic: "demo" },
  });
  check(show(updated.metadata) === show({ topic: "demo" }), show(updated));
  const continued = await client.responses.create({
    model: "echo",
    input: "again",
    conversation: conversation.id,
  });
  check(continued.output_text === "again", show(continued));
  check(continued.conversation.id === conversation.id, show(continued.conversation));

  step("conversation items");
  const listed = await collect(
    client.conversations.items.list(conversation.id, { order: "asc", limit: 2 }),
  );
  const texts = listed.map((item) => item.content[0].text);
  check(show(texts) === show(["hi", "hello", "again", "again"]), show(texts));
  const first = await client.conversations.items.retrieve(listed[0].id, {
    conversation_id: conversation.id,
  });
  check(first.id === listed[0].id && first.role === "user", show(first));
  await expectError(
    NotFoundError,
    client.conversations.items.retrieve("msg_nothing", { conversation_id: conversation.id }),
    "an unknown item",
  );

  step("conversation items added between responses");
  const added = await client.conversations.items.create(conversation.id, {
    items: [
      { type: "message", role: "user", content: "an aside" },
      { type: "message", role: "assistant", content: "noted" },
    ],
  });
  const addedTexts = added.data.map((item) => item.content[0].text);
  check(show(addedTexts) === show(["an aside", "noted"]), show(added));
  check(added.data[0].id === `msg_${conversation.id.slice(5)}_4`, added.data[0].id);
  const readBack = await client.conversations.items.retrieve(added.data[1].id, {
    conversation_id: conversation.id,
  });
  check(readBack.role === "assistant" && readBack.content[0].text === "noted", show(readBack));
  const newest = await client.conversations.items.list(conversation.id, { limit: 2 });
  check(
    show(newest.data.map((item) => item.id)) === show([added.data[1].id, added.data[0].id]),
    show(newest.data),
  );
  const refused = await expectError(
    APIError,
    client.conversations.items.delete(added.data[0].id, { conversation_id: conversation.id }),
    "deleting an item",
  );
  check(refused.status === 405, show(refused.error));
  const continuedAgain = await client.responses.create({
    model: "echo",
    input: "after the aside",
    conversation: conversation.id,
  });
  check(continuedAgain.output_text === "after the aside", show(continuedAgain));

  const deleted = await client.conversations.delete(conversation.id);
  check(deleted.deleted && deleted.id === conversation.id, show(deleted));
  await expectError(
    NotFoundError,
    client.conversations.retrieve(conversation.id),
    "a deleted conversation",
  );
}

async function errors() {
  step("errors");
  const unknown = await expectError(
    NotFoundError,
    client.responses.create({ model: "nobody", input: "x" }),
    "an unknown model",
  );
  check(unknown.code === "model_not_found", show(unknown.error));
  const instructed = await expectError(
    BadRequestError,
    client.responses.create({ model: "echo", input: "x", instructions: "Be terse" }),
    "instructions",
  );
  check(instructed.param === "instructions", show(instructed.error));
}

try {
  await models();
  await createAndRead();
  await streams();
  await background();
  await functionTool();
  await chatCompletions();
  await conversations();
  await errors();
  console.log("all steps passed");
} catch (error) {
  console.log(`FAILED: ${error instanceof Failure ? error.message : error.stack}`);
  process.exit(1);
}
