"""Every example runs offline as is, and says what it did."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models.openai_fake_server import (
    API_KEY,
    FakeOpenAIServer,
    chunk,
    reply_sse,
    tool_delta,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY")
EXPECTED_OUTPUT = {
    "workflow.py": ["final draft: Graph runtimes (v2)"],
    "map_reduce.py": [
        "step  1  summarize (Send 2) {'summaries': ['Send runs...']}",
        "report (97 steps left of 100):",
        "glossary: checkpoint, send, superstep",
        "plan -.Send.-> summarize",
    ],
    "checkpoints.py": ["after time travel, published: None"],
    "quickstart.py": [
        "answer: Right now it is sunny and 23 °C in Hangzhou.",
        "assistant: get_weather({'city': 'Hangzhou'})",
        "__model__ -.tools.-> __tool__",
    ],
    "human_in_the_loop.py": [
        "outbox while paused: []",
        "waiting in: ('HumanInTheLoopHook.human_in_the_loop.afterModel',)",
        "mail_eve: A human rejected this tool call: Eve is on holiday, do not send",
        "outbox: ['ada@example.com: Release 1.0 is out', 'bob@example.com: Release 1.0 is out']",
    ],
    "hooks_and_interceptors.py": [
        "hook        before_agent: user ada",
        "interceptor model: redacted an email address",
        "tool        fetch_price(ACME) fails once (a flaky network)",
        "interceptor tool: {'symbol': 'ACME'} answered from cache",
        "hook        after_agent: 6 messages",
        "answer: ACME trades at 101.50 USD, INITECH at 12.25 USD.",
    ],
    "middleware.py": [
        "the model read: Plan my day in Oslo. Mail me at [REDACTED_EMAIL].",
        "tools offered: ['weather', 'write_todos']",
        "[~] check the weather",
        "steered message delivered: Also: I forgot my umbrella.",
        "answer: Oslo is rainy; noted: 'Also: I forgot my umbrella.'",
    ],
    "openai_endpoint.py": ["skipping: set OPENAI_API_KEY"],
    "mcp_tools.py": [
        "tools of the MCP server: search_notes, read_note",
        "-> search_notes({'query': 'supersteps'})",
        "<- read_note: A graph runtime runs its nodes in supersteps and checkpoints after each one.",
        "answer: Your notes say: A graph runtime runs its nodes in supersteps",
    ],
    "team.py": [
        "    [web] research/web/__tool__: search_web -> Graph runtimes checkpoint every step, so a "
        "crashed agent resumes.",
        "  [research] research/papers: From the papers: BSP supersteps",
        "tokens streamed by: papers, web, writer",
        "answer: Report: Graph runtimes checkpoint every step, so a crashed agent resumes. BSP "
        "supersteps (Valiant, 1990) make parallel steps deterministic.",
    ],
    "supervisor.py": [
        "supervisor -> billing: Why was I charged twice in May?",
        "tech -> supervisor: A noisy line; technician booked. (drops 19:00-23:00, noise margin 2 dB)",
        "tokens streamed by: billing, supervisor, tech",
        "billing's own run, in the same thread: 4 messages",
        "answer: Both sorted: 1041-R was a retry; refunded.",
        "billing: 1041-R was a retry; refunded.",
        "answers in the conversation: 2",
    ],
}


def _run(name: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    environment.update(env)
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_the_example_runs_and_prints_its_result(name):
    result = _run(name)

    assert result.returncode == 0, result.stderr
    for expected in EXPECTED_OUTPUT[name]:
        assert expected in result.stdout


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXPECTED_OUTPUT)


def test_the_endpoint_example_talks_to_an_openai_compatible_server():
    with FakeOpenAIServer() as server:
        server.enqueue(
            reply_sse(
                [
                    chunk(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                tool_delta(
                                    0,
                                    call_id="c1",
                                    name="calculator",
                                    arguments='{"expression": "17 * 23"}',
                                ),
                                tool_delta(
                                    1,
                                    call_id="c2",
                                    name="convert_units",
                                    arguments='{"value": 26.2, "from_unit": "mi", "to_unit": "km"}',
                                ),
                            ],
                        }
                    ),
                    chunk(finish_reason="tool_calls"),
                ]
            ),
            reply_sse(
                [
                    chunk({"role": "assistant", "content": "17 * 23 = 391, "}),
                    chunk({"content": "and 26.2 miles is 42.16 km."}),
                    chunk(
                        finish_reason="stop",
                        usage={"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135},
                    ),
                ]
            ),
        )
        result = _run(
            "openai_endpoint.py",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY=API_KEY,
            OPENAI_MODEL="fake-model",
        )
        requests = server.requests

    assert result.returncode == 0, result.stderr
    assert "<- calculator: 391" in result.stdout
    assert "<- convert_units: 42.1648 km" in result.stdout
    assert "answer: 17 * 23 = 391, and 26.2 miles is 42.16 km." in result.stdout
    assert "total_tokens=135" in result.stdout
    assert API_KEY not in result.stdout + result.stderr
    assert [r.body["model"] for r in requests] == ["fake-model", "fake-model"]
    assert requests[0].headers["Authorization"] == f"Bearer {API_KEY}"


def _readme_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_quickstart_runs_as_printed(tmp_path):
    quickstart, workflow = _readme_blocks("python")[:2]
    assert len(quickstart.splitlines()) <= 20

    result = subprocess.run(
        [sys.executable, "-c", quickstart + workflow],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert "Right now it is sunny and 23 °C in Hangzhou." in result.stdout
    assert "flowchart TD" in result.stdout
    assert "['draft', 'style', 'facts', 'decide']" in result.stdout
    assert (tmp_path / "agent.db").is_file()


def test_the_readme_shows_the_demo_agent_as_drawn_now():
    assert (ROOT / "diagrams" / "demo_agent.mmd").read_text() in _readme_blocks("mermaid")


def test_the_readme_shows_spans_with_the_otel_sdk_extra(tmp_path):
    (setup,) = [block for block in _readme_blocks("python") if "ConsoleSpanExporter" in block]
    run = (
        "from graph_agent import ReactAgent\n"
        "from graph_agent.models import ScriptedChatModel\n"
        "ReactAgent('greeter', ScriptedChatModel(['hi'])).call('hello')\n"
    )

    result = subprocess.run(
        [sys.executable, "-c", setup + run],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert '"name": "invoke_agent greeter"' in result.stdout
    assert '"name": "chat ScriptedChatModel"' in result.stdout
