"""``StateGraph``: declare nodes and edges, then ``compile()`` into a runnable graph."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from graph_agent.graph._effects import RunSettings
from graph_agent.graph._engine import BarrierSpec, BranchSpec, DualNode, GraphSpec, NodeSpec
from graph_agent.graph._policy_node import NodePolicy, node_cache, node_policy, wrap
from graph_agent.graph._subgraph import SubgraphNode, is_node_graph
from graph_agent.graph._validate import validate
from graph_agent.graph.cache import NodeCache
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.errors import GraphSetupError
from graph_agent.graph.policies import CachePolicy, RetryPolicy
from graph_agent.graph.render import EdgeView, GraphView
from graph_agent.graph.state import AppendStrategy, KeyStrategy, as_strategy
from graph_agent.graph.types import END, START, CompileConfig


class _Node:
    __slots__ = ("defer", "destinations", "fn", "labels", "name", "policy")

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        destinations: tuple[str, ...],
        labels: Mapping[str, str],
        defer: bool,
        policy: NodePolicy | None = None,
    ) -> None:
        self.name = name
        self.fn = fn
        self.destinations = destinations
        self.labels = labels  # drawn on the edges to destinations (LangGraph's {node: label})
        self.defer = defer
        self.policy = policy


class _Branch:
    __slots__ = ("fn", "path_map", "sends", "source")

    def __init__(
        self,
        source: str,
        fn: Callable[..., Any],
        path_map: dict[Hashable, str] | None,
        sends: tuple[str, ...],
    ) -> None:
        self.source = source
        self.fn = fn
        self.path_map = path_map
        self.sends = sends

    def send_targets(self) -> frozenset[str] | None:
        """Where its Sends may go: the nodes it declared (``sends`` and its path_map), or
        ``None`` (anywhere) when it declared neither."""
        if self.path_map is None and not self.sends:
            return None
        return frozenset(self.sends) | frozenset((self.path_map or {}).values()) - {END}


class StateGraph:
    """A graph of nodes over a keyed state, built step by step and then compiled.

    Args:
        name: The graph's name (shown in diagrams and as ``NodeOutput.agent``).
        key_strategies: How each key merges writes: a :class:`KeyStrategy` or a
            ``callable(old, new) -> merged``. Keys not listed are replaced.
        private_keys: Bookkeeping keys: stored and readable by name, but left out of
            ``data()``, iteration and snapshot values.
        ephemeral_keys: Keys that live for one superstep: the routers of the step that wrote
            them read them, then they are dropped (never stored, returned or streamed).

    Example:
        >>> from graph_agent import StateGraph, START, END, AppendStrategy
        >>> g = StateGraph("greet", key_strategies={"log": AppendStrategy()})
        >>> _ = g.add_node("hello", lambda state: {"log": "hello"})
        >>> _ = g.add_node("world", lambda state: {"log": "world"})
        >>> _ = g.add_edge(START, "hello").add_edge("hello", "world").add_edge("world", END)
        >>> list(g.compile().invoke({})["log"])
        ['hello', 'world']
    """

    def __init__(
        self,
        name: str,
        key_strategies: Mapping[str, KeyStrategy | Callable[[Any, Any], Any]] | None = None,
        *,
        private_keys: Iterable[str] = (),
        ephemeral_keys: Iterable[str] = (),
    ) -> None:
        if not isinstance(name, str) or not name:
            raise GraphSetupError(f"StateGraph needs a non-empty name, got {name!r}")
        self.name = name
        self.strategies: dict[str, KeyStrategy] = {}
        for key, strategy in (key_strategies or {}).items():
            try:
                self.strategies[key] = as_strategy(strategy)
            except TypeError:
                raise GraphSetupError(
                    f"key_strategies[{key!r}] is {strategy!r}: use ReplaceStrategy(), "
                    "AppendStrategy(), MergeStrategy() or a callable(old, new) -> merged"
                ) from None
        self.private_keys = frozenset(private_keys) | frozenset(ephemeral_keys)
        self.ephemeral_keys = frozenset(ephemeral_keys)
        self._nodes: dict[str, _Node] = {}
        self._edges: list[tuple[str, str]] = []
        self._barriers: list[tuple[tuple[str, ...], str]] = []
        self._branches: list[_Branch] = []
        self._reserved_ok = False
        self._subgraphs: dict[str, GraphView] = {}

    def add_node(
        self,
        name: str,
        fn: Any,
        destinations: Sequence[str] | Mapping[str, str] = (),
        *,
        defer: bool = False,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        cache: CachePolicy | None = None,
        error_handler: Callable[..., Any] | None = None,
    ) -> StateGraph:
        """Add a node: ``fn(state)`` or ``fn(state, config)``, sync or async, returning a dict
        update, a ``Command`` or ``None``. ``destinations`` lists where its ``Command(goto=...)``
        may go (node names, those of its ``Send`` items included; or LangGraph's ``{node: edge
        label}``, labels drawn on the edges).

        ``defer``: the node runs only in a superstep in which nothing else would run, however
        often it was triggered before: an aggregator after branches of different lengths, or
        after Sends, runs once, when they are all done.

        Policies (see :mod:`graph_agent.graph.policies`): ``retry`` attempts the node again
        when it raises what ``RetryPolicy.retry_on`` accepts; ``timeout`` (seconds) cuts each
        attempt with a ``NodeTimeoutError``; ``cache`` reuses its result for the same input;
        ``error_handler(state, error)`` answers the last failure with an update or a
        ``Command`` (declare its ``goto`` targets in ``destinations``) instead of failing.

        ``fn`` may also be a compiled graph or an agent: it then runs as a subgraph (see
        :mod:`graph_agent.graph._subgraph`), keeping its checkpoints in the parent's thread."""
        if not isinstance(name, str) or not name:
            raise GraphSetupError(f"a node name must be a non-empty string, got {name!r}")
        if name in (START, END) or (_is_dunder(name) and not self._reserved_ok):
            raise GraphSetupError(
                f"node name {name!r} is reserved (names like '__start__' and '__end__' belong "
                "to the engine); choose another name"
            )
        if name in self._nodes:
            raise GraphSetupError(
                f"a node named {name!r} already exists in graph {self.name!r}; node names must "
                "be unique"
            )
        if is_node_graph(fn):
            fn = self._subgraph_node(name, fn)
        elif isinstance(fn, SubgraphNode):
            self._subgraphs[name] = fn.child.view
        if not callable(fn):
            raise GraphSetupError(f"node {name!r}: {fn!r} is not callable")
        _takes_config(fn, f"node {name!r}")
        if not isinstance(defer, bool):
            raise GraphSetupError(f"add_node({name!r}, ..., defer={defer!r}): True or False")
        labels = (
            {k: v for k, v in destinations.items() if isinstance(v, str) and v}
            if isinstance(destinations, Mapping)
            else {}
        )
        policy = node_policy(name, retry, timeout, cache, error_handler)
        self._nodes[name] = _Node(
            name, fn, _destinations(name, destinations), labels, defer, policy
        )
        return self

    def _subgraph_node(self, name: str, child: Any) -> SubgraphNode:
        append_keys = frozenset(k for k, s in self.strategies.items() if type(s) is AppendStrategy)
        node = (
            SubgraphNode(child, append_keys=append_keys)
            if isinstance(child, CompiledGraph)
            else child.as_node()
        )
        self._subgraphs[name] = node.child.view
        return node

    def add_edge(self, source: str | Sequence[str], target: str) -> StateGraph:
        """Add an edge. ``add_edge(["b", "c"], "join")`` is a barrier: ``join`` runs once after
        both ``b`` and ``c`` have run since it last ran."""
        if not isinstance(target, str):
            one_each = "add_edge once per target"
            if isinstance(target, Sequence) and target and all(isinstance(t, str) for t in target):
                one_each = " and ".join(f"add_edge({source!r}, {t!r})" for t in target)
            raise GraphSetupError(
                f"add_edge({source!r}, {target!r}): the target must be one node name or END, "
                f"not {type(target).__name__}. For a fan-out call {one_each}, or route with "
                "add_conditional_edges(source, router) and a router that returns a list of "
                "node names"
            )
        if target == START:
            raise GraphSetupError(f"an edge cannot lead into START ({source!r} -> START)")
        if isinstance(source, str):
            if source == END:
                raise GraphSetupError(f"an edge cannot leave END (END -> {target!r})")
            if (source, target) not in self._edges:
                self._edges.append((source, target))
            return self
        listed: tuple[Any, ...] = (
            tuple(source)
            if isinstance(source, Iterable) and not isinstance(source, Mapping)
            else (source,)
        )
        if not all(isinstance(s, str) for s in listed):
            raise GraphSetupError(
                f"add_edge({source!r}, {target!r}): the source must be a node name, START, or "
                "a list of node names (a barrier that waits for all of them)"
            )
        sources: tuple[str, ...] = tuple(dict.fromkeys(listed))
        if not sources:
            raise GraphSetupError(f"a barrier edge needs a list of node names, got {source!r}")
        if START in sources or END in sources:
            raise GraphSetupError(f"a barrier edge waits on nodes, not START/END: {source!r}")
        if len(sources) == 1:
            return self.add_edge(sources[0], target)
        if not any(set(s) == set(sources) and t == target for s, t in self._barriers):
            self._barriers.append((sources, target))
        return self

    def add_conditional_edges(
        self,
        source: str,
        fn: Callable[..., Any],
        path_map: Mapping[Any, str] | Sequence[str] | None = None,
        *,
        sends: str | Sequence[str] = (),
    ) -> StateGraph:
        """Route after ``source`` with ``fn(state[, config])``.

        With a ``path_map`` (dict, or list of node names) ``fn`` returns one of its keys or a list
        of keys (fan-out); without one it returns node names or END. A router whose return type
        is a ``Literal[...]`` of node names needs no path_map.

        ``fn`` may also return :class:`~graph_agent.graph.types.Send` items (among the rest, or
        a list of them): each runs its node once in the next step, with the Send's input as its
        state. ``sends`` names the nodes it sends to (drawn as dashed edges labelled "Send");
        a router with ``sends`` and no path_map answers with Sends only. A router that declared
        a path_map or ``sends`` may send to their nodes only; one that declared neither, to any.
        """
        if not isinstance(source, str):
            raise GraphSetupError(
                f"add_conditional_edges({source!r}, ...): the source must be one node name or "
                "START; add one add_conditional_edges call per source node"
            )
        if source == END:
            raise GraphSetupError("conditional edges cannot leave END")
        if not callable(fn):
            raise GraphSetupError(f"the router on {source!r} is not callable: {fn!r}")
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - a callable object's method
        ):
            raise GraphSetupError(
                f"the router on {source!r} is async; routers must be plain functions of the "
                "state (do async work in a node and store what the router needs)"
            )
        _takes_config(fn, f"the router on {source!r}")
        mapping: dict[Hashable, str] | None
        if path_map is None:
            mapping = _literal_path_map(fn)
        elif isinstance(path_map, Mapping):
            _check_path_map_targets(source, path_map, where="path_map[{!r}]")
            mapping = dict(path_map)
        elif isinstance(path_map, str) or not isinstance(path_map, Iterable):
            raise GraphSetupError(
                f"path_map for {source!r} is {path_map!r}; pass a dict {{key: node}} or a list "
                "of node names"
            )
        else:
            names = list(path_map)
            _check_path_map_targets(source, dict(enumerate(names)), where="path_map item {}")
            mapping = {name: name for name in names}
        send_targets = _send_targets(source, sends)
        if send_targets and mapping is None:
            mapping = {}  # Sends only
        self._branches.append(_Branch(source, fn, mapping, send_targets))
        return self

    def compile(self, config: CompileConfig | None = None) -> CompiledGraph:
        """Validate the graph and return a :class:`CompiledGraph`.

        Raises:
            GraphSetupError: naming every node or edge of the first kind of problem found.
        """
        config = config or CompileConfig()
        interrupt_before = _names(config.interrupt_before, "interrupt_before")
        interrupt_after = _names(config.interrupt_after, "interrupt_after")
        view = self._view()
        validate(
            name=self.name,
            nodes=list(self._nodes),
            edges=[(e.source, e.target) for e in view.edges],
            declared=self._declared_edges(),
            has_saver=config.saver is not None,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
        )
        spec = self._spec(node_cache(config, self._nodes.values()))
        run = RunSettings(
            spec=spec,
            saver=config.saver,
            interrupt_before=frozenset(interrupt_before),
            interrupt_after=frozenset(interrupt_after),
            listeners=tuple(config.listeners),
            store=config.store,
        )
        return CompiledGraph(run, view)

    def _spec(self, store: NodeCache | None = None) -> GraphSpec:
        nodes = {}
        for index, node in enumerate(self._nodes.values()):
            fn, pass_config, is_async = (
                node.fn,
                _takes_config(node.fn, f"node {node.name!r}"),
                _is_async(node.fn),
            )
            afn = node.fn.acall if isinstance(node.fn, DualNode) else None
            if node.policy is not None:
                fn, afn = wrap(
                    node.name,
                    fn,
                    pass_config=pass_config,
                    is_async=is_async,
                    afn=afn,
                    policy=node.policy,
                    store=store,
                    graph=self.name,
                )
                pass_config = True
            nodes[node.name] = NodeSpec(
                name=node.name,
                fn=fn,
                index=index,
                pass_config=pass_config,
                is_async=is_async,
                destinations=frozenset(node.destinations),
                afn=afn,
                defer=node.defer,
                policy=node.policy,
            )
        edges: dict[str, list[str]] = {}
        for source, target in self._edges:
            edges.setdefault(source, []).append(target)
        branches: dict[str, list[BranchSpec]] = {}
        for branch in self._branches:
            pass_config = _takes_config(branch.fn, "router")
            branches.setdefault(branch.source, []).append(
                BranchSpec(
                    source=branch.source,
                    fn=branch.fn,
                    path_map=branch.path_map,
                    pass_config=pass_config,
                    sends=branch.send_targets(),
                )
            )
        return GraphSpec(
            name=self.name,
            nodes=nodes,
            edges={k: tuple(v) for k, v in edges.items()},
            branches={k: tuple(v) for k, v in branches.items()},
            barriers=tuple(BarrierSpec(sources=frozenset(s), target=t) for s, t in self._barriers),
            strategies=dict(self.strategies),
            hidden_keys=self.private_keys,
            ephemeral_keys=self.ephemeral_keys,
        )

    def _declared_edges(self) -> list[tuple[str, str, str]]:
        """Every name an edge mentions, with how it was declared (for error messages)."""
        declared = [(s, t, f"add_edge({s!r}, {t!r})") for s, t in self._edges]
        for sources, target in self._barriers:
            how = f"add_edge({list(sources)!r}, {target!r})"
            declared.extend((s, target, how) for s in sources)
        for branch in self._branches:
            for key, target in (branch.path_map or {}).items():
                how = f"add_conditional_edges({branch.source!r}, ...) path_map[{key!r}]"
                declared.append((branch.source, target, how))
            for target in branch.sends:
                how = f"add_conditional_edges({branch.source!r}, ..., sends=[..., {target!r}])"
                declared.append((branch.source, target, how))
            # Declared on its own so that an unknown source is refused even when no path_map
            # entry names it (an empty path_map).
            declared.append((branch.source, END, f"add_conditional_edges({branch.source!r}, ...)"))
        for node in self._nodes.values():
            for target in node.destinations:
                declared.append((node.name, target, f"add_node({node.name!r}, destinations=...)"))
        return declared

    def _view(self) -> GraphView:
        edges: list[EdgeView] = []
        for source in (START, *self._nodes):
            edges.extend(EdgeView(source=s, target=t) for s, t in self._edges if s == source)
            for sources, target in self._barriers:
                if source in sources:
                    edges.append(EdgeView(source=source, target=target))
            for branch in self._branches:
                if branch.source != source:
                    continue
                if branch.path_map is None:
                    targets: list[tuple[str | None, str]] = [(None, t) for t in (*self._nodes, END)]
                else:
                    targets = [
                        (None if key == target else str(key), target)
                        for key, target in branch.path_map.items()
                    ]
                targets += [("Send", t) for t in branch.sends]
                edges.extend(
                    EdgeView(source=source, target=t, label=label, conditional=True)
                    for label, t in targets
                )
            node = self._nodes.get(source)
            if node is not None:
                edges.extend(
                    EdgeView(source=source, target=t, label=node.labels.get(t), conditional=True)
                    for t in node.destinations
                )
        unique = list(dict.fromkeys(edges))
        return GraphView(
            name=self.name,
            nodes=tuple(self._nodes),
            edges=tuple(unique),
            subgraphs=dict(self._subgraphs),
        )

    def __repr__(self) -> str:
        return f"StateGraph({self.name!r}, nodes={list(self._nodes)})"


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's method
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def _takes_config(fn: Callable[..., Any], what: str) -> bool:
    """Whether ``fn`` is called as ``fn(state, config)`` rather than ``fn(state)``.

    The config goes to a second positional parameter that has no default, or is named
    ``config``, or is annotated ``RunnableConfig``. A defaulted one keeps its default: that is
    the loop-variable idiom (``lambda s, n=n: ...``), whose ``n`` must not become the config.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional: list[inspect.Parameter] = []
    variadic = False
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            variadic = True
        elif parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional.append(parameter)
        elif (
            parameter.kind is inspect.Parameter.KEYWORD_ONLY
            and parameter.default is inspect.Parameter.empty
        ):
            raise GraphSetupError(
                f"{what} has a required keyword-only parameter {parameter.name!r}; it is called "
                "as fn(state) or fn(state, config)"
            )
    required = sum(parameter.default is inspect.Parameter.empty for parameter in positional)
    if not positional and not variadic:
        raise GraphSetupError(
            f"{what} takes no arguments; it is called as fn(state) or fn(state, config)"
        )
    if required > 2:
        raise GraphSetupError(
            f"{what} needs {required} arguments; it is called as fn(state) or fn(state, config)"
        )
    if len(positional) < 2:
        return variadic
    second = positional[1]
    return (
        second.default is inspect.Parameter.empty
        or second.name == "config"
        or _names_runnable_config(_annotation(fn, second))
    )


def _annotation(fn: Callable[..., Any], parameter: inspect.Parameter) -> Any:
    """A parameter's annotation, resolved when it can be (``from __future__ import annotations``
    leaves strings)."""
    if isinstance(parameter.annotation, str):
        try:
            return typing.get_type_hints(fn).get(parameter.name, parameter.annotation)
        except Exception:
            return parameter.annotation
    return parameter.annotation


def _names_runnable_config(annotation: Any) -> bool:
    """``RunnableConfig``, ``RunnableConfig | None`` or an unresolved string naming it (ours, or
    another library's class of that name: the parameter's intent is the same)."""
    if isinstance(annotation, str):
        return re.search(r"\bRunnableConfig\b", annotation) is not None
    if getattr(annotation, "__name__", None) == "RunnableConfig":
        return True
    return any(_names_runnable_config(argument) for argument in typing.get_args(annotation))


def _literal_path_map(fn: Callable[..., Any]) -> dict[Hashable, str] | None:
    """A path_map from a router's ``-> Literal["a", "b"]`` annotation, if it has one."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return None
    answer = hints.get("return")
    if typing.get_origin(answer) is typing.Literal:
        names = [a for a in typing.get_args(answer) if isinstance(a, str)]
        return {name: name for name in names} or None
    return None


