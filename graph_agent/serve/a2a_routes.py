"""The A2A routes: each assistant's agent card and JSON-RPC endpoint, as LangGraph Server
serves them.

- ``POST /a2a/{assistant_id}``: the JSON-RPC endpoint (protocol 1.0 and 0.3's method names;
  :mod:`graph_agent.serve.a2a` answers them);
- ``GET /a2a/{assistant_id}/.well-known/agent-card.json``: the assistant's card, where an A2A
  client given ``http://host/a2a/{assistant_id}`` looks for it;
- ``GET /.well-known/agent-card.json?assistant_id=...``: the same card; without
  ``assistant_id``, the only assistant's (with several, a 400 naming each one's card).

A card's URL is the one the request came to (its ``Host``), and with API keys it declares the
``x-api-key`` header as its security scheme.
"""

from __future__ import annotations

from importlib import metadata

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from starlette.requests import Request
from starlette.responses import Response

from graph_agent.runnable_traits import takes_question
from graph_agent.serve.a2a import RunsRequestHandler, takes_messages
from graph_agent.serve.api import Api, ApiError
from graph_agent.serve.bodies import JSONResponse
from graph_agent.serve.guard import is_json_type, json_type_problem
from graph_agent.serve.protocols import CARD_PATH

__all__ = ["A2AEndpoints", "agent_card"]

_VERSIONS = ("1.0", "0.3")
"""The protocol versions the endpoint speaks (the SDK's dispatcher takes both)."""


class A2AEndpoints:
    """The A2A endpoints of ``api``'s assistants (see the module's docstring; the routes are
    :class:`graph_agent.serve.protocols.Protocols`')."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._dispatcher = JsonRpcDispatcher(
            RunsRequestHandler(api), context_builder=_ContextBuilder(), enable_v0_3_compat=True
        )

    async def rpc(self, request: Request) -> Response:
        self.api.runnable(request.path_params["assistant_id"])  # a 404 naming those served
        content_type = request.headers.get("content-type")
        if not is_json_type(content_type):  # a cross-site page can send text/plain, not JSON
            raise ApiError(415, json_type_problem(content_type))
        return await self._dispatcher.handle_requests(request)

    def card(self, request: Request) -> Response:
        return self._card(request, request.path_params["assistant_id"])

    def root_card(self, request: Request) -> Response:
        assistants = self.api.assistants
        assistant_id = request.query_params.get("assistant_id")
        if assistant_id is None and len(assistants) == 1:
            assistant_id = next(iter(assistants))
        if assistant_id is None:
            base = _base_url(request)
            cards = ", ".join(f"{base}/a2a/{name}{CARD_PATH}" for name in sorted(assistants))
            raise ApiError(
                400,
                "this server serves several assistants, each an A2A agent of its own: name one "
                f"with ?assistant_id=..., or read its card: {cards}",
            )
        return self._card(request, assistant_id)

    def _card(self, request: Request, assistant_id: str) -> Response:
        self.api.runnable(assistant_id)  # a 404 naming those served
        card = agent_card(self.api, assistant_id, _base_url(request))
        return JSONResponse(agent_card_to_dict(card))


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the assistant the route names."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["assistant_id"] = request.path_params["assistant_id"]
        return context


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def agent_card(api: Api, assistant_id: str, base_url: str) -> AgentCard:
    """The card of the served assistant ``assistant_id``, whose endpoint is under
    ``base_url``."""
    runnable = api.assistants[assistant_id]
    kind = "agent" if takes_question(runnable) else "graph"
    described = getattr(runnable, "description", None)
    if not takes_messages(api, assistant_id):
        description = f"The graph {assistant_id!r}: it takes no messages (run it with the runs API)"
    else:
        description = described or f"The {kind} {assistant_id!r}: send it a message"
    url = f"{base_url}/a2a/{assistant_id}"
    card = AgentCard(
        name=assistant_id,
        description=description,
        version=_version(),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=version)
            for version in _VERSIONS
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=assistant_id,
                name=assistant_id,
                description=description,
                tags=[kind, "graph-agent"],
                input_modes=["text/plain"],
                output_modes=["text/plain"],
            )
        ],
    )
    if api.keys_required:
        card.security_schemes["apiKey"].CopyFrom(
            SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name="x-api-key", description="the server's API key"
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={"apiKey": StringList()}))
    return card


def _version() -> str:
    try:
        return metadata.version("graph-agent")
    except metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "0"
