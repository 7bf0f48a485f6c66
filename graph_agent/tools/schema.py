"""A tool's schema from its function: the Google-style docstring's description and ``Args:``
entries, a pydantic model of the signature (which validates the model's arguments), its JSON
schema as the model sees it (no titles, definitions inlined), and the validation errors
rewritten for the model to act on."""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.dataclasses import is_pydantic_dataclass
from pydantic.json_schema import GenerateJsonSchema

from graph_agent.tools.context import ToolContext

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
