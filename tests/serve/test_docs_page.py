"""``/docs``: a page of the OpenAPI document with a console to try a request. The page and
the console's files come from the package and name no other host; in a real headless
Chromium a user picks an operation, fills it in and sends it (the API key included)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from graph_agent.serve import create_app
from graph_agent.serve.docs import DOCS_FILES
from tests.serve.browser import launch
from tests.serve.conftest import Server
from tests.serve.graphs import chain

KEY = "docs-key"
# a URL that leaves the server: a scheme, or a protocol-relative //host
FOREIGN = re.compile(
    r"[a-z][a-z0-9+.-]*://|(?:src|href|action)\s*=\s*['\"]?//|url\(\s*['\"]?//", re.I
)


def _client(**options: Any) -> TestClient:
    return TestClient(create_app([chain()], **options), base_url="http://localhost")


def test_the_page_lists_every_operation_and_frames_the_console() -> None:
    with _client() as client:
        page = client.get("/docs")
        document = client.get("/openapi.json").json()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<iframe id='console' src='/docs/try.html'" in page.text
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"<code>{method.upper()}</code></td><td><code>{path}</code>" in page.text
    assert "frame-src 'self'" in page.headers["content-security-policy"]


def test_neither_the_page_nor_the_console_names_another_host() -> None:
    with _client() as client:
        texts = {"/docs": client.get("/docs").text}
        for path in DOCS_FILES.iterdir():
            answer = client.get(f"/docs/{path.name}")
            assert answer.status_code == 200, path.name
            texts[path.name] = answer.text
    assert {"try.html", "try.js", "try.css"} <= set(texts)
    for name, text in texts.items():
        assert FOREIGN.search(text) is None, f"{name} names another host: {FOREIGN.search(text)}"


def test_the_console_files_are_public_typed_and_only_those_shipped() -> None:
    with _client(api_keys=[KEY]) as client:
        script = client.get("/docs/try.js")  # no key: the files hold no data
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert "script-src 'self'" in script.headers["content-security-policy"]
        assert 'data-keys="yes"' in client.get("/docs/try.html").text
        missing = client.get("/docs/secrets.txt")
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
        assert client.get("/docs/..%2Fapp.py").status_code == 404
        assert client.get("/threads/search").status_code == 401  # the API is still keyed
    with _client() as client:
        assert 'data-keys="no"' in client.get("/docs/try.html").text


# in a browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("docs-browser") / "serve.db"
    with Server(db, [chain()], api_keys=[KEY]) as running:
        yield running


class _Tab:
    """A browser tab on ``/docs``, recording every request and error."""

    def __init__(self, browser: Any, url: str) -> None:
        self.url = url
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.requests: list[tuple[str, str, str | None]] = []
        self.errors: list[str] = []
        self.page.on(
            "request", lambda r: self.requests.append((r.method, r.url, r.headers.get("x-api-key")))
        )
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        self.page.goto(f"{url}/docs")
        self.console = self.page.frame_locator("#console")
        self.console.locator("body[data-ready=yes]").wait_for()

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console error: {message.text}")

    def send(self, operation: str, *, params: dict[str, str], body: str | None = None) -> str:
        from playwright.sync_api import expect

        console = self.console
        answered = console.locator("body").get_attribute("data-answered") or "0"
        console.locator("#operation").select_option(operation)
        for name, value in params.items():
            console.locator(f"[data-param='{name}']").fill(value)
        if body is not None:
            console.locator("#body").fill(body)
        console.locator("#key").fill(KEY)
        console.locator("#send").click()
        expect(console.locator("body")).to_have_attribute(
            "data-answered", str(int(answered) + 1), timeout=10_000
        )
        return str(console.locator("#status").inner_text())

    def close(self) -> None:
        self.context.close()


@pytest.mark.browser
def test_a_user_sends_a_run_and_reads_a_thread_through_the_console(
    browser: Any, keyed: Server
) -> None:
    tab = _Tab(browser, keyed.url)
    try:
        body = '{"assistant_id": "chain", "input": {"x": 1}}'
        assert tab.send("POST /runs/wait", params={}, body=body).startswith("200")
        assert '"x": 12' in tab.console.locator("#response").inner_text()
        thread_id = httpx.post(f"{keyed.url}/threads", json={}, headers={"x-api-key": KEY}).json()[
            "thread_id"
        ]
        status = tab.send("GET /threads/{thread_id}", params={"thread_id": thread_id})
        assert status.startswith("200")
        assert thread_id in tab.console.locator("#response").inner_text()
        sent = [(m, u, k) for m, u, k in tab.requests if "/docs" not in u]
        assert ("POST", f"{keyed.url}/runs/wait", KEY) in sent
        assert ("GET", f"{keyed.url}/threads/{thread_id}", KEY) in sent
        assert all(url.startswith(keyed.url + "/") for _, url, _ in tab.requests)
        assert tab.errors == []
    finally:
        tab.close()


# what the console's script makes of every operation of the document
_BUILD_ALL = """async () => {
  const script = await import("/docs/try.js");
  const document = await (await fetch("/openapi.json")).json();
  return script.operations(document).map((operation) => {
    const params = {};
    for (const param of operation.params) params[param.name] = `p ${param.name}`;
    const body = operation.body ? JSON.stringify(script.example(document, operation.body)) : "";
    const request = script.buildRequest(operation, { params, body, key: "k" });
    return [operation.method, operation.path, request.method, request.url, request.headers,
            request.body ?? null];
  });
}"""


@pytest.mark.browser
def test_the_console_builds_each_operations_request_from_the_document(
    browser: Any, keyed: Server
) -> None:
    tab = _Tab(browser, keyed.url)
    try:
        frame = tab.page.frame(url=re.compile(r"/docs/try\.html$"))
        built = frame.evaluate(_BUILD_ALL)
        document = httpx.get(f"{keyed.url}/openapi.json").json()
        assert {(b[0].lower(), b[1]) for b in built} == {
            (method, path) for path, ops in document["paths"].items() for method in ops
        }
        for method, path, sent_method, url, headers, body in built:
            assert sent_method == method and headers["x-api-key"] == "k"
            expected = re.sub(r"{(\w+)}", lambda m: f"p%20{m.group(1)}", path)
            assert url.split("?")[0] == expected
            operation = document["paths"][path][method.lower()]
            query = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
            assert sorted(re.findall(r"[?&](\w+)=", url)) == sorted(query)
            if "requestBody" in operation:
                assert headers["Content-Type"] == "application/json" and body is not None
        run = next(b for b in built if b[:2] == ["POST", "/runs/wait"])
        assert run[5] == '{"assistant_id":"chain"}'  # the required field, its first choice
        assert tab.errors == []
    finally:
        tab.close()


def _open_console(browser: Any, url: str) -> tuple[Any, Any, list[str]]:
    """The console's own page at ``url`` (a new context), once ready, and its page errors."""
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.locator("body[data-ready=yes]").wait_for(timeout=10_000)
    return context, page, errors


@pytest.mark.browser
def test_a_malformed_hash_leaves_the_console_on_its_first_operation(
    browser: Any, keyed: Server
) -> None:
    context, page, errors = _open_console(browser, f"{keyed.url}/docs/try.html#%")
    try:
        first = page.locator("#operation option").first.get_attribute("value")
        assert page.locator("#operation").input_value() == first
        assert errors == []
    finally:
        context.close()
    named = "GET /threads/{thread_id}"
    link = f"{keyed.url}/docs/try.html#GET%20%2Fthreads%2F%7Bthread_id%7D"
    context, page, errors = _open_console(browser, link)  # a well-formed hash still picks
    try:
        assert page.locator("#operation").input_value() == named
        assert page.locator("#operation option").first.get_attribute("value") != named
        assert errors == []
    finally:
        context.close()
