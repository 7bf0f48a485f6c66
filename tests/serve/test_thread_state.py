"""A thread's state at a checkpoint and its history, as LangGraph's clients read them: a
checkpoint the thread does not have is a 404, and paging the history with ``before`` (an id,
a checkpoint, or a config as the JS SDK and LangGraph Studio send it) gives every checkpoint
once, on SQLite and PostgreSQL records alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.serve.servers import KINDS, Served, serving


@pytest.fixture(scope="module", params=KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serving(request.param, tmp_path_factory.mktemp("state")) as running:
        yield running


@pytest.fixture(scope="module")
def ran(served: Served) -> str:
    """A thread three runs of ``chain`` went through (nine checkpoints)."""
    client = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    for x in range(3):
        client.runs.wait(thread_id, "chain", input={"x": x})
    return thread_id


@pytest.mark.parametrize("ran_before", [True, False], ids=["ran", "never-ran"])
def test_the_state_at_a_checkpoint_the_thread_does_not_have_is_a_404(
    served: Served, ran: str, ran_before: bool
) -> None:
    thread_id = (
        ran if ran_before else httpx.post(f"{served.url}/threads", json={}).json()["thread_id"]
    )
    unknown = "1f0c2b6e-0000-6000-8000-000000000000"
    at = httpx.get(f"{served.url}/threads/{thread_id}/state/{unknown}")
    assert at.status_code == 404 and unknown in at.json()["detail"]
    body = {"checkpoint": {"checkpoint_id": unknown}}
    posted = httpx.post(f"{served.url}/threads/{thread_id}/state/checkpoint", json=body)
    assert posted.status_code == 404


BEFORE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "id": lambda state: state["checkpoint"]["checkpoint_id"],
    "checkpoint": lambda state: state["checkpoint"],
    "config": lambda state: {
        "configurable": {"checkpoint_id": state["checkpoint"]["checkpoint_id"]}
    },
}


@pytest.mark.parametrize("before", BEFORE.values(), ids=BEFORE.keys())
def test_history_pages_by_before_add_up_to_the_whole_history(
    served: Served, ran: str, before: Callable[[dict[str, Any]], Any]
) -> None:
    client = get_sync_client(url=served.url)
    whole = [
        state["checkpoint"]["checkpoint_id"] for state in client.threads.get_history(ran, limit=100)
    ]
    paged: list[str] = []
    page = client.threads.get_history(ran, limit=2)
    while page and len(paged) <= len(whole):
        paged += [state["checkpoint"]["checkpoint_id"] for state in page]
        page = client.threads.get_history(ran, limit=2, before=before(page[-1]))
    assert len(whole) == 9
    assert paged == whole


@pytest.mark.parametrize(
    "body",
    [{"before": 7}, {"before": ["a"]}, {"limit": -1}, {"limit": 2**64}],
    ids=["number-before", "list-before", "negative-limit", "huge-limit"],
)
def test_a_history_request_naming_no_checkpoint_or_count_is_a_422(
    served: Served, ran: str, body: dict[str, Any]
) -> None:
    response = httpx.post(f"{served.url}/threads/{ran}/history", json=body)
    assert response.status_code == 422
    assert next(iter(body)) in response.json()["detail"]
