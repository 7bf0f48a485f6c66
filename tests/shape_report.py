"""The package's shape, measured from its code: how its modules import each other, which are
over 800 lines, which functions are over 80, and which modules outside ``graph/`` import the
engine's private ``graph._*`` modules. ``tests/test_package_shape.py`` holds the package to
it; ``python -m tests.shape_report`` prints the offenders (for an issue's before/after note)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

import graph_agent

PACKAGE = Path(graph_agent.__file__).parent

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80

LONG_FUNCTIONS_ALLOWED = {
    # argparse tables: one add_argument call after another, read as a table of the options
    ("graph_agent.cli.main", "build_parser"),
    ("graph_agent.cli.main", "_add_serve_options"),
}
"""The functions that may be longer than :data:`MAX_FUNCTION_LINES`, by module and qualified
name (tables and data literals that read best whole): each one named, never a blanket rule."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_paths() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports() -> nx.DiGraph:
    """module -> the package modules it imports (``from pkg import name`` counts as the
    submodule ``pkg.name`` where there is one, else as ``pkg``). Every import counts: at the
    top, inside functions and under ``TYPE_CHECKING``."""
    paths = module_paths()
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


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_modules(limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """The modules over ``limit`` lines, with their size."""
    sizes = {name: line_count(path) for name, path in module_paths().items()}
    return {name: n for name, n in sizes.items() if n > limit}


def functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method of a module (nested ones too), with its qualified name."""

    def visit(
        node: ast.AST, prefix: str
    ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child
                yield from visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's length: from its ``def`` line to its last line (decorators not counted)."""
    return (node.end_lineno or node.lineno) - node.lineno + 1


def all_function_sizes() -> dict[tuple[str, str], int]:
    """Every function of the package, by (module, qualified name), with its length."""
    sizes: dict[tuple[str, str], int] = {}
    for module, path in module_paths().items():
        for qualname, node in functions(ast.parse(path.read_text(encoding="utf-8"))):
            key = (module, qualname)
            sizes[key] = max(sizes.get(key, 0), function_lines(node))  # overloads, redefinitions
    return sizes


def long_functions(limit: int = MAX_FUNCTION_LINES) -> dict[tuple[str, str], int]:
    """The functions over ``limit`` lines not excepted by name, with their length."""
    return {
        key: n
        for key, n in all_function_sizes().items()
        if n > limit and key not in LONG_FUNCTIONS_ALLOWED
    }


def is_private_engine_module(name: str) -> bool:
    """``graph_agent.graph._x`` (and anything below it): the engine's private machinery."""
    parts = name.split(".")
    return parts[:2] == ["graph_agent", "graph"] and len(parts) > 2 and parts[2].startswith("_")


def is_engine_module(name: str) -> bool:
    return name == "graph_agent.graph" or name.startswith("graph_agent.graph.")


PRIVATE_ENGINE_FACADES = {"graph_agent.node"}
"""The modules outside ``graph/`` that may import ``graph._*``: the public faces of the engine's
machinery (:mod:`graph_agent.node`, for node authors), so that no other module needs to."""


def private_engine_imports() -> list[tuple[str, str]]:
    """(importer, imported) for each module outside ``graph/`` importing a ``graph._*`` module
    (the facades of :data:`PRIVATE_ENGINE_FACADES` left out)."""
    return sorted(
        (source, target)
        for source, target in imports().edges
        if not is_engine_module(source)
        and source not in PRIVATE_ENGINE_FACADES
        and is_private_engine_module(target)
    )


def report() -> str:
    lines = [f"modules over {MAX_MODULE_LINES} lines:"]
    modules = long_modules()
    lines += [f"  {name}: {n}" for name, n in sorted(modules.items(), key=lambda i: -i[1])]
    funcs = long_functions()
    lines.append(f"functions over {MAX_FUNCTION_LINES} lines (exceptions by name left out):")
    lines += [
        f"  {module}.{qualname}: {n}"
        for (module, qualname), n in sorted(funcs.items(), key=lambda i: -i[1])
    ]
    private = private_engine_imports()
    lines.append("imports of graph._* from outside graph/:")
    lines += [f"  {source} -> {target}" for source, target in private]
    lines.append(
        f"totals: {len(modules)} modules, {len(funcs)} functions, {len(private)} imports; "
        f"package {sum(line_count(p) for p in module_paths().values())} lines "
        f"in {len(module_paths())} modules"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
