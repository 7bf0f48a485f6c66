"""``A2AAgent``: a remote Agent2Agent agent, called like a local agent, used as a node of a
graph or as a tool of a :class:`~graph_agent.ReactAgent`, as
:class:`~graph_agent.client.RemoteGraph` is for a LangGraph-protocol server::

    helper = A2AAgent("http://127.0.0.1:8123/a2a/assistant")
    helper.invoke("What is 2 + 2?")["messages"][-1].text
    ReactAgent("caller", model, tools=[helper.as_tool()])

``url`` is the agent's base URL: its card is read from ``url/.well-known/agent-card.json`` (an
assistant of ``graph-agent serve`` or LangGraph Server is at ``/a2a/{assistant_id}``), and the
official ``a2a-sdk`` client (the ``a2a`` extra) talks to the interface the card offers. The
question goes as a message's text; the answer is the task's artifacts' text (or the reply
message's). With a ``thread_id`` the next questions on that thread go in the same A2A context
(the remote conversation goes on); without one each question is a context of its own.

A task that needs input (the remote run paused for a human) comes back as the state's
``interrupts``; ``invoke(Command(resume="yes"), config)`` on the same thread sends the answer.
A failed, cancelled or rejected task raises :class:`A2AAgentError`.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from graph_agent.graph.concurrency import start_thread
from graph_agent.graph.errors import GraphRuntimeError
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import Command, Interrupt, NodeOutput, RunnableConfig
from graph_agent.messages import AssistantMessage, BaseMessage, UserMessage
from graph_agent.tools import Tool

__all__ = ["A2AAgent", "A2AAgentError"]

_T = TypeVar("_T")
_FAILED = {"TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
_PAUSED = {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}


class A2AAgentError(GraphRuntimeError):
    """The remote agent refused the message, or its task did not complete: ``state`` is the
    task's state (``TASK_STATE_FAILED``, …; empty for a refusal), ``task_id`` its id."""

    def __init__(self, message: str, *, state: str = "", task_id: str = "") -> None:
        super().__init__(message)
        self.state = state
        self.task_id = task_id


