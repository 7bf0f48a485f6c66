"""``graph-agent draw``: the committed diagrams are what the code draws now."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.cli.conftest import ROOT
from tests.renderers import require

DIAGRAMS = ROOT / "diagrams"


def _regenerate_module():
    spec = importlib.util.spec_from_file_location("regenerate", DIAGRAMS / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REGENERATE = _regenerate_module()
CASES = [
    (stem, spec, fmt, suffix)
    for stem, spec in REGENERATE.TARGETS.items()
    for fmt, suffix in REGENERATE.TEXT_SUFFIXES.items()
]


def _absolute(spec: str) -> str:
    module, _, name = spec.partition(":")
    return f"{ROOT / module}:{name}" if module.endswith(".py") else spec


@pytest.mark.parametrize(
    ("stem", "spec", "fmt", "suffix"), CASES, ids=[f"{c[0]}{c[3]}" for c in CASES]
)
def test_a_committed_diagram_equals_what_draw_prints(cli, stem, spec, fmt, suffix):
    committed = DIAGRAMS / f"{stem}{suffix}"
    assert committed.exists(), f"missing {committed.name}: run python diagrams/regenerate.py"

    xray = ["--xray"] if stem in REGENERATE.XRAY else []
    result = cli("draw", _absolute(spec), "--format", fmt, *xray)

    assert result.code == 0, result.err
    assert result.out == committed.read_text(), (
        f"{committed.name} is stale: run python diagrams/regenerate.py"
    )


def test_every_target_has_an_svg():
    for stem in REGENERATE.TARGETS:
        assert (DIAGRAMS / f"{stem}.svg").read_text().lstrip().startswith("<?xml")


def test_the_regenerate_check_reports_no_stale_diagram():
    assert REGENERATE.main(["--check"]) == 0


def test_ascii_is_printed(cli):
    result = cli("draw", "graph_agent.demo:agent", "-f", "ascii")

    assert "Graph: demo" in result.out and "__model__ -.tools.-> __tool__" in result.out


def test_xray_draws_the_agents_of_a_team_open(cli):
    team = f"{ROOT / 'examples' / 'team.py'}:team.graph"

    closed = cli("draw", team, "-f", "dot")
    opened = cli("draw", team, "-f", "dot", "--xray")

    assert closed.code == opened.code == 0
    assert "cluster" not in closed.out and '"research";' in closed.out
    assert 'subgraph "cluster_1" {' in opened.out and '"research/web/__model__"' in opened.out


def test_the_format_follows_the_output_suffix(cli, tmp_path):
    result = cli("draw", "graph_agent.demo:agent", "-o", "out/demo.puml")

    assert result.code == 0, result.err
    assert result.out.startswith("wrote out/demo.puml (plantuml, ")
    assert (tmp_path / "out" / "demo.puml").read_text().startswith("@startuml")


@pytest.mark.parametrize(("fmt", "magic"), [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_images_are_rendered_with_graphviz(cli, tmp_path, fmt, magic):
    require("dot", "apt-get install graphviz")
    result = cli("draw", "graph_agent.demo:agent", "-o", f"demo.{fmt}")

    assert result.code == 0, result.err
    assert magic in (tmp_path / f"demo.{fmt}").read_bytes()[:400]


def test_without_graphviz_an_image_asks_for_it_in_one_line(cli, monkeypatch):
    monkeypatch.setenv("PATH", "")

    result = cli("draw", "graph_agent.demo:agent", "-f", "svg")

    assert result.code == 1
    assert result.error_lines == [
        "error: --format svg needs Graphviz's `dot` program, which is not installed",
        "hint: install graphviz (apt install graphviz, brew install graphviz, winget install "
        "graphviz), or use --format mermaid|plantuml|dot|ascii",
    ]
    assert Path("demo.svg").exists() is False
