"""The Studio when its server goes away and comes back, in a real headless Chromium: what was
typed stays, the page names the server it cannot reach, and carries on once it answers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.browser import Studio, launch
from tests.serve.conftest import Server
from tests.serve.studio_targets import chatty

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


def test_a_message_sent_while_the_server_is_gone_is_kept_and_sent_once_it_is_back(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    db = tmp_path / "serve.db"
    first = Server(db, [chatty()]).__enter__()
    studio = Studio(browser, first.url)
    again = None
    try:
        page = studio.open("chatty")
        first.__exit__(None, None, None)  # the server stops
        page.fill("#message", "are you there?")
        page.click("#send")
        notice = page.locator("#notice.error")
        expect(notice).to_contain_text(f"Cannot reach the server at {first.url}")
        expect(page.locator("#message")).to_have_value("are you there?")
        expect(page.locator("#run-status")).to_have_text("waiting for the server")
        again = Server(db, [chatty()], port=first.port).__enter__()  # back, at the same address
        answer = page.locator("#conversation .msg.ai")
        expect(answer).to_have_text(re.compile("echo: are you there\\?"))
        expect(page.locator("#message")).to_have_value("")
        expect(page.locator("#run-status")).to_have_text("done")
        expect(notice).to_have_count(0)  # the problem is gone, and so is its notice
        expect(page.locator("#threads .thread")).to_have_count(1)  # sent once
        # the browser logs each request that found nobody: those are expected here
        studio.errors = [text for text in studio.errors if "ERR_CONNECTION_REFUSED" not in text]
        studio.assert_clean()
    finally:
        studio.close()
        if again is not None:
            again.__exit__(None, None, None)


def _stopped_studio(browser: Any, tmp_path: Path) -> tuple[Server, Studio, Any]:
    """A Studio page whose server stopped after the page loaded."""
    first = Server(tmp_path / "serve.db", [chatty()]).__enter__()
    studio = Studio(browser, first.url)
    page = studio.open("chatty")
    first.__exit__(None, None, None)
    return first, studio, page


def _page_errors(studio: Studio) -> list[str]:
    """What the browser logged, but for the requests that found nobody (expected here)."""
    return [text for text in studio.errors if "ERR_CONNECTION_REFUSED" not in text]


def test_a_failing_handler_of_the_servers_return_lets_the_others_run(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    first, studio, page = _stopped_studio(browser, tmp_path)
    again = None
    try:
        page.evaluate(
            """async () => {
              const connection = await import("./connection.js");
              window.__ran = [];
              connection.onBack(() => { throw new Error("a handler broke"); });
              connection.onBack(() => { window.__ran.push("the next one"); });
              connection.lost();
            }"""
        )
        expect(page.locator("#notice.error")).to_contain_text("Cannot reach the server")
        again = Server(tmp_path / "serve.db", [chatty()], port=first.port).__enter__()
        page.wait_for_function("() => window.__ran.length > 0", timeout=30_000)
        assert page.evaluate("() => window.__ran") == ["the next one"]
        expect(page.locator("#notice.error")).to_contain_text("a handler broke")  # told
        assert _page_errors(studio) == []  # no unhandled rejection
    finally:
        studio.close()
        if again is not None:
            again.__exit__(None, None, None)


def test_another_problems_notice_stays_while_the_page_asks_the_server_again(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    first, studio, page = _stopped_studio(browser, tmp_path)
    again = None
    try:
        page.evaluate("async () => (await import('./connection.js')).lost()")
        notice = page.locator("#notice-text")
        expect(notice).to_contain_text("Cannot reach the server")
        page.evaluate("async () => (await import('./state.js')).notify('the state is not JSON')")
        for _ in range(2):  # two more tries: each would have said the server is gone again
            with page.expect_event(
                "requestfailed", lambda request: request.url.endswith("/ok"), timeout=30_000
            ):
                pass
        expect(notice).to_have_text("the state is not JSON")
        again = Server(tmp_path / "serve.db", [chatty()], port=first.port).__enter__()
        page.evaluate("async () => (await import('./connection.js')).whenBack()")
        expect(notice).to_have_text("the state is not JSON")  # not replaced by "answers again"
        assert _page_errors(studio) == []
    finally:
        studio.close()
        if again is not None:
            again.__exit__(None, None, None)
