"""What an assistant's config and context mean for its runs (``serve.assistant_config``):
one given alone fills the other, a patch replaces what it sends, and a run's settings are the
assistant's with the run's over them."""

from __future__ import annotations

import pytest

from graph_agent.serve.assistant_config import (
    ConfigProblem,
    checked_config,
    patched_settings,
    run_settings,
    synced,
)


def test_a_configurable_or_a_context_given_alone_fills_the_other() -> None:
    assert synced({"configurable": {"a": 1}}, {}) == ({"configurable": {"a": 1}}, {"a": 1})
    assert synced({"recursion_limit": 3}, {"a": 1}) == (
        {"recursion_limit": 3, "configurable": {"a": 1}},
        {"a": 1},
    )
    both = ({"configurable": {"a": 1}}, {"b": 2})
    assert synced(*both) == both
    assert synced({}, {}) == ({}, {})


def test_a_patch_replaces_what_it_sends_and_keeps_the_rest() -> None:
    config, context = {"configurable": {"a": 1}, "recursion_limit": 5}, {"a": 1}
    assert patched_settings(config, context, None, None) == (config, context)
    assert patched_settings(config, context, None, {"b": 2}) == (
        {"recursion_limit": 5, "configurable": {"b": 2}},
        {"b": 2},
    )
    assert patched_settings(config, context, {"recursion_limit": 9}, None) == (
        {"recursion_limit": 9},
        {"a": 1},
    )
    assert patched_settings(config, context, {"configurable": {"c": 3}}, None) == (
        {"configurable": {"c": 3}},
        {"c": 3},
    )


def test_a_runs_settings_win_over_the_assistants_key_by_key() -> None:
    context, limit = run_settings(
        {"configurable": {"model": "a", "temperature": 1}, "recursion_limit": 7},
        {"model": "a", "temperature": 1, "tone": "dry"},
        {"configurable": {"temperature": 0, "thread_id": "t", "__pregel_x": 1}},
        {"tone": "warm"},
    )
    assert context == {"model": "a", "temperature": 0, "tone": "warm"}
    assert limit == 7
    assert run_settings({"recursion_limit": 7}, {}, {"recursion_limit": 2}, {})[1] == 2
    assert run_settings({}, {}, {}, {}) == ({}, None)


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ([1], "config must be a JSON object"),
        ({"configurable": "x"}, "config.configurable must be a JSON object"),
        ({"recursion_limit": 0}, "config.recursion_limit must be a positive integer"),
        ({"recursion_limit": True}, "config.recursion_limit must be a positive integer"),
    ],
)
def test_a_config_that_does_not_fit_is_named(config: object, problem: str) -> None:
    with pytest.raises(ConfigProblem, match=problem):
        checked_config(config)
