"""Under ainvoke/astream the agent's model call runs on the caller's loop, in its thread; async
tools with a timeout (the default ``tool_timeout``) on a shared loop of their own, so that one
blocking its loop stalls neither the caller nor escapes its timeout; without a timeout, or made
with ``on_caller_loop=True``, on the caller's loop; sync tools on the shared pool; invoke is
unchanged."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from graph_agent import (
    ReactAgent,
    RunnableConfig,
    StreamingOutput,
    ToolContext,
    emit_chunk,
    tool,
)
from graph_agent.agent import ToolInterceptor
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel
from graph_agent.models.base import message_to_chunks


class ThreadRecordingModel(ScriptedChatModel):
    """A scripted model that records the thread of each call, sync or async."""

    def __init__(self, replies: list[AssistantMessage | str]) -> None:
        super().__init__(replies)
        self.threads: list[tuple[str, int]] = []

    def generate(self, messages, tools=None, options=None):
        self.threads.append(("generate", threading.get_ident()))
        return super().generate(messages, tools, options)

    async def agenerate(self, messages, tools=None, options=None):
        self.threads.append(("agenerate", threading.get_ident()))
        return super().generate(messages, tools, options)

    async def astream(self, messages, tools=None, options=None):
        self.threads.append(("astream", threading.get_ident()))
        for chunk in message_to_chunks(super().generate(messages, tools, options)):
            yield chunk


def _agent(
    model: ThreadRecordingModel, seen: list[int], tool_timeout: float | None = 60.0
) -> ReactAgent:
    @tool
    async def lookup(query: str) -> str:
        """Look a fact up."""
        seen.append(threading.get_ident())
        await asyncio.sleep(0)
        return f"found {query}"

    @tool
    def shout(text: str) -> str:
        """Shout the text."""
        seen.append(threading.get_ident())
        return text.upper()

    return ReactAgent("threads", model=model, tools=[lookup, shout], tool_timeout=tool_timeout)


def _replies() -> list[AssistantMessage | str]:
    calls = [
        ToolCall(id="a", name="lookup", arguments={"query": "x"}),
        ToolCall(id="b", name="lookup", arguments={"query": "y"}),
    ]
    return [AssistantMessage(content="", tool_calls=calls), "done"]


def test_ainvoke_calls_the_model_on_the_callers_thread_and_async_tools_off_its_loop() -> None:
    model, seen = ThreadRecordingModel(_replies()), []
    agent = _agent(model, seen)

    async def main() -> tuple[str, int]:
        answer = await agent.acall("go")
        return answer.text, threading.get_ident()

    text, loop_thread = asyncio.run(main())
    assert text == "done"
    assert model.threads == [("agenerate", loop_thread)] * 2
    assert len(seen) == 2 and loop_thread not in seen


def test_without_a_tool_timeout_ainvoke_awaits_async_tools_on_the_callers_thread() -> None:
    model, seen = ThreadRecordingModel(_replies()), []
    agent = _agent(model, seen, tool_timeout=None)

    async def main() -> tuple[str, int]:
        answer = await agent.acall("go")
        return answer.text, threading.get_ident()

    text, loop_thread = asyncio.run(main())
    assert text == "done"
    assert seen == [loop_thread, loop_thread]


def test_an_async_tool_off_the_loop_sees_the_callers_context_and_streams_its_chunks() -> None:
    request = contextvars.ContextVar("request", default="none")

    @tool
    async def report(ctx: ToolContext) -> str:
        """Report what it sees."""
        emit_chunk(f"working on {request.get()}")
        return f"{request.get()} in thread {ctx.config.thread_id}"

    call = ToolCall(id="a", name="report", arguments={})
    model = ScriptedChatModel([AssistantMessage(content="", tool_calls=[call]), "ok"])
    agent = ReactAgent("context", model=model, tools=[report])

    async def main() -> list[object]:
        request.set("req-7")
        config = RunnableConfig(thread_id="t-9")
        return [item async for item in agent.astream("go", config)]

    items = asyncio.run(main())
    chunks = [o.chunk for o in items if isinstance(o, StreamingOutput) and o.node == "__tool__"]
    assert chunks == ["working on req-7"]
    assert model.requests[1].messages[-1].content == "req-7 in thread t-9"


def test_astream_streams_the_model_on_the_callers_thread() -> None:
    model, seen = ThreadRecordingModel(_replies()), []
    agent = _agent(model, seen)

    async def main() -> tuple[list[str], int]:
        chunks = [o.chunk async for o in agent.astream("go") if isinstance(o, StreamingOutput)]
        return chunks, threading.get_ident()

    chunks, loop_thread = asyncio.run(main())
    assert "".join(chunks) == "done"
    assert model.threads == [("astream", loop_thread)] * 2
    assert len(seen) == 2 and loop_thread not in seen


def test_a_sync_tool_under_ainvoke_runs_on_a_worker_thread() -> None:
    call = ToolCall(id="a", name="shout", arguments={"text": "hi"})
    model, seen = ThreadRecordingModel([AssistantMessage(content="", tool_calls=[call]), "ok"]), []
    agent = _agent(model, seen)

    async def main() -> tuple[str, int]:
        state = await agent.ainvoke("go")
        return state["messages"][-2].content, threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert result == "HI"
    assert len(seen) == 1 and seen[0] != loop_thread


def test_invoke_still_calls_the_sync_model_and_runs_async_tools() -> None:
    model, seen = ThreadRecordingModel(_replies()), []
    agent = _agent(model, seen)
    assert agent.call("go").text == "done"
    assert [kind for kind, _ in model.threads] == ["generate", "generate"]
    assert len(seen) == 2


def test_an_async_tool_past_its_timeout_under_ainvoke_is_an_error_result() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Take a long time."""
        await asyncio.sleep(5)
        return "late"

    call = ToolCall(id="a", name="slow", arguments={})
    model = ScriptedChatModel([AssistantMessage(content="", tool_calls=[call]), "ok"])
    agent = ReactAgent("timeouts", model=model, tools=[slow])
    state = asyncio.run(agent.ainvoke("go"))
    result = state["messages"][-2]
    assert result.is_error and "did not finish within 0.05 s" in result.content


