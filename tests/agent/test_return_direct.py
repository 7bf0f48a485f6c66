"""``@tool(return_direct=True)``: a step whose calls all go to such tools, none failing, ends
the run with the result as the answer, without another model request (counted at a real local
OpenAI-compatible server)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from graph_agent import RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.agent.return_direct import RETURN_DIRECT
from graph_agent.messages import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ToolCall,
    ToolResponseMessage,
)
from graph_agent.models import OpenAIChatModel, ScriptedChatModel
from tests.agent.conftest import streamed_or_whole
from tests.models.openai_fake_server import (
    FakeOpenAIServer,
    chunk,
    completion,
    reply_json,
    tool_call,
    tool_delta,
)


@tool(return_direct=True)
def lookup_order(order_id: str) -> str:
    """The status of an order, as the customer should read it."""
    if order_id == "missing":
        raise LookupError(f"no order {order_id}")
    return f"Order {order_id} shipped on Monday."


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


class Status(BaseModel):
    order_id: str
    shipped: bool


@tool(return_direct=True)
def order_status(order_id: str) -> str:
    """The order's status as JSON."""
    return Status(order_id=order_id, shipped=True).model_dump_json()


def calls_tools(*calls: tuple[str, str, str]) -> object:
    """The model's answer asking for ``calls`` (id, name, JSON arguments), streamed or whole."""
    whole = completion(
        "",
        tool_calls=[tool_call(call_id, name, arguments) for call_id, name, arguments in calls],
        finish_reason="tool_calls",
    )
    streamed = [
        *(
            chunk({"tool_calls": [tool_delta(i, call_id=c, name=n, arguments=a)]})
            for i, (c, n, a) in enumerate(calls)
        ),
        chunk(finish_reason="tool_calls"),
    ]
    return streamed_or_whole(streamed, whole)


ORDER_CALL = ("c1", "lookup_order", '{"order_id": "A7"}')


@pytest.mark.parametrize("face", ["invoke", "stream", "ainvoke"])
def test_a_return_direct_tool_ends_the_run_without_another_model_request(
    server: FakeOpenAIServer, model: OpenAIChatModel, face: str
) -> None:
    server.enqueue(calls_tools(ORDER_CALL), reply_json(completion("never asked for")))
    agent = ReactAgent("shop", model, tools=[lookup_order, weather])
    config = RunnableConfig(thread_id="t")
    if face == "invoke":
        state = agent.invoke("Where is order A7?", config)
    elif face == "stream":
        state = [out for out in agent.stream("Where is order A7?", config)][-1].state
    else:
        state = asyncio.run(agent.ainvoke("Where is order A7?", config))
    assert len(server.requests) == 1  # one model call: the tool's result is the answer
    messages = list(state["messages"])
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    assert messages[-1].text == "Order A7 shipped on Monday."
    assert messages[-1].finish_reason == RETURN_DIRECT
    assert state["output"] == "Order A7 shipped on Monday."


def test_without_return_direct_the_same_run_asks_the_model_once_more(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    plain = tool(lookup_order.function, name="lookup_order")
    server.enqueue(calls_tools(ORDER_CALL), reply_json(completion("It shipped on Monday.")))
    answer = ReactAgent("shop", model, tools=[plain]).call("Where is order A7?")
    assert len(server.requests) == 2
    assert answer.text == "It shipped on Monday."


def test_call_returns_the_tool_result_as_the_answer(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(calls_tools(ORDER_CALL))
    answer = ReactAgent("shop", model, tools=[lookup_order]).call("Where is order A7?")
    assert isinstance(answer, AssistantMessage)
    assert answer.text == "Order A7 shipped on Monday." and not answer.tool_calls


def test_a_failed_return_direct_call_goes_back_to_the_model(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        calls_tools(("c1", "lookup_order", '{"order_id": "missing"}')),
        reply_json(completion("I cannot find that order.")),
    )
    answer = ReactAgent("shop", model, tools=[lookup_order]).call("Where is order missing?")
    assert len(server.requests) == 2
    assert answer.text == "I cannot find that order."
    sent = server.bodies[-1]["messages"][-1]
    assert sent["role"] == "tool" and "no order missing" in sent["content"]


def test_a_step_that_also_calls_another_tool_goes_on_to_the_model(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        calls_tools(ORDER_CALL, ("c2", "weather", '{"city": "Rome"}')),
        reply_json(completion("Shipped, and sunny in Rome.")),
    )
    answer = ReactAgent("shop", model, tools=[lookup_order, weather]).call("Order and weather?")
    assert len(server.requests) == 2
    assert answer.text == "Shipped, and sunny in Rome."


def test_several_return_direct_results_are_joined_into_one_answer(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(calls_tools(ORDER_CALL, ("c2", "lookup_order", '{"order_id": "B2"}')))
    answer = ReactAgent("shop", model, tools=[lookup_order]).call("Orders A7 and B2?")
    assert len(server.requests) == 1
    assert answer.text == "Order A7 shipped on Monday.\n\nOrder B2 shipped on Monday."


def test_with_an_output_schema_the_validated_result_lands_at_the_output_key() -> None:
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "order_status", {"order_id": "A7"})])]
    )
    agent = ReactAgent("shop", model, tools=[order_status], output_schema=Status)
    state = agent.invoke("Status of A7?")
    assert state["output"] == Status(order_id="A7", shipped=True)
    assert len(model.requests) == 1


def test_a_return_direct_tool_returning_an_image_answers_with_the_image() -> None:
    picture = ImagePart(url="https://x.test/chart.png")

    @tool(return_direct=True)
    def chart() -> list[object]:
        """Draw the chart."""
        return [TextPart("Your chart:"), picture]

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "chart", {})])])
    state = ReactAgent("plots", model, tools=[chart]).invoke("Chart please")
    result, answer = list(state["messages"])[-2:]
    assert isinstance(result, ToolResponseMessage)
    assert result.content == [TextPart("Your chart:"), picture]
    assert answer.content == [TextPart("Your chart:"), picture]
    assert state["output"] == "Your chart:"


def test_the_decorator_and_repr_show_return_direct() -> None:
    assert lookup_order.return_direct and not weather.return_direct
    assert "return_direct=True" in repr(lookup_order)
