"""Node policies (``add_node(..., retry=, timeout=, error_handler=)``), through both drivers."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from graph_agent import (
    END,
    START,
    AppendStrategy,
    Command,
    CompileConfig,
    GraphSetupError,
    MemorySaver,
    NodeError,
    NodeTimeoutError,
    RetryPolicy,
    RunnableConfig,
    Send,
    StateGraph,
    emit_chunk,
)
from graph_agent.graph.policies import default_retry_on
from graph_agent.models.errors import (
    ModelBadRequestError,
    ModelConnectionError,
    ModelServerError,
)


class FakeClock:
    """Sleeps that take no time: each wait is recorded, and the clock moves on by it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def flaky(failures: int, error: type[Exception] = ConnectionError, *, is_async: bool = False):
    """A node that raises ``error`` ``failures`` times, then appends "done"; ``calls`` counts."""
    calls = []

    def attempt(state):
        calls.append(1)
        emit_chunk(f"try {len(calls)}")
        if len(calls) <= failures:
            raise error(f"failure {len(calls)}")
        return {"log": "done"}

    if not is_async:
        return attempt, calls

    async def async_attempt(state):
        await asyncio.sleep(0)
        return attempt(state)

    return async_attempt, calls


def one_node(fn, saver=None, **policies):
    g = StateGraph("policies", key_strategies={"log": AppendStrategy()})
    g.add_node("work", fn, **policies)
    g.add_edge(START, "work").add_edge("work", END)
    return g.compile(CompileConfig(saver=saver))


def retry(clock: FakeClock, **options) -> RetryPolicy:
    return RetryPolicy(sleep=clock.sleep, async_sleep=clock.async_sleep, **options)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_node_failing_twice_then_succeeding_takes_three_attempts_and_writes_once(
    driver, is_async
):
    clock = FakeClock()
    fn, calls = flaky(2, is_async=is_async)
    saver = MemorySaver()
    app = one_node(fn, saver, retry=retry(clock, jitter=False))
    config = RunnableConfig(thread_id="t")
    outputs = driver.stream(app, {"log": []}, config)
    assert len(calls) == 3
    assert list(app.get_state(config).values["log"]) == ["done"]
    [output] = [o for o in outputs if o.node == "work" and not hasattr(o, "chunk")]
    assert output.attempts == 3
    chunks = [(o.chunk, o.attempts) for o in outputs if hasattr(o, "chunk")]
    assert chunks == [("try 1", 1), ("try 2", 2), ("try 3", 3)]
    assert app.get_state(config).metadata["attempts"] == {"work": 3}


def test_a_node_that_needs_one_attempt_reports_one_and_no_attempts_metadata(driver):
    app = one_node(flaky(0)[0], MemorySaver(), retry=RetryPolicy())
    config = RunnableConfig(thread_id="t")
    [*_, output] = driver.stream(app, {"log": []}, config)
    assert output.attempts == 1
    assert "attempts" not in app.get_state(config).metadata


def test_an_error_retry_on_does_not_accept_is_not_retried(driver):
    clock = FakeClock()
    fn, calls = flaky(2, ValueError)
    app = one_node(fn, retry=retry(clock))
    with pytest.raises(NodeError) as raised:
        driver.invoke(app, {"log": []})
    assert isinstance(raised.value.__cause__, ValueError)
    assert len(calls) == 1 and clock.waits == []


def test_retry_on_takes_types_and_predicates(driver):
    clock = FakeClock()
    fn, calls = flaky(1, KeyError)
    driver.invoke(one_node(fn, retry=retry(clock, retry_on=(KeyError,))), {"log": []})
    assert len(calls) == 2
    fn, calls = flaky(1, KeyError)
    predicate = retry(clock, retry_on=lambda error: isinstance(error, LookupError))
    driver.invoke(one_node(fn, retry=predicate), {"log": []})
    assert len(calls) == 2


