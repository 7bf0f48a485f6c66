"""The step machine: which nodes run, how their writes merge, where the run goes next.

Everything here is pure: no threads, no awaits, no saver calls. :class:`RunState` holds one run's
live state and applies supersteps to it; the drivers in ``_drive.py`` carry out nodes (with
``_run_tasks.py``) and I/O around it (see ``_flow.py`` for the order of events in a call).

A superstep (BSP): the nodes triggered in step *n* run in step *n+1*, each seeing the same state,
and each :class:`~graph_agent.graph.types.Send` of step *n* runs as a task of its own, seeing its
input; their writes are merged in ``add_node`` order (a node's Send tasks after its plain task,
in Send order); then every node that ran is routed (static edges, routers reading the merged
state, ``Command.goto``, barriers) to decide the next step's nodes and Sends. A deferred node
(``add_node(..., defer=True)``) waits for a step in which nothing else would run.
What a node's return becomes is ``_writes.py``'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_agent.graph._sends import (
    DEFERRED,
    decode_sends,
    encode_sends,
    plain_next,
    route_answers,
)
from graph_agent.graph._writes import short as _short
from graph_agent.graph.errors import InvalidUpdateError, NodeError, exception_text
from graph_agent.graph.saver import SENDS_KEY, Blob
from graph_agent.graph.state import KeyStore, KeyStrategy, OverAllState, ReplaceStrategy
from graph_agent.graph.types import END, START, RunnableConfig, Send

_REPLACE = ReplaceStrategy()


class DualNode:
    """A node with a sync and an async face that do the same work: ``invoke``/``stream`` call
    it, ``ainvoke``/``astream`` await :meth:`acall` on the caller's event loop instead of
    running ``__call__`` on a worker thread (the agent's model and tool nodes, whose model
    calls and async tools then need no thread). Both take ``(state, config)``.
    """

    def __call__(self, state: OverAllState, config: RunnableConfig) -> Any:
        raise NotImplementedError

    async def acall(self, state: OverAllState, config: RunnableConfig) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSpec:
    """A node as compiled: its callable and how to call it."""

    name: str
    fn: Callable[..., Any]
    index: int
    pass_config: bool
    is_async: bool
    destinations: frozenset[str] = frozenset()
    afn: Callable[..., Awaitable[Any]] | None = None
    """The async face of a :class:`DualNode` (called like ``fn``), which the async driver
    awaits in place of ``fn``; ``None`` for other nodes."""
    defer: bool = False
    """Runs only in a step in which no other task would run (``add_node(..., defer=True)``)."""
    policy: Any = None
    """Its retry/timeout/cache/error-handler policy (a ``_policy_node.NodePolicy``), when it
    has one; ``fn`` (and ``afn``) then run under it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BranchSpec:
    """A conditional edge: ``fn(state[, config])`` answers path-map keys or node names."""

    source: str
    fn: Callable[..., Any]
    path_map: Mapping[Any, str] | None
    pass_config: bool
    sends: frozenset[str] | None = None
    """The nodes its :class:`Send` items may go to: those named in ``sends=`` or its path_map;
    ``None`` when it declared neither (any node)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BarrierSpec:
    """``add_edge([sources], target)``: target runs once every source ran since it last ran."""

    sources: frozenset[str]
    target: str
    key: str = field(init=False)
    """How checkpoints name the barrier: ``"b+c->join"``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", "+".join(sorted(self.sources)) + "->" + self.target)


