"""``ModelError`` and the model/tool-call events live with the models (issue 34): the engine
(``graph/``) keeps only what it raises and dispatches events without knowing them, while the
old import paths still give the very same objects."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import graph_agent
import graph_agent.graph.errors as engine_errors
import graph_agent.graph.listeners as engine_listeners
import graph_agent.models
import graph_agent.observability
from graph_agent.graph.errors import GraphAgentError
from graph_agent.graph.listeners import ListenerEvent
from graph_agent.graph.policies import default_retry_on
from graph_agent.models.errors import ModelError, ModelServerError
from graph_agent.models.events import ModelCallEvent, ToolCallEvent


def test_model_error_and_the_call_events_are_defined_with_the_models():
    assert ModelError.__module__ == "graph_agent.models.errors"
    assert ModelCallEvent.__module__ == ToolCallEvent.__module__ == "graph_agent.models.events"
    assert issubclass(ModelError, GraphAgentError)
    assert issubclass(ModelError, RuntimeError)
    assert issubclass(ModelCallEvent, ListenerEvent)
    assert issubclass(ToolCallEvent, ListenerEvent)
    assert "ModelError" not in vars(engine_errors)
    assert "ModelCallEvent" not in vars(engine_listeners)
    assert "ToolCallEvent" not in vars(engine_listeners)


def test_the_old_import_paths_give_the_same_objects():
    from graph_agent.graph.errors import ModelError as old_error
    from graph_agent.graph.listeners import ModelCallEvent as old_model_event
    from graph_agent.graph.listeners import ToolCallEvent as old_tool_event

    assert old_error is ModelError
    assert graph_agent.ModelError is ModelError
    assert graph_agent.models.ModelError is ModelError
    assert old_model_event is ModelCallEvent
    assert old_tool_event is ToolCallEvent
    assert graph_agent.observability.ModelCallEvent is ModelCallEvent
    assert graph_agent.observability.ToolCallEvent is ToolCallEvent


def test_a_name_that_never_was_there_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchError"):
        _ = engine_errors.NoSuchError
    with pytest.raises(AttributeError, match="NoSuchEvent"):
        _ = engine_listeners.NoSuchEvent
    with pytest.raises(ImportError):
        from graph_agent.graph.errors import NoSuchError  # noqa: F401


def test_the_default_retry_policy_still_knows_model_errors():
    assert default_retry_on(ModelError("bad gateway", status_code=502))
    assert default_retry_on(ModelServerError("overloaded"))
    assert not default_retry_on(ModelError("refused", status_code=400))
    assert not default_retry_on(ModelError("no status"))

    class Flaky(ModelError):
        transient = True

    assert default_retry_on(Flaky("try again"))


def test_running_a_graph_with_a_retry_policy_loads_no_model_code():
    """The engine reads a model's error only when one was raised: a graph that never calls a
    model does not load ``graph_agent.models``, not even to decide on a retry."""
    script = textwrap.dedent(
        """
        import sys
        from graph_agent import StateGraph, START, END, RetryPolicy

        def fails(state):
            raise ValueError("a bug, not worth retrying")

        g = StateGraph("g")
        g.add_node("fails", fails, retry=RetryPolicy(max_attempts=3, initial_interval=0))
        g.add_edge(START, "fails").add_edge("fails", END)
        try:
            g.compile().invoke({"x": 1})
        except Exception as exc:
            print(type(exc).__name__)
        print(sorted(m for m in sys.modules if m.startswith("graph_agent.models")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=30
    )
    assert done.stdout.split("\n")[:2] == ["NodeError", "[]"], done.stdout + done.stderr
