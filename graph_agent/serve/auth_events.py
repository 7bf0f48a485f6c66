"""What a request asks, in the words of custom auth handlers: its resource and action (from its
method and path, as LangGraph Server names them), the ``value`` a handler gets, the filters a
handler may return and how records' metadata meet them, and the store namespace a handler may
rewrite.

Pure functions over plain data (:mod:`graph_agent.serve.auth_custom` runs the handlers).

Runs belong to their thread: reading, joining, listing a thread's runs is ``threads.read``,
starting one (on a thread or stateless, ``/mcp`` and ``/a2a`` too) ``threads.create_run``,
cancelling ``threads.update``, deleting ``threads.delete``. Crons live under ``/runs/crons``
and ``/threads/{id}/runs/crons``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Event",
    "FilterError",
    "check_filter",
    "event_of",
    "filter_matches",
    "namespace_of",
    "with_namespace",
]

_OPERATORS = ("$eq", "$contains")


@dataclass(frozen=True, slots=True)
class Event:
    """A request as handlers see it: ``resource`` and ``action``, the ids its path names, and
    whether its body is part of the value."""

    resource: str
    action: str
    ids: Mapping[str, str]
    reads_body: bool = False


def event_of(method: str, path: str) -> Event | None:
    """The event of ``method path`` (``None``: no resource, e.g. ``/ok``, ``/docs``)."""
    parts = [part for part in path.split("/") if part]
    if not parts:
        return None
    head = parts[0]
    if head == "store":
        return _store_event(method, parts)
    if head == "assistants":
        return _assistants_event(method, parts)
    if head == "threads":
        return _threads_event(method, parts)
    if head == "runs":
        if len(parts) >= 2 and parts[1] == "crons":
            return _crons_event(method, parts[2:], {})
        if parts[1:] == ["cancel"]:
            return Event("threads", "update", {}, reads_body=True)
        return Event("threads", "create_run", {}, reads_body=method != "GET")
    if head in ("mcp", "a2a") and method == "POST":  # they start runs on threads
        return Event("threads", "create_run", {})
    return None


def _store_event(method: str, parts: list[str]) -> Event | None:
    actions = {
        ("PUT", "items"): "put",
        ("GET", "items"): "get",
        ("DELETE", "items"): "delete",
        ("POST", "items/search"): "search",
        ("POST", "namespaces"): "list_namespaces",
    }
    action = actions.get((method, "/".join(parts[1:])))
    if action is None:
        return None
    return Event("store", action, {}, reads_body=method != "GET")


def _assistants_event(method: str, parts: list[str]) -> Event:
    rest = parts[1:]
    if not rest:
        return Event("assistants", "create" if method == "POST" else "search", {}, True)
    if rest[0] in ("search", "count") and method == "POST":
        return Event("assistants", "search", {}, reads_body=True)
    ids = {"assistant_id": rest[0]}
    if len(rest) == 1:
        action = {"PATCH": "update", "DELETE": "delete"}.get(method, "read")
        return Event("assistants", action, ids, reads_body=action == "update")
    if rest[1] == "latest":
        return Event("assistants", "update", ids, reads_body=True)
    return Event("assistants", "read", ids, reads_body=method == "POST")


def _threads_event(method: str, parts: list[str]) -> Event:
    rest = parts[1:]
    if not rest:
        return Event("threads", "create" if method == "POST" else "search", {}, True)
    if rest[0] in ("search", "count") and method == "POST":
        return Event("threads", "search", {}, reads_body=True)
    if rest[0] == "prune":
        return Event("threads", "delete", {}, reads_body=True)
    ids = {"thread_id": rest[0]}
    rest = rest[1:]
    if not rest:
        action = {"PATCH": "update", "DELETE": "delete"}.get(method, "read")
        return Event("threads", action, ids, reads_body=action == "update")
    if rest[0] == "state" and method == "POST" and len(rest) == 1:
        return Event("threads", "update", ids, reads_body=True)
    if rest[0] != "runs":  # state, history, copy, stream
        return Event("threads", "read", ids)
    rest = rest[1:]
    if rest and rest[0] == "crons":
        return _crons_event(method, rest[1:], ids)
    if method == "POST" and (not rest or rest[0] in ("stream", "wait")):
        return Event("threads", "create_run", ids, reads_body=True)
    if rest:
        ids = {**ids, "run_id": rest[0]}
    if method == "DELETE":
        return Event("threads", "delete", ids)
    if method == "POST" and rest[1:] == ["cancel"]:
        return Event("threads", "update", {**ids, "action": "interrupt"})
    return Event("threads", "read", ids)


def _crons_event(method: str, rest: list[str], ids: dict[str, str]) -> Event:
    if not rest:
        return Event("crons", "create", ids, reads_body=True)
    if rest[0] in ("search", "count"):
        return Event("crons", "search", ids, reads_body=True)
    action = {"PATCH": "update", "DELETE": "delete"}.get(method, "read")
    return Event("crons", action, {**ids, "cron_id": rest[0]}, reads_body=action == "update")


class FilterError(ValueError):
    """A handler returned a filter the server cannot apply (the message says why)."""


def check_filter(found: Any) -> dict[str, Any]:
    """``found`` as a filter: a mapping of metadata keys to a value or ``{"$eq": v}`` /
    ``{"$contains": v}``.

    Raises:
        FilterError: not such a mapping (a handler's mistake: the message names the part).
    """
    if not isinstance(found, Mapping):
        raise FilterError(
            f"returned {type(found).__name__}; return None, True, False or a filter dict"
        )
    for key, condition in found.items():
        if not isinstance(key, str):
            raise FilterError(f"returned a filter with a key that is not a string: {key!r}")
        if isinstance(condition, Mapping):
            unknown = [op for op in condition if op not in _OPERATORS]
            if unknown or not condition:
                raise FilterError(
                    f"returned a filter on {key!r} with operator(s) {unknown or '{}'}; "
                    "the operators are $eq and $contains"
                )
    return dict(found)


def filter_matches(metadata: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether a record's ``metadata`` meets every condition of ``filters`` (a logical AND).

    ``{"k": v}`` and ``{"k": {"$eq": v}}``: the value is ``v``. ``{"k": {"$contains": v}}``:
    the value is a list holding ``v`` (every item of ``v`` when ``v`` is a list).
    """
    for key, condition in filters.items():
        if key not in metadata:
            return False
        value = metadata[key]
        if not isinstance(condition, Mapping):
            condition = {"$eq": condition}
        for operator, wanted in condition.items():
            if operator == "$eq" and value != wanted:
                return False
            if operator == "$contains" and not _contains(value, wanted):
                return False
    return True


def _contains(value: Any, wanted: Any) -> bool:
    if not isinstance(value, list | tuple | set | frozenset):
        return False
    if isinstance(wanted, list | tuple):
        return all(item in value for item in wanted)
    return wanted in value


_NAMESPACE_FIELD = {
    "put": "namespace",
    "delete": "namespace",
    "get": "namespace",
    "search": "namespace_prefix",
    "list_namespaces": "prefix",
}
"""Where each store request holds the namespace a handler sees as ``value["namespace"]``."""


def namespace_of(action: str, request: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The namespace a store request names (``request``: its body, or its query for ``get``,
    where the namespace is labels joined by periods); ``None`` when it names none that could
    be one (the route refuses it)."""
    found = request.get(_NAMESPACE_FIELD[action])
    if found is None and action in ("search", "list_namespaces"):
        return ()
    if isinstance(found, str) and action == "get":
        found = found.split(".") if found else []
    if not isinstance(found, list | tuple) or not all(isinstance(part, str) for part in found):
        return None
    return tuple(found)


def with_namespace(action: str, request: dict[str, Any], namespace: Any) -> dict[str, Any]:
    """``request`` naming ``namespace`` (what a handler left in ``value["namespace"]``)."""
    labels = list(namespace) if namespace is not None else []
    if not all(isinstance(label, str) for label in labels):
        raise FilterError(f"set a namespace that is not a list of strings: {namespace!r}")
    value: Any = ".".join(labels) if action == "get" else labels
    return {**request, _NAMESPACE_FIELD[action]: value}
