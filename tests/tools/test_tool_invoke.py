"""Calling tools: validation with model-readable errors, sync/async, context, timeouts, text."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from dataclasses import dataclass
from typing import Literal

import pytest
from pydantic import BaseModel

from graph_agent.graph.errors import GraphAgentError
from graph_agent.tools import (
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolTimeoutError,
    result_to_text,
    tool,
)


class Forecast(BaseModel):
    city: str
    days: list[int]


@tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


@tool
async def forecast(city: str, days: int = 2) -> Forecast:
    """Forecast for a city."""
    await asyncio.sleep(0)
    return Forecast(city=city, days=list(range(days)))


@tool
def convert(value: float, unit: Literal["c", "f"]) -> str:
    """Convert a temperature."""
    return f"{value}{unit}"


def test_invoke_validates_calls_and_returns_text() -> None:
    assert add.invoke({"a": 2, "b": 3}) == "5"


def test_arguments_are_coerced_the_way_pydantic_does() -> None:
    assert add.invoke({"a": "2"}) == "3"


def test_raw_json_arguments_are_accepted() -> None:
    assert add.invoke('{"a": 4}') == "5"


def test_the_decorated_function_can_still_be_called_directly() -> None:
    assert add(1, 2) == 3


def test_a_missing_argument_is_an_error_the_model_can_act_on() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        add.invoke({"b": 1})
    assert str(caught.value) == (
        "Invalid arguments for tool 'add':\n"
        "- a: required argument is missing\n"
        "Call the tool again with corrected arguments."
    )
    assert caught.value.tool_name == "add"


def test_a_wrong_type_names_the_argument_and_what_was_sent() -> None:
    with pytest.raises(ToolArgumentsError, match=r"- a: .*valid integer.* \(got 'many'\)"):
        add.invoke({"a": "many"})


def test_an_unknown_argument_lists_the_ones_the_tool_takes() -> None:
    with pytest.raises(
        ToolArgumentsError, match=r"- c: unknown argument \(this tool takes: a, b\)"
    ):
        add.invoke({"a": 1, "c": 2})


def test_a_literal_outside_its_choices_says_which_are_allowed() -> None:
    with pytest.raises(ToolArgumentsError, match="'c' or 'f'"):
        convert.invoke({"value": 1, "unit": "k"})


def test_malformed_json_arguments_are_an_arguments_error() -> None:
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        add.invoke('{"a": ')


def test_arguments_that_are_not_an_object_are_an_arguments_error() -> None:
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        add.invoke("[1, 2]")


def test_argument_errors_are_graph_agent_value_errors() -> None:
    assert issubclass(ToolArgumentsError, GraphAgentError)
    assert issubclass(ToolArgumentsError, ValueError)


def test_validate_returns_the_converted_arguments() -> None:
    assert add.validate({"a": "7"}) == {"a": 7, "b": 1}


def test_nested_models_arrive_as_model_instances() -> None:
    seen: list[object] = []

    def keep(report: Forecast) -> str:
        seen.append(report)
        return "kept"

    Tool.from_function(keep).invoke({"report": {"city": "Rome", "days": [1]}})
    assert seen == [Forecast(city="Rome", days=[1])]


def test_an_async_tool_is_awaited_by_ainvoke() -> None:
    text = asyncio.run(forecast.ainvoke({"city": "Rome"}))
    assert text == '{"city":"Rome","days":[0,1]}'


def test_an_async_tool_runs_from_sync_invoke() -> None:
    assert forecast.invoke({"city": "Oslo", "days": 1}) == '{"city":"Oslo","days":[0]}'


async def test_an_async_tool_runs_from_sync_invoke_inside_a_running_loop() -> None:
    assert forecast.invoke({"city": "Oslo", "days": 1}) == '{"city":"Oslo","days":[0]}'
    assert forecast.is_async and not add.is_async


async def test_ainvoke_runs_a_sync_tool_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    @tool
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "here"

    assert await where.ainvoke({}) == "here"
    assert threads and threads[0] != loop_thread


@pytest.mark.parametrize("is_async", [False, True])
def test_the_tool_context_is_injected_into_a_parameter_of_that_type(is_async: bool) -> None:
    received: list[ToolContext] = []

    def sync_tool(city: str, runtime_info: ToolContext) -> str:
        received.append(runtime_info)
        return city

    async def async_tool(city: str, runtime_info: ToolContext) -> str:
        received.append(runtime_info)
        return city

    made = Tool.from_function(async_tool if is_async else sync_tool, name="t")
    context = ToolContext(call_id="c1", idempotency_key="k", state={"x": 1}, config=None)
    assert made.invoke({"city": "Rome"}, context) == "Rome"
    assert received == [context]
    assert made.wants_context


def test_a_context_parameter_without_a_context_gets_an_empty_one() -> None:
    @tool
    def whoami(ctx: ToolContext) -> str:
        """Report the call id."""
        return f"[{ctx.call_id}]"

    assert whoami.invoke({}) == "[]"


def test_the_model_cannot_set_the_context_parameter() -> None:
    @tool
    def whoami(ctx: ToolContext) -> str:
        """Report the call id."""
        return ctx.call_id

    with pytest.raises(ToolArgumentsError, match="unknown argument"):
        whoami.invoke({"ctx": {"call_id": "forged"}})


def test_positional_only_parameters_are_passed_by_position() -> None:
    def power(base: int, exponent: int = 2, /) -> int:
        return int(base**exponent)

    assert Tool.from_function(power).invoke({"base": 3}) == "9"


def test_exceptions_raised_by_the_tool_propagate_unchanged() -> None:
    @tool
    def fail() -> str:
        """Always fails."""
        raise LookupError("no such city")

    with pytest.raises(LookupError, match="no such city"):
        fail.invoke({})
    with pytest.raises(LookupError, match="no such city"):
        asyncio.run(fail.ainvoke({}))


def test_a_sync_tool_over_its_timeout_is_abandoned_with_a_timeout_error() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def slow() -> str:
        """Takes its time."""
        release.wait(5)
        return "late"

    started = time.monotonic()
    with pytest.raises(ToolTimeoutError, match=r"'slow' did not finish within 0\.05 s"):
        asyncio.run(slow.ainvoke({}, timeout=slow.timeout))
    with pytest.raises(ToolTimeoutError):
        slow.invoke({}, timeout=slow.timeout)
    release.set()
    assert time.monotonic() - started < 2


def test_an_async_tool_that_blocks_its_loop_is_still_cut_at_its_timeout() -> None:
    release = threading.Event()

    @tool(timeout=0.1)
    async def blocking() -> str:
        """Sleeps the wrong way: blocks its event loop."""
        release.wait(10)  # like time.sleep: no await, so wait_for on its loop cannot fire
        return "late"

    blocked = r"'blocking' did not finish within 0\.1 s\. It blocked its event loop"
    with pytest.raises(ToolTimeoutError, match=blocked):
        blocking.invoke({}, timeout=blocking.timeout)
    release.set()


def test_ainvoke_runs_an_async_tool_on_the_callers_loop_so_it_can_use_what_lives_there():
    async def main() -> str:
        loop_future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, loop_future.set_result, "from the loop")

        @tool
        async def wait_for_the_loop() -> str:
            """Awaits a future of the caller's loop."""
            return await loop_future

        return await wait_for_the_loop.ainvoke({}, timeout=5)

    assert asyncio.run(main()) == "from the loop"


