"""Record a real model's answers to a JSON file, and replay them offline.

``RecordingChatModel(inner, path)`` passes every call to ``inner`` and saves the answer under a
fingerprint of the request. ``ReplayChatModel(path)`` (or ``RecordingChatModel.replay(path)``)
answers the same requests from the file, with no network, and raises
:class:`UnrecordedRequestError` for a request it has not seen.

The fingerprint covers what the model sees: message roles, texts, tool calls (name and
arguments), the tools' schemas and the options. It leaves out what changes from run to run
without changing the question: message ids, tool call ids and token usage.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel

from graph_agent.messages import AssistantMessage, AssistantMessageChunk, BaseMessage
from graph_agent.models.base import (
    ChatModel,
    ChunkAccumulator,
    LocalChatModel,
    ModelRequest,
    ToolLike,
)
from graph_agent.models.errors import UnrecordedRequestError
from graph_agent.models.scripted import as_reply

__all__ = ["RecordingChatModel", "ReplayChatModel", "request_fingerprint"]

_FORMAT = "graph_agent.recording"
_VERSION = 1


def _jsonable(value: Any) -> Any:
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value.model_json_schema()
    return pydantic_core.to_jsonable_python(value, fallback=repr)


def canonical_request(request: ModelRequest) -> dict[str, Any]:
    """The part of a request that decides the answer, as plain JSON data."""
    messages = []
    for message in request.messages:
        data = message.model_dump(mode="json", exclude={"id", "usage"})
        data.pop("tool_call_id", None)
        if not data.get("thinking_blocks"):  # as recorded before messages had them
            data.pop("thinking_blocks", None)
        for call in data.get("tool_calls", ()):
            call.pop("id", None)
        messages.append(data)
    tools = [
        {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        for tool in request.tools
    ]
    return {
        "messages": messages,
        "tools": _jsonable(tools),
        "options": _jsonable(request.options),
    }


def request_fingerprint(request: ModelRequest) -> str:
    """A stable hash of :func:`canonical_request` (sha256, hex)."""
    text = json.dumps(canonical_request(request), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _load_entries(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise ValueError(f"{path} is not a graph_agent recording (no format {_FORMAT!r})")
    if data.get("version") != _VERSION:
        raise ValueError(f"{path} has recording version {data.get('version')}; need {_VERSION}")
    entries: list[dict[str, Any]] = data["entries"]
    return entries


class RecordingChatModel:
    """Wraps a real model and saves each answer to ``path`` (JSON), keyed by the request.

    An existing recording at ``path`` is extended, so a partial recording can be completed by
    running again. The file is rewritten atomically after every answer.

    Args:
        inner: The model that really answers.
        path: The recording file.

    Attributes:
        requests: Every :class:`ModelRequest` received, in order.

    Example:
        >>> import tempfile, pathlib
        >>> from graph_agent.messages import UserMessage
        >>> from graph_agent.models import ScriptedChatModel
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "answers.json"
        >>> live = RecordingChatModel(ScriptedChatModel(["Paris."]), path)
        >>> live.generate([UserMessage("Capital of France?")]).text
        'Paris.'
        >>> offline = RecordingChatModel.replay(path)
        >>> offline.generate([UserMessage("Capital of France?")]).text
        'Paris.'
    """

    def __init__(self, inner: ChatModel, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.path = Path(path)
        self.requests: list[ModelRequest] = []
        self._lock = threading.Lock()
        self._entries = _load_entries(self.path) if self.path.exists() else []

    def __repr__(self) -> str:
        return f"RecordingChatModel(inner={self.inner!r}, path={str(self.path)!r})"

    @property
    def wrapped(self) -> ChatModel:
        """The model that really answers (what traces and events name)."""
        return self.inner

    @staticmethod
    def replay(path: str | os.PathLike[str]) -> ReplayChatModel:
        """A model that answers from the recording at ``path``."""
        return ReplayChatModel(path)

    def _save(self, request: ModelRequest, reply: AssistantMessage) -> None:
        entry = {
            "fingerprint": request_fingerprint(request),
            "request": canonical_request(request),
            "response": reply.model_dump(mode="json"),
        }
        with self._lock:
            self._entries.append(entry)
            document = {"format": _FORMAT, "version": _VERSION, "entries": self._entries}
            text = json.dumps(document, indent=1, ensure_ascii=False)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    file.write(text)
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise

    def _request(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None,
        options: Mapping[str, Any] | None,
    ) -> ModelRequest:
        request = ModelRequest.build(messages, tools, options)
        with self._lock:
            self.requests.append(request)
        return request

    def generate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Ask ``inner`` and save its answer."""
        request = self._request(messages, tools, options)
        reply = self.inner.generate(request.messages, request.tools, request.options)
        self._save(request, reply)
        return reply

    def stream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Iterator[AssistantMessageChunk]:
        """Stream ``inner``'s answer as it comes; save it once the stream completed."""
        request = self._request(messages, tools, options)
        accumulator = ChunkAccumulator()
        for chunk in self.inner.stream(request.messages, request.tools, request.options):
            accumulator.add(chunk)
            yield chunk
        self._save(request, accumulator.message())

    async def agenerate(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """Async :meth:`generate`."""
        request = self._request(messages, tools, options)
        reply = await self.inner.agenerate(request.messages, request.tools, request.options)
        self._save(request, reply)
        return reply

    async def astream(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AssistantMessageChunk]:
        """Async :meth:`stream`."""
        request = self._request(messages, tools, options)
        accumulator = ChunkAccumulator()
        async for chunk in self.inner.astream(request.messages, request.tools, request.options):
            accumulator.add(chunk)
            yield chunk
        self._save(request, accumulator.message())


class ReplayChatModel(LocalChatModel):
    """Answers from a recording made by :class:`RecordingChatModel`, offline.

    A request recorded several times gets the recorded answers in order, then the last one
    again. Each reply is a copy with a fresh id. A request that was never recorded raises
    :class:`UnrecordedRequestError`, naming the closest recorded request and where it differs.

    Attributes:
        requests: Every :class:`ModelRequest` received, in order.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(
                f"no recording at {self.path}: record one first with RecordingChatModel"
            )
        self._entries = _load_entries(self.path)
        self._answers: dict[str, list[AssistantMessage]] = {}
        for entry in self._entries:
            answer = AssistantMessage.model_validate(entry["response"])
            self._answers.setdefault(entry["fingerprint"], []).append(answer)
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        return f"ReplayChatModel(path={str(self.path)!r}, recorded={len(self._entries)})"

    def _reply(self, request: ModelRequest) -> AssistantMessage:
        fingerprint = request_fingerprint(request)
        with self._lock:
            self.requests.append(request)
            answers = self._answers.get(fingerprint)
            if not answers:
                raise UnrecordedRequestError(self._miss(request))
            served = self._served.get(fingerprint, 0)
            self._served[fingerprint] = served + 1
        return as_reply(answers[min(served, len(answers) - 1)])

    def _miss(self, request: ModelRequest) -> str:
        wanted = canonical_request(request)
        text = (
            f"{self.path} holds no answer for this request ({len(wanted['messages'])} messages, "
            f"last: {_describe(wanted['messages'][-1]) if wanted['messages'] else 'none'})"
        )
        best, shared = None, -1
        for entry in self._entries:
            recorded = entry["request"]["messages"]
            common = 0
            for mine, theirs in zip(wanted["messages"], recorded, strict=False):
                if mine != theirs:
                    break
                common += 1
            if common > shared:
                best, shared = entry, common
        if best is not None:
            recorded = best["request"]
            if shared < min(len(wanted["messages"]), len(recorded["messages"])):
                text += (
                    f"; the closest recording differs at message {shared + 1}: recorded "
                    f"{_describe(recorded['messages'][shared])}, "
                    f"now {_describe(wanted['messages'][shared])}"
                )
            elif recorded["tools"] != wanted["tools"] or recorded["options"] != wanted["options"]:
                text += "; the closest recording has the same messages but other tools or options"
            else:
                text += f"; the closest recording has {len(recorded['messages'])} messages"
        return text + ". Record it again with RecordingChatModel(inner, path)."


def _describe(message: Mapping[str, Any]) -> str:
    text = str(message.get("content", ""))
    text = text if len(text) <= 60 else text[:57] + "..."
    calls = [call.get("name") for call in message.get("tool_calls", ())]
    suffix = f" calling {', '.join(map(str, calls))}" if calls else ""
    return f"{message.get('role')} {text!r}{suffix}"