def _destinations(node: str, destinations: Any) -> tuple[str, ...]:
    """``add_node``'s ``destinations`` as a tuple of names, refusing what cannot be one."""
    if isinstance(destinations, str):
        destinations = (destinations,)
    elif isinstance(destinations, Mapping):  # LangGraph's {node: edge label}: the nodes
        destinations = tuple(destinations)
    if not isinstance(destinations, Iterable):
        raise GraphSetupError(
            f"add_node({node!r}, ..., destinations={destinations!r}): destinations must be a "
            "tuple of node names (or END) that Command(goto=...) may go to, e.g. "
            "destinations=('next', END) (or a dict of node names to edge labels); leave it out "
            "when the node returns no Command"
        )
    names = tuple(destinations)
    for name in names:
        if not isinstance(name, str):
            raise GraphSetupError(
                f"add_node({node!r}, ..., destinations={destinations!r}): {name!r} is not a "
                "node name; destinations must be a tuple of node names (or END)"
            )
        if name == START:
            raise GraphSetupError(
                f"add_node({node!r}, ..., destinations=...): START cannot be a destination "
                "(a run passes START only once, when it begins); name the node to go to instead"
            )
    return names


def _send_targets(source: str, sends: str | Sequence[str]) -> tuple[str, ...]:
    """``add_conditional_edges``'s ``sends`` as a tuple of node names."""
    given: Any = sends
    listed = (given,) if isinstance(given, str) or not isinstance(given, Iterable) else given
    names = tuple(dict.fromkeys(listed))
    for name in names:
        if not isinstance(name, str) or name in (START, END):
            raise GraphSetupError(
                f"add_conditional_edges({source!r}, ..., sends={sends!r}): sends lists the "
                f"nodes the router's Send items go to, and {name!r} is no node name"
            )
    return names


def _check_path_map_targets(source: str, targets: Mapping[Any, Any], *, where: str) -> None:
    """Each path_map value (or listed name) must be one node name or END, never START.

    ``where`` formats a key into how the message names the entry."""
    for key, target in targets.items():
        entry = where.format(key)
        if not isinstance(target, str):
            raise GraphSetupError(
                f"add_conditional_edges({source!r}, ...): {entry} is {target!r}, but each "
                "path_map value must be one node name or END. For a fan-out, map each key to "
                "one node and have the router return a list of keys"
            )
        if target == START:
            raise GraphSetupError(
                f"add_conditional_edges({source!r}, ...): {entry} is START, which a router "
                "cannot route to; name the node to go to instead"
            )


def _names(value: Sequence[str], what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    names = list(value)
    for name in names:
        if not isinstance(name, str):
            raise GraphSetupError(f"CompileConfig.{what} must list node names, got {name!r}")
    return names
