"""The official openai Python SDK drives agentry's /v1 face.

usage: sdk_client.py BASE_URL TOKEN

Agents: `echo` answers at once, `slow` writes one character every 50 ms, `gpt` is a
scripted model that calls the function `get_weather`, then answers its output (twice:
once through the Responses API, once through Chat Completions).
Every step checks what the SDK got; the last line printed is "all steps passed".
"""

import sys

import openai
from openai import OpenAI

base, token = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0)


def step(name):
    print(f"step: {name}", flush=True)


step("models")
ids = [m.id for m in client.models.list()]
assert "echo" in ids and "slow" in ids and "gpt" in ids, ids
assert client.models.retrieve("echo").id == "echo"

step("create")
response = client.responses.create(model="echo", input="Hello, world!", metadata={"k": "v"})
assert response.status == "completed", response
assert response.output_text == "Hello, world!", response.output_text
assert response.id.startswith("resp_")
assert response.usage.total_tokens > 0
assert response.metadata == {"k": "v"}

step("retrieve")
again = client.responses.retrieve(response.id)
assert again.model_dump() == response.model_dump()

step("input items")
items = client.responses.input_items.list(response.id)
assert [i.type for i in items.data] == ["message"], items
assert items.data[0].role == "user"
assert items.data[0].content[0].text == "Hello, world!"

step("previous_response_id")
follow = client.responses.create(model="echo", input="And again", previous_response_id=response.id)
assert follow.previous_response_id == response.id
assert follow.output_text == "And again"

step("stream (raw)")
events = list(client.responses.create(model="echo", input="Stream me, please", stream=True))
assert [e.sequence_number for e in events] == list(range(len(events)))
assert events[0].type == "response.created" and events[-1].type == "response.completed"
deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
assert deltas == "Stream me, please", deltas

step("stream (helper)")
with client.responses.stream(model="echo", input="Helper stream") as stream:
    kinds = [event.type for event in stream]
    final = stream.get_final_response()
assert final.output_text == "Helper stream", final
assert "response.output_text.done" in kinds

step("background, resumed after dropping the stream")
background = client.responses.create(model="slow", input="b" * 30, background=True)
assert background.status == "queued" and background.background
first = client.responses.retrieve(background.id, stream=True)
seen = []
for event in first:
    seen.append(event)
    if event.type == "response.output_text.delta" and len(seen) >= 6:
        break
first.close()
last = seen[-1].sequence_number
rest = list(client.responses.retrieve(background.id, stream=True, starting_after=last))
assert rest[0].sequence_number == last + 1, rest[0]
assert rest[-1].type == "response.completed"
text = "".join(e.delta for e in seen + rest if e.type == "response.output_text.delta")
assert text == "b" * 30, text
assert client.responses.retrieve(background.id).status == "completed"

step("cancel")
running = client.responses.create(model="slow", input="c" * 200, background=True)
cancelled = client.responses.cancel(running.id)
assert cancelled.status == "cancelled", cancelled
assert client.responses.retrieve(running.id).status == "cancelled"

step("delete")
client.responses.delete(response.id)
try:
    client.responses.retrieve(response.id)
    raise AssertionError("a deleted response was found")
except openai.NotFoundError:
    pass

step("function tool round trip")
tools = [{
    "type": "function",
    "name": "get_weather",
    "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": None,
}]
asked = client.responses.create(model="gpt", input="Weather in Paris?", tools=tools)
calls = [item for item in asked.output if item.type == "function_call"]
assert len(calls) == 1 and calls[0].name == "get_weather", asked.output
assert calls[0].arguments == '{"city":"Paris"}', calls[0].arguments
answered = client.responses.create(
    model="gpt",
    previous_response_id=asked.id,
    input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}],
)
assert answered.output_text == "Sunny in Paris.", answered

