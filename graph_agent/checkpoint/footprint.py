"""How much memory loading stored msgpack data would take, found before any of it is built.

A stored byte can become far more memory than one byte: a 2-character string is 3 bytes of
msgpack and about 60 bytes of Python (a str object and its slot in a list), a small negative
int 1 byte and 40, an empty list 1 byte and 64. So 63 MB of data under the size limit could
take 1.5 GB to load. :func:`decoded_size` walks the data's tokens (skipping the bytes of
strings and binaries) and adds up what each would cost in CPython: a container's object and
its dict entries, a string's object and its characters, a number that is not cached, the slot
each takes in its container. Map keys that are strings cost only their entry: msgpack interns
them, so the keys a list of records repeats share one string. The estimate is within a factor
of two of what loading measures, for messages, records, numbers and text alike.

It is plain Python, one step per token (about 0.1 µs), so :class:`~.serde.Serializer` only
walks data that could exceed its budget at :data:`MOST_PER_BYTE`.
"""

from __future__ import annotations

import math
from typing import Final

_SLOT: Final = 8
"""A value's pointer in its list (a map's two are in its entry cost)."""
_NUMBER: Final = 32
"""An int beyond CPython's cached -5..256, or a float."""
_LEAF_EXT: Final = 72
"""A registered leaf value (datetime, Decimal, UUID...), besides its payload."""
_TAG: Final = 32
"""What a registered container value (tuple, set, model) costs beyond the list and map it is
loaded from."""


def _string(length: int) -> int:
    """A str of ``length`` UTF-8 bytes: one character or none is a cached string."""
    return 0 if length <= 1 else 56 + length


def _binary(length: int) -> int:
    return 0 if length == 0 else 40 + length


def _dict(entries: int) -> int:
    """A dict's object and table, besides the slots of its keys and values."""
    return 64 if entries == 0 else 168 + 36 * entries


_LIST: Final = 56


