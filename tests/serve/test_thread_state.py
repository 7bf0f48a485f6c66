"""A thread's state at a checkpoint and its history, as LangGraph's clients read them: a
checkpoint the thread does not have is a 404, and paging the history with ``before`` (an id,
a checkpoint, or a config as the JS SDK and LangGraph Studio send it) gives every checkpoint
once, on SQLite and PostgreSQL records alike; reading them never holds up the server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.serve import Records
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


class HeldSaver(SqliteSaver):
    """A SqliteSaver whose reads, once :attr:`reads_wait` is set, wait for :attr:`reads_go`
    (a slow disk, or a long history)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.reads_wait = threading.Event()
        self.read_waiting = threading.Event()  # a held read began
        self.reads_go = threading.Event()

    def _held(self) -> None:
        if self.reads_wait.is_set():
            self.read_waiting.set()
            self.reads_go.wait(30)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self._held()
        return super().get(*args, **kwargs)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        self._held()
        return super().list(*args, **kwargs)


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "history"), ("GET", "state"), ("POST", "state/checkpoint")],
)
def test_a_slow_state_or_history_read_never_holds_up_the_other_requests(
    tmp_path: Path, method: str, path: str
) -> None:
    saver = HeldSaver(str(tmp_path / "serve.db"))
    with Served(saver, Records(str(tmp_path / "records.db"))) as served:
        client = get_sync_client(url=served.url)
        thread_id = client.threads.create()["thread_id"]
        client.runs.wait(thread_id, "chain", input={"x": 1})
        saver.reads_wait.set()
        url = f"{served.url}/threads/{thread_id}/{path}"
        body = {"checkpoint_id": None} if path == "state/checkpoint" else {}
        answers: list[int] = []
        reader = threading.Thread(
            target=lambda: answers.append(
                httpx.request(method, url, json=body if method == "POST" else None).status_code
            )
        )
        reader.start()
        try:
            assert saver.read_waiting.wait(10)  # the read is held in the saver...
            ok = httpx.get(f"{served.url}/ok", timeout=5)  # ... and the server answers others
            assert ok.status_code == 200
        finally:
            saver.reads_go.set()
            reader.join(30)
        assert answers == [200]
