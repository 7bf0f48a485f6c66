"""Compile-time checks of a graph's structure (networkx, imported only when compiling).

Each kind of problem raises one :class:`GraphSetupError` that names every offending node or
edge and says how to fix it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from graph_agent.graph.errors import GraphSetupError
from graph_agent.graph.types import END, START


def validate(
    *,
    name: str,
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str]],
    declared: Sequence[tuple[str, str, str]],
    has_saver: bool,
    interrupt_before: Sequence[str],
    interrupt_after: Sequence[str],
) -> None:
    """Raise :class:`GraphSetupError` for the first kind of problem the graph has.

    ``edges`` are the drawn edges (routers without a path_map lead everywhere); ``declared``
    pairs each (source, target) with the call that declared it.
    """
    known = set(nodes)
    _check_unknown_names(known, declared)
    if not any(source == START for source, _, _ in declared):
        first = nodes[0] if nodes else "first_node"
        raise GraphSetupError(
            f"graph {name!r} has no entry edge: add g.add_edge(START, {first!r}) (or "
            "add_conditional_edges(START, ...)) so the run knows where to begin"
        )
    check_breakpoints(known, has_saver, interrupt_before, interrupt_after)
    _check_reachability(name, nodes, edges)


def _suggest(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_unknown_names(known: set[str], declared: Sequence[tuple[str, str, str]]) -> None:
    kinds: dict[str, list[str]] = {"edge": [], "path_map": [], "destinations": []}
    for source, target, how in declared:
        kind = next((k for k in ("path_map", "destinations") if k in how), "edge")
        if source != START and source not in known:
            kinds[kind].append(f"{how}: unknown node {source!r}{_suggest(source, known)}")
        if target != END and target not in known:
            kinds[kind].append(f"{how}: unknown node {target!r}{_suggest(target, known)}")
    fixes = {
        "edge": "add the missing nodes with add_node(name, fn) or fix the edge",
        "path_map": "every path_map value must be a node name or END",
        "destinations": "a node's destinations must be node names or END",
    }
    for kind, problems in kinds.items():
        if problems:
            unique = list(dict.fromkeys(problems))
            raise GraphSetupError(
                f"{kind} names an unknown node: " + "; ".join(unique) + f". Fix: {fixes[kind]}"
            )


def check_breakpoints(
    known: set[str],
    has_saver: bool,
    before: Sequence[str],
    after: Sequence[str],
    owner: str = "CompileConfig.",
) -> None:
    """Raise :class:`GraphSetupError` for a breakpoint on no node (its message starts with
    ``owner`` and the field's name), or for breakpoints without a saver."""
    for what, names in (("interrupt_before", before), ("interrupt_after", after)):
        unknown = [n for n in names if n not in known]
        if unknown:
            listed = ", ".join(f"{n!r}{_suggest(n, known)}" for n in unknown)
            raise GraphSetupError(f"{owner}{what} names unknown node(s): {listed}")
        if names and not has_saver:
            raise GraphSetupError(
                f"{owner}{what} needs a checkpoint saver to pause and resume: "
                f"CompileConfig(saver=MemorySaver(), {what}=[...])"
            )


def _check_reachability(name: str, nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> None:
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from([START, *nodes, END])
    graph.add_edges_from(edges)
    reachable = nx.descendants(graph, START)
    unreachable = [n for n in nodes if n not in reachable]
    if unreachable:
        listed = ", ".join(map(repr, unreachable))
        raise GraphSetupError(
            f"graph {name!r}: node(s) {listed} can never run: no path from START reaches them. "
            "Add an edge into each (add_edge, add_conditional_edges or a destinations= entry), "
            "or remove them"
        )
    finishing = nx.ancestors(graph, END)
    stuck = [n for n in nodes if n not in finishing]
    if stuck:
        listed = ", ".join(map(repr, stuck))
        raise GraphSetupError(
            f"graph {name!r}: node(s) {listed} have no path to END, so a run through them "
            "could never finish. Add an edge out of each, e.g. add_edge(node, END)"
        )
