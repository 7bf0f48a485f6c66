"""An agent against a real OpenAI-compatible server: OpenAI, DashScope (Qwen), Ollama, vLLM, ...

Run one of:
    OPENAI_API_KEY=sk-... python examples/openai_endpoint.py                  # OpenAI
    DASHSCOPE_API_KEY=sk-... python examples/openai_endpoint.py               # Qwen on DashScope
    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.1 \\
        python examples/openai_endpoint.py                                    # Ollama
    OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_MODEL=Qwen/Qwen2.5-7B-Instruct \\
        python examples/openai_endpoint.py                                    # vLLM

With none of these set it says so and exits (successfully), so it is safe to run anywhere.
"""

from __future__ import annotations

import os
import sys

from graph_agent import ReactAgent, RunnableConfig, StreamingOutput, ToolResponseMessage
from graph_agent.demo_tools import calculator, convert_units
from graph_agent.messages import AssistantMessage
from graph_agent.models import ChatModel, OpenAIChatModel

QUESTION = "What is 17 * 23, and how many kilometres is 26.2 miles?"


def configured_model() -> ChatModel | None:
    """The model the environment points at, or ``None`` when it points nowhere."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        # base_url and api_key default to OPENAI_BASE_URL / OPENAI_API_KEY
        return OpenAIChatModel(os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    if os.environ.get("DASHSCOPE_API_KEY"):
        return OpenAIChatModel.dashscope(model=os.environ.get("DASHSCOPE_MODEL", "qwen-plus"))
    return None


def main() -> int:
    model = configured_model()
    if model is None:
        print(
            "skipping: set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL) or "
            "DASHSCOPE_API_KEY to run this example against a real model"
        )
        return 0
    agent = ReactAgent(
        "assistant",
        model,
        tools=[calculator, convert_units],
        instruction="Use the tools for arithmetic and unit conversions; answer in one sentence.",
    )
    print(f"model: {model!r}\nyou: {QUESTION}")
    answer = None
    for output in agent.stream(QUESTION, RunnableConfig(thread_id="example")):
        if isinstance(output, StreamingOutput):
            print(output.chunk, end="", flush=True)
            continue
        if output.node not in ("__model__", "__tool__"):  # the model's and the tools' messages
            continue
        for message in output.update.get("messages", []):
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    print(f"\n  -> {call.name}({call.arguments})")
                if not message.tool_calls:
                    answer = message
            elif isinstance(message, ToolResponseMessage):
                print(f"  <- {message.name}: {message.text}")
    if answer is not None:
        print(f"\nanswer: {answer.text}")
        print(f"usage: {answer.usage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
