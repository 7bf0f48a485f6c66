"""Driving the Studio in a real headless Chromium (Debian's ``chromium``, through Playwright's
Python package; no browser is ever downloaded).

On a developer's machine without chromium the browser tests are skipped, saying how to install
it (``pytest -m "not browser"`` leaves them out on purpose); where
``GRAPH_AGENT_REQUIRE_RENDERERS=1`` (CI, which installs chromium) a missing browser fails them.
Every page is watched: a request to any host but the server, a console error or an uncaught
exception fails the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.renderers import require

VIEWPORT = {"width": 1440, "height": 900}


def chromium_path() -> str:
    """Debian's chromium; skip (or, where renderers are required, fail) without it."""
    found = require("chromium", "apt-get install chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        message = "playwright is not installed (pip install -e '.[dev]')"
        if os.environ.get("GRAPH_AGENT_REQUIRE_RENDERERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


def launch() -> Iterator[Any]:
    """A headless Chromium for a module's tests."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        try:
            yield browser
        finally:
            browser.close()


# Records, in order, each time a node or cluster of the graph gets the "running" class: the
# page may set and clear it within one task, so the order is rebuilt from the mutation records.
_WATCH_HIGHLIGHTS = """() => {
  window.__marks = [];
  new MutationObserver((records) => {
    for (const record of records) {
      const target = record.target;
      const name = target.dataset?.node ?? target.dataset?.cluster;
      if (name !== undefined) window.__marks.push([name, record.oldValue ?? ""]);
    }
  }).observe(document.getElementById("graph"),
    { subtree: true, attributes: true, attributeFilter: ["class"], attributeOldValue: true });
}"""
_HIGHLIGHTED = """() => {
  const marks = window.__marks;
  const classes = (text) => text.split(/\\s+/);
  const lit = [];
  marks.forEach(([name, before], i) => {
    const later = marks.slice(i + 1).find(([other]) => other === name);
    const element = [...document.querySelectorAll("#graph [data-node], #graph [data-cluster]")]
      .find((item) => (item.dataset.node ?? item.dataset.cluster) === name);
    const after = later ? later[1] : element?.getAttribute("class") ?? "";
    if (!classes(before).includes("running") && classes(after).includes("running")) lit.push(name);
  });
  return lit;
}"""


# Records each text a streaming answer bubble shows while its tokens arrive.
_WATCH_TOKENS = """() => {
  window.__partials = [];
  new MutationObserver(() => {
    const live = document.querySelector("#conversation .msg.streaming .content");
    const text = live?.textContent ?? "";
    if (text && window.__partials.at(-1) !== text) window.__partials.push(text);
  }).observe(document.getElementById("conversation"),
    { subtree: true, childList: true, characterData: true });
}"""


class Studio:
    """One browser tab on the Studio of the server at ``url``, watched for what must not
    happen."""

    def __init__(self, browser: Any, url: str) -> None:
        self.url = url
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.foreign: list[str] = []
        self.errors: list[str] = []
        self.api_requests: list[tuple[str, str | None]] = []
        self.page.on("request", self._request)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))

    def _request(self, request: Any) -> None:
        if not request.url.startswith(self.url + "/"):
            self.foreign.append(request.url)
        elif "/studio/" not in request.url:
            self.api_requests.append((request.url, request.headers.get("x-api-key")))

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console error: {message.text}")

    def open(self, fragment: str = "", key: str | None = None) -> Any:
        """Load the page (``#assistant/thread``), giving ``key`` when it asks for one."""
        self.page.goto(f"{self.url}/studio/{('#' + fragment) if fragment else ''}")
        if key is not None:
            self.page.locator("#key-dialog[open]").wait_for()
            self.page.fill("#key-input", key)
            self.page.click("#key-save")
        self.page.locator("body[data-ready=yes]").wait_for()
        return self.page

    def watch_highlights(self) -> None:
        self.page.evaluate(_WATCH_HIGHLIGHTS)

    def watch_tokens(self) -> None:
        self.page.evaluate(_WATCH_TOKENS)

    def partial_answers(self) -> list[str]:
        """The texts the streaming answer showed, in order, while its tokens arrived."""
        return list(self.page.evaluate("() => window.__partials"))

    def reopen(self, fragment: str) -> Any:
        """Load the page afresh at ``#fragment`` (as a bookmark would), in the same tab."""
        self.page.goto(f"{self.url}/studio/#{fragment}")
        self.page.reload()
        self.page.locator("body[data-ready=yes]").wait_for()
        return self.page

    def highlighted(self) -> list[str]:
        """The graph's nodes, in the order the page highlighted them as running."""
        return list(self.page.evaluate(_HIGHLIGHTED))

    def shot(self, directory: Path, name: str) -> Path:
        path = directory / f"studio-{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def assert_clean(self) -> None:
        """No request left for another host, the browser logged no error, and the page shows
        no failure of its own (an action that failed)."""
        assert self.foreign == [], f"the page fetched from other hosts: {self.foreign}"
        assert self.errors == [], "\n".join(self.errors)
        notice = self.page.locator("#notice.error:not([hidden])")
        assert notice.count() == 0, f"the page reported a failure: {notice.inner_text()}"

    def close(self) -> None:
        self.context.close()