def _arun_awaiting_a_future_of_the_callers_loop(*, on_caller_loop: bool) -> str:
    entered = threading.Event()

    async def main() -> str:
        loop_future = asyncio.get_running_loop().create_future()

        @tool(on_caller_loop=on_caller_loop)
        async def wait_for_the_loop() -> str:
            """Awaits a future of the caller's loop."""
            entered.set()
            return await loop_future

        call = asyncio.create_task(wait_for_the_loop.arun({}, timeout=30))
        assert await asyncio.to_thread(entered.wait, 30)
        loop_future.set_result("from the loop")
        return await call

    return asyncio.run(main())


def test_arun_with_a_timeout_runs_an_async_tool_off_the_loop_and_names_the_fix_for_its_objects():
    with pytest.raises(RuntimeError, match="attached to a different loop") as caught:
        _arun_awaiting_a_future_of_the_callers_loop(on_caller_loop=False)
    assert "make it with @tool(on_caller_loop=True)" in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError)  # asyncio's own error, chained


def test_arun_runs_an_async_tool_made_on_caller_loop_on_the_callers_loop_despite_a_timeout():
    assert _arun_awaiting_a_future_of_the_callers_loop(on_caller_loop=True) == "from the loop"


def test_an_async_tool_over_its_timeout_that_awaits_is_cut_without_the_blocked_note() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Takes its time, politely."""
        await asyncio.sleep(5)
        return "late"

    for call in (
        lambda: slow.invoke({}, timeout=0.05),
        lambda: asyncio.run(slow.ainvoke({}, timeout=0.05)),
    ):
        with pytest.raises(ToolTimeoutError) as caught:
            call()
        assert "did not finish within 0.05 s. It was abandoned." in str(caught.value)


def test_an_async_tool_within_its_timeout_returns_its_result_from_sync_and_async_code() -> None:
    @tool
    async def quick(text: str) -> str:
        """Answers at once."""
        await asyncio.sleep(0)
        return text.upper()

    assert quick.invoke({"text": "a"}, timeout=5) == "A"
    assert asyncio.run(quick.ainvoke({"text": "b"}, timeout=5)) == "B"


def test_a_timeout_error_the_tool_raises_itself_is_its_own_error_not_a_tool_timeout() -> None:
    @tool
    def sync_fetch() -> str:
        """Fetches, and its socket times out."""
        raise TimeoutError("socket timed out")

    @tool
    async def async_fetch() -> str:
        """Fetches, and its socket times out."""
        raise TimeoutError("socket timed out")

    for fetch in (sync_fetch, async_fetch):
        with pytest.raises(TimeoutError, match="socket timed out") as caught:
            fetch.invoke({}, timeout=5)
        assert not isinstance(caught.value, ToolTimeoutError)
        with pytest.raises(TimeoutError, match="socket timed out") as caught:
            asyncio.run(fetch.ainvoke({}, timeout=5))
        assert not isinstance(caught.value, ToolTimeoutError)


def test_a_timed_out_sync_tool_sees_its_context_cancelled_and_can_stop() -> None:
    stopped: list[str] = []

    @tool
    def poll(ctx: ToolContext) -> str:
        """Works until told to stop."""
        for _ in range(500):
            if ctx.cancelled.is_set():
                stopped.append(ctx.call_id)
                return "stopped"
            time.sleep(0.01)
        return "never told"

    for call_id, run in (
        ("sync", lambda ctx: poll.invoke({}, ctx, timeout=0.05)),
        ("async", lambda ctx: asyncio.run(poll.ainvoke({}, ctx, timeout=0.05))),
    ):
        context = ToolContext(call_id=call_id)
        with pytest.raises(ToolTimeoutError):
            run(context)
        assert context.cancelled.is_set()
        deadline = time.monotonic() + 5
        while call_id not in stopped and time.monotonic() < deadline:
            time.sleep(0.01)
        assert call_id in stopped
    assert not ToolContext().cancelled.is_set()  # each context has its own signal


def test_an_async_tool_over_its_timeout_is_cancelled() -> None:
    cancelled = threading.Event()

    @tool
    async def sleepy() -> str:
        """Sleeps."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    with pytest.raises(ToolTimeoutError) as caught:
        asyncio.run(sleepy.ainvoke({}, timeout=0.05))
    assert cancelled.is_set()
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.timeout == 0.05


