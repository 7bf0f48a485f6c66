"""The Studio's memory browser in a real headless Chromium: it lists the store's namespaces, a
namespace's items a page at a time, an item's value; searches with a filter and a query (the
server's store has an index); puts and deletes items; all over ``/store`` with the API key,
what it does seen by ``langgraph-sdk`` (see ``tests/serve/browser.py`` for the checks every
page gets: no other host, no console error)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from graph_agent.store import HashEmbeddings, InMemoryStore
from tests.serve.browser import Studio, launch
from tests.serve.conftest import Server
from tests.serve.graphs import chain

pytestmark = pytest.mark.browser

KEY = "memory-browser-key"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    store = InMemoryStore(index={"embed": HashEmbeddings(64), "fields": ["text"]})
    with Server(tmp_path / "serve.db", [chain()], api_keys=[KEY], store=store) as running:
        client = get_sync_client(url=running.url, api_key=KEY)
        for n in range(12):
            kind = "fact" if n % 3 == 0 else "chat"
            client.store.put_item(["users", "u1"], key=f"m{n:02d}", value={"n": n, "kind": kind})
        client.store.put_item(["users", "u2"], key="tea", value={"text": "she likes green tea"})
        client.store.put_item(["users", "u2"], key="code", value={"text": "he writes rust code"})
        client.store.put_item(["notes"], key="x", value={"text": "a note", "kind": "fact"})
        yield running


@pytest.fixture
def studio(browser: Any, server: Server) -> Iterator[Studio]:
    from playwright.sync_api import expect

    expect.set_options(timeout=10_000)
    tab = Studio(browser, server.url)
    try:
        yield tab
        tab.assert_clean()
    finally:
        tab.close()


def _namespaces(page: Any) -> list[str]:
    return list(page.locator("#memory-namespaces .memory-namespace").all_inner_texts())


def _keys(page: Any) -> list[str]:
    return list(page.locator("#memory-items .memory-key").all_inner_texts())


def test_browse_namespaces_page_through_items_and_read_one(
    studio: Studio, server: Server, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = studio.open(key=KEY)
    page.click("#open-memory")
    expect(page.locator("#memory-dialog")).to_have_attribute("open", "")
    expect(page.locator("#memory-namespaces .memory-namespace")).to_have_count(3)
    assert _namespaces(page) == ["notes", "users.u1", "users.u2"]
    page.click("#memory-namespaces [data-namespace='users.u1']")
    expect(page.locator("#memory-items .memory-item")).to_have_count(10)
    assert _keys(page) == [f"m{n:02d}" for n in range(11, 1, -1)]  # newest first
    expect(page.locator("#memory-page")).to_have_text("1–10")
    expect(page.locator("#memory-prev")).to_be_disabled()
    page.click("#memory-next")
    expect(page.locator("#memory-items .memory-item")).to_have_count(2)
    assert _keys(page) == ["m01", "m00"]
    expect(page.locator("#memory-next")).to_be_disabled()
    page.click("#memory-prev")
    expect(page.locator("#memory-items .memory-item")).to_have_count(10)
    page.click("#memory-items [data-key='m04']")
    expect(page.locator("#memory-item .memory-item-key")).to_have_text("m04")
    expect(page.locator("#memory-item .memory-value")).to_contain_text('"chat"')
    expect(page.locator("#memory-items [data-key='m04']")).to_have_class(re.compile("selected"))
    # a prefix narrows the namespaces
    page.fill("#memory-prefix", "users")
    page.click("#memory-search")
    expect(page.locator("#memory-namespaces .memory-namespace")).to_have_count(2)
    expect(page.locator("#memory-items .memory-item")).to_have_count(10)
    studio.shot(tmp_path, "memory")
    assert {key for _, key in studio.api_requests} == {KEY}  # every call carried the key
    assert any("/store/namespaces" in url for url, _ in studio.api_requests)


def test_search_by_filter_and_by_query(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open(key=KEY)
    page.click("#open-memory")
    page.fill("#memory-filter", '{"kind": "fact"}')
    page.click("#memory-search")
    expect(page.locator("#memory-items .memory-item")).to_have_count(5)
    assert sorted(_keys(page)) == ["m00", "m03", "m06", "m09", "x"]
    expect(page.locator("#memory-where")).to_have_text("everywhere · filtered")
    page.fill("#memory-filter", "")
    page.fill("#memory-prefix", "users.u2")
    page.fill("#memory-query", "green tea")
    page.click("#memory-search")
    expect(page.locator("#memory-items .memory-item")).to_have_count(2)
    assert _keys(page)[0] == "tea"
    expect(page.locator("#memory-items .memory-score").first).to_have_text(
        re.compile(r"^0\.\d{3}$")
    )
    page.locator("#memory-items .memory-item").first.click()
    expect(page.locator("#memory-item .memory-value")).to_contain_text("she likes green tea")


def test_bad_input_is_said_in_the_dialog(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open(key=KEY)
    page.click("#open-memory")
    page.fill("#memory-filter", "{kind: fact}")
    page.click("#memory-search")
    expect(page.locator("#memory-error")).to_contain_text("Filter is not JSON")
    page.fill("#memory-filter", '{"n": {"$near": 1}}')
    page.click("#memory-search")
    expect(page.locator("#memory-error")).to_contain_text("$near")  # the server's 422
    refused = [error for error in studio.errors if "status of 422" in error]
    assert len(refused) == 1  # the browser logs the refused request: that one only
    studio.errors.remove(refused[0])
    page.fill("#memory-filter", "")
    page.click("#memory-search")
    expect(page.locator("#memory-error")).to_be_hidden()


def test_put_an_item_then_delete_it(studio: Studio, server: Server) -> None:
    from playwright.sync_api import expect

    client = get_sync_client(url=server.url, api_key=KEY)
    page = studio.open(key=KEY)
    page.click("#open-memory")
    page.fill("#memory-put-namespace", "notes.n1")
    page.fill("#memory-put-key", "todo")
    page.fill("#memory-put-value", '{"text": "buy oolong", "done": false}')
    page.fill("#memory-put-ttl", "90")
    page.click("#memory-put")
    expect(page.locator("#memory-item .memory-item-key")).to_have_text("todo")
    expect(page.locator("#memory-namespaces [data-namespace='notes.n1']")).to_have_class(
        re.compile("selected")
    )
    assert client.store.get_item(["notes", "n1"], key="todo")["value"] == {
        "text": "buy oolong",
        "done": False,
    }
    # edit: the form takes the item, a new value replaces it
    page.click("#memory-item button:has-text('Edit')")
    expect(page.locator("#memory-put-key")).to_have_value("todo")
    page.fill("#memory-put-value", '{"text": "buy oolong", "done": true}')
    page.click("#memory-put")
    expect(page.locator("#memory-item .memory-value")).to_contain_text("true")
    assert client.store.get_item(["notes", "n1"], key="todo")["value"]["done"] is True
    # delete asks once more, then deletes
    page.click("#memory-delete")
    expect(page.locator("#memory-delete")).to_have_text("Delete it? Click again")
    assert client.store.get_item(["notes", "n1"], key="todo") is not None
    page.click("#memory-delete")
    expect(page.locator("#memory-item")).to_contain_text("Deleted notes.n1 / todo")
    assert client.store.get_item(["notes", "n1"], key="todo") is None
    expect(page.locator("#memory-namespaces [data-namespace='notes.n1']")).to_have_count(0)
    # a value that is not an object is refused before anything is sent
    page.fill("#memory-put-namespace", "notes")
    page.fill("#memory-put-key", "bad")
    page.fill("#memory-put-value", "[1, 2]")
    page.click("#memory-put")
    expect(page.locator("#memory-error")).to_contain_text("Value must be a JSON object")
    page.click("#memory-close")
    expect(page.locator("#memory-dialog")).not_to_have_attribute("open", "")


def test_on_a_phone_the_dialog_is_one_column_and_never_scrolls_sideways(
    studio: Studio, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = studio.page
    page.set_viewport_size({"width": 420, "height": 860})
    studio.open(key=KEY)
    page.click("#open-memory")
    page.click("#memory-namespaces [data-namespace='users.u2']")
    page.click("#memory-items [data-key='tea']")
    expect(page.locator("#memory-item .memory-value")).to_contain_text("green tea")
    studio.shot(tmp_path, "memory-phone")
    for element in ("#memory-dialog", ".memory-body"):
        width, seen = page.evaluate(
            f"() => [document.querySelector('{element}').scrollWidth, "
            f"document.querySelector('{element}').clientWidth]"
        )
        assert width <= seen, f"{element} is {width} px wide in {seen} px"
