"""``RemoteGraph``: a graph or agent served by ``graph-agent serve`` (or by LangGraph Server),
called with the API of a local :class:`~graph_agent.graph.compiled.CompiledGraph`::

    remote = RemoteGraph("http://127.0.0.1:8123", "demo")
    remote.invoke("What is 2 + 2?", RunnableConfig(thread_id="user-42"))

It speaks LangGraph Server's wire protocol over httpx (``/threads/{id}/runs/wait``,
``/runs/stream`` as server-sent events, ``/threads/{id}/state``, ``/history``): with a
``thread_id`` the run goes on that thread (made on first use), without one it is stateless.
Messages travel LangChain-style and come back as graph_agent messages; interrupts come back as
:class:`Interrupt` and are answered with ``Command(resume=...)``, as locally.

A RemoteGraph is also a node of a local graph (``add_node("weather", remote)``: the node sends
the state as input and returns the remote run's final values as its update) and a tool
(:meth:`RemoteGraph.as_tool`: the model asks it a question, it answers with the remote agent's
last message).

:class:`A2AAgent` (:mod:`graph_agent.a2a_agent`) is the same for an agent that speaks the
Agent2Agent protocol: a node and a tool.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime
from typing import Any

import httpx
import httpx_sse

from graph_agent.a2a_agent import A2AAgent, A2AAgentError  # a remote A2A agent, likewise
from graph_agent.graph.errors import GraphRuntimeError
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import (
    Command,
    Interrupt,
    NodeOutput,
    RunnableConfig,
    StateSnapshot,
    StreamingOutput,
    TaskSnapshot,
)
from graph_agent.messages import BaseMessage, UserMessage
from graph_agent.serve.wire import messages_from_json, to_json
from graph_agent.tools import Tool

__all__ = ["A2AAgent", "A2AAgentError", "RemoteGraph", "RemoteGraphError"]

_STREAM_MODES = ["updates", "values", "custom", "messages-tuple"]


class RemoteGraphError(GraphRuntimeError):
    """The server refused a call or its run failed: ``status`` is the HTTP status (0 for a run
    that failed on the server), ``detail`` what the server said."""

    def __init__(self, message: str, *, status: int, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class RemoteGraph:
    """A served graph or agent (``assistant``: its name on the server), called like a local
    compiled graph. ``api_key`` is sent as ``x-api-key``; ``timeout`` bounds each request
    (None: a run may take as long as it takes)."""

    def __init__(
        self,
        url: str,
        assistant: str,
        *,
        api_key: str | None = None,
        timeout: float | None = 300.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.assistant = assistant
        self._headers = {**(headers or {}), **({"x-api-key": api_key} if api_key else {})}
        self._timeout = timeout
        self._kind: str | None = None  # the assistant's kind, asked once (see is_agent)

    @property
    def name(self) -> str:
        return self.assistant

    @property
    def is_agent(self) -> bool:
        """Whether the server says this assistant is an agent (``graph-agent serve`` tells, in
        the assistant's ``metadata.kind``), which takes a question as its input."""
        if self._kind is None:
            info = self._send("GET", f"/assistants/{self.assistant}")
            metadata = info.get("metadata") if isinstance(info, Mapping) else None
            kind = (metadata or {}).get("kind")
            graph = info.get("graph_id") if isinstance(info, Mapping) else None
            if kind is None and isinstance(graph, str) and graph != self.assistant:
                # an assistant created over a served graph: the graph's own says what it is
                served = self._send("GET", f"/assistants/{graph}")
                metadata = served.get("metadata") if isinstance(served, Mapping) else None
                kind = (metadata or {}).get("kind")
            self._kind = str(kind or "graph")
        return self._kind == "agent"

    def __repr__(self) -> str:
        return f"RemoteGraph({self.url!r}, {self.assistant!r})"

    # runs
    def invoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Run to the end (or the next pause) and return the final state, as locally. ``input``
        is a dict of state keys, ``None`` (continue the thread), ``Command(resume=...)``, or
        for an agent a question (a string)."""
        path, body = self._run(input, config, wait=True)
        return _final_state(self._send("POST", path, body))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        path, body = self._run(input, config, wait=True)
        return _final_state(await self._asend("POST", path, body))

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: Any = None,
        task_events: Any = False,
    ) -> Iterator[NodeOutput]:
        """Each node's output (with the state after its step), and the chunks nodes emit
        (:class:`StreamingOutput`), as the server streams them.

        Raises:
            ValueError: ``subgraphs``, ``stream_mode`` or ``task_events`` was given: a remote
                stream carries NodeOutputs only.
        """
        _local_only("stream", subgraphs, stream_mode, task_events)
        return self._stream(input, config)

    def _stream(self, input: Any, config: RunnableConfig | None) -> Iterator[NodeOutput]:
        path, body = self._run(input, config, wait=False)
        outputs = _Outputs(self.assistant)
        with (
            self._http() as client,
            httpx_sse.connect_sse(client, "POST", self.url + path, json=body) as source,
        ):
            _check(source.response, read=True)
            for event in source.iter_sse():
                yield from outputs.take(event.event, event.data)
        yield from outputs.finish()

    def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: Any = None,
        task_events: Any = False,
    ) -> AsyncIterator[NodeOutput]:
        """Async twin of :meth:`stream`."""
        _local_only("astream", subgraphs, stream_mode, task_events)
        return self._astream(input, config)

    async def _astream(
        self, input: Any, config: RunnableConfig | None
    ) -> AsyncIterator[NodeOutput]:
        path, body = self._run(input, config, wait=False)
        outputs = _Outputs(self.assistant)
        async with (
            self._ahttp() as client,
            httpx_sse.aconnect_sse(client, "POST", self.url + path, json=body) as source,
        ):
            if source.response.is_error:
                await source.response.aread()
            _check(source.response)
            async for event in source.aiter_sse():
                for output in outputs.take(event.event, event.data):
                    yield output
        for output in outputs.finish():
            yield output

    # the thread
    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's state (at ``config.checkpoint_id`` when given); with ``subgraphs``,
        each next task running a graph of its own carries that graph's state."""
        return _snapshot(self._send("GET", self._state_path(config, subgraphs)))

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """Async twin of :meth:`get_state`."""
        return _snapshot(await self._asend("GET", self._state_path(config, subgraphs)))

    def get_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first (``before``: a checkpoint id or config)."""
        path, body = _history_request(config, limit, before, "get_state_history")
        yield from map(_snapshot, self._send("POST", path, body))

    async def aget_state_history(
        self,
        config: RunnableConfig,
        limit: int | None = None,
        before: str | RunnableConfig | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of :meth:`get_state_history`."""
        path, body = _history_request(config, limit, before, "aget_state_history")
        for snapshot in map(_snapshot, await self._asend("POST", path, body)):
            yield snapshot

    def update_state(
        self, config: RunnableConfig, values: Mapping[str, Any], as_node: str | None = None
    ) -> RunnableConfig:
        """Write ``values`` into the thread (as ``as_node``); returns the new checkpoint's
        config."""
        path, body = _update_request(config, values, as_node, "update_state")
        return _updated(self._send("POST", path, body), config)

    async def aupdate_state(
        self, config: RunnableConfig, values: Mapping[str, Any], as_node: str | None = None
    ) -> RunnableConfig:
        """Async twin of :meth:`update_state`."""
        path, body = _update_request(config, values, as_node, "aupdate_state")
        return _updated(await self._asend("POST", path, body), config)

    # the graph
    def get_graph(self, fmt: str = "mermaid", *, xray: bool = False) -> str:
        """The served graph drawn as ``mermaid``, ``plantuml``, ``dot`` or ``ascii`` text (the
        server draws it); with ``xray``, nodes that run a graph of their own drawn open."""
        params = {"format": fmt, **({"xray": "true"} if xray else {})}
        with self._http() as client:
            response = client.get(f"{self.url}/assistants/{self.assistant}/graph", params=params)
        _check(response)
        return response.text

    def with_saver(self, saver: Any) -> RemoteGraph:
        """A copy of this remote graph (``saver`` must be ``None``): its threads live on the
        server, in the saver ``graph-agent serve`` was started with, so no local saver can
        hold them.

        Raises:
            ValueError: ``saver`` is not ``None``.
        """
        if saver is not None:
            raise ValueError(
                f"RemoteGraph {self.assistant!r} keeps its threads on the server at {self.url}, "
                f"in the saver the server runs with; it cannot use a local {type(saver).__name__}"
                ": pass with_saver(None), or choose the saver when starting the server"
            )
        return copy.copy(self)

    # as a node, as a tool
    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """As a node of a local graph: the state is the remote run's input (stateless), its
        final values are the node's update."""
        return self.invoke(dict(state)).data()

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """A tool asking the remote agent one question (a stateless run); its answer is the
        text of the remote run's last message."""

        def ask(question: str) -> str:
            messages = self.invoke({"messages": [UserMessage(question)]}).value("messages", [])
            last = messages[-1] if messages else None
            return last.text if isinstance(last, BaseMessage) else str(last or "")

        tool_name = name or self.assistant.replace(" ", "_")
        return Tool(
            ask,
            name=tool_name,
            description=description or f"Ask the {self.assistant} agent a question.",
        )

    # HTTP
    def _run(
        self, input: Any, config: RunnableConfig | None, *, wait: bool
    ) -> tuple[str, dict[str, Any]]:
        """The path and body of a run: on the config's thread (made if new), else stateless."""
        config = config or RunnableConfig()
        body: dict[str, Any] = {"assistant_id": self.assistant}
        if isinstance(input, Command):
            body["command"] = {"resume": to_json(input.resume)}
        elif isinstance(input, str):  # a question for an agent, as ReactAgent takes one
            body["input"] = {"messages": [{"type": "human", "content": input}]}
        else:
            body["input"] = to_json(input)
        if not wait:
            body["stream_mode"] = _STREAM_MODES
        if config.checkpoint_id is not None:
            body["checkpoint_id"] = config.checkpoint_id
        if config.metadata:
            body["metadata"] = to_json(dict(config.metadata))
        body["config"] = {"recursion_limit": config.max_steps}
        tail = "/runs/wait" if wait else "/runs/stream"
        if config.thread_id is None:
            return tail, body
        body["if_not_exists"] = "create"
        return f"/threads/{config.thread_id}{tail}", body

    def _state_path(self, config: RunnableConfig, subgraphs: bool = False) -> str:
        thread = _thread(config, "get_state")
        at = f"/{config.checkpoint_id}" if config.checkpoint_id else ""
        return f"/threads/{thread}/state{at}" + ("?subgraphs=true" if subgraphs else "")

    def _http(self) -> httpx.Client:
        return httpx.Client(headers=self._headers, timeout=self._timeout)

    def _ahttp(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self._headers, timeout=self._timeout)

    def _send(self, method: str, path: str, body: Any = None) -> Any:
        with self._http() as client:
            response = client.request(method, self.url + path, json=body)
        return _reply(response)

    async def _asend(self, method: str, path: str, body: Any = None) -> Any:
        async with self._ahttp() as client:
            response = await client.request(method, self.url + path, json=body)
        return _reply(response)


def _thread(config: RunnableConfig, what: str) -> str:
    if config.thread_id is None:
        raise ValueError(f"{what} needs RunnableConfig(thread_id=...)")
    return config.thread_id


def _local_only(what: str, subgraphs: bool, stream_mode: Any, task_events: Any) -> None:
    """Refuse the stream options a remote stream cannot honour, naming them."""
    given = [
        name
        for name, value, default in (
            ("subgraphs", subgraphs, False),
            ("stream_mode", stream_mode, None),
            ("task_events", task_events, False),
        )
        if value != default
    ]
    if given:
        raise ValueError(
            f"RemoteGraph.{what}() yields the NodeOutputs the server streams; "
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} not carried over HTTP: "
            "call it without, or stream from the server with a LangGraph SDK client"
        )


