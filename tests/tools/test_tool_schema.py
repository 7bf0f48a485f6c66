"""JSON schemas generated from tool signatures, checked against the expected schema."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from graph_agent.tools import Tool, ToolContext


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str


class Order(BaseModel):
    item: str
    quantity: int = 1
    ship_to: Address | None = None


@dataclass
class Point:
    x: float
    y: float


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


def one_string(city: str) -> str:
    return city


def defaults(city: str, days: int = 3, metric: bool = True) -> str:
    return city


def optional(city: str, country: Optional[str] = None, zip_code: int | None = None) -> str:  # noqa: UP045 - both spellings
    return city


def literal(unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    return unit


def enumeration(unit: Unit) -> str:
    return unit.value


def lists(cities: list[str], scores: list[float] | None = None) -> str:
    return ""


def mapping(weights: dict[str, int]) -> str:
    return ""


def nested(order: Order) -> str:
    return order.item


def list_of_models(points: list[Point]) -> str:
    return ""


def constrained(
    count: Annotated[int, Field(ge=1, le=10, description="How many.")],
    name: Annotated[str, Field(min_length=1)],
) -> str:
    return name


def with_context(query: str, ctx: ToolContext, also: ToolContext | None = None) -> str:
    return query


def no_parameters() -> str:
    return "ok"


def untyped(anything, when: date):  # type: ignore[no-untyped-def]
    return anything


def recursive(tree: TreeNode) -> str:
    return ""


async def asynchronous(query: str, limit: int = 5) -> list[str]:
    return []


def shadowing(json: str, schema: str = "", model_config: int = 0) -> str:
    return json


ADDRESS = {
    "title": "Address",
    "description": "A postal address.",
    "type": "object",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
    "required": ["street", "city"],
}


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


CASES: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "one string": (one_string, obj({"city": {"type": "string"}}, ["city"])),
    "defaults": (
        defaults,
        obj(
            {
                "city": {"type": "string"},
                "days": {"type": "integer", "default": 3},
                "metric": {"type": "boolean", "default": True},
            },
            ["city"],
        ),
    ),
    "optional": (
        optional,
        obj(
            {
                "city": {"type": "string"},
                "country": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                "zip_code": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            },
            ["city"],
        ),
    ),
    "literal": (
        literal,
        obj({"unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}),
    ),
    "enum": (
        enumeration,
        obj(
            {"unit": {"title": "Unit", "type": "string", "enum": ["celsius", "fahrenheit"]}},
            ["unit"],
        ),
    ),
    "lists": (
        lists,
        obj(
            {
                "cities": {"type": "array", "items": {"type": "string"}},
                "scores": {
                    "anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "null"}],
                    "default": None,
                },
            },
            ["cities"],
        ),
    ),
    "dict": (
        mapping,
        obj(
            {"weights": {"type": "object", "additionalProperties": {"type": "integer"}}},
            ["weights"],
        ),
    ),
    "nested model": (
        nested,
        obj(
            {
                "order": {
                    "title": "Order",
                    "type": "object",
                    "properties": {
                        "item": {"type": "string"},
                        "quantity": {"type": "integer", "default": 1},
                        "ship_to": {"anyOf": [ADDRESS, {"type": "null"}], "default": None},
                    },
                    "required": ["item"],
                }
            },
            ["order"],
        ),
    ),
    "list of dataclasses": (
        list_of_models,
        obj(
            {
                "points": {
                    "type": "array",
                    "items": {
                        "title": "Point",
                        "type": "object",
                        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                        "required": ["x", "y"],
                        "additionalProperties": False,  # on every pydantic, not only 2.14+
                    },
                }
            },
            ["points"],
        ),
    ),
    "constraints": (
        constrained,
        obj(
            {
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "description": "How many.",
                },
                "name": {"type": "string", "minLength": 1},
            },
            ["count", "name"],
        ),
    ),
    "context left out": (with_context, obj({"query": {"type": "string"}}, ["query"])),
    "no parameters": (no_parameters, obj({})),
    "untyped and dates": (
        untyped,
        obj({"anything": {}, "when": {"type": "string", "format": "date"}}, ["anything", "when"]),
    ),
    "async": (
        asynchronous,
        obj(
            {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
            ["query"],
        ),
    ),
    "names that shadow BaseModel": (
        shadowing,
        obj(
            {
                "json": {"type": "string"},
                "schema": {"type": "string", "default": ""},
                "model_config": {"type": "integer", "default": 0},
            },
            ["json"],
        ),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_signature_becomes_the_expected_json_schema(case: str) -> None:
    function, expected = CASES[case]
    assert Tool.from_function(function).parameters == expected


def test_a_recursive_model_keeps_its_definitions_instead_of_being_inlined() -> None:
    schema = Tool.from_function(recursive).parameters
    assert schema["properties"] == {"tree": {"$ref": "#/$defs/TreeNode"}}
    assert schema["$defs"]["TreeNode"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/TreeNode"
    }


@pydantic_dataclass(config=ConfigDict(extra="allow"))
class OpenPoint:
    x: float


@pydantic_dataclass
class LaxPoint:
    x: float


def test_a_dataclass_schema_forbids_unknown_fields_exactly_when_validation_does() -> None:
    def draw(strict: Point, open_point: OpenPoint, lax: LaxPoint) -> str:
        return ""

    tool = Tool.from_function(draw)
    properties = tool.parameters["properties"]
    assert properties["strict"]["additionalProperties"] is False
    assert properties["open_point"]["additionalProperties"] is True
    assert "additionalProperties" not in properties["lax"]
    with_extra = {"x": 1, "z": 3}
    with pytest.raises(ValidationError, match=r"strict\.z"):
        tool.arguments_model.model_validate(
            {"strict": {"y": 2, **with_extra}, "open_point": {"x": 1}, "lax": {"x": 1}}
        )
    tool.arguments_model.model_validate(  # the other two take or drop the extra field
        {"strict": {"x": 1, "y": 2}, "open_point": with_extra, "lax": with_extra}
    )


def test_variadic_parameters_are_refused_with_a_reason() -> None:
    def search(*terms: str) -> str:
        return ""

    with pytest.raises(TypeError, match="must be named"):
        Tool.from_function(search)


class Opaque:
    """A class pydantic knows nothing about."""


def test_a_parameter_type_without_a_json_schema_is_refused_at_definition() -> None:
    def use(thing: Opaque) -> str:
        return ""

    with pytest.raises(TypeError, match="tool 'use' has a parameter"):
        Tool.from_function(use)


def test_a_type_hint_that_cannot_be_resolved_is_refused_naming_the_tool() -> None:
    class Local:
        pass

    def use(thing: Local) -> str:  # a string annotation here: this module defers them
        return ""

    with pytest.raises(TypeError, match="cannot resolve the type hints of tool 'use'"):
        Tool.from_function(use)
