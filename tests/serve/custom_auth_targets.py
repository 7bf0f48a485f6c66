"""Custom auth and custom routes the tests serve (also a target for ``graph-agent serve --auth
tests.serve.custom_auth_targets:auth --app tests.serve.custom_auth_targets:app``).

Users by bearer token: ``ann-token`` and ``bob-token``; ``boom-token`` makes ``authenticate``
fail. A thread is its creator's (``owner``) and its ``participants``' (whom the creator lists):
``$eq`` on creation, ``$contains`` on every other thread action. Store namespaces are prefixed
with the caller's identity. A thread created with ``{"explode": true}`` in its metadata makes
the create handler raise.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from langgraph_sdk import Auth as SdkAuth
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from graph_agent.serve import Auth

TOKENS = {"ann-token": "ann", "bob-token": "bob"}
ANN = {"Authorization": "Bearer ann-token"}
BOB = {"Authorization": "Bearer bob-token"}

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    token = (authorization or "").removeprefix("Bearer ").strip()
    if token == "boom-token":
        raise RuntimeError("the identity provider is down")
    if token not in TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return {"identity": TOKENS[token], "permissions": ["threads:write"], "org": "acme"}


def _own(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    participants = metadata.get("participants")
    listed = list(participants) if isinstance(participants, list) else []
    metadata["participants"] = [ctx.user.identity, *(p for p in listed if p != ctx.user.identity)]


@auth.on.threads.create
async def create_thread(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
    if value["metadata"].get("explode"):
        raise RuntimeError("this handler has a bug")
    _own(ctx, value)
    return {"owner": {"$eq": ctx.user.identity}}


@auth.on.threads.create_run
async def create_run(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
    _own(ctx, value)
    return {"participants": {"$contains": ctx.user.identity}}


@auth.on.threads
def thread_access(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
    """A sync handler: every other thread action (read, search, update, delete)."""
    return {"participants": {"$contains": ctx.user.identity}}


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    value["namespace"] = (ctx.user.identity, *value["namespace"])


sdk_auth = SdkAuth()
"""The same rules, as a LangGraph user writes them (``langgraph_sdk.Auth``): owner only."""


@sdk_auth.authenticate
async def sdk_authenticate(headers: dict[bytes, bytes]) -> str:
    token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
    if token not in TOKENS:
        raise SdkAuth.exceptions.HTTPException(status_code=401, detail="who are you?")
    return TOKENS[token]


@sdk_auth.on
async def owner_only(ctx: SdkAuth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    value.setdefault("metadata", {})["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


STARTED: list[str] = []
"""What the custom app's lifespan did (``started``, ``stopped``)."""


async def hello(request: Request) -> JSONResponse:
    return JSONResponse({"hello": "world"})


async def whoami(request: Request) -> JSONResponse:
    user = request.scope.get("user")
    return JSONResponse({"identity": getattr(user, "identity", None)})


async def shadow(request: Request) -> JSONResponse:
    return JSONResponse({"shadowed": True})


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    STARTED.append("started")
    yield
    STARTED.append("stopped")


app = Starlette(
    routes=[
        Route("/hello", hello),
        Route("/whoami", whoami),
        Route("/assistants/search", shadow, methods=["POST"]),
    ],
    lifespan=_lifespan,
)
