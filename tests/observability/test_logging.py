"""Log records of the library carry the run's ids; the library prints nothing itself."""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any

import pytest

from graph_agent import END, START, CompileConfig, MemorySaver, RunnableConfig, StateGraph
from graph_agent.graph.log_context import LIBRARY_LOGGERS, RunContextFilter
from tests.observability.graphs import failing

PACKAGE = Path(__file__).resolve().parents[2] / "graph_agent"


def test_a_record_logged_in_a_node_carries_the_runs_ids(caplog: pytest.LogCaptureFixture) -> None:
    g = StateGraph("logs")

    def noisy(state: Any) -> dict[str, Any]:
        logging.getLogger("graph_agent.agent").warning("inside")
        return {"x": 1}

    g.add_node("noisy", noisy)
    g.add_edge(START, "noisy").add_edge("noisy", END)
    app = g.compile(CompileConfig(saver=MemorySaver()))
    config = RunnableConfig(thread_id="t-log", metadata={"run_id": "r-7"})
    with caplog.at_level(logging.WARNING, logger="graph_agent"):
        app.invoke({}, config)
        logging.getLogger("graph_agent").warning("outside")
    inside, outside = caplog.records
    assert inside.run_id == "r-7"  # type: ignore[attr-defined]
    assert (inside.thread_id, inside.node, inside.step, inside.checkpoint_ns) == (  # type: ignore[attr-defined]
        "t-log",
        "noisy",
        0,
        "",
    )
    assert (outside.thread_id, outside.run_id, outside.node) == (None, None, None)  # type: ignore[attr-defined]


def test_the_filter_on_a_handler_gives_the_ids_to_a_format_and_keeps_given_extras() -> None:
    record = logging.LogRecord("other", logging.INFO, __file__, 1, "hi", None, None)
    record.run_id = "given"
    assert RunContextFilter().filter(record)
    formatted = logging.Formatter("%(run_id)s %(thread_id)s %(message)s").format(record)
    assert formatted == "given None hi"


def test_every_logger_the_library_uses_carries_the_filter() -> None:
    named: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
                and node.args
            ):
                argument = node.args[0]
                if isinstance(argument, ast.Constant):
                    named.add(argument.value)
                elif isinstance(argument, ast.Name) and argument.id == "__name__":
                    named.add(module)
    assert named <= set(LIBRARY_LOGGERS), named - set(LIBRARY_LOGGERS)
    import graph_agent  # noqa: F401  (installs the filter)

    for name in LIBRARY_LOGGERS:
        assert any(isinstance(f, RunContextFilter) for f in logging.getLogger(name).filters)


def test_a_run_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Exception, match="no"):
        failing("quiet", "no").invoke({})
    assert capsys.readouterr() == ("", "")
