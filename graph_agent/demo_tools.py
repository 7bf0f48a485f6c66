"""The demo agent's tools: a safe calculator, a clock and a unit converter.

They are ordinary ``@tool`` functions, usable in any agent. The calculator parses the expression
with :mod:`ast` and evaluates the tree itself: only numbers, ``+ - * / // % **``, unary signs and
parentheses are accepted, and exponents and results are bounded, so no input can run code or
exhaust memory.

Example:
    >>> calculator.invoke({"expression": "(17 * 23) + 4"})
    '395'
    >>> convert_units.invoke({"value": 26.2, "from_unit": "miles", "to_unit": "km"})
    '42.1648 km'
    >>> convert_units.invoke({"value": 100, "from_unit": "C", "to_unit": "F"})
    '212 °F'
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from graph_agent.tools import tool

__all__ = [
    "UNIT_ALIASES",
    "calculator",
    "clock",
    "convert_units",
    "evaluate",
    "format_number",
    "now",
    "unit_of",
]

MAX_EXPRESSION_CHARS = 300
MAX_EXPONENT = 1_000
MAX_RESULT_BITS = 4_096
"""Integers above about 1.2e1233 are refused: big enough for any sum, small enough to print."""

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def format_number(value: float, digits: int = 4) -> str:
    """A number for people: integers whole, others rounded to ``digits`` decimals.

    Example:
        >>> format_number(42.16481), format_number(212.0), format_number(1e20)
        ('42.1648', '212', '1e+20')
    """
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1e15 or (value != 0 and abs(value) < 10**-digits):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression without ``eval``.

    Raises:
        ValueError: the expression is not plain arithmetic, divides by zero, or is too large.

    Example:
        >>> evaluate("2 ** 10 - 7 // 2"), evaluate("-(1.5 + 2) * 4")
        (1021, -14.0)
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    try:
        return _evaluate(tree.body)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large") from None


def _evaluate(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError(f"{node.value!r} is not a number")
        return _bounded(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _bounded(_BINARY[type(node.op)](left, right))
    raise ValueError(
        f"{ast.unparse(node)!r} is not allowed: use numbers, + - * / // % **, and parentheses"
    )


def _check_power(base: float, exponent: float) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponents are limited to ±{MAX_EXPONENT}")
    whole = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if whole and abs(base) > 1 and int(abs(base)).bit_length() * exponent > MAX_RESULT_BITS + 64:
        raise ValueError("the result is too large")


def _bounded(value: int | float) -> int | float:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise ValueError("the result is too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is too large")
    return value


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, e.g. "(17 * 23) + 4".
    """
    return format_number(evaluate(expression), digits=10)


def now(timezone: tzinfo = UTC) -> datetime:
    """The current time in ``timezone`` (a module function so tests can pin the clock)."""
    return datetime.now(timezone)


@tool
def clock(timezone: str = "UTC") -> str:
    """The current date and time.

    Args:
        timezone: An IANA time zone such as "Asia/Tokyo" or "Europe/London" (default UTC).
    """
    try:
        zone: tzinfo = UTC if timezone.upper() == "UTC" else ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {timezone!r}: use an IANA name such as 'Asia/Tokyo'"
        ) from None
    moment = now(zone)
    return f"{moment:%A %d %B %Y, %H:%M:%S} {moment.tzname()} ({timezone})"


Dimension = Literal["length", "mass", "volume", "temperature"]


@dataclass(frozen=True, slots=True)
class _Unit:
    symbol: str
    dimension: Dimension
    factor: float = 1.0
    """How many base units (metre, kilogram, litre) one of this unit is."""


