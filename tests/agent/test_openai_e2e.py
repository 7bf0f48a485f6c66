"""The agent end to end through ``OpenAIChatModel`` and a real local HTTP server.

The server (``tests/models/openai_fake_server.py``) answers each request as the scripted
conversation says, streamed (SSE, tool-call arguments split over chunks) when the request asks
for a stream and as one JSON completion otherwise, with the same content, so a streamed and a
non-streamed run of one script must end in the same state.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from graph_agent import NodeError, NodeOutput, RunnableConfig, StreamingOutput, tool
from graph_agent.agent import ReactAgent
from graph_agent.checkpoint.serde import register
from graph_agent.messages import AssistantMessage, ToolResponseMessage, Usage
from graph_agent.models import ModelError, OpenAIChatModel
from tests.agent.conftest import streamed_or_whole
from tests.models.openai_fake_server import (
    API_KEY,
    chunk,
    completion,
    reply_error,
    reply_json,
    split,
    tool_call,
    tool_delta,
)

ARGUMENTS = json.dumps({"city": "Hangzhou", "unit": "celsius"})
FIRST_USAGE = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
SECOND_USAGE = {"prompt_tokens": 70, "completion_tokens": 9, "total_tokens": 79}
ANSWER = "It is sunny in Hangzhou, 25 degrees."


def asks_for_weather() -> Any:
    """Text, then one tool call whose arguments arrive in 6-character pieces."""
    pieces = split(ARGUMENTS, 6)
    streamed = [
        chunk({"role": "assistant", "content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": [tool_delta(0, call_id="call_w1", name="get_weather", arguments="")]}),
        *(chunk({"tool_calls": [tool_delta(0, arguments=piece)]}) for piece in pieces),
        chunk(finish_reason="tool_calls"),
        chunk(no_choices=True, usage=FIRST_USAGE),
    ]
    whole = completion(
        "Let me check.",
        tool_calls=[tool_call("call_w1", "get_weather", ARGUMENTS)],
        finish_reason="tool_calls",
        usage=FIRST_USAGE,
    )
    return streamed_or_whole(streamed, whole)


def answers() -> Any:
    streamed = [
        *(chunk({"content": word}) for word in split(ANSWER, 5)),
        chunk(finish_reason="stop"),
        chunk(no_choices=True, usage=SECOND_USAGE),
    ]
    return streamed_or_whole(streamed, completion(ANSWER, usage=SECOND_USAGE))


weather_calls: list[dict[str, str]] = []


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: The city name.
        unit: "celsius" or "fahrenheit".
    """
    weather_calls.append({"city": city, "unit": unit})
    return f"Sunny, 25 {unit} in {city}"


@pytest.fixture(autouse=True)
def clear_weather_calls() -> None:
    weather_calls.clear()


def make_agent(model: OpenAIChatModel) -> ReactAgent:
    return ReactAgent(
        "weather_agent", model, tools=[get_weather], instruction="You are a helpful assistant."
    )


def normalised(messages: Any) -> list[dict[str, Any]]:
    """The messages as dicts, their ids replaced by their position."""
    return [m.model_copy(update={"id": f"m{i}"}).model_dump() for i, m in enumerate(messages)]


def test_a_streamed_tool_call_runs_the_tool_and_the_model_gives_the_final_answer(server, model):
    server.enqueue(asks_for_weather(), answers())
    agent = make_agent(model)
    outputs = list(agent.stream("Weather in Hangzhou?", RunnableConfig(thread_id="t")))

    assert weather_calls == [{"city": "Hangzhou", "unit": "celsius"}]
    state = outputs[-1].state
    assert state is not None
    messages = list(state["messages"])
    assert [type(m).__name__ for m in messages] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    ask = messages[2]
    assert ask.text == "Let me check."  # text before a tool call is kept
    assert [(c.id, c.name, c.arguments) for c in ask.tool_calls] == [
        ("call_w1", "get_weather", {"city": "Hangzhou", "unit": "celsius"})
    ]
    assert messages[3].tool_call_id == "call_w1"
    assert messages[3].content == "Sunny, 25 celsius in Hangzhou"
    assert messages[-1].text == ANSWER

    first, second = server.bodies
    assert first["stream"] is True and second["stream"] is True
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    sent_call = second["messages"][2]["tool_calls"][0]
    assert json.loads(sent_call["function"]["arguments"]) == {"city": "Hangzhou", "unit": "celsius"}
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_w1",
        "content": "Sunny, 25 celsius in Hangzhou",
    }


def test_stream_yields_the_tokens_as_streaming_outputs_named_by_agent_and_node(server, model):
    server.enqueue(asks_for_weather(), answers())
    outputs = list(make_agent(model).stream("Weather?", RunnableConfig(thread_id="t")))

    tokens = [o for o in outputs if isinstance(o, StreamingOutput)]
    assert tokens
    assert {(o.agent, o.node) for o in tokens} == {("weather_agent", "__model__")}
    assert all(o.state is None and o.update == {} and o.checkpoint_id is None for o in tokens)
    assert "".join(o.chunk for o in tokens) == "Let me check." + ANSWER
    # each model step's tokens arrive before that step's NodeOutput
    model_steps = [
        o for o in outputs if not isinstance(o, StreamingOutput) and o.node == "__model__"
    ]
    first_output = outputs.index(model_steps[0])
    before = "".join(o.chunk for o in outputs[:first_output] if isinstance(o, StreamingOutput))
    assert before == "Let me check."


