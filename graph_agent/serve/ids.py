"""What a client may name things with: the thread ids it may create, the ``Last-Event-ID`` it
sends back, the checkpoint a page of history ends before, the counts it puts in a query
string. Each check says what was wrong and what to send instead (the API answers it with a
4xx, never a 500).

**Thread ids.** LangGraph Server makes thread ids UUIDs, and its clients accept any string a
thread is created with. Here a client may choose any id that every client can address
afterwards, since every call on a thread names it in the URL path (``/threads/{thread_id}/...``):
LangGraph's Python SDK percent-encodes the id there, but its JS SDK (and so ``useStream`` and
every web front end on it) builds the path without encoding. So an id is one to
:data:`MAX_THREAD_ID` characters, without ``/`` (a path separator even when escaped as ``%2F``:
the server decodes it before routing), ``?`` and ``#`` (they would end the path), ``%`` (it
would be decoded as an escape), ``\\`` (browsers read it as ``/``), whitespace, control
characters (``%00`` and the like, which no database column of text takes whole: PostgreSQL
refuses NUL) or lone surrogates (no URL can encode them), and neither ``.`` nor ``..`` (dot
segments that browsers and ``httpx`` collapse before sending). Any other character, of any
script, is fine: a browser percent-encodes in a path what a path may not hold as it is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_COUNT",
    "MAX_THREAD_ID",
    "count_param",
    "history_before",
    "last_event_id",
    "thread_id_problem",
]

MAX_THREAD_ID = 256
"""Most characters in a thread id a client creates (a UUID has 36; percent-encoded, 256 of any
script stay well within the request line's limit of the HTTP servers in front)."""

MAX_COUNT = 2**63 - 1
"""The largest count or event id taken (the records' integer columns hold 64 bits)."""

_COUNT = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes '²' too
_FORBIDDEN = re.compile(r"[/?#%\\\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""In a thread id: ``/?#%\\``, whitespace, the control characters (Unicode's Cc) and lone
surrogates."""
_KIND = {"Cc": "a control character", "Cs": "a lone surrogate", "Zs": "whitespace"}
"""How the refusal names a forbidden character, by Unicode category (others by themselves)."""


def thread_id_problem(thread_id: str) -> str | None:
    """Why a client may not create a thread named ``thread_id`` (see the module docstring), or
    ``None`` when it may."""
    found = _FORBIDDEN.search(thread_id)
    if found is not None:
        bad = found.group()
        what = _KIND.get(unicodedata.category(bad), "whitespace" if bad.isspace() else repr(bad))
    elif thread_id in (".", ".."):
        what = "only dots"
    elif not thread_id or len(thread_id) > MAX_THREAD_ID:
        what = f"{len(thread_id)} characters"
    else:
        return None
    return (
        f"thread_id {thread_id!r:.80} has {what}: a thread id names the thread in URL paths "
        "(which LangGraph's JS SDK does not encode), so it is 1 to "
        f"{MAX_THREAD_ID} characters of any kind but / ? # % \\, whitespace, control "
        "characters and lone surrogates, and not '.' or '..'; leave thread_id out to get a UUID"
    )


def last_event_id(text: str) -> int:
    """The event id a client sent in ``Last-Event-ID``: the events after it are replayed. An
    empty header and ``-1`` (what LangGraph's clients send to replay a run from its start)
    are ``-1``.

    Raises:
        ValueError: it is not ``-1`` or an event id (ASCII digits, at most :data:`MAX_COUNT`);
            the message says what to send.
    """
    text = text.strip()
    if not text or text == "-1":
        return -1
    number = _count(text)
    if number is None:
        raise ValueError(
            f"Last-Event-ID {text!r:.40} is not an event id this server sent: send the id of "
            "the last event received, or -1 to replay the run's events from the start"
        )
    return number


def history_before(before: Any) -> str | None:
    """The checkpoint a page of history ends before (``before`` of ``POST
    /threads/{id}/history``), as LangGraph's clients name it: its id, a checkpoint object (the
    Python SDK's ``before=state["checkpoint"]``) or a config holding one (the JS SDK's and
    LangGraph Studio's ``before: {configurable: {checkpoint_id}}``); ``None``: from the newest.

    Raises:
        ValueError: ``before`` is none of these.
    """
    if isinstance(before, Mapping) and isinstance(before.get("configurable"), Mapping):
        before = before["configurable"]
    if isinstance(before, Mapping):
        before = before.get("checkpoint_id")
    if before is None or isinstance(before, str):
        return before or None
    raise ValueError(
        "before must be a checkpoint id, a checkpoint object or a config "
        '({"configurable": {"checkpoint_id": ...}})'
    )


def count_param(name: str, text: str) -> int:
    """A count sent in the query string (``?limit=10``).

    Raises:
        ValueError: it is not a non-negative integer of ASCII digits, at most
            :data:`MAX_COUNT`; the message names ``name``.
    """
    number = _count(text)
    if number is None:
        raise ValueError(
            f"query parameter {name} must be a non-negative integer (at most {MAX_COUNT}), "
            f"got {text!r:.40}"
        )
    return number


def _count(text: str) -> int | None:
    if _COUNT.fullmatch(text) is None:
        return None
    number = int(text)
    return number if number <= MAX_COUNT else None
