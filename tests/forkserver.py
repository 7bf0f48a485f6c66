"""A process that forks crashing runs on demand, for the crash tests.

The server side, :func:`serve` (run as ``python -m <module>``), imports and warms graph_agent
up once and forks a child per request, so each run costs milliseconds instead of an
interpreter start. The test side, :class:`ForkServer`, sends a request's fields, gets the
child's pid once the child is ready to run, and later its exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def serve(warm_up: Callable[[], Any], child: Callable[[list[str], int], None]) -> None:
    """Answer requests on stdin: fork ``child(fields, ready_fd)``, which writes a byte to
    ``ready_fd`` when it is about to run; print ``STARTED pid`` then, and ``EXIT code``."""
    warm_up()  # e.g. compile a graph (which imports networkx) before forking
    print("READY", flush=True)
    for line in sys.stdin:
        fields = line.rstrip("\n").split("\t")
        ready_read, ready_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_read)
            code = 0
            try:
                child(fields, ready_write)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(ready_write)
        os.read(ready_read, 1)
        os.close(ready_read)
        print(f"STARTED {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"EXIT {os.waitstatus_to_exitcode(status)}", flush=True)


def child_ready(ready_fd: int) -> None:
    """Tell the server the child is about to run (it then reports the pid to the test)."""
    os.write(ready_fd, b"R")
    os.close(ready_fd)


class ForkServer:
    """Talks to ``python -m module``, a process running :func:`serve`."""

    def __init__(self, module: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._read() == "READY"

    def _read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        assert line, "the fork server died"
        return line

    def start(self, *fields: object) -> int:
        """Fork a run with these fields; its pid, once it is about to run."""
        assert self.process.stdin is not None
        self.process.stdin.write("\t".join(map(str, fields)) + "\n")
        self.process.stdin.flush()
        kind, pid = self._read().split()
        assert kind == "STARTED"
        return int(pid)

    def kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # it may have finished already
            os.kill(pid, signal.SIGKILL)

    def wait(self) -> int:
        """The exit code of the last run started."""
        kind, code = self._read().split()
        assert kind == "EXIT"
        return int(code)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
