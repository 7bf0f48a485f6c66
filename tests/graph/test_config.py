"""RunnableConfig: what a call accepts, and how a malformed config is refused."""

from __future__ import annotations

import dataclasses

import pytest

from graph_agent import RunnableConfig


def test_an_empty_thread_id_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"thread_id=''\) names no thread.*non-empty id"):
        RunnableConfig(thread_id="")


def test_an_empty_thread_id_is_refused_on_replace_too():
    with pytest.raises(ValueError, match="names no thread"):
        dataclasses.replace(RunnableConfig(thread_id="t"), thread_id="")
