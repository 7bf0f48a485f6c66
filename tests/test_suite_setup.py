"""The test suite itself on a fresh machine: what it needs, and what it says when that is missing."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


SERIAL = ("-n", "0")
"""Runs the suite in one process (pyproject's addopts run it on every core)."""

both_ways = pytest.mark.parametrize("way", [("-n", "2"), SERIAL], ids=["parallel", "serial"])
"""In a parallel run the controller, which collects no tests, checks the servers; in a serial
one pytest itself."""


def _pytest_without_postgres(*arguments: str) -> subprocess.CompletedProcess[str]:
    """This suite run in a subprocess against a PostgreSQL address where nothing listens."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *arguments],
        cwd=ROOT,
        env={**os.environ, "GRAPH_AGENT_TEST_POSTGRES": "host=127.0.0.1 port=9 dbname=test"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@both_ways
def test_a_postgresql_server_that_is_down_stops_the_suite_once_saying_how_to_start_it(
    way: tuple[str, ...],
) -> None:
    result = _pytest_without_postgres(*way, "tests/checkpoint/test_postgres.py")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert output.count("need PostgreSQL") == 1
    assert "pg_ctlcluster --skip-systemctl-redirect" in output
    assert "-m 'not postgres'" in output
    assert " passed" not in output and " error" not in output  # stopped before running any


def test_the_postgresql_tests_can_be_left_out_by_marker() -> None:
    one_test_per_saver = "test_copy_thread_of_a_thread_without_checkpoints_is_refused"
    result = _pytest_without_postgres(
        *SERIAL,
        "-m",
        "not postgres",
        "-k",
        one_test_per_saver,
        "tests/checkpoint/test_conformance.py",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed," in result.stdout  # memory and sqlite ran; postgres was left out


@both_ways
def test_a_redis_server_that_is_down_stops_the_suite_once_saying_how_to_start_it(
    way: tuple[str, ...],
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *way,
            "tests/serve/test_redis.py",
        ],
        cwd=ROOT,
        env={**os.environ, "GRAPH_AGENT_TEST_REDIS": "redis://127.0.0.1:9/0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert (
        output.count("selected tests need Redis, and 'redis://127.0.0.1:9/0' cannot be reached")
        == 1
    )
    assert 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save ""' in output
    assert "-m 'not redis'" in output
    assert " passed" not in output and " error" not in output  # stopped before running any


def test_pytest_runs_the_suite_on_every_core() -> None:
    """Plain `pytest` (the README's command and .ci/run's) runs in parallel: serially the suite
    takes longer than the project's ten minutes on two cores."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "pytest-xdist" in _installed_with(project["project"]["optional-dependencies"]["dev"])
    assert "-n auto" in project["tool"]["pytest"]["ini_options"]["addopts"]


def test_the_readme_starts_redis_as_the_suite_says() -> None:
    from tests.serve.redis_db import START

    assert f"`{START}`" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_otel_sdk_extra_brings_the_sdk_that_records_spans() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "opentelemetry-sdk" in _installed_with(extras["otel-sdk"])
    assert "opentelemetry-sdk" not in _installed_with(extras["otel"])  # the API alone


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _installed_with(requirements: list[str]) -> set[str]:
    """The distributions `pip install` of these requirements brings in (their closure)."""
    todo = [_requirement_name(requirement) for requirement in requirements]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(item) for item in requires if "extra ==" not in item]
    return seen


def test_every_module_the_tests_import_comes_with_the_dev_extra() -> None:
    """`pip install -e '.[dev]'` brings everything the suite imports (hypothesis once did not)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = _installed_with(project["dependencies"] + project["optional-dependencies"]["dev"])
    distributions = metadata.packages_distributions()
    own = {path.name for path in ROOT.iterdir() if path.is_dir()}
    undeclared = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in (name.split(".")[0] for name in modules):
                if module in sys.stdlib_module_names or module in own or module == "__future__":
                    continue
                providers = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
                if not providers & installed:
                    undeclared.setdefault(module, path.relative_to(ROOT).as_posix())
    assert not undeclared, f"imported by the tests but not in the dev extra: {undeclared}"


def test_ci_builds_a_brand_new_venv_on_every_run() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "-m venv --clear" in script
    assert script.index("-m venv --clear") < script.index("pip install -q -e '.[dev]'")
