"""The :class:`Tool` (a function with its name, description and JSON schema; its calls are in
``calls.py``) and the :func:`tool` decorator."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, overload

from pydantic import ValidationError

from graph_agent.tools.calls import ToolCalls
from graph_agent.tools.context import ToolArgumentsError, ToolContext
from graph_agent.tools.schema import (
    _default_name,
    _defining_function,
    _describe_validation_error,
    _docstring,
    _json_schema,
    _signature_model,
)

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Tool(ToolCalls):
    """A function the model can call, with its name, description and JSON schema.

    Build one with :func:`tool` or :meth:`from_function`. Calling the tool object calls the
    function unchanged; :meth:`invoke` / :meth:`ainvoke` take the model's arguments, validate
    them and return the result as text.

    Attributes:
        name: The name the model calls it by (``[A-Za-z0-9_-]{1,64}``).
        description: What it does, for the model.
        parameters: The JSON schema of its arguments (an object schema).
        timeout: Seconds a call may take, or ``None``. The caller (the agent's tool node)
            enforces it, by passing it to :meth:`ainvoke`.
        return_direct: Whether the tool's result is the agent's answer: when every call of a
            step is to such a tool and none failed, the run ends with the result, without
            another model call.
        on_caller_loop: Whether an async function runs on the caller's event loop under
            ``ainvoke``/``astream`` (see :func:`tool`), not on graph_agent's own.
        function: The wrapped function.
        is_async: Whether the function is a coroutine function.
        arguments_model: The pydantic model that validates arguments.

    Example:
        >>> def add(a: int, b: int = 1) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> adder = Tool.from_function(add, name="plus")
        >>> adder.name, adder.description, adder.invoke({"a": 2, "b": "3"})
        ('plus', 'Add two numbers.', '5')
    """

    __slots__ = (
        "_parameters",
        "arguments_model",
        "description",
        "function",
        "is_async",
        "name",
        "on_caller_loop",
        "parameters",
        "return_direct",
        "timeout",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        return_direct: bool = False,
        on_caller_loop: bool = False,
    ) -> None:
        tool_name = name if name is not None else _default_name(function)
        if not _TOOL_NAME.match(tool_name):
            raise ValueError(
                f"tool name {tool_name!r} is not allowed: use 1-64 letters, digits, '_' or '-' "
                "(pass name= to choose one)"
            )
        if timeout is not None and timeout <= 0:
            raise ValueError(f"tool {tool_name!r}: timeout must be positive, got {timeout}")
        doc_description, argument_docs = _docstring(function)
        self.function = function
        self.name = tool_name
        self.description = doc_description if description is None else description
        self.timeout = timeout
        self.return_direct = return_direct
        self.on_caller_loop = on_caller_loop
        self.is_async = inspect.iscoroutinefunction(_defining_function(function))
        self.arguments_model, self._parameters = _signature_model(
            function, tool_name, argument_docs
        )
        self.parameters: dict[str, Any] = _json_schema(self.arguments_model, tool_name)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        return_direct: bool = False,
        on_caller_loop: bool = False,
    ) -> Tool:
        """Make a tool of ``function``; ``name``/``description`` default to its name and doc.

        ``function`` may also be a bound method, a callable object (its ``__call__`` gives the
        parameters, its class the name and description) or a ``functools.partial`` (the
        arguments it binds are fixed and left out of the schema).
        """
        return cls(
            function,
            name=name,
            description=description,
            timeout=timeout,
            return_direct=return_direct,
            on_caller_loop=on_caller_loop,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        names = [p.name for p in self._parameters if not p.is_context]
        flags = ", return_direct=True" if self.return_direct else ""
        flags += ", on_caller_loop=True" if self.on_caller_loop else ""
        return f"Tool(name={self.name!r}, parameters={names}, timeout={self.timeout}{flags})"

    @property
    def wants_context(self) -> bool:
        """Whether the function declares a :class:`ToolContext` parameter."""
        return any(p.is_context for p in self._parameters)

    def validate(self, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        """Check the model's arguments and return them converted (``"3"`` → ``3`` for an int).

        Args:
            arguments: A mapping, or the model's raw JSON text (``None`` or ``""`` mean ``{}``).

        Raises:
            ToolArgumentsError: With a message that tells the model what to fix.
        """
        data = self._arguments_object(arguments)
        try:
            validated = self.arguments_model.model_validate(dict(data))
        except ValidationError as exc:
            names = [p.name for p in self._parameters if not p.is_context]
            raise ToolArgumentsError(
                _describe_validation_error(self.name, exc, names), tool_name=self.name
            ) from exc
        return {p.name: getattr(validated, p.field) for p in self._parameters if not p.is_context}

    def _arguments_object(self, arguments: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
        """The model's arguments as a mapping: JSON text read, ``None`` or ``""`` as ``{}``.

        Raises:
            ToolArgumentsError: The text is not JSON, or not a JSON object.
        """
        data: Any = arguments if arguments is not None else {}
        if isinstance(data, str):
            try:
                data = json.loads(data) if data.strip() else {}
            except RecursionError:
                raise ToolArgumentsError(
                    f"The arguments for tool '{self.name}' are JSON nested too deeply to read "
                    f"({len(data)} characters). Send the arguments as one flat JSON object.",
                    tool_name=self.name,
                ) from None
            except json.JSONDecodeError as exc:
                shown = data if len(data) <= 200 else data[:197] + "..."
                raise ToolArgumentsError(
                    f"The arguments for tool '{self.name}' are not valid JSON ({exc.msg} at "
                    f"position {exc.pos}): {shown!r}. Send the arguments as one JSON object.",
                    tool_name=self.name,
                ) from exc
        if not isinstance(data, Mapping):
            raise ToolArgumentsError(
                f"The arguments for tool '{self.name}' must be a JSON object, got "
                f"{type(data).__name__}: {data!r:.100}.",
                tool_name=self.name,
            )
        return data

    def _bind(
        self, arguments: Mapping[str, Any] | str | None, context: ToolContext | None
    ) -> Callable[[], Any]:
        values = self.validate(arguments)
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for parameter in self._parameters:
            if parameter.is_context:
                value: Any = context if context is not None else ToolContext()
            else:
                value = values[parameter.name]
            if parameter.positional_only:
                positional.append(value)
            else:
                keywords[parameter.name] = value
        return lambda: self.function(*positional, **keywords)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    name: str | None = None,
    /,
    *,
    description: str | None = None,
    timeout: float | None = None,
    return_direct: bool = False,
    on_caller_loop: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    return_direct: bool = False,
    on_caller_loop: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function_or_name: Callable[..., Any] | str | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    return_direct: bool = False,
    on_caller_loop: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a :class:`Tool`: ``@tool``, ``@tool("name")`` or ``@tool(name=...)``.

    Args:
        function_or_name: The function (bare ``@tool``) or the tool's name.
        name: The tool's name; defaults to the function's name.
        description: What the tool does; defaults to the docstring's description.
        timeout: Seconds one call may take; ``None`` for no limit.
        return_direct: End the agent's run with this tool's result as the answer, without
            another model call, when every call of the step is to such a tool and none failed
            (a failed call's error goes back to the model as usual).
        on_caller_loop: Run an async function on the caller's event loop under the agent's
            ``ainvoke``/``astream``, for a tool that uses what is bound to that loop (an
            ``asyncio.Event`` or ``Lock`` the caller shares, an ``httpx.AsyncClient`` or a
            database pool made there). By default an async tool with a timeout runs on
            graph_agent's own loop, on another thread, so that its timeout cuts it even if it
            blocks its loop (``time.sleep`` or sync I/O inside ``async def``) and it cannot
            stall the caller's other work (a server's other runs); such a tool touching the
            caller's loop fails with an error naming this option. On the caller's loop the
            timeout cuts the tool only where it awaits: one that blocks the loop is not cut and
            holds up everything on that loop until it returns. Under ``invoke`` an async tool
            runs on a loop of its own either way.

    Example:
        >>> @tool(name="lookup", timeout=5)
        ... async def find(query: str, limit: int = 3) -> list[str]:
        ...     '''Search the notes.'''
        ...     return [query] * limit
        >>> find.name, find.timeout, find.parameters["required"]
        ('lookup', 5, ['query'])
    """
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "timeout": timeout,
        "return_direct": return_direct,
        "on_caller_loop": on_caller_loop,
    }
    if callable(function_or_name):
        return Tool(function_or_name, **options)
    if function_or_name is not None:
        if name is not None:
            raise TypeError("tool() got the name twice: positionally and as name=")
        options["name"] = function_or_name

    def decorate(function: Callable[..., Any]) -> Tool:
        return Tool(function, **options)

    return decorate
