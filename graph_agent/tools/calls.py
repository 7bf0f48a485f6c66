"""How a :class:`~graph_agent.tools.Tool` is called: :meth:`~ToolCalls.invoke` and
:meth:`~ToolCalls.run` from sync code, :meth:`~ToolCalls.arun` and :meth:`~ToolCalls.ainvoke`
on an event loop, each cut at its timeout. No call starts a thread or an event loop of its own
(``graph_agent.graph.concurrency``): a sync function runs on the shared worker pool (past its
timeout it is abandoned there, and its thread leaves the pool once it returns); an async one on
the caller's loop, or with a timeout on graph_agent's shared loop, whose watchdog abandons a
coroutine that blocks it."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any

from graph_agent.graph.concurrency import (
    TimedOut,
    at_most,
    bound_to_another_loop,
    call_on_pool,
    call_with_timeout,
    run_coroutine,
    run_off_loop,
    to_thread,
)
from graph_agent.graph.errors import exception_text
from graph_agent.tools.context import ToolContext, ToolTimeoutError, result_to_text


class ToolCalls:
    """The calling half of :class:`~graph_agent.tools.Tool` (which holds the function, its
    schema and :meth:`_bind`)."""

    __slots__ = ()

    name: str
    is_async: bool
    on_caller_loop: bool

    def _bind(
        self, arguments: Mapping[str, Any] | str | None, context: ToolContext | None
    ) -> Callable[[], Any]:
        raise NotImplementedError

    def invoke(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> str:
        """Validate ``arguments``, call the function (awaiting it if async), return text.

        :meth:`run` takes the same arguments and returns what the function returned.

        Args:
            arguments: The model's arguments, as a mapping or as raw JSON text.
            context: Handed to a :class:`ToolContext` parameter (an empty one when omitted).
            timeout: Seconds to wait; ``None`` waits as long as it takes (a sync function then
                runs on this thread, an async one on graph_agent's event loop for this nesting
                depth). With a timeout, a sync function runs on the shared worker pool; one
                that times out keeps running there, abandoned; an async one on graph_agent's
                shared loop (cut at the timeout even if it blocks that loop).
                ``context.cancelled`` is set so that it can stop.

        Raises:
            ToolArgumentsError: The arguments do not fit; the text is meant for the model.
            ToolTimeoutError: The call took longer than ``timeout``.
            Exception: Whatever the function raised, unchanged.
        """
        return result_to_text(self.run(arguments, context, timeout=timeout))

    def run(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`invoke`, returning the function's value (awaited) instead of its text: the
        agent's tool node applies a returned ``Command(update=..., goto=...)``."""
        call = self._bind(arguments, context)
        if timeout is None:
            result = run_coroutine(lambda: self._result_of(call)) if self.is_async else call()
        else:
            cancelled = context.cancelled if context is not None else None
            try:
                if self.is_async:
                    # on the shared loop, whose watchdog cuts a coroutine blocking it
                    # (time.sleep in an async def) at the timeout, as a sync tool would be
                    result = run_coroutine(
                        lambda: self._result_of(call), timeout, cancelled=cancelled
                    )
                else:
                    result = call_with_timeout(
                        call, timeout, thread_name=f"tool:{self.name}", cancelled=cancelled
                    )
            except TimedOut as out:
                raise self._timeout_error(out) from None
        if inspect.isawaitable(result):
            result = run_coroutine(lambda: result)
        return result

    async def arun(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`run` for code on an event loop (the agent's tool node under ``ainvoke`` and
        ``astream``): a sync function runs on the shared worker pool; an async one, with a
        ``timeout``, on graph_agent's shared loop of its own (on another thread, in a copy of
        this context), so that one blocking its loop (``time.sleep`` inside ``async def``)
        neither stalls this loop (a server's other runs) nor escapes its timeout: like a sync
        call, it is abandoned past it (see :mod:`graph_agent.graph.concurrency`). Without a
        timeout, or made with ``on_caller_loop=True``, an async function is awaited on this
        loop (its timeout then cuts it only where it awaits). Past ``timeout`` the call is
        cancelled and ``context.cancelled`` set.

        Raises:
            RuntimeError: Run off this loop, the tool used something bound to it (an
                ``asyncio.Event`` it waits on, a client or pool made on it); the message
                names the fix, ``on_caller_loop=True``.

        Example:
            >>> import asyncio
            >>> from graph_agent.tools import tool
            >>> @tool
            ... async def echo(text: str) -> str:
            ...     '''Repeat the text.'''
            ...     return text
            >>> asyncio.run(echo.arun({"text": "hi"}, timeout=5))
            'hi'
        """
        call = self._bind(arguments, context)
        if timeout is None:
            return await self._on_loop(call)
        cancelled = context.cancelled if context is not None else None
        try:
            if self.is_async and not self.on_caller_loop:
                return await self._off_loop(call, timeout, cancelled)
            return await at_most(self._on_loop(call), timeout, cancelled=cancelled)
        except TimedOut as out:
            raise self._timeout_error(out) from None

    async def _off_loop(
        self, call: Callable[[], Any], timeout: float, cancelled: threading.Event | None
    ) -> Any:
        """The async call's value, run off this loop; a failure to use an object of this loop
        there is raised as a ``RuntimeError`` that names the fix."""
        try:
            return await run_off_loop(lambda: self._on_loop(call), timeout, cancelled=cancelled)
        except Exception as exc:
            if not bound_to_another_loop(exc):
                raise
            raise RuntimeError(
                f"{exception_text(exc)}. Tool '{self.name}' ran on graph_agent's own event "
                "loop, off the caller's (so that its timeout cuts it even if it blocks its "
                "loop), and used something bound to the caller's loop (an asyncio Event, Lock "
                "or Queue, an async client or pool made there): make it with "
                "@tool(on_caller_loop=True) or Tool(..., on_caller_loop=True) to run it on the "
                "caller's loop."
            ) from exc

    async def _on_loop(self, call: Callable[[], Any]) -> Any:
        """The call's value: awaited on this loop, or (a sync function) from the shared pool."""
        result = call() if self.is_async else await to_thread(call)
        return await result if inspect.isawaitable(result) else result

    async def ainvoke(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> str:
        """Async :meth:`invoke`: sync functions run on the shared worker pool, so a timeout can
        abandon them without blocking the event loop; async ones always run on the caller's
        loop (they may use what lives on it, such as a shared HTTP client), so one that blocks
        that loop (a ``time.sleep`` inside ``async def``) holds the caller up until it returns.
        The agent's tool node calls :meth:`run` or :meth:`arun` instead: under ``ainvoke`` an
        async tool with a timeout runs off the caller's loop, where its timeout cuts it even if
        it blocks its loop, unless it was made with ``on_caller_loop=True`` (then it runs as
        here).

        Example:
            >>> import asyncio
            >>> from graph_agent.tools import tool
            >>> @tool
            ... async def echo(text: str) -> str:
            ...     '''Repeat the text.'''
            ...     return text
            >>> asyncio.run(echo.ainvoke({"text": "hi"}, timeout=5))
            'hi'
        """
        call = self._bind(arguments, context)
        if timeout is None:
            return result_to_text(await self._result_of(call))
        cancelled = context.cancelled if context is not None else None
        try:
            value = await at_most(self._result_of(call), timeout, cancelled=cancelled)
        except TimedOut as out:
            raise self._timeout_error(out) from None
        return result_to_text(value)

    async def _result_of(self, call: Callable[[], Any]) -> Any:
        """The call's value, awaited; a sync function runs on the shared worker pool (its
        thread called ``tool:<name>`` meanwhile), so that a timeout can abandon it without
        blocking the event loop."""
        if self.is_async:
            result = call()
        else:
            result = await call_on_pool(call, thread_name=f"tool:{self.name}")
        return await result if inspect.isawaitable(result) else result

    def _timeout_error(self, out: TimedOut) -> ToolTimeoutError:
        why = (
            " It blocked its event loop (a blocking call such as time.sleep or sync I/O "
            "inside an async def tool), so it could not be cancelled; it was abandoned."
            if out.loop_blocked
            else " It was abandoned."
        )
        return ToolTimeoutError(
            f"Tool '{self.name}' did not finish within {out.timeout:g} s.{why}",
            tool_name=self.name,
            timeout=out.timeout,
        )
