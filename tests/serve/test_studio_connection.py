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
