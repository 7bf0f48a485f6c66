"""In a real headless Chromium: a web page of another origin cannot drive a keyless server
(the cross-site ``text/plain`` POST any page may send without a preflight runs nothing), a page
of a ``--cors-origin`` calls it and reads the answers, and the server's own Studio page, same
origin, works as before."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.serve.browser import Studio, launch
from tests.serve.conftest import Server
from tests.serve.graphs import chain

pytestmark = pytest.mark.browser

RUN = '{"assistant_id": "chain", "input": {"x": 1}}'
# what a page's script does: POST a run; what it may read of the answer
FETCH = """async ([url, type, body]) => {
  try {
    const response = await fetch(url, { method: "POST", headers: { "Content-Type": type }, body });
    return { status: response.status, body: await response.text() };
  } catch (error) {
    return { error: String(error) };
  }
}"""


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>a web page</title><p>hello</p>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class PageSite:
    """A tiny web site on 127.0.0.1 serving one page: an origin of its own."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[PageSite, PageSite]]:
    listed, other = PageSite(), PageSite()
    try:
        yield listed, other
    finally:
        listed.close()
        other.close()


@pytest.fixture(scope="module")
def keyless(
    tmp_path_factory: pytest.TempPathFactory, sites: tuple[PageSite, PageSite]
) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("guard-browser") / "serve.db"
    with Server(db, [chain()], cors_origins=[sites[0].origin]) as running:
        yield running


def _fetch_from(browser: Any, site: PageSite, url: str, content_type: str) -> dict[str, Any]:
    """What a script of ``site``'s page gets when it POSTs a run to ``url``."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(site.origin + "/")
        return dict(page.evaluate(FETCH, [url, content_type, RUN]))
    finally:
        context.close()


def _thread(server: Server) -> str:
    return str(httpx.post(f"{server.url}/threads", json={}).json()["thread_id"])


def _runs(server: Server, thread_id: str) -> list[Any]:
    return list(httpx.get(f"{server.url}/threads/{thread_id}/runs").json())


def test_a_page_of_another_origin_cannot_start_a_run_on_a_keyless_server(
    browser: Any, keyless: Server, sites: tuple[PageSite, PageSite]
) -> None:
    thread_id = _thread(keyless)
    url = f"{keyless.url}/threads/{thread_id}/runs/wait"
    simple = _fetch_from(browser, sites[1], url, "text/plain")  # no preflight
    preflighted = _fetch_from(browser, sites[1], url, "application/json")
    assert "error" in simple and "error" in preflighted  # the page reads nothing either way
    assert _runs(keyless, thread_id) == []
    state = httpx.get(f"{keyless.url}/threads/{thread_id}/state").json()
    assert state["values"] == {}


def test_a_page_of_a_listed_origin_runs_and_reads_the_answer(
    browser: Any, keyless: Server, sites: tuple[PageSite, PageSite]
) -> None:
    thread_id = _thread(keyless)
    url = f"{keyless.url}/threads/{thread_id}/runs/wait"
    answered = _fetch_from(browser, sites[0], url, "application/json")
    assert answered["status"] == 200 and json.loads(answered["body"]) == {"x": 12}
    not_json = _fetch_from(browser, sites[0], url, "text/plain")  # a JSON body must say so
    assert not_json["status"] == 415 and "application/json" in not_json["body"]
    assert len(_runs(keyless, thread_id)) == 1


def test_the_studio_page_of_a_keyless_server_runs_a_graph(browser: Any, keyless: Server) -> None:
    from playwright.sync_api import expect

    studio = Studio(browser, keyless.url)
    try:
        page = studio.open()
        page.fill("#input-json", '{"x": 1}')
        page.click("#start-run")
        expect(page.locator("#run-status")).to_have_text("done", timeout=10_000)
        expect(page.locator("#timeline .cp").first).to_be_visible()
        studio.assert_clean()
    finally:
        studio.close()