class A2AAgent:
    """A remote A2A agent at ``url`` (see the module's docstring). ``name`` is what it is
    known by locally (default: the URL's last segment); ``api_key`` goes as ``x-api-key``,
    ``headers`` with every request; ``timeout`` bounds each request (None: no bound)."""

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 300.0,
    ) -> None:
        self.url = url.rstrip("/")
        self._name = name or self.url.rsplit("/", 1)[-1] or "a2a_agent"
        self._headers = {**(headers or {}), **({"x-api-key": api_key} if api_key else {})}
        self._timeout = timeout
        self._contexts: dict[str, str] = {}
        """The remote context of each local thread, as the agent named it (in memory)."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_agent(self) -> bool:
        """An A2A agent takes a question and answers a message."""
        return True

    def __repr__(self) -> str:
        return f"A2AAgent({self.url!r})"

    # runs
    def invoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Ask the agent and return ``{"messages": [question, answer]}`` (with the task's
        pause as ``interrupts``). ``input``: a question (a string or a message), a state whose
        last message is the question, or ``Command(resume=...)`` answering a pause."""
        return _blocking(self.ainvoke(input, config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> OverAllState:
        """Async twin of :meth:`invoke`."""
        question = _question(input)
        thread_id = config.thread_id if config is not None else None
        context_id = self._contexts.get(thread_id) if thread_id is not None else None
        answer, task = await self._ask(question, context_id)
        if thread_id is not None and task.get("context_id"):
            self._contexts[thread_id] = task["context_id"]
        messages: list[BaseMessage] = [UserMessage(question)]
        if answer:
            messages.append(AssistantMessage(answer))
        interrupts = []
        if task.get("state") in _PAUSED:
            interrupts.append(Interrupt(task.get("id", ""), answer, self.name))
        return OverAllState({"messages": messages}, interrupts)

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: Any = None,
        task_events: Any = False,
    ) -> Iterator[NodeOutput]:
        """The agent's answer as one :class:`NodeOutput` (named after the agent)."""
        _plain("stream", subgraphs, stream_mode, task_events)
        yield self._output(self.invoke(input, config))

    async def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        subgraphs: bool = False,
        stream_mode: Any = None,
        task_events: Any = False,
    ) -> AsyncIterator[NodeOutput]:
        """Async twin of :meth:`stream`."""
        _plain("astream", subgraphs, stream_mode, task_events)
        yield self._output(await self.ainvoke(input, config))

    def _output(self, state: OverAllState) -> NodeOutput:
        return NodeOutput(
            node=self.name,
            agent=self.name,
            step=0,
            update={"messages": list(state["messages"])[1:]},
            state=state,
            checkpoint_id=None,
            interrupts=tuple(state.interrupts),
        )

    def with_saver(self, saver: Any) -> A2AAgent:
        """A copy (``saver`` must be ``None``: the remote agent keeps its conversations).

        Raises:
            ValueError: ``saver`` is not ``None``.
        """
        if saver is not None:
            raise ValueError(
                f"A2AAgent {self.url} keeps its conversations on its server: pass with_saver(None)"
            )
        return copy.copy(self)

    # as a node, as a tool
    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """As a node: the state's last message is the question (a context of its own); the
        answer is appended to ``messages``."""
        answered = self.invoke(state)
        return {"messages": list(answered["messages"])[1:]}

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """A tool asking the agent one question (a context of its own); it answers with the
        agent's answer."""

        async def ask(question: str) -> str:
            answer, _ = await self._ask(question, None)
            return answer

        return Tool(
            ask,
            name=name or self.name.replace(" ", "_"),
            description=description or f"Ask the {self.name} agent a question.",
        )

    # A2A
    async def _ask(self, question: str, context_id: str | None) -> tuple[str, dict[str, str]]:
        """Send ``question``; the answer's text and the task's id, context and state."""
        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
        from a2a.utils.errors import A2AError

        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER)
        message.parts.append(Part(text=question))
        if context_id:
            message.context_id = context_id
        async with httpx.AsyncClient(headers=self._headers, timeout=self._timeout) as http:
            try:
                config = ClientConfig(streaming=False, httpx_client=http)
                client = await create_client(self.url, client_config=config)
                events = [e async for e in client.send_message(SendMessageRequest(message=message))]
            except (A2AError, httpx.HTTPError) as exc:
                raise A2AAgentError(f"the A2A agent at {self.url} refused: {exc}") from exc
        reply = events[-1] if events else None
        if reply is None:
            raise A2AAgentError(f"the A2A agent at {self.url} sent no reply")
        if reply.HasField("message"):  # answered at once, without a task
            return _parts_text(reply.message.parts), {"context_id": reply.message.context_id}
        task = reply.task
        state = TaskState.Name(task.status.state)
        answer = "".join(_parts_text(artifact.parts) for artifact in task.artifacts)
        said = _parts_text(task.status.message.parts)
        found = {"id": task.id, "context_id": task.context_id, "state": state}
        if state in _FAILED:
            raise A2AAgentError(
                f"the A2A agent at {self.url} ended task {task.id} as {state}: {said}",
                state=state,
                task_id=task.id,
            )
        return answer or said, found


def _parts_text(parts: Any) -> str:
    return "".join(part.text for part in parts if part.text)


def _question(input: Any) -> str:
    """The text to send for ``input`` (see :meth:`A2AAgent.invoke`)."""
    if isinstance(input, Command):
        return input.resume if isinstance(input.resume, str) else repr(input.resume)
    if isinstance(input, str):
        return input
    if isinstance(input, BaseMessage):
        return input.text
    messages = input.get("messages") if isinstance(input, Mapping) else None
    if messages:
        last = messages[-1]
        return last.text if isinstance(last, BaseMessage) else str(last)
    raise ValueError(
        "an A2A agent takes a question: a string, a message, or a state whose 'messages' end "
        f"with it (got {type(input).__name__})"
    )


def _plain(what: str, subgraphs: bool, stream_mode: Any, task_events: Any) -> None:
    if subgraphs or stream_mode is not None or task_events:
        raise ValueError(
            f"A2AAgent.{what}: subgraphs, stream_mode and task_events are local graphs' options;"
            " a remote A2A agent streams its answer only"
        )


def _blocking(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to its end from sync code (on a thread of its own when this one runs
    an event loop, which must not wait on itself)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as exc:
            failure.append(exc)

    start_thread(run, name="graph-agent-a2a", daemon=False).join()
    if failure:
        raise failure[0]
    return result[0]
