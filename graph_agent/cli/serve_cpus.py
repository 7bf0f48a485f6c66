"""``graph-agent serve --cpus LIST``: each serving process kept on one CPU of the list.

A server's Python code runs one thread at a time (the GIL), but its threads (the event loop,
the threads reading the runs' graphs) hand work to each other many times per run, and
release the GIL at each SQLite call and socket write. Spread over several cores by the
kernel, each hand-off wakes a thread on another core that then waits for the GIL: on the
2-core VM a durable run on SQLite cost 2.0-2.5 ms of CPU and 80 context switches that way,
against about 1 ms and 13 on one core, at twice the runs per second (``benchmarks.serve``).
Kept on one CPU, a process loses nothing of what Python threads can do in parallel except C
code that releases the GIL for long (numpy, say); ``--workers N`` puts each process on its
own CPU of the list, which is how a Python server uses several cores.

Not the default: servers that do not know of each other (containers on one host, say) would
all pin themselves to the same CPU. Linux only (``os.sched_setaffinity``).
"""

from __future__ import annotations

import argparse
import contextlib
import os

from graph_agent.cli.errors import EXIT_USAGE, CliError

__all__ = ["add_cpus_option", "cpus_of", "pin_to"]


def add_cpus_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        help="keep each serving process on one CPU of LIST (0, 0-3, 0,2: Linux), in turn with "
        "--workers N: its threads then stop passing Python's lock between cores, which cost "
        "a durable run twice the CPU on a 2-core machine (default: the kernel places them)",
    )


def cpus_of(text: str | None) -> list[int]:
    """The CPUs ``--cpus`` lists, in order (``[]`` without it): refused with a usage error
    naming what is wrong when one cannot be used here.

    >>> cpus_of(None)
    []
    """
    if text is None:
        return []
    if not hasattr(os, "sched_setaffinity"):
        raise CliError("--cpus works on Linux only", "leave --cpus out", EXIT_USAGE)
    cpus: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            span = range(int(first), int(last or first) + 1)
        except ValueError:
            span = range(0)
        if not span or span.start < 0:
            raise CliError(
                f"--cpus {text}: {part.strip()!r} is not a CPU number or range",
                "e.g. --cpus 0, --cpus 0-3 or --cpus 0,2",
                EXIT_USAGE,
            )
        cpus.extend(cpu for cpu in span if cpu not in cpus)
    allowed = os.sched_getaffinity(0)
    refused = [cpu for cpu in cpus if cpu not in allowed]
    if refused:
        usable = ",".join(map(str, sorted(allowed)))
        raise CliError(
            f"--cpus {text}: CPU {refused[0]} is not one this process may run on",
            f"pick among {usable}",
            EXIT_USAGE,
        )
    return cpus


def pin_to(cpus: list[int]) -> None:
    """Keep this process on the first of ``cpus`` (nothing without any): every thread it has
    (each is pinned on its own) and every thread it starts later (they inherit the mask of the
    thread that starts them), and the processes it starts (so ``serve`` starts its other
    processes first)."""
    if not cpus:
        return
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), {cpus[0]})