step("chat completion")
completion = client.chat.completions.create(
    model="echo",
    messages=[{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hello, chat!"}],
    temperature=0.3,
    metadata={"k": "v"},
)
assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-"), completion
assert completion.model == "echo"
choice = completion.choices[0]
assert choice.message.role == "assistant" and choice.message.content == "Hello, chat!", choice
assert choice.finish_reason == "stop" and choice.message.tool_calls is None, choice
usage = completion.usage
assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0, usage

step("chat completion (stream with usage)")
chunks = list(client.chat.completions.create(
    model="echo",
    messages=[{"role": "user", "content": "Stream me, please"}],
    stream=True,
    stream_options={"include_usage": True},
))
assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-"), chunks
assert chunks[0].choices[0].delta.role == "assistant"
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert text == "Stream me, please", text
assert chunks[-2].choices[0].finish_reason == "stop", chunks[-2]
assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0, chunks[-1]
assert all(c.usage is None for c in chunks[:-1])

step("chat completion (stream helper)")
with client.chat.completions.stream(
    model="echo", messages=[{"role": "user", "content": "Helper chat"}]
) as stream:
    for _ in stream:
        pass
    final = stream.get_final_completion()
assert final.choices[0].message.content == "Helper chat", final

step("chat completion (continued session)")
key = {"Agentry-Session": "sdk-chat"}
history = [{"role": "user", "content": "one"}]
first = client.chat.completions.create(model="echo", messages=history, extra_headers=key)
history += [{"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "two"}]
second = client.chat.completions.with_raw_response.create(model="echo", messages=history, extra_headers=key)
assert second.parse().choices[0].message.content == "two"
session = second.headers["agentry-session"]
assert session.startswith("sess_"), session
try:
    client.chat.completions.create(
        model="echo",
        messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
                  {"role": "user", "content": "z"}],
        extra_headers=key,
    )
    raise AssertionError("a rewritten history was accepted")
except openai.BadRequestError as error:
    assert error.param == "messages", error.body

step("chat completion tool round trip")
chat_tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
messages = [{"role": "user", "content": "Weather in Paris?"}]
asked = client.chat.completions.create(model="gpt", messages=messages, tools=chat_tools)
choice = asked.choices[0]
assert choice.finish_reason == "tool_calls", choice
calls = choice.message.tool_calls
assert len(calls) == 1 and calls[0].function.name == "get_weather", calls
assert calls[0].function.arguments == '{"city":"Paris"}', calls[0]
messages.append(choice.message.model_dump(exclude_none=True))
messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"})
answered = client.chat.completions.create(model="gpt", messages=messages, tools=chat_tools)
assert answered.choices[0].message.content == "Sunny in Paris.", answered
assert answered.choices[0].finish_reason == "stop"

step("conversations")
conversation = client.conversations.create(
    items=[{"type": "message", "role": "user", "content": "hi"},
           {"type": "message", "role": "assistant", "content": "hello"}],
    extra_body={"model": "echo"},
)
assert conversation.id.startswith("conv_") and conversation.object == "conversation", conversation
assert client.conversations.retrieve(conversation.id).id == conversation.id
updated = client.conversations.update(conversation.id, metadata={"topic": "demo"})
assert updated.metadata == {"topic": "demo"}, updated
assert client.conversations.retrieve(conversation.id).metadata == {"topic": "demo"}
continued = client.responses.create(model="echo", input="again", conversation=conversation.id)
assert continued.output_text == "again", continued
assert continued.conversation.id == conversation.id, continued.conversation
listed = list(client.conversations.items.list(conversation.id, order="asc", limit=2))
texts = [item.content[0].text for item in listed]
assert texts == ["hi", "hello", "again", "again"], texts
first = client.conversations.items.retrieve(listed[0].id, conversation_id=conversation.id)
assert first.id == listed[0].id and first.role == "user", first

step("conversation items added between responses")
added = client.conversations.items.create(
    conversation.id,
    items=[{"type": "message", "role": "user", "content": "an aside"},
           {"type": "message", "role": "assistant", "content": "noted"}],
)
assert [item.content[0].text for item in added.data] == ["an aside", "noted"], added
assert added.data[0].id == f"msg_{conversation.id[5:]}_4", added.data[0].id
read_back = client.conversations.items.retrieve(added.data[1].id, conversation_id=conversation.id)
assert read_back.role == "assistant" and read_back.content[0].text == "noted", read_back
newest = client.conversations.items.list(conversation.id, limit=2)
assert [item.id for item in newest.data] == [added.data[1].id, added.data[0].id], newest
try:
    client.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
    raise AssertionError("an item was deleted")
except openai.APIStatusError as error:
    assert error.status_code == 405, error
deleted = client.conversations.delete(conversation.id)
assert deleted.deleted and deleted.id == conversation.id, deleted
try:
    client.conversations.retrieve(conversation.id)
    raise AssertionError("a deleted conversation was found")
except openai.NotFoundError:
    pass

step("errors")
try:
    client.responses.create(model="nobody", input="x")
    raise AssertionError("an unknown model was accepted")
except openai.NotFoundError as error:
    assert error.code == "model_not_found", error.body
try:
    client.responses.create(model="echo", input="x", instructions="Be terse")
    raise AssertionError("instructions were accepted")
except openai.BadRequestError as error:
    assert error.param == "instructions", error.body

try:
    client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "x"}], n=2)
    raise AssertionError("n=2 was accepted")
except openai.BadRequestError as error:
    assert error.param == "n", error.body

print("all steps passed", flush=True)
