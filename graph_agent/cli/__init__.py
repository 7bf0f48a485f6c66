"""The ``graph-agent`` command line: ``demo``, ``run``, ``chat``, ``draw`` and ``threads``.

Run ``graph-agent --help``, or ``python -m graph_agent.cli``. :func:`main` takes the arguments
as a list and returns the exit code, so it can be called from Python too::

    from graph_agent.cli import main
    main(["draw", "examples/workflow.py:build", "--format", "mermaid"])
"""

from graph_agent.cli.main import main

__all__ = ["main"]