def _history_request(
    config: RunnableConfig, limit: int | None, before: str | RunnableConfig | None, what: str
) -> tuple[str, dict[str, Any]]:
    if isinstance(before, RunnableConfig):
        before = before.checkpoint_id
    body = {"limit": limit or 1000, **({"before": before} if before else {})}
    return f"/threads/{_thread(config, what)}/history", body


def _update_request(
    config: RunnableConfig, values: Mapping[str, Any], as_node: str | None, what: str
) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"values": to_json(dict(values))}
    if as_node is not None:
        body["as_node"] = as_node
    return f"/threads/{_thread(config, what)}/state", body


def _updated(reply: Any, config: RunnableConfig) -> RunnableConfig:
    """The config of the checkpoint an update made, from the server's reply."""
    return _config(reply.get("checkpoint")) or RunnableConfig(thread_id=config.thread_id)


def _check(response: httpx.Response, *, read: bool = False) -> None:
    """Raise :class:`RemoteGraphError` for an error response, with what the server said."""
    if not response.is_error:
        return
    if read:
        response.read()
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = response.text[:500]
    raise RemoteGraphError(
        f"the server answered {response.status_code}: {detail}",
        status=response.status_code,
        detail=detail,
    )


def _reply(response: httpx.Response) -> Any:
    _check(response)
    return response.json()


