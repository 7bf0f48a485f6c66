"""What a client names things with: a thread id it could never address is refused when the
thread would be created (422), any other works through LangGraph's SDK; ``Last-Event-ID`` and
query-string counts are read as ASCII numbers (a 400 or 422 otherwise, never a 500), and
``Last-Event-ID: -1`` replays a run from its start, as LangGraph Server does."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_sync_client

from graph_agent.serve.ids import MAX_THREAD_ID
from tests.serve.servers import KINDS, Served, serving

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serving(request.param, tmp_path_factory.mktemp("ids")) as running:
        yield running


@pytest.fixture(scope="module")
def finished_run(served: Served) -> tuple[str, str]:
    """A thread and a run on it that ended."""
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    run_id = client.runs.create(thread_id, "chain", input={"x": 1})["run_id"]
    client.runs.join(thread_id, run_id)
    return thread_id, run_id


UNADDRESSABLE = {
    "slash": "team/alice",
    "question-mark": "what?now",
    "hash": "top#1",
    "percent": "50%2Foff",
    "backslash": "back\\slash",
    "space": "with space",
    "no-break-space": "a\u00a0b",
    "line-separator": "a\u2028b",
    "nul": "a\x00b",
    "newline": "line\nbreak",
    "c1-control": "a\x85b",
    "lone-surrogate": "a\ud800b",
    "dot": ".",
    "dot-dot": "..",
    "too-long": "x" * (MAX_THREAD_ID + 1),
}


@pytest.mark.parametrize("thread_id", UNADDRESSABLE.values(), ids=UNADDRESSABLE.keys())
def test_a_thread_id_no_path_could_address_is_refused_naming_the_allowed_characters(
    served: Served, thread_id: str
) -> None:
    body = json.dumps({"thread_id": thread_id}).encode()  # escaped: any client can send it
    response = httpx.post(f"{served.url}/threads", content=body, headers=JSON)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_thread_id"
    detail = response.json()["detail"]
    assert "any kind but / ? # % \\, whitespace, control characters and lone" in detail
    search = json.dumps({"ids": [thread_id]}).encode()
    assert httpx.post(f"{served.url}/threads/search", content=search, headers=JSON).json() == []


def test_a_run_that_would_create_its_thread_refuses_such_an_id_too(served: Served) -> None:
    body = {"assistant_id": "chain", "input": {"x": 1}, "if_not_exists": "create"}
    response = httpx.post(f"{served.url}/threads/bad%01id/runs/wait", json=body)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_thread_id"


@pytest.mark.parametrize(
    "thread_id",
    ["用户-42", "a+b&c=d;e:f@g,h", "ünï~çødé!$'()*", "x" * MAX_THREAD_ID],
    ids=["cjk", "sub-delims", "accents-and-marks", "longest"],
)
def test_any_other_thread_id_is_created_and_addressed_through_the_sdk(
    served: Served, thread_id: str
) -> None:
    client = get_sync_client(url=served.url)
    assert client.threads.create(thread_id=thread_id)["thread_id"] == thread_id
    assert client.runs.wait(thread_id, "chain", input={"x": 1}) == {"x": 12}
    assert client.threads.get_state(thread_id)["values"] == {"x": 12}
    client.threads.delete(thread_id)


def test_a_path_holding_nul_finds_no_thread_and_no_run(
    served: Served, finished_run: tuple[str, str]
) -> None:
    """PostgreSQL's text holds no NUL: the records are not even asked."""
    thread_id, _ = finished_run
    assert httpx.get(f"{served.url}/threads/a%00b").status_code == 404
    assert httpx.get(f"{served.url}/threads/{thread_id}/runs/a%00b").status_code == 404


@pytest.mark.parametrize(
    "sent",
    ["²", "1" * 4300, "9" * 20, "yesterday", "-2", "1.5", "+3"],
    ids=["superscript", "4300-digits", "over-64-bits", "word", "negative", "fraction", "plus"],
)
def test_a_last_event_id_that_is_no_event_id_is_a_400(
    served: Served, finished_run: tuple[str, str], sent: str
) -> None:
    thread_id, run_id = finished_run
    url = f"{served.url}/threads/{thread_id}/runs/{run_id}/stream"
    response = httpx.get(url, headers={"Last-Event-ID": sent.encode()})
    assert response.status_code == 400
    assert "-1 to replay the run's events from the start" in response.json()["detail"]


def test_last_event_id_minus_one_replays_the_run_from_its_start(
    served: Served, finished_run: tuple[str, str]
) -> None:
    thread_id, run_id = finished_run
    client = get_sync_client(url=served.url)
    everything = [(part.event, part.data) for part in client.runs.join_stream(thread_id, run_id)]
    replayed = client.runs.join_stream(thread_id, run_id, last_event_id="-1")
    assert [(part.event, part.data) for part in replayed] == everything
    assert everything[0][0] == "metadata" and everything[-1][1] == {"x": 12}


@pytest.mark.parametrize("limit", ["²", "9" * 30, "-1"], ids=["superscript", "huge", "negative"])
def test_a_count_in_the_query_string_must_be_ascii_digits_within_64_bits(
    served: Served, finished_run: tuple[str, str], limit: str
) -> None:
    thread_id, _ = finished_run
    response = httpx.get(f"{served.url}/threads/{thread_id}/runs", params={"limit": limit})
    assert response.status_code == 422
    assert "query parameter limit must be a non-negative integer" in response.json()["detail"]