def test_the_last_failure_is_raised_once_the_attempts_are_spent(driver):
    clock = FakeClock()
    fn, calls = flaky(5)
    app = one_node(fn, retry=retry(clock, max_attempts=3))
    with pytest.raises(NodeError, match=r"failure 3 \(step 0, attempt 3 of a RetryPolicy\)"):
        driver.invoke(app, {"log": []})
    assert len(calls) == 3


def test_backoff_grows_by_the_factor_up_to_the_longest_wait(driver):
    clock = FakeClock()
    fn, _ = flaky(5)
    policy = retry(
        clock,
        max_attempts=6,
        initial_interval=1.0,
        backoff_factor=3.0,
        max_interval=20.0,
        jitter=False,
    )
    driver.invoke(one_node(fn, retry=policy), {"log": []})
    assert clock.waits == [1.0, 3.0, 9.0, 20.0, 20.0]


def test_jitter_takes_at_most_half_off_each_wait(driver):
    clock = FakeClock()
    fn, _ = flaky(4)
    policy = retry(clock, max_attempts=5, initial_interval=2.0, backoff_factor=2.0)
    driver.invoke(one_node(fn, retry=policy), {"log": []})
    for wait, full in zip(clock.waits, [2.0, 4.0, 8.0, 16.0], strict=True):
        assert full / 2 <= wait <= full


def test_the_default_retry_on_takes_network_and_server_errors_only():
    assert default_retry_on(ConnectionError("reset"))
    assert default_retry_on(TimeoutError())
    assert default_retry_on(ModelConnectionError("down"))
    assert default_retry_on(ModelServerError("busy", status_code=503))
    assert not default_retry_on(ModelBadRequestError("bad", status_code=400))
    assert not default_retry_on(ValueError("bug"))
    nested = NodeError("node 'inner' raised", node="inner", step=0)
    nested.__cause__ = ConnectionError("reset")
    assert default_retry_on(nested)  # a subgraph's node lost its connection


def test_default_retry_on_knows_httpx_errors():
    request = httpx.Request("GET", "http://example.invalid")
    assert default_retry_on(httpx.ConnectError("refused", request=request))
    for status, retried in [(502, True), (404, False)]:
        response = httpx.Response(status, request=request)
        error = httpx.HTTPStatusError("status", request=request, response=response)
        assert default_retry_on(error) is retried


def test_a_sync_node_past_its_timeout_is_abandoned_with_node_timeout_error(driver):
    release = threading.Event()
    finished = []

    def slow(state):
        release.wait(10)
        finished.append(1)
        return {"log": "late"}

    app = one_node(slow, timeout=0.05)
    try:
        with pytest.raises(NodeTimeoutError) as raised:
            driver.invoke(app, {"log": []})
    finally:
        release.set()
    error = raised.value
    assert (error.node, error.step, error.timeout) == ("work", 0, 0.05)
    assert "abandoned" in str(error) and "timeout=" in str(error)


def test_an_async_node_past_its_timeout_is_cancelled(driver):
    cancelled = threading.Event()

    async def slow(state):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"log": "late"}

    with pytest.raises(NodeTimeoutError, match="cancelled"):
        driver.invoke(one_node(slow, timeout=0.05), {"log": []})
    assert cancelled.wait(5)  # the cancellation reaches it on its loop's next turn


def test_a_node_within_its_timeout_returns_as_usual(driver):
    async def quick(state):
        return {"log": "fast"}

    assert list(driver.invoke(one_node(quick, timeout=5), {"log": []})["log"]) == ["fast"]
    assert list(driver.invoke(one_node(flaky(0)[0], timeout=5), {"log": []})["log"]) == ["done"]


def test_a_timed_out_attempt_is_retried(driver):
    clock = FakeClock()
    calls = []

    async def slow_once(state):
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(10)
        return {"log": "second"}

    app = one_node(slow_once, timeout=0.05, retry=retry(clock))
    assert list(driver.invoke(app, {"log": []})["log"]) == ["second"]
    assert len(calls) == 2


