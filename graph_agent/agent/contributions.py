"""What hooks and interceptors bring to an agent besides their methods: an order and tools.

**Priority.** Hooks and interceptors have a ``priority`` (an int, default 0). The agent
orders each list by it, lower first, and keeps registration order among equal priorities
(a stable sort), so with no priorities set nothing changes. "First" means what registration
order meant before: a before-hook runs earlier, an after-hook later (after-hooks run
last-first, like an onion), an interceptor sits further out. The agent's instruction hook
always comes first, whatever the priorities.

**Tools.** A hook or interceptor may list ``tools`` (``@tool`` functions, :class:`Tool`
objects or plain functions); the agent adds them to its toolset after its own tools, so
the model may call them like any other (a todo list hook brings its ``write_todos`` tool).
``tools`` is read only from instances of the library's base classes, which declare it (empty):
:class:`~graph_agent.agent.hooks.Hook` (``AgentHook``, ``ModelHook`` and the messages
variants), :class:`~graph_agent.agent.interceptors.ModelInterceptor` and
:class:`~graph_agent.agent.interceptors.ToolInterceptor`. An object that only acts like one
(it has ``intercept`` or a hook method, without subclassing) and lists ``tools`` is a
:class:`~graph_agent.graph.errors.GraphSetupError`, so its tools are not dropped unseen (an
empty ``tools`` is fine; another object's ``tools`` is left alone). On those classes the
name is taken: an entry that is not a tool (a tool's name, a dict, a class) is a
:class:`~graph_agent.graph.errors.GraphSetupError` naming the hook, so a hook that needs an
attribute for other tools (the names of those it watches) calls it something else. A name
clash with one of the agent's tools, or between two contributors, is a ``GraphSetupError``
too; all are raised when the agent is made.

Example:
    >>> from graph_agent.agent import ModelHook
    >>> class Early(ModelHook):
    ...     priority = -10
    >>> class Late(ModelHook):
    ...     name = "late"
    >>> [type(hook).__name__ for hook in by_priority([Late(), Early()])]
    ['Early', 'Late']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import Any, TypeVar

from graph_agent.agent.hooks import NODE_SUFFIX, Hook
from graph_agent.agent.interceptors import ModelInterceptor, ToolInterceptor
from graph_agent.graph.errors import GraphSetupError
from graph_agent.tools import Tool, Toolkit

CONTRIBUTOR_TYPES = (Hook, ModelInterceptor, ToolInterceptor)
"""The classes whose ``tools`` attribute lists contributed tools (each declares it empty)."""

Ordered = TypeVar("Ordered")


def priority_of(item: object) -> int:
    """``item.priority`` (0 when it has none), checked to be an int.

    Raises:
        GraphSetupError: the priority is not an int.
    """
    value = getattr(item, "priority", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GraphSetupError(
            f"{_label(item)} has priority={value!r}; give an int (lower runs first, default 0)"
        )
    return value


def by_priority(items: Iterable[Ordered]) -> tuple[Ordered, ...]:
    """``items`` ordered by ``priority``, lower first; equal priorities keep their order."""
    return tuple(sorted(items, key=priority_of))


def add_contributed_tools(
    toolkit: Toolkit, agent_name: str, contributors: Sequence[Any]
) -> Toolkit:
    """Add the ``tools`` each of ``contributors`` (hooks, interceptors) lists to ``toolkit``.

    Raises:
        GraphSetupError: a contributed tool's name is taken by one of the agent's tools or by
            another contributor's tool, or ``tools`` is not a list of tools.
    """
    owners: dict[str, str] = {}
    for contributor in contributors:
        for new in contributed_tools(contributor):
            if new.name in toolkit:
                owner = owners.get(new.name)
                where = owner if owner is not None else f"agent {agent_name!r} (tools=[...])"
                raise GraphSetupError(
                    f"{_label(contributor)} contributes a tool named {new.name!r}, and "
                    f"{where} already has a tool of that name; rename one of them "
                    "(e.g. @tool(name=...)) or leave one out"
                )
            toolkit.add(new)
            owners[new.name] = _label(contributor)
    return toolkit


def contributed_tools(contributor: object) -> list[Tool]:
    """The tools ``contributor`` brings: its ``tools`` when it is a hook or an interceptor of
    the library's base classes, else none.

    Raises:
        GraphSetupError: ``tools`` is not a list of tools, naming the contributor and what to
            give instead.
    """
    if not isinstance(contributor, CONTRIBUTOR_TYPES):
        _refuse_unread_tools(contributor)
        return []
    tools = contributor.tools
    if isinstance(tools, str | bytes | Tool | Mapping) or not isinstance(tools, Iterable):
        raise GraphSetupError(
            f"{_label(contributor)} has tools={tools!r:.60}; `tools` lists the tools it adds "
            f"to the agent's toolset: {_TOOLS_SHAPE}"
        )
    return [_as_tool(contributor, index, item) for index, item in enumerate(tools)]


_HOOK_LIKE_METHODS = ("intercept", *NODE_SUFFIX)
"""Methods that make an object act as a hook or an interceptor."""


def _refuse_unread_tools(contributor: object) -> None:
    """An object acting as a hook or an interceptor without subclassing one would have its
    ``tools`` silently left out of the agent: say so, unless it lists none.

    Raises:
        GraphSetupError: it has a hook method or ``intercept``, and a non-empty ``tools``.
    """
    tools = getattr(contributor, "tools", None)
    if tools is None or (isinstance(tools, Sized) and len(tools) == 0):
        return
    if not any(callable(getattr(contributor, name, None)) for name in _HOOK_LIKE_METHODS):
        return
    raise GraphSetupError(
        f"{type(contributor).__name__!r} acts as a hook or an interceptor and lists "
        f"tools={tools!r:.60}, but is not a subclass of the library's Hook, ModelInterceptor "
        "or ToolInterceptor, so its tools would not be added to the agent: subclass "
        "ModelInterceptor (or Hook/ToolInterceptor) to contribute tools, or rename the "
        "attribute"
    )


_TOOLS_SHAPE = (
    "give a list of @tool functions, Tool objects or plain functions (or leave it empty), e.g. "
    "tools = (write_todos,); an attribute for anything else needs another name"
)


def _as_tool(contributor: object, index: int, item: object) -> Tool:
    if isinstance(item, Tool):
        return item
    problem = f"is {item!r:.60} ({type(item).__name__}), not a tool"
    if callable(item) and not isinstance(item, type):
        try:
            return Tool.from_function(item)
        except (TypeError, ValueError) as exc:
            problem = f"({item!r:.60}) cannot be made a tool: {exc}"
    raise GraphSetupError(f"{_label(contributor)}: tools[{index}] {problem}; {_TOOLS_SHAPE}")


def _label(item: object) -> str:
    full_name = getattr(item, "full_name", None)
    kind = "hook" if full_name is not None else "interceptor"
    return f"{kind} {(full_name or type(item).__name__)!r}"
