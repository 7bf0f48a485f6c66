"""The Studio as files and events, without a browser: what ``/studio`` serves and to whom, that
the page references only files it ships, the events the page reads (errors with their node and
step, token usage), and ``graph-agent studio``."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from graph_agent.cli.studio import open_when_ready, studio_url
from graph_agent.serve.studio import STUDIO_FILES
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.studio_targets import broken, demo, steps

KEY = "studio-test-key"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("studio") / "serve.db"
    with Server(db, [demo(), steps(), broken()], api_keys=[KEY]) as running:
        yield running


def _events(server: Server, assistant: str, body: dict) -> list[tuple[str, dict]]:
    headers = {"x-api-key": KEY}
    thread = httpx.post(f"{server.url}/threads", json={}, headers=headers).json()["thread_id"]
    body = {"assistant_id": assistant, "stream_mode": ["updates", "values"], **body}
    events: list[tuple[str, dict]] = []
    with httpx.stream(
        "POST", f"{server.url}/threads/{thread}/runs/stream", json=body, headers=headers
    ) as response:
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[6:])))
    return events


def test_the_page_and_its_files_are_served_to_anyone_with_a_strict_policy(keyed: Server) -> None:
    moved = httpx.get(f"{keyed.url}/studio")
    assert moved.status_code == 308 and moved.headers["location"].endswith("/studio/")
    page = httpx.get(f"{keyed.url}/studio/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    script = httpx.get(f"{keyed.url}/studio/main.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert httpx.get(f"{keyed.url}/studio/config.json").json() == {"keys_required": True}
    assert httpx.get(f"{keyed.url}/assistants/demo").status_code == 401  # the data is not open


@pytest.mark.parametrize("name", ["nope.js", "../app.py", "..%2Fapp.py", "studio.py", "x/../../ok"])
def test_nothing_but_the_shipped_files_is_served(keyed: Server, name: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", int(keyed.url.rsplit(":", 1)[1]))
    connection.request("GET", f"/studio/{name}")  # as sent: no client tidies the dots away
    response = connection.getresponse()
    assert response.status == 404
    assert json.loads(response.read())["code"] == "not_found"
    connection.close()


def test_the_studio_can_be_left_out(tmp_path: Path) -> None:
    with Server(tmp_path / "serve.db", [steps()], studio=False) as server:
        assert httpx.get(f"{server.url}/studio/").status_code == 404
        assert httpx.get(f"{server.url}/ok").status_code == 200


def test_every_file_the_page_references_ships_with_it() -> None:
    shipped = {path.name for path in STUDIO_FILES.iterdir()}
    html = (STUDIO_FILES / "index.html").read_text()
    referenced = set(re.findall(r'(?:src|href)="([^"]+)"', html))
    for script in STUDIO_FILES.glob("*.js"):
        referenced |= set(re.findall(r'from "\./([^"]+)"', script.read_text()))
    assert referenced and referenced <= shipped
    for text in [html, *(path.read_text() for path in STUDIO_FILES.glob("*.[jc]s*"))]:
        assert not re.search(r"https?://(?!www\.w3\.org/)", text)  # no other host, ever


def test_a_failed_run_names_the_node_and_step_it_failed_in(keyed: Server) -> None:
    events = _events(keyed, "broken", {"input": {"amount": 21}})
    errors = [data for event, data in events if event == "error"]
    assert len(errors) == 1
    assert errors[0]["node"] == "check" and errors[0]["step"] == 1
    assert errors[0]["error"] == "ValueError" and "over the limit" in errors[0]["message"]


def test_each_model_call_reports_its_token_usage(keyed: Server) -> None:
    events = _events(keyed, "demo", {"input": {"messages": "What is 6 * 7?"}})
    usage = [data for event, data in events if event == "usage"]
    assert [item["node"] for item in usage] == ["__model__", "__model__"]  # call, then answer
    for item in usage:
        counts = item["usage"]
        assert counts["total_tokens"] == counts["input_tokens"] + counts["output_tokens"] > 0
    assert usage[0]["step"] < usage[1]["step"]


def test_the_studio_address_is_one_a_browser_here_reaches() -> None:
    assert studio_url("127.0.0.1", 8123) == "http://127.0.0.1:8123/studio/"
    assert studio_url("0.0.0.0", 80) == "http://127.0.0.1:80/studio/"
    assert studio_url("::1", 9000) == "http://[::1]:9000/studio/"


def test_the_page_opens_once_the_server_answers(keyed: Server) -> None:
    opened: list[str] = []
    port = int(keyed.url.rsplit(":", 1)[1])
    args = argparse.Namespace(host="127.0.0.1", port=port)
    assert open_when_ready(args, opened.append, timeout=10) == f"{keyed.url}/studio/"
    assert opened == [f"{keyed.url}/studio/"]
    nobody = argparse.Namespace(host="127.0.0.1", port=free_port())
    assert open_when_ready(nobody, opened.append, timeout=0.3) is None
    assert len(opened) == 1


def test_graph_agent_studio_serves_the_page_and_says_where(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "graph_agent", "studio", "tests/serve/studio_targets.py:steps"]
    command += ["--port", str(port), "--db", str(tmp_path / "studio.db"), "--no-browser"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        assert server.stdout is not None
        lines = [server.stdout.readline().strip() for _ in range(2)]
        assert lines[1] == f"graph-agent studio: http://127.0.0.1:{port}/studio/"
        page = httpx.get(f"http://127.0.0.1:{port}/studio/")
        assert page.status_code == 200 and "graph-agent Studio" in page.text
    finally:
        server.terminate()
        server.wait(15)
