"""What the command line tells a user when something they can fix went wrong.

A :class:`CliError` is one line saying what happened plus one hint saying what to do; ``main``
prints both and exits with its code, without a traceback (``--debug`` adds it). :func:`explain`
turns the library's own errors (a model server that cannot be reached, a key it refuses, a
corrupt database, a busy thread) into such errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from graph_agent.graph.errors import (
    GraphAgentError,
    GraphRecursionError,
    GraphSetupError,
    InvalidResumeError,
    NodeError,
    SerializationError,
    ThreadBusyError,
)
from graph_agent.models.errors import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelStreamCutError,
    ModelTimeoutError,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CliError",
    "RunStopped",
    "cannot_write",
    "explain",
]

EXIT_ERROR = 1
"""A run or a command failed (the model server, the database, the user's code)."""
EXIT_USAGE = 2
"""The command line itself was wrong: arguments, MODULE:OBJECT, input, missing key."""
EXIT_INTERRUPTED = 130
"""Ctrl-C."""


class CliError(Exception):
    """A failure the user can fix: ``message`` says what, ``hint`` says how."""

    def __init__(self, message: str, hint: str = "", exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code


class RunStopped(KeyboardInterrupt):
    """Ctrl-C stopped a run; ``advice`` says how to carry it on (empty: nothing to carry on).

    Still a ``KeyboardInterrupt``, so nothing that lets errors pass swallows it."""

    def __init__(self, advice: str) -> None:
        super().__init__(advice)
        self.advice = advice


def cannot_write(flag: str, path: str | os.PathLike[str], error: OSError) -> CliError:
    """``flag PATH`` cannot be written: what is in the way, and to give another path.

    Args:
        flag: The option that named the path (``-o``, ``--db``).
        path: The path as the user gave it.
        error: What creating its folder or writing it raised.
    """
    target = Path(path)
    hint = f"give {flag} a file path in a folder you can write to"
    if target.is_dir():
        return CliError(f"{flag} {path} is a folder, not a file", hint)
    blocker = next((folder for folder in target.parents if folder.exists()), None)
    if blocker is not None and not blocker.is_dir():
        return CliError(f"{flag} {path}: {blocker} is a file, not a folder", hint)
    reason = error.strerror or str(error)
    if error.filename is not None and Path(os.fsdecode(error.filename)) != target:
        return CliError(
            f"{flag} {path}: cannot create the folder {os.fsdecode(error.filename)} ({reason})",
            hint,
        )
    return CliError(f"{flag} {path} cannot be written ({reason})", hint)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def explain(error: BaseException) -> CliError | None:
    """The user-facing form of a library error, or ``None`` for a bug worth a traceback."""
    if isinstance(error, CliError):
        return error
    cause = error
    if isinstance(error, NodeError) and isinstance(error.__cause__, ModelError):
        cause = error.__cause__
    if isinstance(cause, ModelError):
        return _model_error(cause)
    if isinstance(error, NodeError):
        detail = error.__cause__ if error.__cause__ is not None else error
        return CliError(
            f"node {error.node!r} failed at step {error.step}: "
            f"{type(detail).__name__}: {_one_line(str(detail))}",
            "that is the graph's own code failing; run with --debug to see the traceback",
        )
    if isinstance(error, SerializationError):
        return CliError(
            _one_line(str(error)),
            "give --db a new file or a graph_agent database; move a damaged file away",
        )
    if isinstance(error, ThreadBusyError):
        return CliError(_one_line(str(error)), "wait for the other run, or pick another --thread")
    if isinstance(error, InvalidResumeError):
        return CliError(
            _one_line(str(error)),
            "show what the thread waits for with: graph-agent threads show THREAD --db PATH",
            EXIT_USAGE,
        )
    if isinstance(error, GraphRecursionError):
        return CliError(_one_line(str(error)), "the graph loops: check its conditional edges")
    if isinstance(error, GraphSetupError):
        return CliError(_one_line(str(error)), "fix the graph definition", EXIT_USAGE)
    if isinstance(error, GraphAgentError):
        return CliError(_one_line(str(error)), "run with --debug to see the traceback")
    return None


def _model_error(error: ModelError) -> CliError:
    message = _one_line(str(error))
    if isinstance(error, ModelTimeoutError):
        return CliError(
            f"the model server did not answer in time: {message}",
            "check that the server is up and not overloaded",
        )
    if isinstance(error, ModelStreamCutError):
        return CliError(
            f"the model server's answer broke off: {message}",
            "the server answered, then its stream stopped early; check its log, and send it one "
            "request at a time (llama-cpp-python's server cuts a stream when another request "
            "arrives, unless interrupt_requests is off)",
        )
    if isinstance(error, ModelConnectionError):
        return CliError(
            f"cannot reach the model server: {message}",
            "check --base-url / OPENAI_BASE_URL and that the server is running "
            "(Ollama: `ollama serve`)",
        )
    if isinstance(error, ModelAuthenticationError):
        return CliError(
            f"the model server refused the API key: {message}",
            "check OPENAI_API_KEY (or DASHSCOPE_API_KEY) and that it may use this model",
        )
    if isinstance(error, ModelNotFoundError):
        return CliError(
            f"the model server does not know this model or path: {message}",
            "pass --model with a model the server serves, and a --base-url ending in /v1",
        )
    if isinstance(error, ModelRateLimitError):
        return CliError(f"the model server is rate limiting: {message}", "wait and try again")
    return CliError(f"the model call failed: {message}", "run with --debug for details")
