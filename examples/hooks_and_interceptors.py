"""Custom hooks and interceptors, next to built-in ones, and the order they run in.

Hooks are nodes of the agent's graph (they change state and may jump); interceptors wrap the
model call and each tool call (they see and edit the request, and may retry or answer
themselves). Run: python examples/hooks_and_interceptors.py
"""

from __future__ import annotations

from typing import Any

from graph_agent import (
    AgentCommand,
    AgentHook,
    JumpTo,
    MessagesModelHook,
    ModelCallLimitHook,
    ModelHook,
    ModelInterceptor,
    ReactAgent,
    RunnableConfig,
    ToolInterceptor,
    ToolResponseMessage,
    ToolRetryInterceptor,
    UserMessage,
    tool,
)
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ModelRequest, ScriptedChatModel

TRACE: list[str] = []
_attempts: dict[str, int] = {}


@tool
def fetch_price(symbol: str) -> str:
    """The latest price of a stock.

    Args:
        symbol: The ticker, e.g. "ACME".
    """
    _attempts[symbol] = _attempts.get(symbol, 0) + 1
    if _attempts[symbol] == 1:
        TRACE.append(f"tool        fetch_price({symbol}) fails once (a flaky network)")
        raise ConnectionError("price feed timed out")
    TRACE.append(f"tool        fetch_price({symbol}) runs")
    return {"ACME": "101.50 USD", "INITECH": "12.25 USD"}[symbol]


class AuditHook(AgentHook):
    """Runs once around the whole run."""

    def before_agent(self, state: Any, config: RunnableConfig) -> None:
        TRACE.append(f"hook        before_agent: user {config.context.get('user', '?')}")

    def after_agent(self, state: Any, config: RunnableConfig) -> None:
        TRACE.append(f"hook        after_agent: {len(state['messages'])} messages")


class BudgetHook(ModelHook):
    """Runs around every model call; ends the run early when the model starts to loop."""

    can_jump_to = (JumpTo.END,)

    def before_model(self, state: Any, config: RunnableConfig) -> None:
        TRACE.append("hook        before_model")

    def after_model(self, state: Any, config: RunnableConfig) -> dict[str, Any] | None:
        calls = len(state["messages"][-1].tool_calls)
        TRACE.append(f"hook        after_model: {calls} tool call(s)")
        asked = sum(1 for m in state["messages"] if isinstance(m, AssistantMessage))
        return {"jump_to": JumpTo.END} if asked > 5 else None


class KeepRecent(MessagesModelHook):
    """Edits the message list before each model call: keeps the last 20 messages."""

    def before_model(self, messages: list[Any], config: RunnableConfig) -> AgentCommand | None:
        if len(messages) <= 20:
            return None
        return AgentCommand(messages=messages[-20:], policy="replace")


class RedactEmails(ModelInterceptor):
    """Wraps the model call: the model never sees an email address."""

    def intercept(self, request: ModelRequest, call_next: Any) -> AssistantMessage:
        for index, message in enumerate(request.messages):
            if isinstance(message, UserMessage) and "@" in message.text:
                words = ["<email>" if "@" in w else w for w in message.text.split()]
                request.messages[index] = UserMessage(" ".join(words), id=message.id)
                TRACE.append("interceptor model: redacted an email address")
        TRACE.append("interceptor model: calling the model")
        return call_next(request)


class CacheResults(ToolInterceptor):
    """Wraps each tool call: a call with the same arguments is answered from a cache."""

    def __init__(self) -> None:
        self.cache: dict[str, ToolResponseMessage] = {}

    def intercept(self, request: Any, call_next: Any) -> ToolResponseMessage:
        key = f"{request.call.name}{sorted(request.call.arguments.items())}"
        if key in self.cache:
            TRACE.append(f"interceptor tool: {request.call.arguments} answered from cache")
            cached = self.cache[key]
            return cached.model_copy(update={"tool_call_id": request.call.id})
        result = call_next(request)
        if not result.is_error:
            self.cache[key] = result
        return result


def respond(request: ModelRequest) -> AssistantMessage | str:
    """The offline model: ACME, then ACME again and INITECH, then the answer."""
    asked = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    if asked == 0:
        return AssistantMessage(tool_calls=[ToolCall("p1", "fetch_price", {"symbol": "ACME"})])
    if asked == 1:
        return AssistantMessage(
            tool_calls=[
                ToolCall("p2", "fetch_price", {"symbol": "ACME"}),
                ToolCall("p3", "fetch_price", {"symbol": "INITECH"}),
            ]
        )
    prices = [m.text for m in request.messages if isinstance(m, ToolResponseMessage)]
    return f"ACME trades at {prices[-2]}, INITECH at {prices[-1]}."


agent = ReactAgent(
    "broker",
    ScriptedChatModel([respond] * 20),
    tools=[fetch_price],
    hooks=[AuditHook(), BudgetHook(), KeepRecent(), ModelCallLimitHook(run_limit=10)],
    model_interceptors=[RedactEmails()],
    tool_interceptors=[CacheResults(), ToolRetryInterceptor(max_retries=2)],  # cache outermost
)

if __name__ == "__main__":
    config = RunnableConfig(thread_id="t1", context={"user": "ada"})
    reply = agent.call("Prices of ACME and INITECH please, mail them to ada@example.com", config)
    print("\n".join(TRACE))
    print("\nanswer:", reply.text)
    print("\ngraph nodes:", ", ".join(agent.graph.view.nodes))
