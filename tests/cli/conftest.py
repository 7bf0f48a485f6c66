"""Fixtures for the command-line tests: the CLI called in-process and as a real program.

Every test runs in its own temporary folder (so the demo's default ``./.graph_agent/demo.db``
lands there) with no provider keys in the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from graph_agent.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "DASHSCOPE_API_KEY",
    "DASHSCOPE_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "FORCE_COLOR",
)


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``cli("run", "x:y", ...)``: ``graph_agent.cli.main`` with those arguments."""

    def run(*argv: str, stdin: str | None = None) -> Result:
        capsys.readouterr()
        if stdin is not None:
            import io

            original = sys.stdin
            sys.stdin = io.StringIO(stdin)
            try:
                code = main(list(argv))
            finally:
                sys.stdin = original
        else:
            code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def entry_point() -> list[str]:
    """The installed ``graph-agent`` script, else ``python -m graph_agent.cli``."""
    script = Path(sys.executable).parent / "graph-agent"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "graph_agent.cli"]


@pytest.fixture
def program() -> Callable[..., Result]:
    """``program("demo", ...)``: the real ``graph-agent`` command in a subprocess."""

    def run(*argv: str, env: dict[str, str] | None = None) -> Result:
        environment = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
        environment.update(env or {})
        completed = subprocess.run(
            [*entry_point(), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env=environment,
            stdin=subprocess.DEVNULL,
        )
        return Result(completed.returncode, completed.stdout, completed.stderr)

    return run


def example(name: str) -> str:
    """The path of an example file, for ``MODULE:OBJECT``."""
    return str(ROOT / "examples" / name)


@pytest.fixture(autouse=True)
def fresh_demo_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """``graph_agent.demo:agent`` is one object per process: each test gets a new one."""
    import graph_agent.demo

    monkeypatch.setattr(graph_agent.demo, "agent", graph_agent.demo.build_agent())
