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

import functools
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.dataclasses import is_pydantic_dataclass
from pydantic.json_schema import GenerateJsonSchema

from graph_agent.graph._concurrency import (
    TimedOut,
    at_most,
    call_on_daemon_thread,
    call_with_timeout,
    run_coroutine,
    to_thread,
)
from graph_agent.graph._off_loop import bound_to_another_loop, run_off_loop
from graph_agent.graph.errors import (
    GraphAgentError,
    GraphSetupError,
    ParentCommand,
    exception_text,
)
from graph_agent.graph.task import current_task
from graph_agent.graph.types import Command
from graph_agent.messages import AudioPart, FilePart, ImagePart, MessageContent, TextPart

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

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool learns about the call it serves, injected into a parameter of this type.

    The parameter is matched by its annotation (``ctx: ToolContext``, ``ToolContext | None``),
    never by its name, and it is left out of the schema the model sees.

    Attributes:
        call_id: The id of the model's tool call.
        idempotency_key: Stable across re-runs of the same call (thread id + assistant message id
            + call id): pass it to external systems so a retried call is not applied twice.
        state: The agent's state (a read-only mapping) when the call was made.
        config: The run's ``RunnableConfig``; ``config.context`` holds per-run values.
        cancelled: A ``threading.Event`` set when the caller stops waiting (the call timed
            out): a long tool can check ``ctx.cancelled.is_set()`` and give up. An agent run
            as a tool (``agent_tool``) stops at its next step when it is set.
        attempt: 0 for the first attempt of the call, ``n`` for its ``n``-th retry
            (``ToolRetryInterceptor`` gives each attempt a fresh context, with its own
            ``cancelled`` event; ``idempotency_key`` stays the same).
        store: The run's long-term memory (``config.store``: a ``graph_agent.store``
            store), or None when the graph or agent has none.

    Example:
        >>> @tool
        ... def whoami(ctx: ToolContext) -> str:
        ...     '''Tell the model which call this is.'''
        ...     return ctx.call_id
        >>> whoami.invoke({}, ToolContext(call_id="c7"))
        'c7'
    """

    call_id: str = ""
    idempotency_key: str = ""
    state: Mapping[str, Any] | None = None
    config: Any = None
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    attempt: int = 0

    @property
    def store(self) -> Any:
        """The run's long-term memory store (``config.store``), or None without one."""
        return getattr(self.config, "store", None)


