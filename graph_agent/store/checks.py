"""A store's input checks: namespaces, keys, values, TTLs, pages and filters, refused with a
:class:`~graph_agent.store.errors.StoreInputError` saying what to give instead, before
anything is read or written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graph_agent.store.errors import StoreInputError
from graph_agent.store.filters import _condition
from graph_agent.store.items import NOT_PROVIDED, GetOp, ListNamespacesOp, Op, PutOp, SearchOp


def _checked(op: Op) -> Op:
    """``op`` once its namespace, key and options are known good."""
    if isinstance(op, GetOp | PutOp):
        _check_place(op.namespace, op.key)
    if isinstance(op, PutOp):
        if op.value is not None and not isinstance(op.value, dict):
            raise StoreInputError(
                f"put(..., key={op.key!r}, value={op.value!r:.60}): a value is a dict, e.g. "
                "{'text': 'likes tea'}"
            )
        if op.ttl is not None and op.ttl is not NOT_PROVIDED and not _minutes(op.ttl):
            raise StoreInputError(f"ttl={op.ttl!r}: give minutes (> 0), or None to keep the item")
        if (
            op.index is not None
            and op.index is not False
            and (isinstance(op.index, str) or not all(isinstance(p, str) for p in op.index))
        ):
            raise StoreInputError(f"index={op.index!r}: give a list of field paths, or False")
    elif isinstance(op, SearchOp):
        _check_search(op.namespace_prefix, op.filter, op.limit, op.offset)
    elif isinstance(op, ListNamespacesOp):
        _check_namespace(op.prefix, "prefix", empty_ok=True)
        _check_namespace(op.suffix, "suffix", empty_ok=True)
        _check_page(op.limit, op.offset)
        if op.max_depth is not None and (type(op.max_depth) is not int or op.max_depth < 1):
            raise StoreInputError(
                f"max_depth={op.max_depth!r}: give a number of labels (>= 1) or None"
            )
    return op


def _check_search(namespace_prefix: Any, filter: Any, limit: Any, offset: Any) -> None:
    _check_namespace(namespace_prefix, "namespace_prefix", empty_ok=True)
    _check_page(limit, offset)
    if filter is not None and not isinstance(filter, Mapping):
        raise StoreInputError(f"filter={filter!r}: give a dict, e.g. {{'kind': 'fact'}}")
    for path, wanted in (filter or {}).items():
        if type(path) is not str:
            raise StoreInputError(
                f"filter names the field {path!r}: a field is a string (a dotted one "
                "reads a nested field), e.g. {'kind': 'fact'} or {'profile.age': {'$gte': 18}}"
            )
        if isinstance(wanted, dict):
            _condition(path, wanted)  # names an unknown operator now, not at the first row


def _check_place(namespace: Any, key: Any) -> None:
    _check_namespace(namespace, "namespace", empty_ok=False)
    if type(key) is not str or not key:
        raise StoreInputError(f"key={key!r}: a key is a non-empty string, e.g. 'profile'")


def _check_namespace(namespace: Any, name: str, *, empty_ok: bool) -> None:
    if not _labels(namespace):
        raise StoreInputError(
            f"{name}={namespace!r}: a namespace is a tuple of non-empty strings, e.g. "
            "('memories', 'user-42')"
        )
    if not namespace and not empty_ok:
        raise StoreInputError(f"{name}=(): an item needs a namespace, e.g. ('memories', 'user-42')")


def _labels(namespace: Any) -> bool:
    """Whether ``namespace`` is a tuple of non-empty strings (a loop: every call checks one,
    and ``all()`` over a generator costs more than the check)."""
    if not isinstance(namespace, tuple):
        return False
    for label in namespace:  # noqa: SIM110 (the point: no generator)
        if not isinstance(label, str) or not label:
            return False
    return True


def _check_page(limit: Any, offset: Any) -> None:
    if type(limit) is not int or limit < 0:
        raise StoreInputError(f"limit={limit!r}: give a number of items (>= 0)")
    if type(offset) is not int or offset < 0:
        raise StoreInputError(f"offset={offset!r}: give a number of items to skip (>= 0)")


def _minutes(ttl: object) -> bool:
    """Whether ``ttl`` is a TTL: a number of minutes above 0."""
    return isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl > 0


def _check_ttl_settings(default_ttl: object, refresh_on_read: object) -> None:
    """A store's TTL settings, refused with what to give instead."""
    if default_ttl is not None and not _minutes(default_ttl):
        raise StoreInputError(
            f"default_ttl={default_ttl!r}: give the minutes an item lives when its put gives no "
            "ttl (> 0), or None for items that never expire"
        )
    if not isinstance(refresh_on_read, bool):
        raise StoreInputError(
            f"refresh_on_read={refresh_on_read!r}: give true (a read restarts an item's TTL) "
            "or false"
        )
