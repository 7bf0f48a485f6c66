"""The demo agent: safe arithmetic, a clock, a unit converter, and an offline model whose
answers come from the conversation and the tools' real results."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

import pytest

from graph_agent import RunnableConfig, ToolResponseMessage, UserMessage
from graph_agent.demo import DEFAULT_QUESTION, DemoChatModel, build_agent, plan_tool_calls
from graph_agent.demo_tools import calculator, clock, convert_units, evaluate
from graph_agent.models import fold_chunks


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("(17 * 23) + 4", 395),
        ("-(2 + 3) * 4", -20),
        ("+7 - -3", 10),
        ("7 // 2 + 7 % 2", 4),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("1.5 * 4", 6.0),
        ("10 / 4", 2.5),
    ],
)
def test_the_calculator_evaluates_plain_arithmetic(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('echo hi')",
        "open('/etc/passwd')",
        "x + 1",
        "(1).bit_length()",
        "'a' * 3",
        "[1, 2]",
        "True + 1",
        "1 if 2 else 3",
        "lambda: 1",
        "1 < 2",
        "2 & 3",
    ],
)
def test_the_calculator_refuses_anything_but_numbers_and_operators(expression):
    with pytest.raises(ValueError, match=r"not allowed|not a number|not an arithmetic"):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9 ** 9 ** 9", "exponents are limited"),
        ("10 ** 999 * 10 ** 999", "too large"),
        ("99999 ** 1000", "too large"),
        ("10.0 ** 400", "too large"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 +", "not an arithmetic expression"),
        ("1" + " + 1" * 200, "longer than"),
    ],
)
def test_the_calculator_bounds_its_work_and_explains_failures(expression, message):
    with pytest.raises(ValueError, match=message):
        evaluate(expression)


def test_the_calculator_tool_returns_text():
    assert calculator.invoke({"expression": "1 / 3"}) == "0.3333333333"


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (26.2, "miles", "km", "42.1648 km"),
        (1, "ft", "in", "12 in"),
        (10, "pounds", "kg", "4.5359 kg"),
        (100, "°C", "fahrenheit", "212 °F"),
        (-40, "F", "C", "-40 °C"),
        (0, "K", "celsius", "-273.15 °C"),
        (2, "gallons", "l", "7.5708 l"),
    ],
)
def test_the_converter_handles_length_mass_temperature_and_volume(value, source, target, expected):
    assert convert_units.invoke({"value": value, "from_unit": source, "to_unit": target}) == (
        expected
    )


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("kg", "km", "cannot convert mass"),
        ("parsec", "km", "unknown unit 'parsec'"),
    ],
)
def test_the_converter_refuses_what_it_cannot_convert(source, target, message):
    with pytest.raises(ValueError, match=message):
        convert_units.function(1, source, target)


def test_temperatures_below_absolute_zero_are_refused():
    with pytest.raises(ValueError, match="below absolute zero"):
        convert_units.function(-500, "C", "K")


def _pinned(monkeypatch):
    def fixed(timezone: tzinfo = UTC) -> datetime:
        return datetime(2025, 3, 14, 6, 30, tzinfo=UTC).astimezone(timezone)

    monkeypatch.setattr("graph_agent.demo_tools.now", fixed)


def test_the_clock_tells_the_time_in_a_time_zone(monkeypatch):
    _pinned(monkeypatch)

    assert clock.invoke({}) == "Friday 14 March 2025, 06:30:00 UTC (UTC)"
    assert clock.invoke({"timezone": "Asia/Tokyo"}) == (
        "Friday 14 March 2025, 15:30:00 JST (Asia/Tokyo)"
    )
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        clock.function("Mars/Olympus")


def test_the_default_question_asks_for_every_tool_at_once():
    calls = plan_tool_calls(DEFAULT_QUESTION)

    assert [(c.name, c.arguments) for c in calls] == [
        ("calculator", {"expression": "(17 * 23) + 4"}),
        ("convert_units", {"value": 26.2, "from_unit": "miles", "to_unit": "km"}),
        ("clock", {"timezone": "Asia/Tokyo"}),
    ]
    assert len({c.id for c in calls}) == 3


@pytest.mark.parametrize(
    ("question", "calls"),
    [
        ("what is 17 times 23?", [("calculator", {"expression": "17 * 23"})]),
        ("2^8 - 1 please", [("calculator", {"expression": "2**8 - 1"})]),
        (
            "convert -40 F to C",
            [("convert_units", {"value": -40.0, "from_unit": "F", "to_unit": "C"})],
        ),
        (
            "time in New York and London?",
            [("clock", {"timezone": "America/New_York"}), ("clock", {"timezone": "Europe/London"})],
        ),
        ("what's the date in Europe/Madrid", [("clock", {"timezone": "Europe/Madrid"})]),
        ("hello there", []),
    ],
)
def test_the_offline_model_plans_calls_from_the_question(question, calls):
    assert [(c.name, c.arguments) for c in plan_tool_calls(question)] == calls


@pytest.mark.parametrize(
    ("question", "calls"),
    [
        ("What is 1,500 * 2?", [("calculator", {"expression": "1500 * 2"})]),
        ("1,000,000 / 4", [("calculator", {"expression": "1000000 / 4"})]),
        ("What is 1_000 * 3?", [("calculator", {"expression": "1000 * 3"})]),
        ("What is 2.5e3 + 1?", [("calculator", {"expression": "2.5e3 + 1"})]),
        ("1e-3 * 2", [("calculator", {"expression": "1e-3 * 2"})]),
        (
            "Convert 1,000 miles to km",
            [("convert_units", {"value": 1000.0, "from_unit": "miles", "to_unit": "km"})],
        ),
        (
            "how many lb is 1_000.5 kg",
            [("convert_units", {"value": 1000.5, "from_unit": "kg", "to_unit": "lb"})],
        ),
    ],
)
def test_the_offline_model_reads_digit_separators_and_exponents(question, calls):
    assert [(c.name, c.arguments) for c in plan_tool_calls(question)] == calls


@pytest.mark.parametrize(
    "question",
    ["abc123 + 4", "x2 + 3", "v1.5 + 2", "1,5000 * 2", "python 3.11.2 + 1"],
)
def test_the_offline_model_never_reads_a_number_from_inside_another_token(question):
    assert plan_tool_calls(question) == []


def test_the_answer_to_a_question_with_thousands_separators_is_the_right_one():
    assert build_agent().call("What is 1,500 * 2?").text == "- 1500 * 2 = 3000"
    assert build_agent().call("Convert 1,000 miles to km").text == "- 1000 miles is 1609.344 km"


def test_the_final_answer_uses_the_real_tool_results(monkeypatch):
    _pinned(monkeypatch)
    agent = build_agent()

    reply = agent.call(DEFAULT_QUESTION, RunnableConfig(thread_id="t"))

    assert reply.text == (
        "- (17 * 23) + 4 = 395\n"
        "- 26.2 miles is 42.1648 km\n"
        "- In Tokyo it is Friday 14 March 2025, 15:30:00 JST (Asia/Tokyo)"
    )


def test_a_failing_tool_is_reported_in_the_answer():
    reply = build_agent().call("What is 1 / 0 and 5 kg in km?")

    assert "I could not compute 1 / 0: division by zero" in reply.text
    assert "I could not convert 5 kg to km: cannot convert mass (kg) to length (km)" in reply.text


def test_without_a_fitting_tool_the_model_answers_directly():
    reply = build_agent().call("Hello!")

    assert reply.text.startswith("I am the offline demo model")


def test_the_model_streams_its_text_in_pieces_and_reports_usage():
    model = DemoChatModel()
    history = [
        UserMessage("What is 2 + 2?"),
        model.generate([UserMessage("What is 2 + 2?")], [calculator]),
    ]
    history.append(
        ToolResponseMessage(
            tool_call_id=history[1].tool_calls[0].id, name="calculator", content="4"
        )
    )

    chunks = list(model.stream(history, [calculator]))
    reply = fold_chunks(chunks)

    assert reply.text == "- 2 + 2 = 4"
    assert len([c for c in chunks if c.text]) > 1
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_the_model_only_calls_the_tools_it_is_offered():
    reply = DemoChatModel().generate([UserMessage("What is 2 + 2 and 1 km in mi?")], [calculator])

    assert [c.name for c in reply.tool_calls] == ["calculator"]
