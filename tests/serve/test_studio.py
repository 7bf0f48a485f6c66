"""The Studio end to end, in a real headless Chromium: what a person does on the page and what
they must see. Each scenario leaves a screenshot in its tmp dir; every page is checked to fetch
from no other host and to log no console error (see ``tests/serve/browser.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_agent.demo import DEFAULT_QUESTION
from tests.serve.browser import Studio, chromium_path, launch
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.studio_targets import targets

pytestmark = pytest.mark.browser

KEY = "studio-browser-key"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("studio") / "serve.db"
    with Server(db, targets(), api_keys=[KEY]) as running:
        yield running


@pytest.fixture
def studio(browser: Any, server: Server) -> Iterator[Studio]:
    from playwright.sync_api import expect

    expect.set_options(timeout=10_000)
    tab = Studio(browser, server.url)
    try:
        yield tab
        tab.assert_clean()  # every scenario: no other host, no console error
    finally:
        tab.close()


def test_the_demo_agent_runs_live_and_its_nodes_light_up_in_order(
    studio: Studio, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = studio.open(key=KEY)
    expect(page.locator("#assistant-kind")).to_have_text("agent")
    studio.watch_highlights()
    studio.watch_tokens()
    page.fill("#message", DEFAULT_QUESTION)
    page.click("#send")
    answer = page.locator("#conversation .msg.ai").last
    expect(answer.locator(".content")).to_contain_text("(17 * 23) + 4 = 395")
    expect(answer).to_contain_text("26.2 miles is 42.1648 km")
    expect(page.locator("#run-status")).to_have_text("done")
    assert studio.highlighted() == [
        "InstructionAgentHook.instruction.before",
        "__model__",
        "__tool__",
        "__model__",
    ]
    expect(page.locator("#path li")).to_have_count(4)
    partials = studio.partial_answers()  # the answer arrived token by token
    assert len(partials) >= 3
    final = answer.locator(".content").inner_text()
    assert all(final.startswith(text) for text in partials)
    # each tool call folds open on its arguments and result
    calculator = page.locator("#conversation .tool-call[data-tool=calculator]")
    expect(calculator).to_have_class(re.compile(r"\bdone\b"))
    calculator.locator(":scope > summary").click()
    expect(calculator.locator(".tool-result")).to_have_text("395")
    # token usage per model call, and in all
    usage = page.locator("#run-log li[data-node=__model__] .usage")
    expect(usage).to_have_count(2)
    expect(usage.first).to_have_text(re.compile(r"^\d+ tokens \(\d+ in · \d+ out\)$"))
    expect(page.locator("#run-tokens")).to_have_text(re.compile(r"^\d+ tokens$"))
    # the thread is listed, with its five checkpoints
    expect(page.locator("#threads .thread.selected .chip")).to_have_text("idle")
    expect(page.locator("#timeline .cp")).to_have_count(5)
    studio.shot(tmp_path, "demo")
    # the key was asked for once, and went with every API call
    assert studio.api_requests
    assert {key for _, key in studio.api_requests} == {KEY}
    page.reload()
    page.locator("body[data-ready=yes]").wait_for()
    expect(page.locator("#key-dialog")).not_to_have_attribute("open", "")


def test_one_tool_call_approved_one_rejected_and_one_edited(studio: Studio, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = studio.open("gated", key=KEY)
    page.fill("#message", "What is 2 + 3 and 5 kg in lb?")
    page.click("#send")
    calculator = page.locator(".approval[data-tool=calculator]")
    converter = page.locator(".approval[data-tool=convert_units]")
    expect(calculator.locator("input[data-arg=expression]")).to_have_value("2 + 3")
    expect(converter.locator("input[data-arg=to_unit]")).to_have_value("lb")
    expect(page.locator("#run-status")).to_have_text("waiting for you")
    paused = "#graph [data-node='HumanInTheLoopHook.human_in_the_loop.afterModel']"
    expect(page.locator(paused)).to_have_class(re.compile(r"\bpaused\b"))
    converter.locator("input[value=reject]").check()
    converter.locator(".reason").fill("no conversions today")
    studio.shot(tmp_path, "approval")
    page.click(".send-decisions")
    answer = page.locator("#conversation .msg.ai").last
    expect(answer).to_contain_text("2 + 3 = 5")
    expect(answer).to_contain_text("no conversions today")
    rejected = page.locator("#conversation .tool-call[data-tool=convert_units]")
    expect(rejected).to_have_class(re.compile(r"\berror\b"))
    expect(page.locator("#run-status")).to_have_text("done")
    # the arguments are a form: an edited call runs with what the human wrote
    page.fill("#message", "What is 6 * 7?")
    page.click("#send")
    calculator.locator("input[value=edit]").check()
    calculator.locator("input[data-arg=expression]").fill("6 * 8")
    page.click(".send-decisions")
    expect(page.locator("#conversation .msg.ai").last).to_contain_text("6 * 8 = 48")
    expect(page.locator(".approval")).to_have_count(0)


def test_a_fork_from_an_earlier_checkpoint_is_a_new_branch_on_the_timeline(
    studio: Studio, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = studio.open("steps", key=KEY)
    page.fill("#input-json", '{"x": 1}')
    page.click("#start-run")
    expect(page.locator("#conversation")).to_contain_text("x: 12")
    expect(page.locator("#timeline .cp")).to_have_count(3)
    # edit the state after the first step, and carry on from there
    page.click("#timeline .cp[data-step='0']")
    expect(page.locator("#checkpoint .diff")).to_contain_text("x 1 → 2")
    page.click("#checkpoint .edit-state")
    page.fill("#state-editor", '{"x": 100}')
    page.click("#checkpoint .save-continue")
    expect(page.locator("#conversation")).to_contain_text("x: 110")
    branch = page.locator("#timeline .cp.branch")
    expect(branch).to_have_count(1)
    expect(branch).to_have_attribute("data-lane", "1")
    expect(branch).to_contain_text("branch from step 0")
    page.locator("#timeline .cp[data-lane='1']", has_text="update_state").click()
    expect(page.locator("#checkpoint .diff")).to_contain_text("x 2 → 100")
    # fork from the first checkpoint with another input
    page.click("#timeline .cp[data-step='-1'][data-lane='0']")
    page.click("#checkpoint button.fork")
    expect(page.locator("#fork-banner")).to_contain_text("(step -1)")
    page.fill("#input-json", '{"x": 5}')
    page.click("#start-run")
    expect(page.locator("#conversation")).to_contain_text("x: 16")
    expect(page.locator("#timeline .cp.branch")).to_have_count(2)
    expect(page.locator("#timeline-count")).to_have_text("10 checkpoints · 3 branches")
    expect(page.locator("#fork-banner")).to_be_hidden()
    studio.shot(tmp_path, "time-travel")


def test_a_node_that_raises_shows_its_node_step_and_message(studio: Studio, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = studio.open("broken", key=KEY)
    page.fill("#input-json", '{"amount": 21}')
    page.click("#start-run")
    error = page.locator("#run-error")
    expect(error).to_be_visible()
    expect(error.locator(".error-node")).to_have_text("check")
    expect(error.locator(".error-step")).to_have_text("1")
    expect(error).to_contain_text("the amount 42 is over the limit")
    expect(page.locator("#graph [data-node=check]")).to_have_class(re.compile(r"\bfailed\b"))
    expect(page.locator("#run-status")).to_have_text("error")
    studio.shot(tmp_path, "error")
    # coming back to the thread later shows the same error, from the run's record
    thread = page.locator("#threads .thread.selected").get_attribute("data-thread-id")
    page = studio.reopen(f"broken/{thread}")
    expect(page.locator("#threads .thread.selected .chip")).to_have_text("error")
    expect(page.locator("#run-error .error-node")).to_have_text("check")
    expect(page.locator("#run-error")).to_contain_text("over the limit")


def test_a_subgraph_is_a_cluster_that_lights_up_while_it_runs(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open("nested", key=KEY)
    expect(page.locator("#graph [data-cluster=research]")).to_have_count(1)
    expect(page.locator("#graph [data-node='research/search']")).to_have_count(1)
    studio.watch_highlights()
    page.click("#start-run")
    expect(page.locator("#conversation")).to_contain_text("report: NOTES ON GRAPHS")
    assert studio.highlighted() == ["plan", "research", "write"]


RUNNING = re.compile(r"\brunning\b")
_LIT_NOW = """() => [...document.querySelectorAll("#graph .running")]
  .map((item) => item.dataset.node ?? item.dataset.cluster).sort()"""


def test_a_slow_node_is_lit_while_it_runs_and_parallel_branches_are_lit_together(
    studio: Studio,
) -> None:
    from playwright.sync_api import expect

    page = studio.open("paced", key=KEY)
    page.click("#start-run")
    expect(page.locator("#graph [data-node=think]")).to_have_class(RUNNING)
    assert page.locator("#run-log li").count() == 0  # lit before it ended: it runs now
    both = "() => ['left', 'right'].every((name) => document.querySelector("
    both += "`#graph [data-node=${name}]`).classList.contains('running'))"
    page.wait_for_function(both)
    assert page.evaluate(_LIT_NOW) == ["left", "right"]  # and `think`, which ended, is not
    assert page.locator("#run-log li[data-node=left]").count() == 0
    expect(page.locator("#run-status")).to_have_text("done")
    assert page.evaluate(_LIT_NOW) == []


def test_while_a_tool_runs_the_tool_node_is_lit_and_not_the_model(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open("pausing", key=KEY)
    page.fill("#message", "Wait a moment, please.")
    page.click("#send")
    expect(page.locator("#graph [data-node=__tool__]")).to_have_class(RUNNING)
    assert page.evaluate(_LIT_NOW) == ["__tool__"]
    assert page.locator("#run-log li[data-node=__tool__]").count() == 0  # it runs now
    expect(page.locator("#conversation .msg.ai").last).to_contain_text("Done waiting.")
    expect(page.locator("#run-status")).to_have_text("done")
    assert page.evaluate(_LIT_NOW) == []


def test_a_pause_shows_its_value_and_takes_the_answer(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open("asking", key=KEY)
    page.fill("#input-json", '{"question": "lunch?"}')
    page.click("#start-run")
    card = page.locator(".interrupt")
    expect(card).to_contain_text('"reply to lunch?"')
    expect(card).to_contain_text("send this?")
    expect(page.locator("#graph [data-node=ask]")).to_have_class(re.compile(r"\bpaused\b"))
    card.locator(".resume-value").fill('{"send": true}')
    card.locator("button.resume").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#conversation")).to_contain_text("send: true")
    expect(page.locator(".interrupt")).to_have_count(0)


def test_a_long_run_stops_when_cancelled(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open("slow", key=KEY)
    page.click("#start-run")
    expect(page.locator("#run-log li")).not_to_have_count(0)
    page.click("#cancel-run")
    expect(page.locator("#run-status")).to_have_text("cancelled")
    expect(page.locator("#threads .thread.selected .chip")).to_have_text("idle")
    assert page.locator("#run-log li").count() < 50


def test_each_checkpoint_shows_the_part_of_its_id_that_tells_it_apart(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open("steps", key=KEY)
    page.fill("#input-json", '{"x": 1}')
    page.click("#start-run")
    rows = page.locator("#timeline .cp")
    expect(rows).to_have_count(3)
    expect(page.locator("#run-status")).to_have_text("done")
    ids = rows.evaluate_all("rows => rows.map((row) => row.dataset.checkpoint)")
    shown = page.locator("#timeline .cp .cp-id").all_inner_texts()
    heads = []
    for row in rows.all():
        row.click()
        heads.append(page.locator("#checkpoint .cp-head code").inner_text())
    assert len(set(shown)) == len(set(heads)) == 3  # each reads differently
    for checkpoint_id, short in zip(ids, heads, strict=True):
        assert short.strip("…") in checkpoint_id


def test_the_thread_list_and_the_timeline_follow_a_run_while_it_runs(studio: Studio) -> None:
    from playwright.sync_api import expect

    page = studio.open("slow", key=KEY)
    page.click("#start-run")
    expect(page.locator("#threads .thread.selected .chip")).to_have_text("busy")
    expect(page.locator("#timeline .cp").nth(3)).to_be_attached()  # checkpoints as saved
    expect(page.locator("#timeline .cp.head.selected")).to_have_count(1)  # the newest shown
    expect(page.locator("#run-status")).to_have_text("running")  # ... before the run ends
    page.click("#cancel-run")
    expect(page.locator("#threads .thread.selected .chip")).to_have_text("idle")


def test_the_timeline_follows_a_run_from_its_stream_without_reading_the_history_again(
    studio: Studio,
) -> None:
    from playwright.sync_api import expect

    page = studio.open("slow", key=KEY)
    before = len(studio.api_requests)
    page.click("#start-run")
    expect(page.locator("#timeline .cp").nth(7)).to_be_attached()  # 8 checkpoints told...
    during = [url for url, _ in studio.api_requests[before:] if url.endswith("/history")]
    assert during == []  # ... and not one read of the whole history for them
    steps = page.locator("#timeline .cp").evaluate_all("rows => rows.map((r) => r.dataset.step)")
    assert steps[:8] == [str(step) for step in range(-1, 7)]
    expect(page.locator("#timeline .cp.head.selected .cp-step")).not_to_have_text("step -1")
    page.click("#cancel-run")
    expect(page.locator("#run-status")).to_have_text("cancelled")
    after = [url for url, _ in studio.api_requests[before:] if url.endswith("/history")]
    assert len(after) == 1  # read once the run ended: what the stream told, as saved
    count = page.locator("#timeline .cp").count()
    expect(page.locator("#timeline-count")).to_have_text(f"{count} checkpoints")


def test_a_graph_with_messages_gets_a_chat_box_and_no_field_for_its_private_keys(
    studio: Studio,
) -> None:
    from playwright.sync_api import expect

    page = studio.open("chatty", key=KEY)
    expect(page.locator("#message")).to_be_visible()
    expect(page.locator("#run-form [data-key=messages]")).to_have_count(0)
    expect(page.locator("#run-form [data-key=log]")).to_have_count(0)  # private bookkeeping
    page.click("#run-form .more-inputs > summary")
    page.fill("#run-form [data-key=tone]", "shout")
    page.fill("#message", "hello")
    page.press("#message", "Enter")
    expect(page.locator("#conversation .msg.ai")).to_have_text(re.compile("shout: hello"))
    expect(page.locator("#conversation .msg.human")).to_contain_text("hello")
    expect(page.locator("#message")).to_have_value("")
    expect(page.locator("#run-status")).to_have_text("done")


def test_a_phone_sized_window_never_scrolls_sideways(studio: Studio, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = studio.page
    page.set_viewport_size({"width": 420, "height": 860})
    studio.open("demo", key=KEY)
    page.fill("#message", DEFAULT_QUESTION)
    page.click("#send")
    expect(page.locator("#run-status")).to_have_text("done")
    page.locator("#conversation .tool-call[data-tool=calculator] > summary").click()
    page.locator("#timeline .cp").nth(2).click()
    studio.shot(tmp_path, "phone")
    for element in ("document.documentElement", "document.body"):
        width, seen = page.evaluate(f"() => [{element}.scrollWidth, {element}.clientWidth]")
        assert width <= seen, f"{element} is {width} px wide in a {seen} px window"


def _luminance(colour: str) -> float:
    """The relative luminance (0 black .. 1 white) of a computed CSS ``rgb(...)`` colour."""
    red, green, blue = (int(part) / 255 for part in re.findall(r"\d+", colour)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def test_the_page_follows_a_dark_colour_scheme(studio: Studio, tmp_path: Path) -> None:
    page = studio.page
    colours = """() => {
      const style = (selector) => getComputedStyle(document.querySelector(selector));
      return [style("body").backgroundColor, style(".panel").backgroundColor,
              style(".panel").color, style("#input-json").backgroundColor,
              style("#input-json").color];
    }"""
    studio.open("steps", key=KEY)
    light = [_luminance(colour) for colour in page.evaluate(colours)]
    page.emulate_media(color_scheme="dark")
    dark = [_luminance(colour) for colour in page.evaluate(colours)]
    studio.shot(tmp_path, "dark")
    assert min(light[:2]) > 0.8 and light[2] < 0.3  # dark text on light panels
    page_, panel, text, field, typed = dark
    assert max(page_, panel, field) < 0.2 and min(text, typed) > 0.7


def test_every_control_is_reached_by_the_keyboard_and_the_arrows_move_between_checkpoints(
    studio: Studio,
) -> None:
    from playwright.sync_api import expect

    page = studio.open("steps", key=KEY)
    page.fill("#input-json", '{"x": 1}')
    page.click("#start-run")
    expect(page.locator("#timeline .cp")).to_have_count(3)
    expect(page.locator("#run-status")).to_have_text("done")
    page.locator("body").focus()
    wanted = {"assistant", "new-thread", "thread", "input-json", "start-run", "cp", "fork"}
    reached = set()
    for _ in range(60):  # every control of this page, and then some
        page.keyboard.press("Tab")
        reached.add(
            page.evaluate("() => document.activeElement.id || document.activeElement.classList[0]")
        )
        if wanted <= reached:
            break
    assert wanted <= reached, f"never reached by Tab: {wanted - reached}"
    newest = page.locator("#timeline .cp.selected")
    expect(newest).to_have_attribute("data-step", "1")
    newest.focus()
    page.keyboard.press("ArrowUp")
    selected = page.locator("#timeline .cp.selected")
    expect(selected).to_have_attribute("data-step", "0")
    expect(selected).to_be_focused()
    expect(page.locator("#checkpoint .cp-head")).to_contain_text("Step 0")
    page.keyboard.press("ArrowUp")
    expect(selected).to_have_attribute("data-step", "-1")
    page.keyboard.press("ArrowDown")
    expect(selected).to_have_attribute("data-step", "0")
    expect(page.locator("#checkpoint .cp-head")).to_contain_text("Step 0")


@pytest.mark.postgres
def test_the_studio_on_postgresql_with_an_api_key(browser: Any, tmp_path: Path) -> None:
    """``graph-agent studio --postgres``: runs are queued jobs there, events come through the
    database; the page works the same, key and all."""
    from playwright.sync_api import expect

    from tests.checkpoint.postgres_db import fresh_schema

    chromium_path()
    with fresh_schema() as dsn:
        port = free_port()
        command = [sys.executable, "-m", "graph_agent", "studio", "--no-browser"]
        command += ["tests/serve/studio_targets.py:gated", "--port", str(port)]
        command += ["--postgres", dsn]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GRAPH_AGENT_API_KEYS": KEY}
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        studio = Studio(browser, f"http://127.0.0.1:{port}")
        try:
            wait_until_up(studio.url, timeout=30)
            page = studio.open(key=KEY)
            page.fill("#message", "What is 2 + 3 and 5 kg in lb?")
            page.click("#send")
            page.locator(".approval[data-tool=convert_units] input[value=reject]").check()
            page.click(".send-decisions")
            answer = page.locator("#conversation .msg.ai").last
            expect(answer).to_contain_text("2 + 3 = 5")
            expect(answer).to_contain_text("A human rejected this tool call")
            expect(page.locator("#run-status")).to_have_text("done")
            expect(page.locator("#timeline .cp")).to_have_count(7)
            studio.shot(tmp_path, "postgres")
            assert {key for _, key in studio.api_requests} == {KEY}
            studio.assert_clean()
        finally:
            studio.close()
            process.terminate()
            process.wait(20)
