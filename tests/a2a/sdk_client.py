"""Drives an A2A server with the official Python SDK (`a2a-sdk`) and checks every answer.

    python sdk_client.py BASE_URL TOKEN ECHO_AGENT SLOW_AGENT [--task-prefix P] [--context-prefix P]
                         [--default-agent A]

BASE_URL is the server's root (`http://127.0.0.1:8080`); each agent lives under
`BASE_URL/a2a/{agent}`. ECHO_AGENT answers with the user's text; SLOW_AGENT does too, slowly
enough (about 50 ms a character) that a task can be caught running. TOKEN is sent as a bearer
token through the SDK's `AuthInterceptor`, which only does so when the card declares a bearer
scheme. The prefixes, when given, are what every task id and context id must start with;
with --default-agent, the card at `BASE_URL/.well-known/agent-card.json` must be that agent's.
Push configs go through create/get/list/delete when the card promises pushNotifications, and
must each be refused with PushNotificationNotSupported when it does not.

One line per step on stdout; the first failed check ends the run with exit status 1 and says
what was expected and what came back.
"""

import argparse
import asyncio
import sys
import time
import traceback
import uuid

import httpx

from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    Client,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
)

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
# The slow agent takes about 3 s for this; long enough to catch it running.
SLOW_TEXT = "The slow agent spells this out one character at a time, ok?!"
DEADLINE_SECONDS = 30


