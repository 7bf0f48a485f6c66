"""Steering messages take the path of the history to a real local model server: through
the beforeModel hooks and the model interceptors, so a redacting one redacts them too."""

from __future__ import annotations

import json
import threading

from graph_agent import RunnableConfig, tool
from graph_agent.agent import AgentCommand, MessagesModelHook, ReactAgent
from graph_agent.agent.middleware import PIIRedactionInterceptor
from graph_agent.messages import BaseMessage, UserMessage
from graph_agent.models import OpenAIChatModel
from graph_agent.tools import Tool
from tests.models.openai_fake_server import (
    Behaviour,
    FakeOpenAIServer,
    completion,
    reply_json,
    tool_call,
)

CFG = RunnableConfig(thread_id="t1")
EMAIL = "ada.lovelace@example.com"


class RedactingHook(MessagesModelHook):
    """Redacts email addresses in user messages before each model call, in the history (a
    hook, where the PII interceptor edits only the requests)."""

    name = "redact"

    def __init__(self) -> None:
        self.pii = PIIRedactionInterceptor(["email"])

    def before_model(self, messages: list[BaseMessage], config: RunnableConfig) -> AgentCommand:
        cleaned = [
            m.model_copy(update={"content": self.pii.clean(m.text, "input")})
            if isinstance(m, UserMessage)
            else m
            for m in messages
        ]
        return AgentCommand(cleaned, policy="replace")


def asks_for_search() -> Behaviour:
    calls = [tool_call("c1", "slow_search", {})]
    return reply_json(completion(None, tool_calls=calls, finish_reason="tool_calls"))


def searching(started: threading.Event, go_on: threading.Event) -> Tool:
    @tool
    def slow_search() -> str:
        """Search slowly."""
        started.set()
        assert go_on.wait(10), "the test never steered"
        return "found it"

    return slow_search


def test_a_redacting_before_model_hook_redacts_a_steered_email(
    server: FakeOpenAIServer, model: OpenAIChatModel
):
    server.enqueue(reply_json(completion("Noted.")))
    agent = ReactAgent("agent", model, hooks=[RedactingHook()])
    agent.steer(CFG, f"also cc {EMAIL}")
    agent.invoke("hello", CFG)
    sent = server.bodies[0]["messages"]
    assert sent[-1]["content"] == "also cc [REDACTED_EMAIL]"
    assert EMAIL not in json.dumps(server.bodies)
    stored = [m.text for m in agent.get_state(CFG).values["messages"]]
    assert EMAIL not in " ".join(stored)


def test_a_steered_email_sent_mid_run_is_redacted_by_the_hook_and_the_interceptor(
    server: FakeOpenAIServer, model: OpenAIChatModel
):
    started, go_on = threading.Event(), threading.Event()
    server.enqueue(asks_for_search(), reply_json(completion("Done.")))
    agent = ReactAgent(
        "agent",
        model,
        tools=[searching(started, go_on)],
        hooks=[RedactingHook()],
        model_interceptors=[PIIRedactionInterceptor(["email"])],
    )
    runner = threading.Thread(target=lambda: agent.invoke("find x", CFG))
    runner.start()
    assert started.wait(10)
    agent.steer(CFG, f"send it to {EMAIL}")
    go_on.set()
    runner.join(10)
    assert len(server.bodies) == 2
    assert server.bodies[1]["messages"][-1] == {
        "role": "user",
        "content": "send it to [REDACTED_EMAIL]",
    }
    assert EMAIL not in json.dumps(server.bodies)