_UNITS = {
    unit.symbol: unit
    for unit in (
        _Unit("m", "length"),
        _Unit("km", "length", 1000.0),
        _Unit("cm", "length", 0.01),
        _Unit("mm", "length", 0.001),
        _Unit("mi", "length", 1609.344),
        _Unit("yd", "length", 0.9144),
        _Unit("ft", "length", 0.3048),
        _Unit("in", "length", 0.0254),
        _Unit("nmi", "length", 1852.0),
        _Unit("kg", "mass"),
        _Unit("g", "mass", 0.001),
        _Unit("mg", "mass", 1e-6),
        _Unit("t", "mass", 1000.0),
        _Unit("lb", "mass", 0.45359237),
        _Unit("oz", "mass", 0.028349523125),
        _Unit("st", "mass", 6.35029318),
        _Unit("l", "volume"),
        _Unit("ml", "volume", 0.001),
        _Unit("gal", "volume", 3.785411784),
        _Unit("cup", "volume", 0.2365882365),
        _Unit("°C", "temperature"),
        _Unit("°F", "temperature"),
        _Unit("K", "temperature"),
    )
}

UNIT_ALIASES: dict[str, str] = {
    **{symbol.lower(): symbol for symbol in _UNITS},
    **{
        alias: symbol
        for symbol, aliases in {
            "m": ("meter", "meters", "metre", "metres"),
            "km": ("kilometer", "kilometers", "kilometre", "kilometres", "kms"),
            "cm": ("centimeter", "centimeters", "centimetre", "centimetres"),
            "mm": ("millimeter", "millimeters", "millimetre", "millimetres"),
            "mi": ("mile", "miles"),
            "yd": ("yard", "yards"),
            "ft": ("foot", "feet"),
            "in": ("inch", "inches"),
            "nmi": ("nautical mile", "nautical miles"),
            "kg": ("kilogram", "kilograms", "kilo", "kilos", "kgs"),
            "g": ("gram", "grams"),
            "mg": ("milligram", "milligrams"),
            "t": ("tonne", "tonnes", "metric ton", "metric tons"),
            "lb": ("pound", "pounds", "lbs"),
            "oz": ("ounce", "ounces"),
            "st": ("stone", "stones"),
            "l": ("liter", "liters", "litre", "litres"),
            "ml": ("milliliter", "milliliters", "millilitre", "millilitres"),
            "gal": ("gallon", "gallons"),
            "cup": ("cups",),
            "°C": ("c", "celsius", "centigrade", "degc", "deg c"),
            "°F": ("f", "fahrenheit", "degf", "deg f"),
            "K": ("k", "kelvin", "kelvins"),
        }.items()
        for alias in aliases
    },
}
"""Every unit name the converter understands (lower case) and the unit it means."""


def unit_of(name: str) -> str:
    """The unit symbol for a name such as ``"miles"`` or ``"°F"``.

    Raises:
        ValueError: an unknown unit, with the list of known ones.
    """
    key = " ".join(name.strip().lower().replace("degrees", "").split())
    symbol = UNIT_ALIASES.get(key) or UNIT_ALIASES.get(key.removeprefix("°"))
    if symbol is None:
        known = ", ".join(_UNITS)
        raise ValueError(f"unknown unit {name!r}; known units: {known}")
    return symbol


def _to_kelvin(value: float, symbol: str) -> float:
    if symbol == "°C":
        return value + 273.15
    if symbol == "°F":
        return (value - 32) * 5 / 9 + 273.15
    return value


def _from_kelvin(value: float, symbol: str) -> float:
    if symbol == "°C":
        return value - 273.15
    if symbol == "°F":
        return (value - 273.15) * 9 / 5 + 32
    return value


@tool
def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a quantity between units of length, mass, volume or temperature.

    Args:
        value: The quantity to convert, e.g. 26.2.
        from_unit: Its unit, e.g. "miles", "kg", "°F".
        to_unit: The unit wanted, e.g. "km", "lb", "°C".
    """
    source, target = _UNITS[unit_of(from_unit)], _UNITS[unit_of(to_unit)]
    if source.dimension != target.dimension:
        raise ValueError(
            f"cannot convert {source.dimension} ({source.symbol}) to "
            f"{target.dimension} ({target.symbol})"
        )
    if source.dimension == "temperature":
        kelvin = _to_kelvin(value, source.symbol)
        if kelvin < 0:
            raise ValueError(f"{format_number(value)} {source.symbol} is below absolute zero")
        result = _from_kelvin(kelvin, target.symbol)
        result = round(result, 10)
    else:
        result = value * source.factor / target.factor
    return f"{format_number(result)} {target.symbol}"