class Failure(Exception):
    """A check that did not hold."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failure(what)


def state(value: int) -> str:
    return TaskState.Name(value)


class Bearer(CredentialService):
    """The one token, for whatever scheme name the card gives its bearer scheme."""

    def __init__(self, token: str):
        self.token = token

    async def get_credentials(self, security_scheme_name, context):
        return self.token


class Driver:
    def __init__(self, args, http: httpx.AsyncClient):
        self.base = args.base_url.rstrip("/")
        self.token = args.token
        self.echo = args.echo_agent
        self.slow = args.slow_agent
        self.task_prefix = args.task_prefix
        self.context_prefix = args.context_prefix
        self.default_agent = args.default_agent
        self.http = http
        self.interceptors = [AuthInterceptor(Bearer(args.token))]
        self.cards: dict[str, AgentCard] = {}

    # ------------------------------------------------------------ helpers

    def step(self, text: str) -> None:
        print(f"ok   {text}", flush=True)

    def agent_url(self, agent: str) -> str:
        return f"{self.base}/a2a/{agent}"

    def client(self, agent: str, binding: str, streaming: bool) -> Client:
        """A client made the SDK's way: a factory over the resolved card and a config."""
        config = ClientConfig(
            streaming=streaming,
            httpx_client=self.http,
            supported_protocol_bindings=[binding],
        )
        return ClientFactory(config).create(self.cards[agent], self.interceptors)

    @staticmethod
    def message(text: str, context_id: str | None = None) -> Message:
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
        )
        if context_id:
            message.context_id = context_id
        return message

    def check_ids(self, task: Task, what: str) -> None:
        check(task.id != "", f"{what}: the task has no id")
        check(task.context_id != "", f"{what}: task {task.id} has no contextId")
        if self.task_prefix:
            check(
                task.id.startswith(self.task_prefix),
                f"{what}: task id {task.id!r} does not start with {self.task_prefix!r}",
            )
        if self.context_prefix:
            check(
                task.context_id.startswith(self.context_prefix),
                f"{what}: contextId {task.context_id!r} does not start with "
                f"{self.context_prefix!r}",
            )

    @staticmethod
    def artifact_text(task: Task) -> str:
        return "".join(
            part.text for artifact in task.artifacts for part in artifact.parts if part.text
        )

    def check_echoed(self, task: Task, text: str, what: str) -> None:
        check(
            task.status.state == TaskState.TASK_STATE_COMPLETED,
            f"{what}: task {task.id} is {state(task.status.state)}, not TASK_STATE_COMPLETED",
        )
        got = self.artifact_text(task)
        check(got == text, f"{what}: the artifacts say {got!r}, not the echo {text!r}")

    async def send(self, client: Client, request: SendMessageRequest, what: str) -> Task:
        """The one answer of a non-streaming send, which must be a task."""
        events = [event async for event in client.send_message(request)]
        check(len(events) == 1, f"{what}: {len(events)} answers to a non-streaming send")
        check(
            events[0].HasField("task"),
            f"{what}: the answer is not a task: {events[0].WhichOneof('payload')}",
        )
        return events[0].task

    async def get(self, client: Client, task_id: str, history_length=None) -> Task:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return await client.get_task(request)

    async def wait_until_terminal(self, client: Client, task_id: str, what: str) -> Task:
        """Polls GetTask until the task is terminal (the non-blocking send's way to wait)."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            task = await self.get(client, task_id)
            if task.status.state in TERMINAL:
                return task
            check(
                time.monotonic() < deadline,
                f"{what}: task {task_id} still {state(task.status.state)} "
                f"after {DEADLINE_SECONDS}s",
            )
            await asyncio.sleep(0.05)

    async def expect_error(self, error: type, call, what: str) -> A2AError:
        try:
            result = await call
        except error as e:
            return e
        except A2AError as e:
            raise Failure(f"{what}: expected {error.__name__}, got {type(e).__name__}: {e}")
        raise Failure(f"{what}: expected {error.__name__}, got a result: {result}")

    async def running_slow_task(self, client: Client, what: str) -> Task:
        """A task of the slow agent started with returnImmediately, still running."""
        request = SendMessageRequest(
            message=self.message(SLOW_TEXT),
            configuration=SendMessageConfiguration(return_immediately=True),
        )
        task = await self.send(client, request, what)
        self.check_ids(task, what)
        check(
            task.status.state not in TERMINAL,
            f"{what}: returnImmediately answered with a finished task "
            f"({state(task.status.state)})",
        )
        return task

    @staticmethod
    def fold(events: list[StreamResponse], what: str) -> tuple[Task, list[str]]:
        """Applies stream events to the first event's task as the spec says a client must.

        Returns the folded task and the kinds of the events in order.
        """
        check(events, f"{what}: the stream was empty")
        check(
            events[0].HasField("task"),
            f"{what}: the first event is {events[0].WhichOneof('payload')}, not the task",
        )
        task = Task()
        task.CopyFrom(events[0].task)
        kinds = ["task"]
        for event in events[1:]:
            kind = event.WhichOneof("payload")
            kinds.append(kind)
            if kind == "task":
                check(event.task.id == task.id, f"{what}: a snapshot of another task")
                task.CopyFrom(event.task)
            elif kind == "status_update":
                update = event.status_update
                check(
                    update.task_id == task.id and update.context_id == task.context_id,
                    f"{what}: a status update for {update.task_id}/{update.context_id}, "
                    f"not {task.id}/{task.context_id}",
                )
                task.status.CopyFrom(update.status)
            elif kind == "artifact_update":
                update = event.artifact_update
                check(
                    update.task_id == task.id and update.context_id == task.context_id,
                    f"{what}: an artifact update for {update.task_id}/{update.context_id}, "
                    f"not {task.id}/{task.context_id}",
                )
                existing = [a for a in task.artifacts if a.artifact_id == update.artifact.artifact_id]
                if update.append:
                    check(
                        existing,
                        f"{what}: append to an artifact never started: "
                        f"{update.artifact.artifact_id}",
                    )
                    existing[0].parts.extend(update.artifact.parts)
                elif existing:
                    existing[0].CopyFrom(update.artifact)
                else:
                    task.artifacts.append(update.artifact)
            else:
                raise Failure(f"{what}: an unexpected {kind} event in a task stream")
        return task, kinds

    def check_stream_end(self, task: Task, kinds: list[str], text: str, what: str) -> None:
        check(
            "status_update" in kinds,
            f"{what}: no status update in the stream: {kinds}",
        )
        last_status = len(kinds) - 1 - kinds[::-1].index("status_update")
        check(
            all(kind == "task" for kind in kinds[last_status + 1 :]),
            f"{what}: events after the final status update: {kinds[last_status:]}",
        )
        check(
            "artifact_update" in kinds,
            f"{what}: the reply came in no artifact update: {kinds}",
        )
        self.check_echoed(task, text, what)

    # ------------------------------------------------------------ steps

    async def resolve_cards(self) -> None:
        for agent in (self.echo, self.slow):
            resolver = A2ACardResolver(self.http, self.agent_url(agent))
            card = await resolver.get_agent_card()
            url = self.agent_url(agent)
            interfaces = {
                (i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces
            }
            for binding in ("JSONRPC", "HTTP+JSON"):
                check(
                    (binding, url, "1.0") in interfaces,
                    f"card of {agent}: no {binding} 1.0 interface at {url}: {interfaces}",
                )
            caps = card.capabilities
            check(
                caps.streaming and caps.extended_agent_card,
                f"card of {agent}: capabilities streaming/extendedAgentCard are "
                f"{caps.streaming}/{caps.extended_agent_card}, not both true",
            )
            bearer = [
                name
                for name, scheme in card.security_schemes.items()
                if scheme.HasField("http_auth_security_scheme")
                and scheme.http_auth_security_scheme.scheme.lower() == "bearer"
            ]
            check(bearer, f"card of {agent}: no bearer httpAuthSecurityScheme")
            required = {name for r in card.security_requirements for name in r.schemes}
            check(
                set(bearer) & required,
                f"card of {agent}: securityRequirements {required} name no bearer scheme",
            )
            self.cards[agent] = card
            self.step(
                f"card of {agent}: {card.name!r}, interfaces {sorted(interfaces)}, "
                f"pushNotifications {caps.push_notifications}"
            )

    async def default_card(self) -> None:
        """The card at the server's root is the default agent's."""
        card = await A2ACardResolver(self.http, self.base).get_agent_card()
        urls = {i.url for i in card.supported_interfaces}
        check(
            urls == {self.agent_url(self.default_agent)},
            f"the default card's interfaces are at {urls}, not "
            f"{self.agent_url(self.default_agent)}",
        )
        self.step(f"default card: {card.name!r} at {self.agent_url(self.default_agent)}")

    async def extended_card(self, client: Client) -> None:
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        check(card.name != "", "extended card: no name")
        check(
            len(card.supported_interfaces) > 0,
            "extended card: no supportedInterfaces",
        )
        self.step(f"extended card: {card.name!r}")

    async def blocking_send(self, client: Client, label: str) -> tuple[Task, Message]:
        """A completed task and the message that started it."""
        text = f"Hello from the {label} SDK driver, blocking."
        message = self.message(text)
        task = await self.send(client, SendMessageRequest(message=message), label)
        self.check_ids(task, f"{label} blocking send")
        self.check_echoed(task, text, f"{label} blocking send")
        self.step(f"{label} blocking send: {task.id} completed with the echo")
        return task, message

    async def non_blocking_send(self, client: Client) -> None:
        what = "non-blocking send"
        task = await self.running_slow_task(client, what)
        first = state(task.status.state)
        done = await self.wait_until_terminal(client, task.id, what)
        self.check_echoed(done, SLOW_TEXT, what)
        self.step(f"{what}: {task.id} came back {first}, polled GetTask until completed")

    async def streaming_send(self, client: Client, label: str) -> Task:
        what = f"{label} streaming send"
        text = f"Streamed back by the {label} binding, chunk by chunk."
        request = SendMessageRequest(message=self.message(text))
        events = [event async for event in client.send_message(request)]
        task, kinds = self.fold(events, what)
        self.check_ids(task, what)
        self.check_stream_end(task, kinds, text, what)
        stored = await self.get(client, task.id)
        check(
            stored.status.state == TaskState.TASK_STATE_COMPLETED,
            f"{what}: GetTask after the stream says {state(stored.status.state)}",
        )
        check(
            self.artifact_text(stored) == text,
            f"{what}: GetTask's artifacts say {self.artifact_text(stored)!r}, the stream {text!r}",
        )
        updates = kinds.count("artifact_update")
        self.step(f"{what}: {task.id} in {len(kinds)} events ({updates} artifact updates)")
        return task

    async def get_with_history(self, client: Client, task: Task, sent: Message, label: str) -> None:
        """GetTask shows the task, its history starting with `sent` as the client made it."""
        what = f"{label} get"
        text = sent.parts[0].text
        full = await self.get(client, task.id)
        check(full.id == task.id, f"{what}: asked for {task.id}, got {full.id}")
        self.check_echoed(full, text, what)
        check(full.history, f"{what}: task {task.id} has no history")
        first = full.history[0]
        check(
            first.role == Role.ROLE_USER and [p.text for p in first.parts] == [text],
            f"{what}: the history does not start with the user's message: {first}",
        )
        # The creator of a message chooses its messageId (a2a.proto, Message.message_id).
        check(
            first.message_id == sent.message_id,
            f"{what}: the user's message came back with messageId {first.message_id!r}, "
            f"not the {sent.message_id!r} the client gave it",
        )
        one = await self.get(client, task.id, history_length=1)
        check(
            len(one.history) == 1,
            f"{what}: historyLength=1 gave {len(one.history)} messages",
        )
        check(
            one.history[0] == full.history[-1],
            f"{what}: historyLength=1 is not the newest message: {one.history[0]} "
            f"vs {full.history[-1]}",
        )
        self.step(
            f"{what}: {task.id} with {len(full.history)} messages, historyLength=1 gives the newest"
        )

    async def continue_conversation(self, client: Client, first: Task) -> Task:
        what = "second message in the context"
        text = "And a second message in the same conversation."
        request = SendMessageRequest(message=self.message(text, first.context_id))
        task = await self.send(client, request, what)
        self.check_ids(task, what)
        check(
            task.context_id == first.context_id,
            f"{what}: contextId {task.context_id}, not {first.context_id}",
        )
        check(task.id != first.id, f"{what}: the same task id {task.id} again")
        self.check_echoed(task, text, what)
        self.step(f"{what}: {task.id} in {task.context_id} after {first.id}")
        return task

    async def list_tasks(self, client: Client, first: Task, second: Task) -> None:
        what = "list"
        context_id = first.context_id
        page = await client.list_tasks(ListTasksRequest(context_id=context_id, page_size=1))
        check(
            [t.id for t in page.tasks] == [second.id],
            f"{what}: page 1 of size 1 in {context_id} is {[t.id for t in page.tasks]}, "
            f"not the newest task [{second.id}]",
        )
        check(page.next_page_token != "", f"{what}: page 1 of 2 has no nextPageToken")
        check(page.total_size == 2, f"{what}: totalSize {page.total_size}, not 2")
        check(page.page_size == 1, f"{what}: pageSize {page.page_size}, not 1")
        rest = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=1, page_token=page.next_page_token)
        )
        check(
            [t.id for t in rest.tasks] == [first.id],
            f"{what}: page 2 is {[t.id for t in rest.tasks]}, not [{first.id}]",
        )
        check(
            rest.next_page_token == "",
            f"{what}: the last page has nextPageToken {rest.next_page_token!r}",
        )
        for task in [*page.tasks, *rest.tasks]:
            check(
                task.context_id == context_id,
                f"{what}: {task.id} of context {task.context_id} in a list filtered on {context_id}",
            )
            check(
                len(task.artifacts) == 0,
                f"{what}: {task.id} lists artifacts without includeArtifacts",
            )
        self.step(f"{what}: {context_id} pages [{second.id}] then [{first.id}]")

    async def cancel(self, client: Client, echo: Client, finished: Task) -> None:
        """Cancels a running task of `client`'s agent, then `finished`, a task of `echo`'s."""
        what = "cancel"
        task = await self.running_slow_task(client, what)
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        check(canceled.id == task.id, f"{what}: asked to cancel {task.id}, got {canceled.id}")
        check(
            canceled.status.state == TaskState.TASK_STATE_CANCELED,
            f"{what}: CancelTask answered {state(canceled.status.state)}",
        )
        stored = await self.get(client, task.id)
        check(
            stored.status.state == TaskState.TASK_STATE_CANCELED,
            f"{what}: GetTask after the cancel says {state(stored.status.state)}",
        )
        self.step(f"{what}: running {task.id} is TASK_STATE_CANCELED")
        error = await self.expect_error(
            TaskNotCancelableError,
            echo.cancel_task(CancelTaskRequest(id=finished.id)),
            f"{what} of finished {finished.id}",
        )
        self.step(f"{what} of finished {finished.id}: TaskNotCancelableError ({error.message})")

    async def subscribe(self, blocking: Client, streaming: Client) -> None:
        what = "subscribe"
        task = await self.running_slow_task(blocking, what)
        events = [
            event async for event in streaming.subscribe(SubscribeToTaskRequest(id=task.id))
        ]
        folded, kinds = self.fold(events, what)
        check(folded.id == task.id, f"{what}: the snapshot is of {folded.id}, not {task.id}")
        self.check_stream_end(folded, kinds, SLOW_TEXT, what)
        self.step(f"{what}: {task.id} snapshot first, then {len(kinds) - 1} events to the end")

    async def push_configs(self, client: Client, receiver: str) -> None:
        what = "push config"
        task = await self.running_slow_task(client, what)
        if not self.cards[self.slow].capabilities.push_notifications:
            await self.push_not_supported(client, task, receiver)
            return
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=receiver, token="driver-token")
        )
        check(created.id != "", f"{what} create: no id in {created}")
        check(
            created.task_id == task.id and created.url == receiver and created.token == "driver-token",
            f"{what} create: answered {created}",
        )
        self.step(f"{what} create: {created.id} on {task.id}")
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
        )
        check(
            # agentry shows a config's token once, when it is created.
            got.id == created.id and got.url == receiver and got.token == "",
            f"{what} get: answered {got}",
        )
        self.step(f"{what} get: {got.id} -> {got.url}")
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        check(
            [c.id for c in listed.configs] == [created.id],
            f"{what} list: {[c.id for c in listed.configs]}, not [{created.id}]",
        )
        self.step(f"{what} list: [{created.id}]")
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        check(not listed.configs, f"{what} delete: still listed: {listed.configs}")
        await self.expect_error(
            TaskNotFoundError,
            client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
            ),
            f"{what} get after delete",
        )
        self.step(f"{what} delete: {created.id} gone from list and get")
        await client.cancel_task(CancelTaskRequest(id=task.id))

    async def push_not_supported(self, client: Client, task: Task, receiver: str) -> None:
        """Without the capability, every push config operation is PushNotificationNotSupported."""
        calls = {
            "create": lambda: client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=receiver)
            ),
            "get": lambda: client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="any")
            ),
            "list": lambda: client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            ),
            "delete": lambda: client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="any")
            ),
        }
        for name, call in calls.items():
            await self.expect_error(
                PushNotificationNotSupportedError,
                call(),
                f"push config {name} without the capability",
            )
        await client.cancel_task(CancelTaskRequest(id=task.id))
        self.step(
            "push config: the card says pushNotifications false; create/get/list/delete "
            "answer PushNotificationNotSupportedError"
        )

    # ------------------------------------------------------------ the run

    async def run(self) -> None:
        receiver = await start_receiver()
        await self.resolve_cards()
        if self.default_agent:
            await self.default_card()

        rpc = self.client(self.echo, "JSONRPC", streaming=False)
        rpc_stream = self.client(self.echo, "JSONRPC", streaming=True)
        slow = self.client(self.slow, "JSONRPC", streaming=False)
        slow_stream = self.client(self.slow, "JSONRPC", streaming=True)
        await self.extended_card(rpc)
        first, sent = await self.blocking_send(rpc, "JSON-RPC")
        await self.non_blocking_send(slow)
        await self.streaming_send(rpc_stream, "JSON-RPC")
        await self.get_with_history(rpc, first, sent, "JSON-RPC")
        second = await self.continue_conversation(rpc, first)
        await self.list_tasks(rpc, first, second)
        await self.cancel(slow, rpc, first)
        await self.subscribe(slow, slow_stream)
        await self.push_configs(slow, receiver)

        rest = self.client(self.echo, "HTTP+JSON", streaming=False)
        rest_stream = self.client(self.echo, "HTTP+JSON", streaming=True)
        task, sent = await self.blocking_send(rest, "HTTP+JSON")
        await self.get_with_history(rest, task, sent, "HTTP+JSON")
        await self.streaming_send(rest_stream, "HTTP+JSON")


async def start_receiver() -> str:
    """A webhook receiver on loopback that answers 204 to anything, for push config URLs."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}/a2a-push"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base_url")
    parser.add_argument("token")
    parser.add_argument("echo_agent")
    parser.add_argument("slow_agent")
    parser.add_argument("--task-prefix", default="")
    parser.add_argument("--context-prefix", default="")
    parser.add_argument(
        "--default-agent", default="", help="the agent whose card the root well-known path serves"
    )
    args = parser.parse_args()
    async with httpx.AsyncClient(timeout=DEADLINE_SECONDS) as http:
        driver = Driver(args, http)
        try:
            await driver.run()
        except Failure as failure:
            print(f"FAIL {failure}", flush=True)
            return 1
        except Exception as error:  # an SDK error is a failed step too: say which
            traceback.print_exc()
            print(f"FAIL {type(error).__name__}: {error}", flush=True)
            return 1
    print("all steps passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
