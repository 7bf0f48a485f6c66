"""Quickstart: a ReactAgent with one tool, a conversation on a thread, and its graph.

Run: python examples/quickstart.py
Or:  graph-agent run examples/quickstart.py:agent "Weather in Paris?" --stream

The model here is scripted so the example runs offline; put a real one in its place with
``OpenAIChatModel("gpt-4o-mini")`` or ``OpenAIChatModel.dashscope(model="qwen-plus")``.
"""

from __future__ import annotations

from graph_agent import ReactAgent, RunnableConfig, tool
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ModelRequest, ScriptedChatModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name, e.g. "Hangzhou".
    """
    return f"sunny and 23 °C in {city}"


def call_the_tool(request: ModelRequest) -> AssistantMessage:
    """The scripted model's first answer: ask for the weather in the city the user named."""
    city = request.messages[-1].text.rsplit(" in ", 1)[-1].strip(" ?.")
    return AssistantMessage(tool_calls=[ToolCall("call_1", "get_weather", {"city": city})])


def answer_from_result(request: ModelRequest) -> str:
    """Its second answer: the tool's result, in a sentence."""
    return f"Right now it is {request.messages[-1].text}."


agent = ReactAgent(
    "weather_agent",
    ScriptedChatModel([call_the_tool, answer_from_result]),
    tools=[get_weather],
    instruction="You are a helpful assistant.",
)

if __name__ == "__main__":
    config = RunnableConfig(thread_id="user-42")
    print("answer:", agent.call("What is the weather in Hangzhou?", config).text)

    print("\nthe thread:")
    for message in agent.get_state(config).values["messages"]:
        shown = message.text or ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        print(f"  {message.role:>9}: {shown}")

    print()
    print(agent.get_graph("ascii"))