def test_a_tool_within_its_timeout_returns_normally() -> None:
    assert add.invoke({"a": 1}, timeout=5) == "2"
    assert asyncio.run(forecast.ainvoke({"city": "Rome", "days": 0}, timeout=5)) == (
        '{"city":"Rome","days":[]}'
    )


@dataclass
class Reading:
    sensor: str
    value: float


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        ({"a": 1, "b": [1, 2]}, '{"a":1,"b":[1,2]}'),
        ([1, "two"], '[1,"two"]'),
        (Forecast(city="Rome", days=[1]), '{"city":"Rome","days":[1]}'),
        (Reading("t1", 21.5), '{"sensor":"t1","value":21.5}'),
        (None, "null"),
        (42, "42"),
        (True, "true"),
        ("ünïcode", "ünïcode"),
        ({"city": "Zürich"}, '{"city":"Zürich"}'),
    ],
)
def test_results_become_text_for_the_model(value: object, text: str) -> None:
    assert result_to_text(value) == text


def test_a_result_json_cannot_express_falls_back_to_str() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd thing"

    assert result_to_text({"x": Odd()}) == '{"x":"odd thing"}'


@pytest.mark.parametrize("bad_name", ["", "has space", "a" * 65, "émoji"])
def test_a_tool_name_the_api_refuses_is_refused_at_definition(bad_name: str) -> None:
    with pytest.raises(ValueError, match="is not allowed"):
        Tool.from_function(add.function, name=bad_name)


