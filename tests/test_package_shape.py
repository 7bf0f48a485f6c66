"""The package's shape: its modules import each other one way (no cycle, counting every
import: at the top, inside functions and under ``TYPE_CHECKING``, so a lazy or type-only import
cannot hide one); ``graph/`` never imports ``checkpoint/``, ``agent/`` or ``models/`` (savers
plug into the engine through ``graph/saver.py``); no engine module is over 600 lines; no
module outside ``graph/`` imports the engine's private ``graph._*`` modules (it imports
:mod:`graph_agent.node` or a public ``graph/`` module); no module of the package is over 800
lines and no function over 80 (exceptions by name, in ``tests/shape_report.py``)."""

from __future__ import annotations

import ast
import textwrap

import networkx as nx

from tests.shape_report import (
    LONG_FUNCTIONS_ALLOWED,
    MAX_FUNCTION_LINES,
    MAX_MODULE_LINES,
    PACKAGE,
    PRIVATE_ENGINE_FACADES,
    all_function_sizes,
    functions,
    imports,
    is_private_engine_module,
    long_functions,
    long_modules,
    module_paths,
    private_engine_imports,
)


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


def test_the_walk_sees_imports_of_private_engine_modules_however_written():
    """Every spelling of an import of ``graph._*`` is an edge the check below sees: at the top,
    inside a function, under ``TYPE_CHECKING``, ``import a.b._c`` and ``from a.b import _c``."""
    assert is_private_engine_module("graph_agent.graph._drive")
    assert not is_private_engine_module("graph_agent.graph.task")
    assert not is_private_engine_module("graph_agent.graph")
    assert not is_private_engine_module("graph_agent._graph")
    graph = imports()
    # graph_agent.node imports graph._engine at its top; the engine's own modules import each
    # other's private parts inside functions and under TYPE_CHECKING
    assert graph.has_edge("graph_agent.node", "graph_agent.graph._engine")
    private_edges = [(s, t) for s, t in graph.edges if is_private_engine_module(t)]
    assert len(private_edges) > 20


def test_no_module_outside_the_engine_imports_its_private_modules():
    """``graph._*`` is the engine's machinery: the agent, the tools, MCP, the CLI and the server
    use :mod:`graph_agent.node` and the public ``graph/`` modules instead (issue 34)."""
    assert set(module_paths()) >= PRIVATE_ENGINE_FACADES
    offenders = private_engine_imports()
    assert offenders == [], "modules outside graph/ importing graph._*:\n" + "\n".join(
        f"  {source} imports {target}" for source, target in offenders
    )


def test_no_module_of_the_package_is_over_800_lines():
    """A reader holds one module at a time (issue 34): split a bigger one by what it does."""
    offenders = long_modules()
    assert offenders == {}, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(
        f"  {name}: {n} lines" for name, n in sorted(offenders.items(), key=lambda i: -i[1])
    )
    assert len(module_paths()) > 100


def test_no_function_of_the_package_is_over_80_lines():
    """A function reads on one screen or two (issue 34); the exceptions are named one by one
    in ``LONG_FUNCTIONS_ALLOWED`` (argparse tables), never by a blanket rule."""
    offenders = long_functions()
    assert offenders == {}, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(
        f"  {module}.{qualname}: {n} lines"
        for (module, qualname), n in sorted(offenders.items(), key=lambda i: -i[1])
    )


def test_every_function_excepted_from_the_length_rule_exists():
    """An exception names a function that is there: a renamed or removed one must not leave a
    stale exception behind for another function to hide under."""
    sizes = all_function_sizes()
    assert set(sizes) >= LONG_FUNCTIONS_ALLOWED, LONG_FUNCTIONS_ALLOWED - set(sizes)


def test_function_lengths_are_measured_from_def_to_last_line_with_qualified_names():
    tree = ast.parse(
        textwrap.dedent(
            """
            @decorator
            def top(a,
                    b):
                return a


            class Box:
                async def method(self):
                    def inner():
                        pass
                    return inner
            """
        )
    )
    from tests.shape_report import function_lines

    found = {name: function_lines(node) for name, node in functions(tree)}
    assert found == {"top": 3, "Box.method": 4, "Box.method.<locals>.inner": 2}
