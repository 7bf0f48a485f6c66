"""JSON in and out of the server: text the library keeps (a lone surrogate included) comes back
exactly, on SQLite and PostgreSQL records alike; a body no response could carry back, or nested
deeper than the limit, is a 400 at the door, never a 500 later."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from graph_agent.serve.bodies import MAX_DEPTH, JSONResponse, json_bytes, json_text
from graph_agent.serve.errors import error_body, error_bytes
from graph_agent.serve.records import ThreadRecord, now
from tests.serve.servers import KINDS, Served, serving

JSON = {"content-type": "application/json"}
LONE = "\ud800"
"""A lone UTF-16 surrogate: a valid JSON string (``"\\ud800"``), not encodable as UTF-8."""


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serving(request.param, tmp_path_factory.mktemp("bodies")) as running:
        yield running


def post(url: str, body: Any, **options: Any) -> httpx.Response:
    """POST ``body`` as JSON with non-ASCII escaped (as a client holding a lone surrogate must
    send it: it has no UTF-8)."""
    content = json.dumps(body).encode()
    return httpx.post(url, content=content, headers={"content-type": "application/json"}, **options)


def events(response: httpx.Response) -> list[tuple[str, Any]]:
    """The ``(event, data)`` of an SSE response, each data parsed as JSON."""
    found, event = [], ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            found.append((event, json.loads(line[len("data: ") :])))
    return found


def test_a_lone_surrogate_in_thread_metadata_comes_back_from_create_get_and_search(
    served: Served,
) -> None:
    created = post(f"{served.url}/threads", {"metadata": {"note": LONE, "tag": "lone"}})
    assert created.status_code == 200
    thread_id = created.json()["thread_id"]
    assert created.json()["metadata"]["note"] == LONE
    assert httpx.get(f"{served.url}/threads/{thread_id}").json()["metadata"]["note"] == LONE
    listed = post(f"{served.url}/threads/search", {"metadata": {"tag": "lone"}})
    assert listed.status_code == 200
    assert [thread["metadata"]["note"] for thread in listed.json()] == [LONE]


def test_a_lone_surrogate_in_a_runs_input_streams_ends_the_run_and_stays_readable(
    served: Served,
) -> None:
    thread_id = httpx.post(f"{served.url}/threads", json={}).json()["thread_id"]
    body = {"assistant_id": "chain", "input": {"x": 1, "note": LONE}, "stream_mode": ["values"]}
    with httpx.stream(
        "POST",
        f"{served.url}/threads/{thread_id}/runs/stream",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        timeout=30,
    ) as response:
        streamed = events(response)
    assert [data for event, data in streamed if event == "values"][-1] == {"x": 12, "note": LONE}
    run_id = streamed[0][1]["run_id"]
    assert (
        httpx.get(f"{served.url}/threads/{thread_id}/runs/{run_id}").json()["status"] == "success"
    )
    assert httpx.get(f"{served.url}/threads/{thread_id}/state").json()["values"]["note"] == LONE
    history = httpx.post(f"{served.url}/threads/{thread_id}/history", json={})
    assert history.status_code == 200 and history.json()[0]["values"]["note"] == LONE
    again = post(
        f"{served.url}/threads/{thread_id}/runs/wait",
        {"assistant_id": "chain", "input": {"x": 2}},
        timeout=30,
    )
    assert again.status_code == 200 and again.json() == {"x": 13, "note": LONE}


def test_rows_earlier_versions_stored_with_a_surrogate_or_a_nan_do_not_break_the_list(
    served: Served,
) -> None:
    """What the server stored before it checked (it answered 500 then, and on every list)."""
    for thread_id, note in (("poisoned-surrogate", LONE), ("poisoned-nan", float("nan"))):
        stamp = now()
        metadata = {"note": note, "tag": "poisoned"}
        served.records.put_thread(
            ThreadRecord(thread_id=thread_id, created_at=stamp, updated_at=stamp, metadata=metadata)
        )
    listed = post(f"{served.url}/threads/search", {"metadata": {"tag": "poisoned"}})
    assert listed.status_code == 200
    notes = {thread["thread_id"]: thread["metadata"]["note"] for thread in listed.json()}
    assert notes == {"poisoned-surrogate": LONE, "poisoned-nan": None}  # NaN: null, as orjson


@pytest.mark.parametrize("depth", [100_000, 5_000, 900, MAX_DEPTH + 1])
def test_a_body_nested_deeper_than_the_limit_is_a_400_naming_it(tmp_path: Path, depth: int) -> None:
    nested = "[" * (depth - 2) + "]" * (depth - 2)  # in the body object and the input object
    body = f'{{"assistant_id": "chain", "input": {{"x": 1, "deep": {nested}}}}}'
    with serving("sqlite", tmp_path) as server:
        response = httpx.post(f"{server.url}/runs/wait", content=body.encode(), headers=JSON)
    assert response.status_code == 400
    assert f"the limit is {MAX_DEPTH}" in response.json()["detail"]


def test_a_body_nested_up_to_the_limit_runs_and_comes_back(served: Served) -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH - 3):  # MAX_DEPTH - 2 levels, in the body and input objects
        deep = [deep]
    thread_id = httpx.post(f"{served.url}/threads", json={}).json()["thread_id"]
    modes = ["values", "updates", "messages", "custom"]
    body = {"assistant_id": "chain", "input": {"x": 1, "deep": deep}, "stream_mode": modes}
    with httpx.stream(
        "POST",
        f"{served.url}/threads/{thread_id}/runs/stream",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        timeout=30,
    ) as response:
        assert [data for event, data in events(response) if event == "values"][-1]["deep"] == deep
    history = httpx.post(f"{served.url}/threads/{thread_id}/history", json={})
    assert history.status_code == 200
    assert history.json()[0]["values"] == {"x": 12, "deep": deep}


@pytest.mark.parametrize(
    ("number", "named"),
    [("NaN", "NaN"), ("-Infinity", "-Infinity"), ("1e400", "1e400"), ("1" * 4301, "4300 digits")],
    ids=["nan", "infinity", "overflow", "digits"],
)
def test_a_number_json_cannot_carry_is_a_400_naming_it_and_stores_nothing(
    served: Served, number: str, named: str
) -> None:
    body = '{"metadata": {"tag": "number", "n": ' + number + "}}"
    response = httpx.post(f"{served.url}/threads", content=body.encode(), headers=JSON)
    assert response.status_code == 400
    assert named in response.json()["detail"]
    assert post(f"{served.url}/threads/search", {"metadata": {"tag": "number"}}).json() == []


def _strict(text: str) -> Any:
    """``text`` parsed as a browser's JSON.parse would: ``NaN`` and ``Infinity`` are errors."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_stream_event_holding_a_nan_a_node_wrote_carries_null_as_langgraph_does() -> None:
    data = {"values": {"score": float("nan"), "ratio": [float("inf"), 0.5], "note": LONE}}
    assert _strict(json_text(data)) == {
        "values": {"score": None, "ratio": [None, 0.5], "note": LONE}
    }


@pytest.mark.parametrize(
    "value",
    [{"text": "ünï 用户"}, {"text": f"a{LONE}b"}, {"n": float("nan")}, [1, {"a": None}]],
    ids=["non-ascii", "lone-surrogate", "nan", "nested"],
)
def test_responses_events_and_error_bodies_are_written_by_one_encoder(value: Any) -> None:
    text = json_text(value)
    assert JSONResponse(value).body == json_bytes(value) == text.encode("utf-8")
    detail = json.dumps(value, ensure_ascii=False)  # any text a refusal may quote
    assert error_bytes(403, detail, "x") == json_bytes(error_body(403, detail, "x"))
