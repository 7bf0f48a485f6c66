"""The renderer lookup the diagram tests use: skip on a developer machine, fail where required."""

from __future__ import annotations

import pytest

from tests.renderers import require


def test_a_missing_renderer_skips_saying_how_to_install_it(monkeypatch):
    monkeypatch.delenv("GRAPH_AGENT_REQUIRE_RENDERERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"no-such-tool is not installed \(apt x\)"):
        require("no-such-tool", "apt x")


def test_a_missing_renderer_fails_where_renderers_are_required(monkeypatch):
    monkeypatch.setenv("GRAPH_AGENT_REQUIRE_RENDERERS", "1")
    with pytest.raises(pytest.fail.Exception, match="GRAPH_AGENT_REQUIRE_RENDERERS=1 requires it"):
        require("no-such-tool", "apt x")


def test_an_installed_renderer_is_found(monkeypatch, tmp_path):
    tool = tmp_path / "fake-renderer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert require("fake-renderer", "nothing") == str(tool)