def _values(values: Any) -> dict[str, Any]:
    """A state (or a node's update) from JSON: messages become graph_agent messages, and
    LangGraph's removals of messages our ``RemoveMessage`` and ``ReplaceAll``."""
    if not isinstance(values, Mapping):
        return {}
    state = {k: v for k, v in values.items() if k not in ("__interrupt__", "__error__")}
    messages = state.get("messages")
    if isinstance(messages, list | Mapping):
        state["messages"] = messages_from_json(messages)
    return state


def _interrupts(items: Any) -> tuple[Interrupt, ...]:
    return tuple(
        Interrupt(str(item.get("id", "")), item.get("value"), str(item.get("node", "")))
        for item in items or ()
        if isinstance(item, Mapping)
    )


def _failed(error: Any) -> RemoteGraphError:
    """The error of a run that failed on the server, from its ``__error__`` (or ``error``
    event): the exception's class and message, and the node and step that raised it."""
    if not isinstance(error, Mapping):
        return RemoteGraphError(f"the run failed on the server: {error}", status=0, detail=error)
    text = f"{error.get('error') or 'Error'}: {error.get('message', '')}"
    node, step = error.get("node"), error.get("step")
    if isinstance(node, str):
        text = f"node {node!r} raised {text}" + (f" (step {step})" if isinstance(step, int) else "")
    return RemoteGraphError(f"the run failed on the server: {text}", status=0, detail=error)


