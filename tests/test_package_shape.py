"""The package's shape: its modules import each other one way (no cycle, counting every
import: at the top, inside functions and under ``TYPE_CHECKING``, so a lazy or type-only import
cannot hide one); ``graph/`` never imports ``checkpoint/``, ``agent/`` or ``models/`` (savers
plug into the engine through ``graph/saver.py``); no engine module is over 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import graph_agent

PACKAGE = Path(graph_agent.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> nx.DiGraph:
    """module -> the package modules it imports (``from pkg import name`` counts as the
    submodule ``pkg.name`` where there is one, else as ``pkg``)."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.append(submodule if submodule in paths else base)
            graph.add_edges_from((name, t) for t in targets if t in paths and t != name)
    return graph


def test_the_walk_sees_the_imports_it_must():
    graph = imports()
    assert graph.has_edge("graph_agent.graph._flow", "graph_agent.graph._engine")
    assert graph.has_edge("graph_agent.checkpoint.base", "graph_agent.graph.saver")
    assert graph.number_of_edges() > 100


def test_no_module_imports_itself_back():
    cycles = [" -> ".join([*cycle, cycle[0]]) for cycle in nx.simple_cycles(imports())]
    assert cycles == [], "import cycles:\n" + "\n".join(sorted(cycles, key=len))


def test_the_engine_depends_on_no_saver_and_no_agent():
    graph = imports()
    engine = [name for name in graph if name.startswith("graph_agent.graph.")]
    reached = set().union(*(nx.descendants(graph, name) for name in engine))
    outside = sorted(
        name
        for name in reached
        if name.startswith(("graph_agent.checkpoint", "graph_agent.agent", "graph_agent.models"))
    )
    assert outside == []


def test_no_module_of_the_engine_is_over_600_lines():
    """A reader holds one piece of the engine at a time (issue 19)."""
    sizes = {
        path.name: len(path.read_text(encoding="utf-8").splitlines())
        for path in (PACKAGE / "graph").glob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 600} == {}
    assert len(sizes) > 10
