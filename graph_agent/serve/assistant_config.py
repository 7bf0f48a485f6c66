"""What an assistant's configuration means for its runs, as LangGraph Server has it.

An assistant (:mod:`graph_agent.serve.assistant_records`) holds a ``config`` (LangGraph's
``{"configurable": {...}, "recursion_limit": N, ...}``) and a ``context`` (LangGraph 0.6's
replacement for ``configurable``). As LangGraph Server does, one given alone fills the other:
an assistant created with ``config={"configurable": {"model": "a"}}`` has ``context={"model":
"a"}`` too, and the other way round (:func:`synced`).

A run of an assistant runs its graph with the assistant's settings merged *under* the run's
(:func:`run_settings`): the run's keys win, ``configurable`` and ``context`` merged key by key.
A graph here reads them as ``config.context`` (graph_agent's ``RunnableConfig`` has no
``configurable``): the assistant's ``configurable`` and ``context``, then the run's
``configurable`` and ``context``, each over the one before. The keys LangGraph keeps in
``configurable`` for itself (``thread_id``, ``checkpoint_id``, ...) are left out. The step limit
is the run's ``config.recursion_limit``, else the assistant's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ConfigProblem", "checked_config", "patched_settings", "run_settings", "synced"]

RESERVED_CONFIGURABLE = frozenset(
    {
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "run_id",
        "assistant_id",
        "graph_id",
    }
)
"""``configurable`` keys that LangGraph's clients and server set for themselves (where a run
is), never the graph's settings: not passed on in ``config.context``; nor are keys starting
with ``__`` or ``langgraph_``."""


class ConfigProblem(ValueError):
    """A ``config`` that does not fit (the message names the field); the API answers 422."""


def checked_config(config: Any, where: str = "config") -> dict[str, Any]:
    """``config`` (a JSON object), if its parts LangGraph gives a meaning are of the right kind:
    ``configurable`` an object, ``recursion_limit`` a positive integer.

    Raises:
        ConfigProblem: they are not.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigProblem(f"{where} must be a JSON object")
    configurable = config.get("configurable")
    if configurable is not None and not isinstance(configurable, Mapping):
        raise ConfigProblem(f"{where}.configurable must be a JSON object")
    limit = config.get("recursion_limit")
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ConfigProblem(f"{where}.recursion_limit must be a positive integer")
    return {key: value for key, value in config.items() if value is not None}


def synced(
    config: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``config`` and ``context`` as an assistant keeps them: one given alone fills the other
    (LangGraph Server keeps them "up to date with one another"); both given stay as given."""
    config, context = dict(config), dict(context)
    configurable = config.get("configurable") or {}
    if configurable and not context:
        context = dict(configurable)
    elif context and not configurable:
        config["configurable"] = dict(context)
    return config, context


def patched_settings(
    config: Mapping[str, Any],
    context: Mapping[str, Any],
    new_config: Mapping[str, Any] | None,
    new_context: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``config`` and ``context`` of an assistant's new version: each one sent replaces the
    old one whole (LangGraph: "pass the entire config"), one not sent stays; a
    ``configurable`` or ``context`` sent alone fills the other (:func:`synced`)."""
    if new_config is not None and new_context is not None:
        return synced(new_config, new_context)
    if new_config is not None:
        configurable = new_config.get("configurable")
        return dict(new_config), dict(configurable) if configurable else dict(context)
    if new_context is not None:
        kept = {key: value for key, value in config.items() if key != "configurable"}
        return synced(kept, new_context)
    return dict(config), dict(context)


def run_settings(
    assistant_config: Mapping[str, Any],
    assistant_context: Mapping[str, Any],
    run_config: Mapping[str, Any],
    run_context: Mapping[str, Any],
) -> tuple[dict[str, Any], int | None]:
    """The ``config.context`` and step limit of a run of an assistant (see the module
    docstring).

    Raises:
        ConfigProblem: the run's ``config.configurable`` is not a JSON object.
    """
    checked = checked_config(run_config)
    context = {
        **_settings(assistant_config.get("configurable") or {}),
        **assistant_context,
        **_settings(checked.get("configurable") or {}),
        **run_context,
    }
    limit = checked.get("recursion_limit", assistant_config.get("recursion_limit"))
    return context, limit


def _settings(configurable: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in configurable.items()
        if key not in RESERVED_CONFIGURABLE and not key.startswith(("__", "langgraph_"))
    }