def test_the_model_nodes_outputs_carry_the_usage_the_server_sent(server, model):
    server.enqueue(asks_for_weather(), answers())
    outputs = list(make_agent(model).stream("Weather?", RunnableConfig(thread_id="t")))

    finished = [o for o in outputs if type(o) is NodeOutput]
    usage = {o.step: o.usage for o in finished if o.node == "__model__"}
    assert list(usage.values()) == [Usage(**FIRST_USAGE), Usage(**SECOND_USAGE)]
    assert all(o.usage is None for o in finished if o.node != "__model__")
    final = finished[-1].state
    assert final is not None and final["messages"][-1].usage == Usage(**SECOND_USAGE)


def test_a_streamed_run_ends_in_the_same_state_as_a_non_streamed_run(server, model):
    server.enqueue(asks_for_weather(), answers(), asks_for_weather(), answers())
    agent = make_agent(model)
    invoked = agent.invoke("Weather in Hangzhou?", RunnableConfig(thread_id="invoked"))
    streamed_outputs = list(
        agent.stream("Weather in Hangzhou?", RunnableConfig(thread_id="streamed"))
    )

    bodies = server.bodies
    assert [b.get("stream", False) for b in bodies] == [False, False, True, True]
    streamed = agent.get_state(RunnableConfig(thread_id="streamed")).values
    assert streamed_outputs[-1].state is not None
    assert normalised(streamed_outputs[-1].state["messages"]) == normalised(streamed["messages"])
    assert normalised(streamed["messages"]) == normalised(invoked["messages"])
    assert streamed.keys() == invoked.data().keys()
    assert len(weather_calls) == 2


def test_an_async_streamed_run_ends_in_the_same_state_as_a_sync_one(server, model):
    server.enqueue(asks_for_weather(), answers(), asks_for_weather(), answers())
    agent = make_agent(model)
    sync_state = agent.invoke("Weather?", RunnableConfig(thread_id="sync"))

    async def run() -> list[NodeOutput]:
        try:
            return [o async for o in agent.astream("Weather?", RunnableConfig(thread_id="async"))]
        finally:
            await model.aclose()

    outputs = asyncio.run(run())
    tokens = "".join(o.chunk for o in outputs if isinstance(o, StreamingOutput))
    assert tokens == "Let me check." + ANSWER
    async_state = agent.get_state(RunnableConfig(thread_id="async")).values
    assert normalised(async_state["messages"]) == normalised(sync_state["messages"])


def test_a_server_error_stops_the_run_with_a_node_error_and_stores_no_answer(server, model):
    server.enqueue(reply_error(400, "model not found", code="model_not_found"))
    agent = make_agent(model)
    config = RunnableConfig(thread_id="t")
    with pytest.raises(NodeError) as raised:
        agent.invoke("Weather?", config)
    assert raised.value.node == "__model__"
    assert isinstance(raised.value.__cause__, ModelError)
    assert raised.value.__cause__.status_code == 400
    messages = agent.get_state(config).values["messages"]
    assert not any(isinstance(m, AssistantMessage) for m in messages)
    assert API_KEY not in str(raised.value)


def test_malformed_tool_arguments_from_the_server_become_an_error_result_the_model_sees(
    server, model
):
    bad = completion(
        "",
        tool_calls=[tool_call("call_b1", "get_weather", '{"city": ')],
        finish_reason="tool_calls",
    )
    server.enqueue(reply_json(bad), reply_json(completion("Sorry, let me retry later.")))
    agent = make_agent(model)
    state = agent.invoke("Weather?", RunnableConfig(thread_id="t"))
    assert weather_calls == []
    results = [m for m in state["messages"] if isinstance(m, ToolResponseMessage)]
    assert len(results) == 1 and results[0].is_error and results[0].tool_call_id == "call_b1"
    assert state["messages"][-1].text == "Sorry, let me retry later."
    # the history sent back is one the strict server accepts (it answered with 200)
    assert server.bodies[1]["messages"][-1]["tool_call_id"] == "call_b1"


class Forecast(BaseModel):
    city: str
    sky: str


register(Forecast, 122)


def test_structured_output_sends_the_schema_and_stores_the_validated_answer(server, model):
    server.enqueue(
        asks_for_weather(),
        reply_json(completion('{"city": "Hangzhou", "sky": "sunny"}')),
    )
    agent = ReactAgent("weather_agent", model, tools=[get_weather], output_schema=Forecast)
    state = agent.invoke("Weather in Hangzhou?", RunnableConfig(thread_id="t"))
    assert state["output"] == Forecast(city="Hangzhou", sky="sunny")
    response_format = server.bodies[-1]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["city", "sky"]


def test_structured_output_through_the_final_tool_offers_the_schema_as_a_tool(server, model):
    def final(call_id: str) -> Any:
        arguments = {"city": "Hangzhou", "sky": "sunny"}
        calls = [tool_call(call_id, "final_answer", arguments)]
        return reply_json(completion("", tool_calls=calls, finish_reason="tool_calls"))

    server.enqueue(asks_for_weather(), final("call_f1"), final("call_f2"))
    agent = ReactAgent(
        "weather_agent", model, tools=[get_weather], output_schema=Forecast, output_mode="tool"
    )
    config = RunnableConfig(thread_id="t")
    state = agent.invoke("Weather in Hangzhou?", config)
    assert state["output"] == Forecast(city="Hangzhou", sky="sunny")
    body = server.bodies[-1]
    assert "response_format" not in body
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    assert offered["final_answer"] == Forecast.model_json_schema()
    answer = state["messages"][-1]
    assert answer.tool_calls == [] and answer.finish_reason == "stop"
    assert json.loads(answer.text) == {"city": "Hangzhou", "sky": "sunny"}
    # the next turn's history is one the strict server accepts: no unanswered tool call
    agent.invoke("And now?", config)
    assert server.bodies[-1]["messages"][-2] == {"role": "assistant", "content": answer.text}
