"""How a store keeps things: namespaces as text no label can fool, stored values decoded (fast for
the usual small dict), and rows turned back into :class:`~graph_agent.store.items.Item`.

Namespaces are stored as text: each label percent-encoded (so it holds no ``/``), each followed
by ``/``. The items under a prefix are exactly the rows whose text starts with the prefix's,
found by a range comparison (:func:`prefix_end`), never ``LIKE``.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote, unquote

import msgpack

from graph_agent.checkpoint.footprint import MOST_PER_BYTE
from graph_agent.checkpoint.serde import (
    FORMAT_VERSION,
    MAX_DECODED_RATIO,
    MAX_PAYLOAD_BYTES,
    default_serializer,
    loads,
)
from graph_agent.store.errors import StoreInputError
from graph_agent.store.items import Item, Row


@functools.lru_cache(maxsize=4096)
def encode_namespace(namespace: tuple[str, ...]) -> str:
    """A namespace (or prefix) as stored: each label percent-encoded, then ``/``; the items
    under a prefix are the rows whose text starts with the prefix's."""
    return "".join(quote(label, safe="", errors="surrogatepass") + "/" for label in namespace)


@functools.lru_cache(maxsize=4096)
def decode_namespace(stored: str) -> tuple[str, ...]:
    return tuple(unquote(label, errors="surrogatepass") for label in stored.split("/")[:-1])


ANY_LABEL: Final = "*"
"""In a prefix or suffix of ``list_namespaces``: any one label (as in LangGraph)."""


def literal_head(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """The labels of ``prefix`` before its first :data:`ANY_LABEL`: what a range read finds."""
    for index, label in enumerate(prefix):
        if label == ANY_LABEL:
            return prefix[:index]
    return prefix


def namespace_matches(
    namespace: tuple[str, ...], prefix: tuple[str, ...], suffix: tuple[str, ...]
) -> bool:
    """Whether ``namespace`` starts with ``prefix`` and ends with ``suffix``, label by label
    (:data:`ANY_LABEL` matches any label; a namespace shorter than either never matches)."""
    if len(namespace) < len(prefix) or len(namespace) < len(suffix):
        return False
    start = len(namespace) - len(suffix)
    pairs = itertools.chain(
        zip(prefix, namespace, strict=False), zip(suffix, namespace[start:], strict=True)
    )
    return all(wanted in (ANY_LABEL, label) for wanted, label in pairs)


class _Typed(Exception):
    """Raised by :func:`load_value`'s msgpack hook: the data holds an ext type."""


def _no_ext(code: int, data: bytes) -> Any:
    raise _Typed


_PLAIN_MAX: Final = 1 << 16
"""The largest stored value :func:`load_value` decodes itself: far below what makes
:func:`~graph_agent.checkpoint.serde.loads` count containers or measure the memory a load
takes (those checks apply to larger data, which goes to it)."""
if (
    _PLAIN_MAX * MOST_PER_BYTE > MAX_DECODED_RATIO * (MAX_PAYLOAD_BYTES >> 2)
    or default_serializer.max_containers < _PLAIN_MAX
):
    raise ValueError("_PLAIN_MAX must stay below the sizes serde.loads checks further")


def load_value(data: Any) -> Any:
    """A stored value: what :func:`~graph_agent.checkpoint.serde.loads` returns, faster for
    the usual value, a small JSON-like dict.

    Such a value is stored by ``dumps`` as the format byte and plain msgpack (no ext types),
    so one ``msgpack.unpackb`` that refuses every ext type, and string keys only, builds
    exactly what ``loads`` would (no hook of it runs on such data). Anything else (a
    registered type, a msgpack Timestamp, which needs a ``0xff`` byte, a non-string key,
    large or corrupt data, another format version) goes to ``loads``, which decodes it with
    the registry or raises its :class:`~graph_agent.graph.errors.SerializationError`."""
    if (
        type(data) is bytes
        and 2 <= len(data) <= _PLAIN_MAX
        and data[0] == FORMAT_VERSION
        and b"\xff" not in data  # (data[0] is the format byte, never 0xff)
    ):
        try:
            return msgpack.unpackb(data[1:], ext_hook=_no_ext)  # a copy: faster than a view
        except Exception:  # loads decodes it, or raises the precise error
            pass
    return loads(data)


def prefix_end(prefix: str) -> str:
    """The smallest text after every text starting with ``prefix`` (which ends with ``/`` or
    is empty): ``ns >= prefix AND ns < prefix_end(prefix)`` selects exactly those under it."""
    return prefix[:-1] + "0" if prefix else "\U0010ffff"  # "0" follows "/" in ASCII


def other_lengths(query: int, stored: int) -> StoreInputError:
    """The error of a query vector of ``query`` dimensions met by a stored one of ``stored``
    (every backend raises it, wherever it compares them)."""
    return StoreInputError(
        f"the query's vector has {query} dimensions and a stored one {stored}: the store holds "
        "vectors of another embedder; use the same index as when the items were put"
    )


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product (the cosine similarity of two unit vectors)."""
    if len(a) != len(b):
        raise other_lengths(len(a), len(b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _item(
    row: Row, value: Any, score: float | None = None, namespace: tuple[str, ...] | None = None
) -> Item:
    updated_at = datetime.fromtimestamp(row.updated_at, UTC)
    created = row.created_at
    item: Item = object.__new__(Item)  # a search makes one per row: skip the frozen __init__
    _set_namespace(item, decode_namespace(row.ns) if namespace is None else namespace)
    _set_key(item, row.key)
    _set_value(item, value)
    _set_created_at(item, updated_at if created == row.updated_at else _utc(created))
    _set_updated_at(item, updated_at)
    _set_score(item, score)
    return item


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


_set_namespace, _set_key, _set_value, _set_created_at, _set_updated_at, _set_score = (
    getattr(Item, name).__set__
    for name in ("namespace", "key", "value", "created_at", "updated_at", "score")
)
if set(Item.__slots__) != {"namespace", "key", "value", "created_at", "updated_at", "score"}:
    raise TypeError("_item() must set every field of Item")
