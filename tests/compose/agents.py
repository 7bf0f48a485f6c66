"""Scripted agents for the composition tests."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

from graph_agent import AssistantMessage, ReactAgent, ToolCall
from graph_agent.agent import AgentHook, JumpTo
from graph_agent.models import ScriptedChatModel
from graph_agent.models.scripted import ScriptedResponse


class RefusePasswords(AgentHook):
    """Ends the run before the model when the request mentions a password (adds nothing)."""

    can_jump_to = (JumpTo.END,)

    def before_agent(self, state: Any, config: Any) -> dict[str, Any] | None:
        if "password" in state["messages"][-1].text:
            return {"jump_to": JumpTo.END}
        return None


def scripted(name: str, *replies: ScriptedResponse, **options: Any) -> ReactAgent:
    """A ReactAgent called ``name`` whose model answers ``replies`` in order."""
    return ReactAgent(name, ScriptedChatModel(replies), **options)


def echo(name: str, **options: Any) -> ReactAgent:
    """An agent that answers every request with ``"<name>: <the last message's text>"``."""
    return ReactAgent(
        name,
        ScriptedChatModel([lambda request: f"{name}: {request.messages[-1].text}"] * 20),
        **options,
    )


def calls(*tool_calls: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    """An assistant message asking for ``(call id, tool name, arguments)`` calls."""
    return AssistantMessage(tool_calls=[ToolCall(i, name, args) for i, name, args in tool_calls])


def texts(state: Any) -> list[str]:
    """The text of each message in a state."""
    return [message.text for message in state["messages"]]


def call_with_config(agent: Any, method: str, config: Any) -> None:
    """Call ``agent.<method>`` with ``config`` (and input, or values for ``update_state``),
    reading what it returns to the end (a stream, a coroutine)."""
    if method in ("get_state", "get_state_history"):
        result = getattr(agent, method)(config)
    elif method == "update_state":
        result = agent.update_state(config, {"note": "x"})
    else:
        result = getattr(agent, method)("hi", config)
    if inspect.iscoroutine(result):
        asyncio.run(result)
    elif inspect.isasyncgen(result):

        async def drain() -> None:
            async for _ in result:
                pass

        asyncio.run(drain())
    elif isinstance(result, Iterator):
        list(result)
