"""A2A server built from the official SDK's own server parts, shaped like agentry's A2A face.

It exists to check the drivers (`sdk_client.py`, `js_client.mjs`) against the SDK itself:
whatever a driver asserts must hold against the reference implementation before it is held
against agentry. It serves, for each agent name given, the card at
`/a2a/{A}/.well-known/agent-card.json`, JSON-RPC at `POST /a2a/{A}` and HTTP+JSON under
`/a2a/{A}/…` (1.0 and, with the SDK's compat layer, 0.3), behind the bearer token given on
the command line. Agents echo the user's text as artifact
chunks: `slow` one character every 50 ms, any other four characters at a time. With
`--no-push` the cards say `pushNotifications: false` and there is no push config store.

Needs `a2a-sdk[http-server]` and `uvicorn` (the drivers need neither):

    python3 -m venv /tmp/a2a-ref
    /tmp/a2a-ref/bin/pip install 'a2a-sdk[http-server]==1.3.0' uvicorn
    /tmp/a2a-ref/bin/python tests/a2a/sdk_reference_server.py 8765 TOKEN echo slow &
    /tmp/a2a-ref/bin/python tests/a2a/sdk_client.py http://127.0.0.1:8765 TOKEN echo slow
    (mkdir -p /tmp/a2a-js && cp tests/a2a/package*.json /tmp/a2a-js && cd /tmp/a2a-js && npm ci)
    node tests/a2a/js_client.mjs /tmp/a2a-js http://127.0.0.1:8765 TOKEN echo slow
"""

import asyncio
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)


class EchoExecutor(AgentExecutor):
    """Answers with the user's text, `chunk` characters per artifact update."""

    def __init__(self, chunk: int, delay: float):
        self.chunk = chunk
        self.delay = delay

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        pieces = [text[i : i + self.chunk] for i in range(0, len(text), self.chunk)]
        for i, piece in enumerate(pieces):
            if self.delay:
                await asyncio.sleep(self.delay)
            await updater.add_artifact(
                [new_text_part(piece)],
                artifact_id="reply",
                append=i > 0,
                last_chunk=i == len(pieces) - 1,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.cancel()


class BearerOnly(BaseHTTPMiddleware):
    """Everything but the cards needs `Authorization: Bearer <token>`."""

    def __init__(self, app, token: str):
        super().__init__(app)
        self.token = token

    async def dispatch(self, request, call_next):
        if request.url.path.endswith("/.well-known/agent-card.json"):
            return await call_next(request)
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse(
                {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "no token"}},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)


def card_for(base: str, name: str, push: bool) -> AgentCard:
    url = f"{base}/a2a/{name}"
    return AgentCard(
        name=name,
        description=f"The {name} agent.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
            AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=push, extended_agent_card=True
        ),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", bearer_format="JWT"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="chat", name="Chat", description="Echoes.", tags=["chat"])],
    )


def main() -> None:
    port, token, *agents = sys.argv[1:]
    push = "--no-push" not in agents
    agents = [a for a in agents if a != "--no-push"]
    base = f"http://127.0.0.1:{port}"
    routes, rest = [], []
    for name in agents:
        card = card_for(base, name, push)
        executor = EchoExecutor(1, 0.05) if name == "slow" else EchoExecutor(4, 0)
        handler = DefaultRequestHandler(
            agent_executor=executor,
            task_store=InMemoryTaskStore(),
            agent_card=card,
            push_config_store=InMemoryPushNotificationConfigStore() if push else None,
            extended_agent_card=card,
        )
        prefix = f"/a2a/{name}"
        routes += create_agent_card_routes(card, card_url=f"{prefix}/.well-known/agent-card.json")
        routes += create_jsonrpc_routes(handler, prefix, enable_v0_3_compat=True)
        # Without the SDK's `/{tenant}` mount, which would swallow the other agents' paths.
        rest += [
            route
            for route in create_rest_routes(handler, enable_v0_3_compat=True, path_prefix=prefix)
            if isinstance(route, Route)
        ]
    app = Starlette(routes=routes + rest)
    app.add_middleware(BearerOnly, token=token)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
