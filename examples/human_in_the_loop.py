"""Human in the loop: a tool that needs approval, a pause that survives a restart, and a resume
that approves one call, edits another and rejects a third.

Run: python examples/human_in_the_loop.py
Or, answering at the prompt yourself: graph-agent chat examples/human_in_the_loop.py:agent
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from graph_agent import (
    Command,
    HumanInTheLoopHook,
    ReactAgent,
    RunnableConfig,
    SqliteSaver,
    ToolResponseMessage,
    tool,
)
from graph_agent.checkpoint import CheckpointSaver
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ModelRequest, ScriptedChatModel

OUTBOX: list[str] = []
TEAM = ("ada@example.com", "bob@exmaple.com", "eve@example.com")  # one address has a typo


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
    """
    OUTBOX.append(f"{to}: {subject}")
    return f"sent to {to}"


def respond(request: ModelRequest) -> AssistantMessage | str:
    """The offline model: a mail per team member for a new request, a report once the tools
    answered (a real model decides the same from the conversation)."""
    last = request.messages[-1]
    if not isinstance(last, ToolResponseMessage):
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    f"mail_{to.split('@')[0]}",
                    "send_email",
                    {"to": to, "subject": "Release 1.0 is out"},
                )
                for to in TEAM
            ]
        )
    results = [m for m in request.messages if isinstance(m, ToolResponseMessage)][-len(TEAM) :]
    return "Done: " + "; ".join(f"{m.tool_call_id}: {m.text}" for m in results)


def build_agent(saver: CheckpointSaver | None = None) -> ReactAgent:
    return ReactAgent(
        "mailer",
        ScriptedChatModel([respond] * 20),  # answers up to 20 calls, each from the conversation
        tools=[send_email],
        hooks=[HumanInTheLoopHook(approve={"send_email": "sends mail on your behalf"})],
        saver=saver,
    )


agent = build_agent()

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "mail.db"
        config = RunnableConfig(thread_id="release-mail")

        state = build_agent(SqliteSaver(database)).invoke("Tell the team 1.0 is out", config)
        for call in state.interrupts[0].value["tool_calls"]:
            print(f"needs approval: {call['id']} -> {call['arguments']['to']}")
        print("outbox while paused:", OUTBOX)

        # A new agent on the same file, as after a restart: the pause is still there.
        restarted = build_agent(SqliteSaver(database))
        print("waiting in:", restarted.get_state(config).next)
        decisions = {
            "mail_ada": {"decision": "approve"},
            "mail_bob": {
                "decision": "edit",
                "arguments": {"to": "bob@example.com", "subject": "Release 1.0 is out"},
            },
            "mail_eve": {"decision": "reject", "reason": "Eve is on holiday, do not send"},
        }
        state = restarted.invoke(Command(resume=decisions), config)
        print("answer:", state["messages"][-1].text)
        print("outbox:", sorted(OUTBOX))  # the two approved mails went out in parallel