@dataclass(frozen=True, kw_only=True)
class GraphSpec:
    """Everything the engine needs to know about a compiled graph."""

    name: str
    nodes: Mapping[str, NodeSpec]
    edges: Mapping[str, tuple[str, ...]]
    branches: Mapping[str, tuple[BranchSpec, ...]]
    barriers: tuple[BarrierSpec, ...]
    strategies: Mapping[str, KeyStrategy]
    hidden_keys: frozenset[str] = frozenset()
    ephemeral_keys: frozenset[str] = frozenset()
    barriers_from: Mapping[str, tuple[BarrierSpec, ...]] = field(init=False)
    barriers_into: Mapping[str, tuple[BarrierSpec, ...]] = field(init=False)
    kept_keys: frozenset[str] = field(init=False)
    """The keys whose strategy keeps them its own way (:meth:`KeyStrategy.store`): append keys."""
    rank: Mapping[str, int] = field(init=False)
    fixed_next: Mapping[str, tuple[str, ...]] = field(init=False)
    """The next step of a node that only has static edges out and no barrier: the usual
    routing of one node, without sets (see :meth:`RunState.route`)."""
    lone_branch: Mapping[str, BranchSpec] = field(init=False)
    """The router of a node whose only way out is one conditional edge, and no barrier."""
    deferred: frozenset[str] = field(init=False)
    """The deferred nodes; a graph with any routes every step the general way."""
    policies: bool = field(init=False)
    """Some node has a policy: the flow then reports attempts (metadata, outputs)."""

    def __post_init__(self) -> None:
        by_source: dict[str, list[BarrierSpec]] = {}
        by_target: dict[str, list[BarrierSpec]] = {}
        for barrier in self.barriers:
            for source in sorted(barrier.sources):
                by_source.setdefault(source, []).append(barrier)
            by_target.setdefault(barrier.target, []).append(barrier)
        object.__setattr__(self, "barriers_from", {k: tuple(v) for k, v in by_source.items()})
        object.__setattr__(self, "barriers_into", {k: tuple(v) for k, v in by_target.items()})
        kept = frozenset(k for k, s in self.strategies.items() if s.store() is not None)
        object.__setattr__(self, "kept_keys", kept)
        object.__setattr__(self, "rank", {name: node.index for name, node in self.nodes.items()})
        deferred = frozenset(name for name, node in self.nodes.items() if node.defer)
        object.__setattr__(self, "deferred", deferred)
        policies = any(node.policy is not None for node in self.nodes.values())
        object.__setattr__(self, "policies", policies)
        in_barrier = set(by_source) | set(by_target)
        simple = [name for name in [START, *self.nodes] if name not in in_barrier]
        if deferred:  # a step's next nodes depend on whether others would run beside them
            simple = []
        fixed = {
            name: self.order(set(self.edges.get(name, ())))
            for name in simple
            if name not in self.branches
        }
        object.__setattr__(self, "fixed_next", fixed)
        lone = {
            name: self.branches[name][0]
            for name in simple
            if len(self.branches.get(name, ())) == 1 and name not in self.edges
        }
        object.__setattr__(self, "lone_branch", lone)

    def order(self, names: Sequence[str] | set[str]) -> tuple[str, ...]:
        """Node names in ``add_node`` order (END dropped)."""
        if len(names) == 1:  # the common step: one node triggered one node
            (name,) = names
            return () if name == END else (name,)
        return tuple(sorted((n for n in names if n != END), key=self.rank.__getitem__))


_new_blob: Callable[[type[Blob], tuple[str, Any, str | None]], Blob] = tuple.__new__
"""``Blob(*fields)`` without the named tuple's Python-level ``__new__``: one is made per
checkpoint and changed key."""


