"""Drives an A2A server with a 0.3 release of the official Python SDK (`a2a-sdk` 0.3.x), which
speaks only protocol 0.3: it resolves the agent's card, picks an interface from the card's
0.3 fields (`url`, `preferredTransport`, `additionalInterfaces`) and sends over it.

    python sdk03_client.py BASE_URL TOKEN AGENT

AGENT must echo the user's text. One line per step on stdout; the first failed check ends
the run with exit status 1.
"""

import asyncio
import sys
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, Task, TaskState, TextPart


class Failure(Exception):
    """A check that did not hold."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failure(what)


def step(what: str) -> None:
    print(what, flush=True)


async def send(http: httpx.AsyncClient, card, transport: str, streaming: bool) -> None:
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_transports=[transport]
    )
    client = ClientFactory(config).create(card)
    text = f"over {transport}, streaming {streaming}"
    message = Message(
        role=Role.user, parts=[Part(root=TextPart(text=text))], message_id=str(uuid.uuid4())
    )
    task = None
    async for event in client.send_message(message):
        check(isinstance(event, tuple), f"{transport}: a task was expected, got {event!r}")
        task = event[0]
    check(isinstance(task, Task), f"{transport}: no task came back")
    check(
        task.status.state == TaskState.completed,
        f"{transport}: the task is {task.status.state}, not completed",
    )
    said = "".join(
        part.root.text
        for artifact in task.artifacts or []
        for part in artifact.parts
        if isinstance(part.root, TextPart)
    )
    check(said == text, f"{transport}: the agent said {said!r}, not {text!r}")
    step(f"0.3 {transport} (streaming {streaming}): task {task.id} completed, echoed")


async def main(base: str, token: str, agent: str) -> None:
    url = f"{base}/a2a/{agent}"
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        check(
            card.protocol_version.startswith("0.3"),
            f"the card's protocolVersion is {card.protocol_version!r}",
        )
        check(card.url == url, f"the card's url is {card.url!r}, not {url!r}")
        check(
            card.preferred_transport == "JSONRPC",
            f"the card's preferredTransport is {card.preferred_transport!r}",
        )
        rest = [i.url for i in card.additional_interfaces or [] if i.transport == "HTTP+JSON"]
        check(rest == [url], f"the card's HTTP+JSON interfaces are {rest!r}")
        step(f"card of {agent}: 0.3 interfaces JSONRPC and HTTP+JSON at {url}")
        await send(http, card, "JSONRPC", False)
        await send(http, card, "JSONRPC", True)
        await send(http, card, "HTTP+JSON", False)
    step("all steps passed")


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:4]))
    except Failure as failure:
        print(f"FAILED: {failure}", flush=True)
        sys.exit(1)
