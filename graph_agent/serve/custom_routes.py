"""Custom routes: a Starlette (or FastAPI) app of the user's served beside the API, on the same
port (``graph-agent serve --app module:app``, ``http.app`` in the config file).

Its routes are tried first: a request one of them matches (path and method) goes to that app,
with its own middleware, exception handlers and lifespan (started and stopped with the
server's); every other request goes to the API. The ``Host``/``Origin`` guard covers both. The
API's auth (API keys, or custom auth) covers the app's routes only when asked
(``http.enable_custom_route_auth``, ``--app-auth``), as LangGraph Server does; then the user is
in ``request.user``. The API's body size limit is the API's: the app sets its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CustomRoutesMiddleware", "custom_routes_of", "with_custom_lifespan"]


def custom_routes_of(app: Any) -> list[BaseRoute]:
    """The routes of the custom ``app``.

    Raises:
        ValueError: it has none to match requests with (not a Starlette or FastAPI app).
    """
    routes = getattr(app, "routes", None)
    if not callable(app) or not isinstance(routes, list):
        raise ValueError(
            f"the custom app must be a Starlette (or FastAPI) app, got {type(app).__name__}: "
            "its routes are matched before the API's"
        )
    return routes


class CustomRoutesMiddleware:
    """Sends a request one of ``custom``'s routes matches to it (through ``access`` when the
    API's auth covers it), every other to the API behind.

    Args:
        app: The API (its auth, body limit and routes).
        custom: The custom app.
        access: Wraps ``custom`` in the API's auth check, or None to leave it open.
    """

    def __init__(
        self, app: ASGIApp, custom: Any, access: Callable[[ASGIApp], ASGIApp] | None = None
    ) -> None:
        self.app = app
        self._routes = custom_routes_of(custom)
        self._custom: ASGIApp = access(custom) if access is not None else custom

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self._claims(scope):
            await self._custom(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _claims(self, scope: Scope) -> bool:
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return True
        return False


def with_custom_lifespan(
    lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[None]], custom: Any
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """``lifespan`` with the custom app's inside it (started after, stopped before)."""
    router = getattr(custom, "router", None)
    inner = getattr(router, "lifespan_context", None)
    if inner is None:
        return lifespan

    @contextlib.asynccontextmanager
    async def both(app: Any) -> AsyncIterator[None]:
        async with lifespan(app), inner(custom):
            yield

    return both
