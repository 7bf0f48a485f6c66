"""The package's module map, made from the code: each module and the first sentence of its
docstring, in ``MODULES.md`` (README's "Layout" points there). ``python -m tests.module_map``
rewrites it; ``tests/test_module_map.py`` checks that it is current."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

import graph_agent

ROOT = Path(graph_agent.__file__).parent.parent
MAP = ROOT / "MODULES.md"
HEADER = """# Module map

Made from the code by `python -m tests.module_map` (a test checks it is current): each module of
`graph_agent` and the first sentence of its docstring. DESIGN §2 tells how the rooms depend on
each other: `graph/` (the engine; modules starting with `_` are its private machinery) imports
nothing else of the package, `checkpoint/` plugs into it through `graph/saver.py`, and `agent/`
builds graphs with the public API.
"""


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, without reST markup, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    text = re.sub(r":[a-z]+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = text.replace("``", "")
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return first.rstrip(".:")


def render() -> str:
    """MODULES.md: per package folder, each module and what it is for."""
    package = Path(graph_agent.__file__).parent
    paths = sorted(package.rglob("*.py"), key=lambda p: (p.parent != package, str(p)))
    out = [HEADER]
    folder = None
    for path in paths:
        if path.parent != folder:
            folder = path.parent
            out.append(f"\n## {folder.relative_to(ROOT)}/\n")
        text = f"- `{path.name}`: {summary(path)}"
        out.append(textwrap.fill(text, width=100, subsequent_indent="  "))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    MAP.write_text(render(), encoding="utf-8")
    sys.exit(0)
