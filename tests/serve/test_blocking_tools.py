"""An agent's ``async def`` tool that blocks its event loop (``time.sleep`` where it should
await) on a real server: it is cut at the agent's ``tool_timeout``, and other runs go on
meanwhile (the server runs agents with ``astream`` on its one event loop)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from graph_agent import ReactAgent, tool
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel
from tests.serve.conftest import Server
from tests.serve.graphs import chain

BLOCKS_FOR = 8.0
"""How long the tool would hold its loop if nothing cut it (seconds)."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets the blocking tool go once the test is over."""
    released = threading.Event()
    yield released
    released.set()


def blocking_agent(release: threading.Event) -> ReactAgent:
    @tool
    async def stuck() -> str:
        """Looks something up, the wrong way."""
        release.wait(BLOCKS_FOR)  # no await: blocks whatever loop runs it
        return "late"

    call = ToolCall(id="c1", name="stuck", arguments={})
    model = ScriptedChatModel([AssistantMessage(content="", tool_calls=[call]), "gave up"])
    return ReactAgent("blocker", model=model, tools=[stuck], tool_timeout=1.0)


def test_a_blocking_async_tool_stalls_no_other_run_and_ends_at_its_timeout(
    tmp_path, release: threading.Event
) -> None:
    with Server(tmp_path / "serve.db", targets=[blocking_agent(release), chain()]) as server:
        blocked: dict[str, object] = {}

        def run_the_blocker() -> None:
            started = time.monotonic()
            response = httpx.post(
                f"{server.url}/runs/wait",
                json={
                    "assistant_id": "blocker",
                    "input": {"messages": [{"role": "user", "content": "go"}]},
                },
                timeout=30,
            )
            blocked["elapsed"] = time.monotonic() - started
            blocked["body"] = response.json()

        blocker = threading.Thread(target=run_the_blocker)
        blocker.start()
        time.sleep(0.5)  # the tool is holding its loop by now
        started = time.monotonic()
        quick = httpx.post(
            f"{server.url}/runs/wait", json={"assistant_id": "chain", "input": {"x": 1}}, timeout=30
        )
        quick_elapsed = time.monotonic() - started
        blocker.join(30)

    assert quick.status_code == 200 and quick.json()["x"] == 12
    assert quick_elapsed < 1.0  # well under the blocked tool's 8 s
    assert blocked["elapsed"] < 4.0  # the 1 s timeout and its grace, not 8 s
    messages = blocked["body"]["messages"]  # type: ignore[index]
    result = next(m for m in messages if m["type"] == "tool")
    assert result["status"] == "error"
    assert "did not finish within 1 s" in result["content"]
    assert messages[-1]["content"] == "gave up"
