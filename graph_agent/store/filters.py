"""A store's ``filter=``: which stored values match (``{"field": value}``, operators such as
``{"$gte": 3}``, dotted names reading nested fields), and the bytes a backend may look for to
pass over most rows without decoding them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

import msgpack

from graph_agent.store.errors import StoreInputError
from graph_agent.store.items import Row
from graph_agent.store.values import load_value

_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


_Hit: TypeAlias = tuple[Row, float | None, Any]
"""A row found by a search, its score, and its decoded value."""


def _needles(filter: Mapping[str, Any]) -> list[bytes]:
    """Bytes that the stored value of every item matching ``filter`` holds, so a backend can
    pass over most others without decoding them (the filter is still applied to what it
    returns). A field equal to a string holds that string's msgpack bytes wherever it sits
    (msgpack has one form for a string), also a ``StrEnum`` member stored through its codec
    (its text follows the ext marker, so not right after the key's bytes: the key is no part
    of the needle); other values have several forms (``1 == 1.0 == True``), and give none."""
    needles = []
    for wanted in filter.values():
        if isinstance(wanted, dict) and set(wanted) == {"$eq"}:
            wanted = wanted["$eq"]
        if type(wanted) is str:
            needle = _needle(wanted)
            if needle is not None:
                needles.append(needle)
    return needles


@functools.lru_cache(maxsize=1024)
def _needle(wanted: str) -> bytes | None:
    try:
        needle: bytes = msgpack.packb(wanted)
    except UnicodeEncodeError:  # a lone surrogate: serde stores it otherwise
        return None
    return needle


def _matching(
    found: Iterable[tuple[Row, float | None]], filter: Mapping[str, Any], limit: int, offset: int
) -> list[_Hit]:
    """The page (``offset``, ``limit``) of the rows whose value matches ``filter``, each row
    decoded once."""
    equal: list[tuple[str, Any]] = []  # top-level fields equal to a value: tested inline
    tests: list[tuple[list[str], Callable[[Any], bool]]] = []
    for name, wanted in filter.items():
        if "." not in name and not _has_operators(wanted):
            equal.append((name, wanted))
        else:
            tests.append((name.split("."), _condition(name, wanted)))
    page: list[_Hit] = []
    seen = 0
    wanted = offset + limit
    if not wanted:
        return page
    for row, score in found:
        value = load_value(row[2])
        if not isinstance(value, dict):  # no field of it can match
            continue
        for name, equal_to in equal:
            field = value.get(name, _ABSENT)
            if field is _ABSENT or not field == equal_to:  # noqa: SIM201 (as the other tests)
                break
        else:
            for path, test in tests:
                field = _lookup(value, path)
                if field is _ABSENT or not test(field):
                    break
            else:
                if seen >= offset:
                    page.append((row, score, value))
                seen += 1
                if seen >= wanted:  # stop before pulling another row: it may cost another query
                    break
    return page


_ABSENT = object()


def _lookup(value: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _has_operators(wanted: Any) -> bool:
    """Whether a filter entry's value is operators (``{"$gt": 3}``), not a value to equal."""
    return (
        isinstance(wanted, dict)
        and bool(wanted)
        and all(isinstance(k, str) and k.startswith("$") for k in wanted)
    )


def _condition(path: str, wanted: Any) -> Callable[[Any], bool]:
    if not _has_operators(wanted):
        return lambda found: bool(found == wanted)
    tests = [_comparison(path, operator, operand) for operator, operand in wanted.items()]
    return lambda found: all(test(found) for test in tests)


def _comparison(path: str, operator: str, operand: Any) -> Callable[[Any], bool]:
    if operator == "$eq":
        return lambda found: bool(found == operand)
    if operator == "$ne":
        return lambda found: bool(found != operand)
    compare = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }.get(operator)
    if compare is None:
        raise StoreInputError(
            f"filter[{path!r}] uses the operator {operator!r}; use one of {', '.join(_OPERATORS)}"
            f", e.g. {{{path!r}: {{'$gte': 3}}}}"
        )

    def ordered(found: Any) -> bool:
        try:
            return bool(compare(found, operand))
        except TypeError:  # a string field compared with a number: not a match
            return False

    return ordered
