"""The stdio transport: an MCP server started as a subprocess, its answers read line by line
with a cap on a line's size.

It takes the place of the SDK's ``stdio_client``, whose reader joins the pieces of a long line
by concatenating them again for every piece: a 30 MB answer kept the toolset's event loop busy
for a minute, and the answers behind it (a trivial call's too) waited in the pipe, so the next
calls timed out. Here a line is split in time linear in its length, and one over the cap is
dropped as it arrives; the request it answered gets an error at once (see
:mod:`graph_agent.mcp.framing`). Starting and stopping the server follow the SDK's own steps:
its own process group (a job object on Windows) so that its children stop with it; on
closing, its stdin closed, 2 s to exit, then the whole group terminated.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, jsonrpc_message_adapter

from graph_agent.mcp.config import StdioServer
from graph_agent.mcp.framing import Dropped, Lines, answer_key, too_large

__all__ = ["stdio_transport"]

_logger = logging.getLogger(__name__)

_EXIT_SECONDS = 2.0
"""How long a server may take to exit once its stdin is closed (then its group is terminated,
and killed 2 s later), as the SDK waits."""
_FLUSH_SECONDS = 0.5
"""How long the messages handed over before closing may take to be written."""
_READ_BYTES = 65536

Received = MemoryObjectReceiveStream[SessionMessage | Exception]
Sent = MemoryObjectSendStream[SessionMessage]


@contextlib.asynccontextmanager
async def stdio_transport(
    spec: StdioServer, *, limit: int, dropped: dict[Any, int]
) -> AsyncIterator[tuple[Received, Sent]]:
    """Start the server ``spec``; yield the streams of its messages (read, write).

    Args:
        spec: The server.
        limit: The most bytes one message from the server may have.
        dropped: Where the ids of requests whose answers were dropped are noted (with the
            bytes seen), before their error is handed on.
    """
    process = await _start(spec)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for item in from_session:
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server stopped reading: the session sees it end
        finally:
            written.set()

    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, to_session, limit, dropped)
        group.start_soon(write)
        try:
            yield from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):
                from_server.close()  # the reader then drains the pipe, so the server can exit
                to_server.close()
                with anyio.move_on_after(_FLUSH_SECONDS):
                    await written.wait()
                await _stop(process)
            group.cancel_scope.cancel()


async def _read(
    process: Any,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    limit: int,
    dropped: dict[Any, int],
) -> None:
    """Hand each line of the server's output to the session as a message (a line that is not
    one, as the exception saying why); once the session is gone, read on and discard."""
    lines = Lines(limit)
    async with to_session:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
        ):
            while True:
                for line in lines.feed(await process.stdout.receive(_READ_BYTES)):
                    item = _message(line, limit, dropped)
                    if item is None:
                        continue
                    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await to_session.send(item)


def _message(
    line: bytes | Dropped, limit: int, dropped: dict[Any, int]
) -> SessionMessage | Exception | None:
    if isinstance(line, Dropped):
        return _instead_of(line, limit, dropped)
    if not line.strip():
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        _logger.warning("an MCP server wrote a line that is not a JSON-RPC message: %s", exc)
        return exc


def _instead_of(line: Dropped, limit: int, dropped: dict[Any, int]) -> SessionMessage | None:
    """The error that answers the request a dropped line answered (``None`` when the line
    answers none that can be told: it is dropped with a warning)."""
    request_id = line.request_id()
    if request_id is None:
        _logger.warning(
            "an MCP server sent a message of %s bytes, over the cap of %s (max_result_bytes), "
            "that answers no request it names: dropped",
            f"{line.size:,}",
            f"{limit:,}",
        )
        return None
    dropped[answer_key(request_id)] = line.size
    error: JSONRPCError = too_large(request_id, limit)
    return SessionMessage(error)


async def _start(spec: StdioServer) -> Any:
    """The server's process, in a process group (a job object on Windows) of its own."""
    env = get_default_environment() | dict(spec.env or {})
    if sys.platform == "win32":  # pragma: no cover - the SDK's own Windows start
        from mcp.os.win32.utilities import create_windows_process, get_windows_executable_command

        command = await anyio.to_thread.run_sync(get_windows_executable_command, spec.command)
        return await create_windows_process(command, list(spec.args), env, sys.__stderr__, spec.cwd)
    return await anyio.open_process(  # stderr: this process's own (file descriptor 2)
        [spec.command, *spec.args],
        env=env,
        stderr=None,
        cwd=spec.cwd,
        start_new_session=True,
    )


async def _stop(process: Any) -> None:
    """Close the server's stdin, give it time to exit, then terminate its whole group."""
    await _close(process.stdin)
    if not await _exited(process, _EXIT_SECONDS):
        if sys.platform == "win32":  # pragma: no cover
            from mcp.os.win32.utilities import terminate_windows_process_tree

            await terminate_windows_process_tree(process)
        else:
            from mcp.os.posix.utilities import terminate_posix_process_tree

            await terminate_posix_process_tree(process, _EXIT_SECONDS)
        if not await _exited(process, _EXIT_SECONDS):
            _logger.warning("MCP server process %d did not stop; left behind", process.pid)
    if sys.platform == "win32":  # pragma: no cover
        from mcp.os.win32.utilities import close_process_job

        close_process_job(process)
    await _close(process.stdout)
    if isinstance(process, anyio.abc.Process):
        with anyio.move_on_after(_EXIT_SECONDS):
            await process.aclose()


async def _exited(process: Any, seconds: float) -> bool:
    """Whether the process exits within ``seconds`` (its return code polled, not awaited: a
    child holding its pipes open would make a wait hang)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False


async def _close(stream: Any) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.aclose()