class RunState:
    """One run's live state and position, advanced one superstep at a time.

    ``values`` is replaced (never mutated) each step, so an :class:`OverAllState` built on it
    stays what it was. Keys whose strategy keeps them its own way (append keys, in an
    :class:`~graph_agent.graph.state.AppendKey`) live in ``stores``, and appear in ``values`` as
    the store's view (for an append key, a fixed-length :class:`SeqView` snapshot).

    ``next`` and ``sends`` are the next step's tasks: the nodes triggered (one task each), and
    the Sends (one task each, with their inputs). A checkpoint stores the Sends under the key
    :data:`~graph_agent.graph.saver.SENDS_KEY`, and their nodes after the others in its
    ``next``; ``values`` never holds that key.
    """

    def __init__(self, spec: GraphSpec) -> None:
        self.spec = spec
        self.values: dict[str, Any] = {}
        self.stores: dict[str, KeyStore] = {}
        self.step = -1
        self.next: tuple[str, ...] = ()
        self.sends: Sequence[Send] = ()
        self.sends_changed = False
        """``sends`` differ from those of the checkpoint the run stands on."""
        self.barrier_seen: dict[str, set[str]] = {}
        self.versions: dict[str, str] = {}
        self.dirty: set[str] = set()
        self._state: OverAllState | None = None
        self._state_of: dict[str, Any] | None = None  # the values dict _state shows

    def load(
        self,
        values: Mapping[str, Any],
        *,
        step: int,
        next_nodes: Sequence[str],
        versions: Mapping[str, str],
        barriers: Mapping[str, Sequence[str]],
        chains: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    ) -> None:
        """Start from a stored checkpoint's state (``chains``: its ``Checkpoint.chains``)."""
        kept_keys, strategies = self.spec.kept_keys, self.spec.strategies
        self.values = {}
        self.stores = {}
        chains = chains or {}
        for key, value in values.items():
            store = (
                strategies[key].store(value, versions.get(key), chains.get(key))
                if key in kept_keys
                else None
            )
            if store is not None:
                self.stores[key] = store
                self.values[key] = store.view()
            else:
                self.values[key] = value
        self.step = step
        stored_sends = self.values.pop(SENDS_KEY, None)
        self.sends = decode_sends(stored_sends) if stored_sends else ()
        self.sends_changed = False
        if self.sends:
            next_nodes = plain_next(next_nodes, self.sends)
        self.next = tuple(n for n in next_nodes if n in self.spec.nodes)
        self.versions = dict(versions)
        self.barrier_seen = {k: set(v) for k, v in barriers.items()}
        self.dirty = set()

    def next_nodes(self) -> tuple[str, ...]:
        """The next step's nodes as a checkpoint stores them: the Sends' nodes last."""
        if not self.sends:
            return self.next
        return (*self.next, *(send.node for send in self.sends))

    def take_sends(self) -> Sequence[Send]:
        """The Sends to run now: the step that runs them is under way, so they are no longer
        the next step's (the next checkpoint drops them)."""
        sends, self.sends = self.sends, ()
        self.sends_changed = True
        return sends

    def add_sends(self, sends: Sequence[Send]) -> None:
        """Sends a router or a ``Command.goto`` gave: the next step runs them, in order."""
        self.sends = [*self.sends, *sends]
        self.sends_changed = True

    def state(self) -> OverAllState:
        """A read-only view of ``values``; one per ``values`` dict (views are immutable)."""
        if self._state is None or self._state_of is not self.values:
            self._state = OverAllState(self.values, hidden=self.spec.hidden_keys)
            self._state_of = self.values
        return self._state

    def apply_writes(self, writes: Sequence[tuple[str, Mapping[str, Any]]], step: int) -> None:
        """Merge the writes of one superstep, given in merge order, into a new ``values``."""
        values = dict(self.values)
        strategies, kept_keys, dirty = self.spec.strategies, self.spec.kept_keys, self.dirty
        replaced_by: dict[str, str] = {}
        for node, update in writes:
            for key, new in update.items():
                strategy = strategies.get(key, _REPLACE)
                if strategy is _REPLACE or type(strategy) is ReplaceStrategy:
                    if key in replaced_by:
                        raise InvalidUpdateError(
                            f"nodes {replaced_by[key]!r} and {node!r} both wrote the key {key!r} "
                            f"in step {step}; a replaced key takes one write per step: give it "
                            "an AppendStrategy/MergeStrategy or a merge callable in "
                            "StateGraph(key_strategies=...), or route the nodes into "
                            "different steps",
                            node=node,
                            step=step,
                        )
                    replaced_by[key] = node
                    values[key] = new
                elif key in kept_keys:
                    values[key] = self._kept_write(key, new, node, step)
                else:
                    values[key] = self._merge(strategy, key, values.get(key), new, node, step)
                dirty.add(key)
        self.values = values

    def _kept_write(self, key: str, new: Any, node: str, step: int) -> Any:
        """A write to a key its strategy keeps (an append key): the store takes it."""
        store = self.stores.get(key)
        if store is None:
            store = self.spec.strategies[key].store()
            assert store is not None  # an append key's strategy keeps it
            self.stores[key] = store
        try:
            return store.write(new)
        except (KeyError, TypeError) as exc:  # an unknown RemoveMessage id, an unhashable id
            reason = exc.args[0] if exc.args else exc
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) wrote to {key!r}: {reason}", node=node, step=step
            ) from exc

    @staticmethod
    def _merge(strategy: KeyStrategy, key: str, old: Any, new: Any, node: str, step: int) -> Any:
        try:
            return strategy.merge(old, new)
        except Exception as exc:
            raise InvalidUpdateError(
                f"node {node!r} (step {step}) wrote to {key!r}, and its strategy {strategy!r} "
                f"could not merge {_short(new)} into {_short(old)}: {exception_text(exc)}",
                node=node,
                step=step,
            ) from exc

    def route(
        self, ran: Sequence[tuple[str, tuple[str | Send, ...]]], config: RunnableConfig
    ) -> None:
        """Decide the next step's nodes and Sends from the nodes that just ran (with their
        gotos), each node once (see ``_sends.once_per_node``). The Sends of the step that ran
        must have been taken (:meth:`take_sends`)."""
        spec = self.spec
        if len(ran) == 1 and not ran[0][1]:  # the usual step: one node ran, no goto
            node = ran[0][0]
            fixed = spec.fixed_next.get(node)
            if fixed is not None:
                self.next = fixed
                self._drop_ephemeral()
                return
            branch = spec.lone_branch.get(node)
            if branch is not None:
                targets = self.evaluate(branch, self.state(), config)
                if len(targets) == 1:
                    name = targets[0]
                    self.next = () if name == END else (name,)
                else:
                    self.next = spec.order(set(targets))
                self._drop_ephemeral()
                return
        edges, branches, barriers_from = spec.edges, spec.branches, spec.barriers_from
        triggered: set[str] = set()
        state: OverAllState | None = None
        if spec.barriers:
            for node, _ in ran:
                for barrier in spec.barriers_into.get(node, ()):
                    self.barrier_seen.pop(barrier.key, None)
        for node, goto in ran:
            if node in edges:
                triggered.update(edges[node])
            if goto:
                names = [target for target in goto if type(target) is str]
                triggered.update(names)
                if len(names) < len(goto):
                    self.add_sends([target for target in goto if isinstance(target, Send)])
            if node in branches:
                for branch in branches[node]:
                    if state is None:
                        state = self.state()
                    triggered.update(self.evaluate(branch, state, config))
            if node in barriers_from:
                for barrier in barriers_from[node]:
                    seen = self.barrier_seen.setdefault(barrier.key, set())
                    seen.add(node)
                    if seen >= barrier.sources:
                        triggered.add(barrier.target)
                        del self.barrier_seen[barrier.key]
        if spec.deferred:
            self._hold_deferred(triggered)
        if len(triggered) == 1:  # one node triggered one node
            (name,) = triggered
            self.next = () if name == END else (name,)
        else:
            self.next = spec.order(triggered)
        self._drop_ephemeral()

    def _hold_deferred(self, triggered: set[str]) -> None:
        """Deferred nodes run in a step with no other task: those triggered wait (in
        ``barrier_seen``, so that checkpoints keep them) while other nodes or Sends are due."""
        waiting = self.barrier_seen.pop(DEFERRED, set())
        waiting.update(triggered.intersection(self.spec.deferred))
        if not waiting:
            return
        triggered.difference_update(waiting)
        if self.sends or any(name != END for name in triggered):
            self.barrier_seen[DEFERRED] = waiting
        else:
            triggered.update(waiting)

    def _drop_ephemeral(self) -> None:
        """Ephemeral keys are read by this step's routers, then gone: never stored, returned
        or streamed."""
        values, dirty = self.values, self.dirty
        for key in self.spec.ephemeral_keys:
            if key in values:  # whatever its value, None included: a dirty key gets stored
                del values[key]
                dirty.discard(key)

    def route_from_start(self, config: RunnableConfig) -> None:
        self.barrier_seen = {}
        if self.sends:
            self.take_sends()
        self.route(((START, ()),), config)

    def drop_sends(self) -> None:
        """Forget the next step's Sends (a new run, or a state update routing anew)."""
        if self.sends:
            self.take_sends()

    def evaluate(
        self, branch: BranchSpec, state: OverAllState, config: RunnableConfig
    ) -> tuple[str, ...]:
        """Run a router and map its answer to node names; user errors become ``NodeError``."""
        source, step = branch.source, self.step
        try:
            answer = branch.fn(state, config) if branch.pass_config else branch.fn(state)
        except Exception as exc:
            raise NodeError(
                f"the router on {source!r} raised {type(exc).__name__}: {exception_text(exc)} "
                f"(step {step})",
                node=source,
                step=step,
            ) from exc
        answers = answer if isinstance(answer, list | tuple) else (answer,)
        if branch.path_map is None:
            for name in answers:
                if name != END and (not isinstance(name, str) or name not in self.spec.nodes):
                    return self._routed_otherwise(branch, answers)
            return tuple(answers)
        targets = []
        for key in answers:
            try:
                target = branch.path_map.get(key)
            except TypeError:  # an unhashable answer is no key
                target = None
            if target is None:
                return self._routed_otherwise(branch, answers)
            targets.append(target)
        return tuple(targets)

    def _routed_otherwise(self, branch: BranchSpec, answers: Sequence[Any]) -> tuple[str, ...]:
        """A router's answer that is not only known names or keys: Sends (taken into
        :attr:`sends`), or a mistake (an :class:`InvalidUpdateError` saying what to fix)."""
        targets, sends = route_answers(branch, answers, self.spec.nodes, self.step)
        if sends:
            self.add_sends(sends)
        return targets

    def take_blobs(self, checkpoint_id: str) -> dict[str, Blob]:
        """The blobs a new checkpoint must store: only the keys that changed since the last one,
        each as its strategy's storage contract says (:meth:`KeyStrategy.store`): a key its
        strategy keeps (an append key) decides what it stores (the items appended since, say,
        or nothing); any other key stores its new value whole."""
        blobs: dict[str, Blob] = {}
        stores, versions = self.stores, self.versions
        for key in self.dirty:
            store = stores.get(key)
            if store is None:
                blobs[key] = _new_blob(Blob, ("full", self.values[key], None))
            else:
                blob = store.blob(checkpoint_id, versions.get(key))
                if blob is None:  # nothing to store (a write of []): the version stays
                    continue
                blobs[key] = blob
            versions[key] = checkpoint_id
        self.dirty = set()
        if self.sends_changed:
            self.sends_changed = False
            if self.sends:
                blobs[SENDS_KEY] = _new_blob(Blob, ("full", encode_sends(self.sends), None))
                versions[SENDS_KEY] = checkpoint_id
            else:
                versions.pop(SENDS_KEY, None)
        return blobs
