"""The diagram renderers the tests check exports with (graphviz, plantuml, mermaid-cli).

On a developer's machine a test whose renderer is not installed is skipped, saying how to
install it; where ``GRAPH_AGENT_REQUIRE_RENDERERS=1`` (CI, which installs them all) it fails.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest


def require(command: str, install: str) -> str:
    """The path of ``command``; skip (or, where renderers are required, fail) without it."""
    found = shutil.which(command)
    if found is None:
        message = f"{command} is not installed ({install})"
        if os.environ.get("GRAPH_AGENT_REQUIRE_RENDERERS") == "1":
            pytest.fail(message + "; GRAPH_AGENT_REQUIRE_RENDERERS=1 requires it")
        pytest.skip(message)
    return found


def mermaid_command(output: Path, workdir: Path) -> list[str]:
    """``mmdc`` reading the diagram from stdin into ``output``; with Debian's chromium when
    installed (puppeteer's own browser is not downloaded)."""
    mmdc = require("mmdc", "npm install -g @mermaid-js/mermaid-cli")
    command = [mmdc, "--quiet", "--input", "-", "--output", str(output)]
    chromium = shutil.which("chromium")
    if chromium is not None:
        config = {"executablePath": chromium, "args": ["--no-sandbox", "--headless"]}
        (workdir / "puppeteer.json").write_text(json.dumps(config))
        command += ["--puppeteerConfigFile", str(workdir / "puppeteer.json")]
    return command