class PassThrough(ToolInterceptor):
    """A tool interceptor that changes nothing (the agent then runs tools on worker threads)."""


def _wait_for_callers_event(*, on_caller_loop: bool, interceptors: bool = False) -> str:
    """The result of a tool awaiting an ``asyncio.Event`` that the caller's loop waits on too,
    set by the caller once the tool has started, through ``ainvoke`` of an agent."""
    entered = threading.Event()

    async def main() -> str:
        ready = asyncio.Event()
        watcher = asyncio.create_task(ready.wait())
        await asyncio.sleep(0)  # the watcher waits: the event is bound to this loop

        @tool(on_caller_loop=on_caller_loop)
        async def wait_until_ready() -> str:
            """Wait until the caller is ready."""
            entered.set()
            await ready.wait()
            return "ready"

        call = ToolCall(id="a", name="wait_until_ready", arguments={})
        model = ScriptedChatModel([AssistantMessage(content="", tool_calls=[call]), "ok"])
        agent = ReactAgent(
            "shared_event",
            model=model,
            tools=[wait_until_ready],
            tool_interceptors=[PassThrough()] if interceptors else (),
        )
        run = asyncio.create_task(agent.ainvoke("go"))
        assert await asyncio.to_thread(entered.wait, 30)
        ready.set()
        state = await run
        await watcher
        result = state["messages"][-2]
        return f"error: {result.content}" if result.is_error else result.content

    return asyncio.run(main())


@pytest.mark.parametrize("interceptors", [False, True], ids=["plain", "intercepted"])
def test_an_async_tool_using_the_callers_loop_off_it_fails_naming_on_caller_loop(
    interceptors: bool,
) -> None:
    result = _wait_for_callers_event(on_caller_loop=False, interceptors=interceptors)
    assert result.startswith("error: ")
    assert "bound to a different event loop" in result
    assert "make it with @tool(on_caller_loop=True)" in result


@pytest.mark.parametrize("interceptors", [False, True], ids=["plain", "intercepted"])
def test_an_async_tool_made_on_caller_loop_shares_the_callers_event_under_ainvoke(
    interceptors: bool,
) -> None:
    assert _wait_for_callers_event(on_caller_loop=True, interceptors=interceptors) == "ready"


def test_an_async_tool_on_the_callers_loop_is_still_cut_at_its_timeout() -> None:
    @tool(timeout=0.05, on_caller_loop=True)
    async def slow() -> str:
        """Take a long time."""
        await asyncio.sleep(30)
        return "late"

    call = ToolCall(id="a", name="slow", arguments={})
    model = ScriptedChatModel([AssistantMessage(content="", tool_calls=[call]), "ok"])
    agent = ReactAgent("timeouts", model=model, tools=[slow])
    state = asyncio.run(asyncio.wait_for(agent.ainvoke("go"), 10))
    result = state["messages"][-2]
    assert result.is_error and "did not finish within 0.05 s" in result.content
