"""Hooks: code that runs as nodes of an agent's graph, around the model and the whole run.

A hook is a class; the methods it overrides decide where it sits in the graph
(``before_agent``, ``after_agent``, ``before_model``, ``after_model``), unless its ``positions``
attribute names them explicitly. Each method receives the
state (or, for the messages variants, the message list) and the run's config, and returns a
partial state update, ``None``, or ``{"jump_to": JumpTo.X}`` to leave the normal path (only to
targets listed in ``can_jump_to``).

Anything else a method may receive comes as a keyword argument, and only when the method
declares it (by name, after the two positional ones) or takes ``**kwargs``; so a hook written
before an argument existed keeps working (as Burr's lifecycle hooks do). Today there is one:
``agent``, the :class:`~graph_agent.agent.spec.AgentSpec` of the agent running the hook.

Example:
    >>> class Audit(ModelHook):
    ...     name = "audit"
    ...     can_jump_to = (JumpTo.END,)
    ...     def after_model(self, state, config):
    ...         return {"jump_to": JumpTo.END} if "STOP" in state["messages"][-1].text else None
    >>> Audit().full_name, Audit().active_positions()
    ('Audit.audit', ('after_model',))
    >>> class Announce(ModelHook):
    ...     def before_model(self, state, config, *, agent):  # the running agent's AgentSpec
    ...         print(f"{agent.name} calls {type(agent.model).__name__}")
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Literal

from graph_agent.agent.spec import AgentSpec
from graph_agent.graph.errors import GraphSetupError
from graph_agent.graph.state import KeyStrategy, OverAllState, RemoveMessage, ReplaceAll
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import BaseMessage

HookPosition = Literal["before_agent", "after_agent", "before_model", "after_model"]
POSITIONS: tuple[HookPosition, ...] = ("before_agent", "before_model", "after_model", "after_agent")
NODE_SUFFIX: Mapping[HookPosition, str] = {
    "before_agent": "before",
    "after_agent": "after",
    "before_model": "beforeModel",
    "after_model": "afterModel",
}


class JumpTo(StrEnum):
    """Where a hook may send the run instead of the next node."""

    MODEL = "model"
    """The loop entry: the first beforeModel hook, else the model."""
    TOOL = "tool"
    """The tool node (pending calls only), else the loop entry when nothing is pending."""
    END = "end"
    """The exit: the afterAgent hooks (they still run), then the end."""


_POLICIES = ("append", "replace")
_COMMAND_SHAPE = (
    "a messages hook returns AgentCommand(messages, policy='append'|'replace') with message "
    "objects, e.g. AgentCommand([SystemMessage('be brief')]) or AgentCommand(SystemMessage("
    "'be brief'))"
)


@dataclass(frozen=True)
class AgentCommand:
    """What a messages hook returns: new messages to ``append`` or to ``replace`` all with.

    ``messages`` is a message or a sequence of messages (kept as a tuple); with ``"append"``
    a ``RemoveMessage(id)`` among them deletes that message, as for any append key.

    Raises:
        TypeError: ``messages`` holds something that is not a message (a string, a dict).
        ValueError: ``policy`` is neither ``"append"`` nor ``"replace"``.
    """

    messages: BaseMessage | Sequence[BaseMessage] = ()
    policy: Literal["append", "replace"] = "append"
    jump_to: JumpTo | None = None
    update: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _command_messages(self.messages))
        if self.policy not in _POLICIES:
            raise ValueError(
                f"AgentCommand got policy={self.policy!r}; use 'append' (add the messages) or "
                "'replace' (the messages become the whole history)"
            )
        if self.policy == "replace" and any(isinstance(m, RemoveMessage) for m in self.messages):
            raise ValueError(
                "AgentCommand(policy='replace') takes the messages to keep; a RemoveMessage "
                "belongs with policy='append' (or leave the message out of the replacement)"
            )

    def as_update(self) -> dict[str, Any]:
        """This command as a state update for the agent graph."""
        assert not isinstance(self.messages, BaseMessage)  # __post_init__ made it a tuple
        update = dict(self.update)
        if self.policy == "replace":
            update["messages"] = ReplaceAll(self.messages)
        elif self.messages:
            update["messages"] = list(self.messages)
        if self.jump_to is not None:
            update["jump_to"] = self.jump_to
        return update


def _command_messages(messages: object) -> tuple[Any, ...]:
    """``messages`` as a tuple of messages (or ``RemoveMessage``s); a lone one is a tuple of
    one, ``None`` an empty tuple."""
    if messages is None:
        return ()
    if isinstance(messages, BaseMessage | RemoveMessage):
        return (messages,)
    if isinstance(messages, str | bytes):
        raise TypeError(
            f"AgentCommand got the string {_short(messages)} as messages; wrap text in a "
            f"message: {_COMMAND_SHAPE}"
        )
    if isinstance(messages, Mapping) or not isinstance(messages, Iterable):
        hint = " (other state keys go in update={...})" if isinstance(messages, Mapping) else ""
        raise TypeError(
            f"AgentCommand got messages of type {type(messages).__name__}{hint}; {_COMMAND_SHAPE}"
        )
    items = tuple(messages)
    for index, item in enumerate(items):
        if not isinstance(item, BaseMessage | RemoveMessage):
            raise TypeError(
                f"AgentCommand messages[{index}] is {_short(item)} ({type(item).__name__}), not "
                f"a message; {_COMMAND_SHAPE}"
            )
    return items


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _snake(name: str) -> str:
    name = re.sub(r"Hook$", "", name) or name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Hook:
    """Base of every hook. Override the methods for the positions you want.

    Attributes:
        name: Distinguishes two hooks of one class (``full_name`` is ``Class.name``); defaults
            to the class name in snake case.
        can_jump_to: The jump targets this hook may return (``JumpTo`` members or their
            values, e.g. ``"end"``); graph edges exist only for these.
        positions: Where the hook runs, e.g. ``("before_model",)``; ``None`` (the default)
            means at every position whose method the hook overrides.
        state_keys: Extra state keys the hook uses, with their merge strategies.
        priority: Where the hook sits among the agent's hooks: lower first, equal
            priorities in registration order (default 0). Before-hooks run in that order,
            after-hooks in reverse (see :mod:`graph_agent.agent.contributions`).
        tools: Tools the hook brings to the agent's toolset (e.g. a todo list's
            ``write_todos``); a name the agent already has, or an entry that is no tool, is
            a ``GraphSetupError`` (see :mod:`graph_agent.agent.contributions`).

    A position's method is called as ``method(state, config)`` (``messages`` for the messages
    variants), plus the keyword arguments it declares of those the agent offers: ``agent``
    (the running agent's :class:`~graph_agent.agent.spec.AgentSpec`). Declare them
    keyword-only, e.g. ``def before_model(self, state, config, *, agent):``; a method with
    ``**kwargs`` receives them all. Agents never change a hook object, so one instance may
    serve several agents.
    """

    name: str = ""
    can_jump_to: ClassVar[tuple[JumpTo, ...]] = ()
    state_keys: ClassVar[Mapping[str, KeyStrategy]] = {}
    positions: ClassVar[tuple[HookPosition, ...] | None] = None
    takes_messages: ClassVar[bool] = False
    priority: int = 0
    tools: Sequence[Any] = ()

    @property
    def agent(self) -> AgentSpec | None:
        """The :class:`~graph_agent.agent.spec.AgentSpec` of the agent running this hook's
        method, while the method runs (in this thread or task); ``None`` elsewhere. A hook
        instance that serves several agents sees, in each call, the agent running it: the same
        value as the ``agent`` keyword argument."""
        running = _running.get()
        if running is not None and running[0] is self:
            return running[1]
        return None

    @property
    def full_name(self) -> str:
        return f"{type(self).__name__}.{self.name or _snake(type(self).__name__)}"

    def active_positions(self) -> tuple[HookPosition, ...]:
        """Where this hook runs: its ``positions``, else the methods it overrides.

        Raises:
            GraphSetupError: ``positions`` is not a tuple or list of position names.
        """
        explicit = self.positions
        if explicit is None:
            own = type(self)
            return tuple(p for p in POSITIONS if getattr(own, p) not in _DEFAULT_METHODS[p])
        unknown = (
            [explicit]
            if not isinstance(explicit, tuple | list)
            else [p for p in explicit if p not in POSITIONS]
        )
        if unknown:
            raise GraphSetupError(
                f"hook {self.full_name!r} has positions={explicit!r}; give a tuple of "
                f"{', '.join(map(repr, POSITIONS))} (e.g. positions = ('before_model',)), or "
                "None to run where the hook overrides a method"
            )
        return tuple(dict.fromkeys(explicit))  # each position once

    def jump_targets(self) -> tuple[JumpTo, ...]:
        """This hook's ``can_jump_to`` as :class:`JumpTo` members (``"end"`` is ``JumpTo.END``).

        Raises:
            GraphSetupError: ``can_jump_to`` is not a tuple, list or set, or holds something
                that is not a jump target.
        """
        declared = self.can_jump_to
        valid = ", ".join(f"JumpTo.{t.name} ({t.value!r})" for t in JumpTo)
        if isinstance(declared, set | frozenset):  # fine too, in JumpTo's order
            order = list(JumpTo)
            declared = sorted(declared, key=lambda t: order.index(t) if t in order else -1)
        if not isinstance(declared, tuple | list):
            raise GraphSetupError(
                f"hook {self.full_name!r} has can_jump_to={declared!r}; give a tuple of jump "
                f"targets, e.g. can_jump_to = (JumpTo.END,); the targets are {valid}"
            )
        targets = []
        for entry in declared:
            try:
                targets.append(JumpTo(entry))
            except (ValueError, TypeError):
                raise GraphSetupError(
                    f"hook {self.full_name!r} has {entry!r} in can_jump_to, which is not a jump "
                    f"target; the targets are {valid}"
                ) from None
        return tuple(dict.fromkeys(targets))

    def before_agent(self, state: Any, config: RunnableConfig) -> Any:
        """Once per run, before anything else."""
        return None

    def after_agent(self, state: Any, config: RunnableConfig) -> Any:
        """Once per run, after the final answer."""
        return None

    def before_model(self, state: Any, config: RunnableConfig) -> Any:
        """Before every model call."""
        return None

    def after_model(self, state: Any, config: RunnableConfig) -> Any:
        """After every model call, before tools run."""
        return None

    def __repr__(self) -> str:
        return f"<{self.full_name} at {', '.join(self.active_positions()) or 'no position'}>"


class AgentHook(Hook):
    """A hook around the whole run: override ``before_agent(state, config)`` and/or
    ``after_agent(state, config)``; return a state update, ``None`` or a jump."""

    def before_agent(self, state: OverAllState, config: RunnableConfig) -> Any:
        return None

    def after_agent(self, state: OverAllState, config: RunnableConfig) -> Any:
        return None


class ModelHook(Hook):
    """A hook around each model call: override ``before_model(state, config)`` and/or
    ``after_model(state, config)``; return a state update, ``None`` or a jump."""

    def before_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        return None

    def after_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        return None


class MessagesAgentHook(Hook):
    """Like :class:`AgentHook`, but receives the message list and returns an
    :class:`AgentCommand` (or ``None``)."""

    takes_messages = True

    def before_agent(self, messages: list[BaseMessage], config: RunnableConfig) -> Any:
        return None

    def after_agent(self, messages: list[BaseMessage], config: RunnableConfig) -> Any:
        return None


class MessagesModelHook(Hook):
    """Like :class:`ModelHook`, but receives the message list and returns an
    :class:`AgentCommand` (or ``None``)."""

    takes_messages = True

    def before_model(self, messages: list[BaseMessage], config: RunnableConfig) -> Any:
        return None

    def after_model(self, messages: list[BaseMessage], config: RunnableConfig) -> Any:
        return None


_running: ContextVar[tuple[Hook, AgentSpec] | None] = ContextVar("running_hook", default=None)
"""The hook whose method is running in this context, and the spec of the agent running it."""


@contextmanager
def running_for(hook: Hook, agent: AgentSpec) -> Iterator[None]:
    """While the block runs, ``hook.agent`` is ``agent`` (in this thread or task only)."""
    token = _running.set((hook, agent))
    try:
        yield
    finally:
        _running.reset(token)


def accepted_keywords(method: Callable[..., Any], offered: Iterable[str]) -> tuple[str, ...]:
    """The keyword arguments among ``offered`` that a hook method takes: those it names after
    its two positional parameters (keyword-only, or positional with that name), or all of
    them when it takes ``**kwargs``. Read once, when the agent builds its graph.

    Example:
        >>> def old(state, config): ...
        >>> def new(state, config, *, agent): ...
        >>> def open_ended(state, config, **kwargs): ...
        >>> [accepted_keywords(f, ["agent"]) for f in (old, new, open_ended)]
        [(), ('agent',), ('agent',)]
    """
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): the two arguments only
        return ()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return tuple(offered)
    named = {
        p.name
        for index, p in enumerate(parameters)
        if p.kind is p.KEYWORD_ONLY or (index >= 2 and p.kind is p.POSITIONAL_OR_KEYWORD)
    }
    return tuple(name for name in offered if name in named)


_DEFAULT_METHODS: dict[str, set[Any]] = {
    position: {
        getattr(base, position)
        for base in (Hook, AgentHook, ModelHook, MessagesAgentHook, MessagesModelHook)
    }
    for position in POSITIONS
}
"""The library's no-op methods: a hook runs at a position only if it replaced this method."""
