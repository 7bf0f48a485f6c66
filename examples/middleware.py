"""The middleware pack and mid-run steering, offline with scripted models.

One agent with a todo list, PII redaction, an LLM tool selector, context editing and a token
budget; while a tool runs, another thread steers the run with a new user message, which the
model reads at its next call. Run: python examples/middleware.py
"""

from __future__ import annotations

import threading

from graph_agent import ReactAgent, RunnableConfig, tool
from graph_agent.agent.middleware import (
    ContextEditingInterceptor,
    LLMToolSelectorInterceptor,
    PIIRedactionInterceptor,
    TodoListHook,
    TokenBudgetHook,
    format_todos,
)
from graph_agent.messages import AssistantMessage, ToolCall, Usage
from graph_agent.models import ModelRequest, ScriptedChatModel

tool_started, steered = threading.Event(), threading.Event()


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    tool_started.set()
    steered.wait(5)  # the other thread steers the run meanwhile
    return f"{city}: 9 °C, rain"


@tool
def stocks(symbol: str) -> str:
    """Share prices."""
    return f"{symbol}: 100"


@tool
def translate(text: str, language: str) -> str:
    """Translate a text."""
    return text


def plan(todos: list[dict[str, str]]) -> AssistantMessage:
    calls = [ToolCall("t1", "write_todos", {"todos": todos})]
    return AssistantMessage(tool_calls=calls, usage=Usage(total_tokens=300))


def answer(request: ModelRequest) -> AssistantMessage:
    heard = request.messages[-1].text
    return AssistantMessage(f"Oslo is rainy; noted: {heard!r}", usage=Usage(total_tokens=400))


model = ScriptedChatModel(
    [
        plan([{"content": "check the weather", "status": "in_progress"}, {"content": "pack"}]),
        AssistantMessage(tool_calls=[ToolCall("w1", "weather", {"city": "Oslo"})]),
        answer,
    ]
)
selector = ScriptedChatModel(['{"tools": ["weather"]}'] * 3)
pii = PIIRedactionInterceptor(strategy="redact")
pii.priority = -1  # outermost: the tool selector sees the redacted request too
agent = ReactAgent(
    "travel",
    model,
    tools=[weather, stocks, translate],
    hooks=[TodoListHook(), TokenBudgetHook(run_limit=50_000)],
    model_interceptors=[
        LLMToolSelectorInterceptor(selector, always_include=["write_todos"]),
        ContextEditingInterceptor(trigger_tokens=20_000, keep=3),
        pii,
    ],
)


def main() -> None:
    config = RunnableConfig(thread_id="trip")

    def steer_when_the_tool_runs() -> None:
        tool_started.wait(5)
        agent.steer(config, "Also: I forgot my umbrella.")
        steered.set()

    helper = threading.Thread(target=steer_when_the_tool_runs)
    helper.start()
    state = agent.invoke("Plan my day in Oslo. Mail me at ada@example.com.", config)
    helper.join()
    print("the model read:", model.requests[0].messages[-1].text)
    print("tools offered:", [t.name for t in model.requests[0].tools])
    print("todos:")
    print(format_todos(state["todos"]))
    print("steered message delivered:", model.requests[2].messages[-1].text)
    print("answer:", state["messages"][-1].text)


if __name__ == "__main__":
    main()