class ToolArgumentsError(GraphAgentError, ValueError):
    """The model's arguments do not fit the tool; the message is written for the model to act on."""

    def __init__(self, message: str, *, tool_name: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class ToolTimeoutError(GraphAgentError, TimeoutError):
    """A tool call took longer than its timeout (a sync tool keeps running on its thread)."""

    def __init__(self, message: str, *, tool_name: str, timeout: float) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.timeout = timeout


def result_to_text(value: Any) -> str:
    """Turn a tool's return value into the text the model reads.

    A ``str`` is kept as is; anything else (pydantic models, dataclasses, dicts, lists, numbers,
    ``None``) becomes compact JSON; what JSON cannot express falls back to ``str(value)``.
    A ``Command(graph=Command.PARENT, ...)`` is a handoff, not a result: it stops the agent and
    routes the graph the agent runs in (raised as
    :class:`~graph_agent.graph.errors.ParentCommand`).

    Example:
        >>> result_to_text({"temp": 21}), result_to_text("ok"), result_to_text(None)
        ('{"temp":21}', 'ok', 'null')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Command) and value.graph == Command.PARENT:
        task = current_task()  # the tool node, to name it should no parent graph exist
        if task is None:
            raise ParentCommand(value)
        raise ParentCommand(value, node=task.node, step=task.step)
    return pydantic_core.to_json(value, fallback=str).decode()


_PARTS = (TextPart, ImagePart, AudioPart, FilePart)


def result_to_content(value: Any) -> MessageContent:
    """What a tool's return value becomes as the content of its result: a content part
    (``ImagePart``, ...) or a list of them stays parts, so a model that sees images gets the
    screenshot a tool took; anything else is :func:`result_to_text`.

    Example:
        >>> result_to_content(ImagePart(url="https://x.test/a.png"))[0].url
        'https://x.test/a.png'
        >>> result_to_content({"temp": 21})
        '{"temp":21}'
    """
    if isinstance(value, _PARTS):
        return [value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, _PARTS) for v in value):
        return list(value)
    return result_to_text(value)


_SECTION_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns|Return|Yields|Yield|Raises|Examples|Example|Notes|Note|Warnings|Warning|"
    r"See Also|Todo|Attributes|References)\s*:\s*$"
)
_ARGUMENT_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
)
_ARGUMENT_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and ``Args:`` entries."""
    if not doc:
        return "", {}
    description: list[str] = []
    arguments: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        header = None if line[:1].isspace() else _SECTION_HEADER.match(stripped)
        if header:
            section, current, entry_indent = header.group(1), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARGUMENT_SECTIONS or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ARGUMENT_ENTRY.match(stripped)
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent, current = indent, entry.group(1)
            arguments[current] = entry.group(2).strip()
        elif current is not None:
            arguments[current] = f"{arguments[current]} {stripped}".strip()
    return "\n".join(description).strip(), arguments


class _ToolSchemaGenerator(GenerateJsonSchema):
    """Pydantic's JSON schema without the per-field titles (noise in every model prompt)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def dataclass_schema(self, schema: Any) -> Any:
        # a standard library dataclass refuses unknown fields; pydantic says so in its schema
        # from 2.14 on only, so say it on every version (one prompt whatever pydantic pip picks)
        json_schema = super().dataclass_schema(schema)
        extra = schema.get("config", {}).get("extra_fields_behavior")
        if (
            extra in (None, "forbid")
            and not is_pydantic_dataclass(schema["cls"])
            and json_schema.get("type") == "object"
        ):
            json_schema.setdefault("additionalProperties", False)
        return json_schema


class _RecursiveSchema(Exception):
    pass


def _inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace ``$ref``s by their definitions: small local models and some servers ignore refs.

    A recursive model cannot be inlined; its schema keeps ``$defs``.
    """
    definitions = schema.get("$defs")
    if not definitions:
        return schema

    def resolve(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen:
                raise _RecursiveSchema
            target = resolve(definitions[name], seen | {name})
            siblings = {key: resolve(value, seen) for key, value in node.items() if key != "$ref"}
            return {**target, **siblings}
        return {key: resolve(value, seen) for key, value in node.items() if key != "$defs"}

    try:
        inlined: dict[str, Any] = resolve(schema, frozenset())
    except _RecursiveSchema:
        return schema
    return inlined


@dataclass(frozen=True, slots=True)
class _Parameter:
    name: str
    field: str
    positional_only: bool
    is_context: bool


def _is_tool_context(annotation: Any) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, type):
        return issubclass(annotation, ToolContext)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(members) == 1 and _is_tool_context(members[0])
    return False


def _has_description(annotation: Any) -> bool:
    """Whether ``Annotated[..., Field(description=...)]`` already describes the parameter."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(getattr(meta, "description", None) for meta in annotation.__metadata__)


def _defining_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What declares ``fn``'s annotations: the function a ``functools.partial`` wraps, or the
    ``__call__`` method of a callable object; ``fn`` itself for functions and methods."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or isinstance(fn, type):
        return fn
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - the method, not callable()
    return call if inspect.isroutine(call) else fn


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description and per-argument docs of ``fn`` (see :func:`_defining_function`); for
    a callable object, its class's docstring and its ``__call__``'s ``Args:`` entries."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or isinstance(fn, type):
        return _parse_docstring(inspect.getdoc(fn))
    call_description, call_arguments = _parse_docstring(inspect.getdoc(_defining_function(fn)))
    class_description, class_arguments = _parse_docstring(type(fn).__doc__)
    return class_description or call_description, {**class_arguments, **call_arguments}


def _default_name(fn: Callable[..., Any]) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__name__", None) or type(fn).__name__


def _signature_model(
    fn: Callable[..., Any], tool_name: str, descriptions: Mapping[str, str]
) -> tuple[type[BaseModel], tuple[_Parameter, ...]]:
    try:
        hints = typing.get_type_hints(_defining_function(fn), include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"cannot resolve the type hints of tool {tool_name!r}: {exc}; define the types it "
            "uses before the function, at module level"
        ) from exc
    fields: dict[str, Any] = {}
    parameters: list[_Parameter] = []
    # arguments a partial binds by keyword stay listed in its signature (as defaults); they
    # are fixed, not the model's to choose
    bound = fn.keywords if isinstance(fn, functools.partial) else {}
    for index, parameter in enumerate(inspect.signature(fn).parameters.values()):
        if parameter.name in bound:
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(
                f"tool {tool_name!r} has *{parameter.name} or **{parameter.name}: a tool's "
                "parameters must be named, so the model can be told about each one"
            )
        annotation = hints.get(parameter.name, Any)
        positional_only = parameter.kind is parameter.POSITIONAL_ONLY
        if _is_tool_context(annotation):
            parameters.append(_Parameter(parameter.name, "", positional_only, is_context=True))
            continue
        field_name = f"p{index}"  # aliases keep names like `json` or `schema` off BaseModel's
        default = ... if parameter.default is parameter.empty else parameter.default
        extra: dict[str, Any] = {}
        if parameter.name in descriptions and not _has_description(annotation):
            extra["description"] = descriptions[parameter.name]
        fields[field_name] = (annotation, Field(default, alias=parameter.name, **extra))
        parameters.append(_Parameter(parameter.name, field_name, positional_only, False))
    try:
        model: type[BaseModel] = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False),
            **fields,
        )
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r} has a parameter pydantic cannot validate: {exc}"
        ) from exc
    return model, tuple(parameters)


def _json_schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
    try:
        schema = model.model_json_schema(schema_generator=_ToolSchemaGenerator)
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r} has a parameter type with no JSON schema ({exc}); use str, "
            "numbers, bool, Literal, enums, lists, dicts, dataclasses or pydantic models"
        ) from exc
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return _inline_definitions(schema)


def _describe_validation_error(
    tool_name: str, error: ValidationError, parameters: Iterable[str]
) -> str:
    lines = [f"Invalid arguments for tool '{tool_name}':"]
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        if item["type"] == "missing":
            what = "argument" if len(item["loc"]) == 1 else "field"
            lines.append(f"- {where}: required {what} is missing")
        elif item["type"] == "extra_forbidden":
            known = ", ".join(parameters) or "no arguments"
            lines.append(f"- {where}: unknown argument (this tool takes: {known})")
        else:
            shown = repr(item.get("input"))
            shown = shown if len(shown) <= 100 else shown[:97] + "..."
            lines.append(f"- {where}: {item['msg']} (got {shown})")
    lines.append("Call the tool again with corrected arguments.")
    return "\n".join(lines)


class Tool:
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

    def invoke(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> str:
        """Validate ``arguments``, call the function (awaiting it if async), return text.

        :meth:`run` takes the same arguments and returns what the function returned.

        Args:
            arguments: The model's arguments, as a mapping or as raw JSON text.
            context: Handed to a :class:`ToolContext` parameter (an empty one when omitted).
            timeout: Seconds to wait; ``None`` waits as long as it takes. A sync function that
                times out keeps running on a daemon thread; ``context.cancelled`` is set so
                that it can stop.

        Raises:
            ToolArgumentsError: The arguments do not fit; the text is meant for the model.
            ToolTimeoutError: The call took longer than ``timeout``.
            Exception: Whatever the function raised, unchanged.
        """
        return result_to_text(self.run(arguments, context, timeout=timeout))

    def run(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`invoke`, returning the function's value (awaited) instead of its text: the
        agent's tool node applies a returned ``Command(update=..., goto=...)``."""
        call = self._bind(arguments, context)
        if timeout is None:
            result = run_coroutine(lambda: self._result_of(call)) if self.is_async else call()
        else:
            cancelled = context.cancelled if context is not None else None
            try:
                if self.is_async:
                    # on a loop of its own, so that a coroutine blocking its loop (time.sleep
                    # in an async def) is still cut at the timeout, as a sync tool would be
                    result = run_coroutine(
                        lambda: self._result_of(call),
                        timeout,
                        thread_name=f"tool:{self.name}",
                        cancelled=cancelled,
                    )
                else:
                    result = call_with_timeout(
                        call, timeout, thread_name=f"tool:{self.name}", cancelled=cancelled
                    )
            except TimedOut as out:
                raise self._timeout_error(out) from None
        if inspect.isawaitable(result):
            result = run_coroutine(lambda: result)
        return result

    async def arun(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`run` for code on an event loop (the agent's tool node under ``ainvoke`` and
        ``astream``): a sync function runs on the shared worker pool; an async one, with a
        ``timeout``, on graph_agent's shared loop of its own (on another thread, in a copy of
        this context), so that one blocking its loop (``time.sleep`` inside ``async def``)
        neither stalls this loop (a server's other runs) nor escapes its timeout: like a sync
        call, it is abandoned past it (see :mod:`graph_agent.graph._off_loop`). Without a
        timeout, or made with ``on_caller_loop=True``, an async function is awaited on this
        loop (its timeout then cuts it only where it awaits). Past ``timeout`` the call is
        cancelled and ``context.cancelled`` set.

        Raises:
            RuntimeError: Run off this loop, the tool used something bound to it (an
                ``asyncio.Event`` it waits on, a client or pool made on it); the message
                names the fix, ``on_caller_loop=True``.

        Example:
            >>> import asyncio
            >>> @tool
            ... async def echo(text: str) -> str:
            ...     '''Repeat the text.'''
            ...     return text
            >>> asyncio.run(echo.arun({"text": "hi"}, timeout=5))
            'hi'
        """
        call = self._bind(arguments, context)
        if timeout is None:
            return await self._on_loop(call)
        cancelled = context.cancelled if context is not None else None
        try:
            if self.is_async and not self.on_caller_loop:
                return await self._off_loop(call, timeout, cancelled)
            return await at_most(self._on_loop(call), timeout, cancelled=cancelled)
        except TimedOut as out:
            raise self._timeout_error(out) from None

    async def _off_loop(
        self, call: Callable[[], Any], timeout: float, cancelled: threading.Event | None
    ) -> Any:
        """The async call's value, run off this loop; a failure to use an object of this loop
        there is raised as a ``RuntimeError`` that names the fix."""
        try:
            return await run_off_loop(lambda: self._on_loop(call), timeout, cancelled=cancelled)
        except Exception as exc:
            if not bound_to_another_loop(exc):
                raise
            raise RuntimeError(
                f"{exception_text(exc)}. Tool '{self.name}' ran on graph_agent's own event "
                "loop, off the caller's (so that its timeout cuts it even if it blocks its "
                "loop), and used something bound to the caller's loop (an asyncio Event, Lock "
                "or Queue, an async client or pool made there): make it with "
                "@tool(on_caller_loop=True) or Tool(..., on_caller_loop=True) to run it on the "
                "caller's loop."
            ) from exc

    async def _on_loop(self, call: Callable[[], Any]) -> Any:
        """The call's value: awaited on this loop, or (a sync function) from the shared pool."""
        result = call() if self.is_async else await to_thread(call)
        return await result if inspect.isawaitable(result) else result

    async def ainvoke(
        self,
        arguments: Mapping[str, Any] | str | None = None,
        context: ToolContext | None = None,
        *,
        timeout: float | None = None,
    ) -> str:
        """Async :meth:`invoke`: sync functions run on a daemon thread, so a timeout can abandon
        them without blocking the event loop; async ones always run on the caller's loop (they
        may use what lives on it, such as a shared HTTP client), so one that blocks that loop (a
        ``time.sleep`` inside ``async def``) holds the caller up until it returns. The agent's
        tool node calls :meth:`run` or :meth:`arun` instead: under ``ainvoke`` an async tool
        with a timeout runs off the caller's loop, where its timeout cuts it even if it blocks
        its loop, unless it was made with ``on_caller_loop=True`` (then it runs as here).

        Example:
            >>> import asyncio
            >>> @tool
            ... async def echo(text: str) -> str:
            ...     '''Repeat the text.'''
            ...     return text
            >>> asyncio.run(echo.ainvoke({"text": "hi"}, timeout=5))
            'hi'
        """
        call = self._bind(arguments, context)
        if timeout is None:
            return result_to_text(await self._result_of(call))
        cancelled = context.cancelled if context is not None else None
        try:
            value = await at_most(self._result_of(call), timeout, cancelled=cancelled)
        except TimedOut as out:
            raise self._timeout_error(out) from None
        return result_to_text(value)

    async def _result_of(self, call: Callable[[], Any]) -> Any:
        """The call's value, awaited; a sync function runs on a daemon thread of its own, so
        that a timeout can abandon it without blocking the event loop."""
        if self.is_async:
            result = call()
        else:
            result = await call_on_daemon_thread(call, thread_name=f"tool:{self.name}")
        return await result if inspect.isawaitable(result) else result

    def _timeout_error(self, out: TimedOut) -> ToolTimeoutError:
        why = (
            " It blocked its event loop (a blocking call such as time.sleep or sync I/O "
            "inside an async def tool), so it could not be cancelled; it was abandoned."
            if out.loop_blocked
            else " It was abandoned."
        )
        return ToolTimeoutError(
            f"Tool '{self.name}' did not finish within {out.timeout:g} s.{why}",
            tool_name=self.name,
            timeout=out.timeout,
        )


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


class Toolkit:
    """Tools by name, in the order they were added. Each agent works on its own :meth:`copy`.

    Example:
        >>> @tool
        ... def ping() -> str:
        ...     '''Answer pong.'''
        ...     return "pong"
        >>> kit = Toolkit([ping])
        >>> kit["ping"].invoke({}), "ping" in kit, kit.names
        ('pong', True, ('ping',))
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with :meth:`Tool.from_function`).

        Raises:
            GraphSetupError: A tool with the same name is already here.
        """
        new = item if isinstance(item, Tool) else Tool.from_function(item)
        existing = self._tools.get(new.name)
        if existing is not None:
            raise GraphSetupError(
                f"two tools are named {new.name!r} ({_origin(existing)} and {_origin(new)}): "
                "give one a distinct name, e.g. @tool(name=...)"
            )
        self._tools[new.name] = new
        return new

    def remove(self, name: str) -> Tool:
        """Remove and return the tool called ``name``."""
        return self._tools.pop(self[name].name)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(self._tools) or "none"
            raise KeyError(f"no tool named {name!r}; known tools: {known}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolkit({list(self._tools)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The tool names, in the order they were added."""
        return tuple(self._tools)

    def copy(self) -> Toolkit:
        """A new toolkit with the same tools; adding to or removing from it leaves this one be."""
        duplicate = Toolkit()
        duplicate._tools = dict(self._tools)
        return duplicate


def _origin(item: Tool) -> str:
    function = item.function
    module = getattr(function, "__module__", None) or "?"
    qualname = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}.{qualname}"
