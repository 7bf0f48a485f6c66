"""The supervisor pattern, two ways: a supervisor agent whose tools are specialist agents
(``agent.as_tool()``), and a router (``LlmRoutingAgent``) whose model picks the specialists,
which then answer in parallel.

The models are scripted, so it runs offline; with real models only the ``ScriptedChatModel``
lines change (a real supervisor decides the same from the conversation).

Run: python examples/supervisor.py
"""

from __future__ import annotations

import dataclasses

from graph_agent import (
    AssistantMessage,
    LlmRoutingAgent,
    ReactAgent,
    RunnableConfig,
    StreamingOutput,
    ToolCall,
    ToolContext,
    ToolResponseMessage,
    tool,
)
from graph_agent.agent.compose import agent_tool_namespace
from graph_agent.models import ModelRequest, ScriptedChatModel

BILLING_QUESTION = "Why was I charged twice in May?"
LINE_QUESTION = "My internet drops every evening."


@tool
def find_invoices(month: str) -> str:
    """List the customer's invoices of a month.

    Args:
        month: The month, e.g. "May".
    """
    return f"{month}: 1041 39.90, 1041-R 39.90 (a retry after a card error)"


@tool
def line_report() -> str:
    """Read the customer's line diagnostics."""
    return "drops 19:00-23:00, noise margin 2 dB"


def specialist(tool_name: str, answer: str) -> object:
    """A specialist's model: call its tool once, then answer from the result."""

    def reply(request: ModelRequest) -> AssistantMessage | str:
        last = request.messages[-1]
        if isinstance(last, ToolResponseMessage):
            return answer.format(result=last.text)
        arguments = {"month": "May"} if tool_name == "find_invoices" else {}
        return AssistantMessage(tool_calls=[ToolCall("t1", tool_name, arguments)])

    return reply


billing_model = specialist("find_invoices", "1041-R was a retry; refunded. ({result})")
billing = ReactAgent(
    "billing",
    ScriptedChatModel([billing_model] * 20),
    tools=[find_invoices],
    description="Answers questions about invoices, charges and refunds.",
)
tech_model = specialist("line_report", "A noisy line; technician booked. ({result})")
tech = ReactAgent(
    "tech",
    ScriptedChatModel([tech_model] * 20),
    tools=[line_report],
    description="Fixes connection problems.",
)


def supervise(request: ModelRequest) -> AssistantMessage | str:
    """The supervisor's model: delegate each part of the request, then sum up."""
    results = [m for m in request.messages if isinstance(m, ToolResponseMessage)]
    if not results:
        return AssistantMessage(
            tool_calls=[ToolCall("d1", "billing", {"request": BILLING_QUESTION})]
        )
    if len(results) == 1:
        return AssistantMessage(tool_calls=[ToolCall("d2", "tech", {"request": LINE_QUESTION})])
    return "Both sorted: " + " ".join(m.text for m in results)


supervisor = ReactAgent(
    "supervisor",
    ScriptedChatModel([supervise] * 20),
    tools=[billing.as_tool(), tech.as_tool()],
    instruction="Delegate each part of the customer's request to the right specialist.",
)
router = LlmRoutingAgent(
    "desk",
    ScriptedChatModel(['{"agents": ["tech", "billing"]}'] * 20),
    [billing, tech],
    fallback=ReactAgent("general", ScriptedChatModel(["How can I help?"] * 20)),
)


def run_supervisor() -> None:
    print("== a supervisor with specialist agents as tools")
    config = RunnableConfig(thread_id="customer-42")
    streamed_by: set[str] = set()
    for output in supervisor.stream(f"{BILLING_QUESTION} Also: {LINE_QUESTION}", config):
        if isinstance(output, StreamingOutput):
            streamed_by.add(output.agent)  # a specialist's tokens arrive under its own name
            continue
        added = output.update.get("messages")
        for message in added if isinstance(added, list) else []:  # not the instruction's edit
            if isinstance(message, AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    print(f"supervisor -> {call.name}: {call.arguments['request']}")
            elif isinstance(message, ToolResponseMessage):
                print(f"{message.name} -> supervisor: {message.text}")
    messages = supervisor.get_state(config).values["messages"]
    answer = messages[-1]
    print("tokens streamed by:", ", ".join(sorted(streamed_by)))
    # billing ran on the supervisor's thread, under a namespace of its own for the call d1
    asked = next(m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls)
    key = f"{config.thread_id}:{asked.id}:d1"  # what the tool's ToolContext.idempotency_key is
    namespace = agent_tool_namespace("billing", ToolContext(call_id="d1", idempotency_key=key))
    inside = supervisor.get_state(dataclasses.replace(config, checkpoint_ns=namespace))
    print("billing's own run, in the same thread:", len(inside.values["messages"]), "messages")
    print("answer:", answer.text)


def run_router() -> None:
    print("\n== a router picking specialists, who answer in parallel")
    final = router.invoke(f"{BILLING_QUESTION} Also: {LINE_QUESTION}")
    for name, text in final["outputs"].items():
        print(f"{name}: {text}")
    print("answers in the conversation:", len(final["messages"]) - 1)


if __name__ == "__main__":
    run_supervisor()
    run_router()
