"""Tools a model can call: the ``@tool`` decorator, :class:`Tool`, :class:`Toolkit`.

A tool is a plain function, sync or async. Its signature becomes the JSON schema the model sees
(through pydantic: defaults, ``Optional``, ``Literal``, enums, lists, nested pydantic models,
``Annotated[..., Field(...)]`` constraints), its docstring the description, and the Google-style
``Args:`` section the per-parameter descriptions. The model's arguments are validated by the same
pydantic model before the call; a mistake becomes a :class:`ToolArgumentsError` whose text tells
the model what to fix. A parameter annotated :class:`ToolContext` (any name) is left out of the
schema and receives the call's context.

Example:
    >>> from graph_agent.tools import tool
    >>> @tool
    ... def get_weather(city: str, unit: str = "celsius") -> dict:
    ...     '''Current weather for a city.
    ...
    ...     Args:
    ...         city: The city name, e.g. "Hangzhou".
    ...         unit: "celsius" or "fahrenheit".
    ...     '''
    ...     return {"city": city, "sky": "sunny", "unit": unit}
    >>> get_weather.parameters["properties"]["city"]
    {'description': 'The city name, e.g. "Hangzhou".', 'type': 'string'}
    >>> get_weather.invoke({"city": "Hangzhou"})
    '{"city":"Hangzhou","sky":"sunny","unit":"celsius"}'
"""

from __future__ import annotations

from graph_agent.tools.context import (
    ToolArgumentsError,
    ToolContext,
    ToolTimeoutError,
    result_to_content,
    result_to_text,
)
from graph_agent.tools.tool import Tool, tool
from graph_agent.tools.toolkit import Toolkit

__all__ = [
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolTimeoutError",
    "Toolkit",
    "result_to_content",
    "result_to_text",
    "tool",
]