def routed(handler, destinations=("recover",)):
    g = StateGraph("handled", key_strategies={"log": AppendStrategy()})
    g.add_node("work", flaky(9, ValueError)[0], destinations, error_handler=handler)
    g.add_node("recover", lambda state: {"log": "recovered"})
    g.add_node("next", lambda state: {"log": "next"})
    g.add_edge(START, "work").add_edge("work", "next")
    g.add_edge("recover", END).add_edge("next", END)
    return g.compile()


def test_an_error_handler_turns_the_failure_into_a_route(driver):
    def handler(state, error):
        return Command(goto="recover", update={"log": f"handled {type(error).__name__}"})

    result = driver.invoke(routed(handler), {"log": []})
    assert list(result["log"]) == ["handled ValueError", "recovered", "next"]


def test_an_error_handler_may_return_a_plain_update(driver):
    result = driver.invoke(routed(lambda state, error: {"log": str(error)}), {"log": []})
    assert list(result["log"]) == ["failure 1", "next"]


def test_the_error_handler_runs_once_the_retries_are_spent(driver):
    clock = FakeClock()
    fn, calls = flaky(9)
    seen = []
    app = one_node(
        fn,
        retry=retry(clock, max_attempts=2),
        error_handler=lambda state, error: seen.append(str(error)) or {"log": "gave up"},
    )
    assert list(driver.invoke(app, {"log": []})["log"]) == ["gave up"]
    assert len(calls) == 2 and seen == ["failure 2"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"timeout": -1}, "timeout"),
        ({"timeout": 0}, "above 0"),
        ({"timeout": "5"}, "timeout"),
        ({"retry": 3}, "RetryPolicy"),
        ({"error_handler": "recover"}, "error_handler"),
        ({"cache": 60}, "CachePolicy"),
    ],
)
def test_bad_node_policies_are_refused_naming_the_fix(options, named):
    with pytest.raises(GraphSetupError, match=named):
        StateGraph("bad").add_node("work", lambda state: None, **options)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"initial_interval": -1}, "initial_interval"),
        ({"backoff_factor": 0.5}, "backoff_factor"),
        ({"max_interval": float("nan")}, "max_interval"),
        ({"retry_on": "ValueError"}, "retry_on"),
        ({"retry_on": (ValueError, "x")}, "retry_on"),
    ],
)
def test_bad_retry_policies_are_refused_naming_the_fix(options, named):
    with pytest.raises(GraphSetupError, match=named):
        RetryPolicy(**options)


def test_a_retried_send_task_beside_others_writes_once_and_its_attempts_are_kept(driver):
    clock = FakeClock()
    failed = set()

    def work(item):
        if item["n"] == 1 and item["n"] not in failed:
            failed.add(item["n"])
            raise ConnectionError("once")
        return {"log": item["n"]}

    g = StateGraph("sends", key_strategies={"log": AppendStrategy()})
    g.add_node("plan", lambda state: None)
    g.add_node("work", work, retry=retry(clock))
    g.add_edge(START, "plan").add_edge("work", END)
    g.add_conditional_edges(
        "plan", lambda state: [Send("work", {"n": n}) for n in range(3)], sends=["work"]
    )
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t")
    outputs = [o for o in driver.stream(app, {"log": []}, config) if o.node == "work"]
    assert list(app.get_state(config).values["log"]) == [0, 1, 2]
    assert [o.attempts for o in outputs] == [1, 2, 1]
    assert app.get_state(config).metadata["attempts"] == {"work (Send 1)": 2}


def test_a_subgraph_node_with_a_policy_is_still_a_subgraph(driver):
    clock = FakeClock()
    child = StateGraph("child", key_strategies={"log": AppendStrategy()})
    child.add_node("inner", flaky(1)[0])
    child.add_edge(START, "inner").add_edge("inner", END)
    g = StateGraph("parent", key_strategies={"log": AppendStrategy()})
    g.add_node("sub", child.compile(), retry=retry(clock))
    g.add_edge(START, "sub").add_edge("sub", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    result = driver.invoke(app, {"log": []}, RunnableConfig(thread_id="t"))
    assert list(result["log"]) == ["done"]
    assert [name for name, _ in app.get_subgraphs()] == ["sub"]