def _final_state(reply: Any) -> OverAllState:
    if isinstance(reply, Mapping) and "__error__" in reply:
        raise _failed(reply["__error__"])
    interrupts = _interrupts(reply.get("__interrupt__")) if isinstance(reply, Mapping) else ()
    return OverAllState(_values(reply), list(interrupts))


def _config(checkpoint: Any) -> RunnableConfig | None:
    if not isinstance(checkpoint, Mapping) or not checkpoint.get("thread_id"):
        return None
    return RunnableConfig(
        thread_id=checkpoint["thread_id"],
        checkpoint_id=checkpoint.get("checkpoint_id"),
        checkpoint_ns=checkpoint.get("checkpoint_ns") or "",
    )


def _snapshot(body: Any) -> StateSnapshot:
    created = body.get("created_at")
    return StateSnapshot(
        values=_values(body.get("values")),
        next=tuple(body.get("next") or ()),
        config=_config(body.get("checkpoint")) or RunnableConfig(),
        metadata=body.get("metadata") or {},
        created_at=datetime.fromisoformat(created) if created else None,
        parent_config=_config(body.get("parent_checkpoint")),
        interrupts=_interrupts(body.get("interrupts")),
        tasks=tuple(_task(task) for task in body.get("tasks") or () if isinstance(task, Mapping)),
    )


def _task(body: Mapping[str, Any]) -> TaskSnapshot:
    """A next task of a snapshot, with its graph's state when the server sent it."""
    state, error = body.get("state"), body.get("error")
    return TaskSnapshot(
        id=str(body.get("id", "")),
        name=str(body.get("name", "")),
        interrupts=_interrupts(body.get("interrupts")),
        error=str(error) if error is not None else None,
        state=_snapshot(state) if isinstance(state, Mapping) else None,
    )


class _Outputs:
    """Server-sent events as NodeOutputs: an ``updates`` event waits for the ``values`` event
    after it, which carries the state after its step."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.step = -1
        self.waiting: list[tuple[str, dict[str, Any]]] = []

    def take(self, event: str, data: str) -> Iterator[NodeOutput]:
        payload = json.loads(data) if data else None
        if event == "error":
            raise _failed(payload)
        if event == "updates" and isinstance(payload, Mapping):
            if "__interrupt__" in payload:
                interrupts = _interrupts(payload["__interrupt__"])
                node = interrupts[0].node if interrupts else ""
                yield self._output(node, {}, None, interrupts)
                return
            self.waiting.extend((node, update or {}) for node, update in payload.items())
        elif event == "values" and isinstance(payload, Mapping):
            state = OverAllState(_values(payload))
            for node, update in self.waiting:
                yield self._output(node, _values(update), state)
            self.waiting = []
        elif event == "custom":
            yield self._chunk("", payload)
        elif event == "messages" and isinstance(payload, list) and payload:
            chunk, metadata = payload[0], payload[1] if len(payload) > 1 else {}
            node = metadata.get("langgraph_node", "") if isinstance(metadata, Mapping) else ""
            yield self._chunk(node, chunk.get("content", "") if isinstance(chunk, Mapping) else "")

    def finish(self) -> Iterator[NodeOutput]:
        for node, update in self.waiting:
            yield self._output(node, _values(update), None)
        self.waiting = []

    def _output(
        self,
        node: str,
        update: Mapping[str, Any],
        state: OverAllState | None,
        interrupts: tuple[Interrupt, ...] = (),
    ) -> NodeOutput:
        self.step += 1
        return NodeOutput(
            node=node,
            agent=self.agent,
            step=self.step,
            update=update,
            state=state,
            checkpoint_id=None,
            interrupts=interrupts,
        )

    def _chunk(self, node: str, payload: Any) -> StreamingOutput:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return StreamingOutput(
            node=node,
            agent=self.agent,
            step=self.step,
            update={},
            state=None,
            checkpoint_id=None,
            chunk=text,
        )