def _tables() -> tuple[list[int], list[int], list[int]]:
    """Per head byte of a token whose size the head tells: its cost, the bytes after the head
    (-1: a length follows the head), and the tokens that follow as its items (a map's
    negative: two per entry)."""
    cost, skip, items = [_SLOT] * 256, [-1] * 256, [0] * 256
    for head in range(0x00, 0x80):  # positive fixint: cached
        skip[head] = 0
    for head in range(0x80, 0x90):  # fixmap
        cost[head] += _dict(head & 0x0F)
        skip[head], items[head] = 0, -2 * (head & 0x0F)
    for head in range(0x90, 0xA0):  # fixarray
        cost[head] += _LIST
        skip[head], items[head] = 0, head & 0x0F
    for head in range(0xA0, 0xC0):  # fixstr
        cost[head] += _string(head & 0x1F)
        skip[head] = head & 0x1F
    for head in (0xC0, 0xC1, 0xC2, 0xC3, 0xCC):  # nil, (unused), false, true, uint8: cached
        skip[head] = 1 if head == 0xCC else 0
    for head, width in ((0xCA, 4), (0xCB, 8), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
        cost[head] += _NUMBER
        skip[head] = width
    for head, width in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
        cost[head] += _NUMBER
        skip[head] = width
    for head, width in ((0xD4, 1), (0xD5, 2), (0xD6, 4), (0xD7, 8), (0xD8, 16)):  # fixext
        cost[head] += _LEAF_EXT + width
        skip[head] = 1 + width
    for head in range(0xE0, 0x100):  # negative fixint: -5..-1 are cached
        cost[head] += _NUMBER if head < 0xFB else 0
        skip[head] = 0
    return cost, skip, items


_COST, _SKIP, _ITEMS = _tables()
_LENGTH_WIDTH: Final = {
    **dict.fromkeys((0xC4, 0xC7, 0xD9), 1),  # bin8, ext8, str8
    **dict.fromkeys((0xC5, 0xC8, 0xDA, 0xDC, 0xDE), 2),  # bin16, ext16, str16, array16, map16
    **dict.fromkeys((0xC6, 0xC9, 0xDB, 0xDD, 0xDF), 4),  # 32-bit lengths
}
_STRING_HEADS: Final = frozenset((*range(0xA0, 0xC0), 0xD9, 0xDA, 0xDB))

MOST_PER_BYTE: Final = math.ceil(
    max(
        _COST[head] / (1 + _SKIP[head] + abs(_ITEMS[head]))
        for head in range(256)
        if _SKIP[head] >= 0
    )
)
"""The most memory one byte of data can cost (an empty dict: 72): data no larger than
``budget / MOST_PER_BYTE`` fits any budget without a walk. (A token whose length follows its
head spends more bytes on that length, so it never costs more per byte.)"""


def decoded_size(data: bytes, budget: int, start: int = 1) -> int | None:
    """About how many bytes of Python objects loading the msgpack value in ``data[start:]``
    builds; None as soon as the estimate passes ``budget`` (the walk stops there).

    Malformed data is walked as far as it goes; loading it reports what is wrong.
    """
    cost, skip, items_of, string_heads = _COST, _SKIP, _ITEMS, _STRING_HEADS
    size, at, total = len(data), start, 0
    # tokens still to come in each open container, innermost last; a map's count is negative
    # (two tokens per entry) and a key comes when it is even
    left = [1]
    while at < size and left:
        count = left[-1]
        head = data[at]
        step = skip[head]
        if count > 0 and step >= 0 and not items_of[head]:
            at, count, total = _leaves(data, at, count, total, budget)
            left[-1] = count
        else:
            if step >= 0:
                spent, items = cost[head], items_of[head]
                at += 1 + step
            else:
                at, spent, items = _sized_token(data, at, head)
            if count < 0:
                if not count & 1 and head in string_heads:
                    spent = 0  # a map's string key: interned, equal keys share one string
                left[-1] = count + 1
            else:
                left[-1] = count - 1
            total += spent
            if items:
                left.append(items)
                continue
        while left and not left[-1]:
            left.pop()
        if total > budget:
            return None
    return total


def _leaves(data: bytes, at: int, count: int, total: int, budget: int) -> tuple[int, int, int]:
    """Walk the run of fixed-size leaves at ``at`` in a list with ``count`` items left (the
    common case, without the container stack); returns where it ended, the items left and
    the new total."""
    cost, skip, items_of, size = _COST, _SKIP, _ITEMS, len(data)
    head = data[at]
    step = skip[head]
    while True:
        total += cost[head]
        at += 1 + step
        count -= 1
        if not count or at >= size or total > budget:
            return at, count, total
        head = data[at]
        step = skip[head]
        if step < 0 or items_of[head]:
            return at, count, total


def _sized_token(data: bytes, at: int, head: int) -> tuple[int, int, int]:
    """A token whose length or item count follows its head: where the next token starts,
    its cost, and the tokens that follow as its items (a map's negative)."""
    width = _LENGTH_WIDTH.get(head)
    if width is None:  # never a head msgpack writes: loading reports it
        return at + 1, _SLOT, 0
    length = int.from_bytes(data[at + 1 : at + 1 + width], "big")
    at += 1 + width
    left = len(data) - at  # every item takes a byte at least: a count cannot promise more
    if head in (0xDC, 0xDD):
        length = min(length, left)
        return at, _SLOT + _LIST, length
    if head in (0xDE, 0xDF):
        length = min(length, left // 2)
        return at, _SLOT + _dict(length), -2 * length
    if head in _STRING_HEADS:
        return at + length, _SLOT + _string(length), 0
    if head in (0xC7, 0xC8, 0xC9):  # ext: a type byte, then the payload; none: a type tag
        return at + 1 + length, _SLOT + (_TAG if length == 0 else _LEAF_EXT + length), 0
    return at + length, _SLOT + _binary(length), 0