def test_a_lambda_needs_an_explicit_name() -> None:
    with pytest.raises(ValueError, match="pass name="):
        Tool.from_function(lambda x: x)
    assert Tool.from_function(lambda x: x, name="identity").invoke({"x": 1}) == "1"


class Counter:
    """Count things."""

    def __call__(self, n: int, ctx: ToolContext) -> str:
        """Count up to a number.

        Args:
            n: Where to stop.
        """
        return f"{list(range(1, n + 1))} for {ctx.call_id}"


class AsyncEcho:
    async def __call__(self, text: str) -> str:
        """Repeat the text."""
        await asyncio.sleep(0)
        return text


def test_a_callable_object_is_a_tool_described_by_its_class_and_its_call() -> None:
    counter = Tool.from_function(Counter())
    assert (counter.name, counter.description) == ("Counter", "Count things.")
    assert counter.parameters["properties"] == {
        "n": {"description": "Where to stop.", "type": "integer"}
    }
    assert counter.invoke({"n": "3"}, ToolContext(call_id="c1")) == "[1, 2, 3] for c1"
    echo = Tool.from_function(AsyncEcho(), name="echo")
    assert echo.is_async and echo.description == "Repeat the text."
    assert echo.invoke({"text": "hi"}) == "hi"


def scale(value: float, factor: float, unit: str = "m") -> str:
    """Scale a length.

    Args:
        value: The length.
    """
    return f"{value * factor}{unit}"


def test_a_partial_is_a_tool_of_the_arguments_it_leaves_open() -> None:
    doubled = Tool.from_function(functools.partial(scale, factor=2.0))
    assert (doubled.name, doubled.description) == ("scale", "Scale a length.")
    assert list(doubled.parameters["properties"]) == ["value", "unit"]
    assert doubled.parameters["required"] == ["value"]
    assert doubled.invoke({"value": 1.5}) == "3.0m"
    with pytest.raises(ToolArgumentsError, match="unknown argument"):
        doubled.invoke({"value": 1.5, "factor": 10})
    of_one = Tool.from_function(functools.partial(scale, 1.5), name="scale_one")
    assert list(of_one.parameters["properties"]) == ["factor", "unit"]
    assert of_one.invoke({"factor": 3, "unit": "cm"}) == "4.5cm"


def test_tool_decorator_forms_all_make_tools() -> None:
    def f() -> str:
        """F."""
        return "f"

    assert tool(f).name == "f"
    assert tool("renamed")(f).name == "renamed"
    assert tool(name="named", timeout=2)(f).timeout == 2
    assert tool()(f).name == "f"
    assert tool(on_caller_loop=True)(f).on_caller_loop and not tool(f).on_caller_loop
    assert Tool.from_function(f, on_caller_loop=True).on_caller_loop


def test_a_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        tool(timeout=0)(add.function)


def test_the_repr_names_the_tool_and_its_parameters() -> None:
    assert repr(add) == "Tool(name='add', parameters=['a', 'b'], timeout=None)"
    on_loop = Tool(add.function, on_caller_loop=True)
    assert (
        repr(on_loop)
        == "Tool(name='add', parameters=['a', 'b'], timeout=None, on_caller_loop=True)"
    )
